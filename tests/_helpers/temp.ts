/**
 * Temp directories for tests (made fresh, removed by the test that made them), and whether a
 * file is there.
 *
 * @module
 */

/** A temp directory and the function that removes it with everything in it. */
export interface TempDir {
  /** The directory's path (no trailing slash). */
  dir: string;
  /** Removes the directory recursively. */
  cleanup(): Promise<void>;
}

/** A fresh temp directory named `<prefix><random>`, removed by the returned `cleanup`. */
export async function tempDir(prefix = "skeid-test-"): Promise<TempDir> {
  const dir = await Deno.makeTempDir({ prefix });
  return { dir, cleanup: () => Deno.remove(dir, { recursive: true }) };
}

/** Whether anything exists at `path` (a file, a directory). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}
