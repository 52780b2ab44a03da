/**
 * The gateway's Deno flags as an operator runs it: the `SKEID_DENO_FLAGS` list of `scripts/flags`
 * (which `scripts/skeid` and the compiled binary carry), so a benchmark measures that process and
 * not one started with a list of its own.
 *
 * @module
 */

/** The entries of the `SKEID_DENO_FLAGS=( … )` array in the text of `scripts/flags`. */
export function parseFlagList(text: string): string[] {
  const start = text.indexOf("SKEID_DENO_FLAGS=(");
  if (start < 0) throw new Error("scripts/flags: no SKEID_DENO_FLAGS=( … ) list");
  const end = text.indexOf(")", start + "SKEID_DENO_FLAGS=(".length);
  if (end < 0) throw new Error("scripts/flags: the SKEID_DENO_FLAGS list is not closed");
  const flags: string[] = [];
  for (const raw of text.slice(start + "SKEID_DENO_FLAGS=(".length, end).split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (line === "") continue;
    for (const word of line.split(/\s+/)) {
      if (!word.startsWith("--")) throw new Error(`scripts/flags: '${word}' is not a flag`);
      flags.push(word);
    }
  }
  if (flags.length === 0) throw new Error("scripts/flags: the SKEID_DENO_FLAGS list is empty");
  return flags;
}

/** The flag list of `scripts/flags` under `root` (the repository). */
export async function gatewayFlags(root: string): Promise<string[]> {
  return parseFlagList(await Deno.readTextFile(`${root}/scripts/flags`));
}
