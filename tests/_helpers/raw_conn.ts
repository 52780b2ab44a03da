/**
 * Raw TCP clients for tests that need what `fetch` hides: a body sent byte by byte, a body that
 * stops, and whether the server closed the connection after its answer.
 *
 * @module
 */

/** Reads a connection until the peer closes it, bounded by `ms`: the text read, and whether it closed. */
export async function readToClose(
  conn: Deno.Conn,
  ms = 5000,
): Promise<{ text: string; closed: boolean }> {
  const dec = new TextDecoder();
  const buf = new Uint8Array(16 * 1024);
  let text = "";
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const n = await Promise.race([
      conn.read(buf).catch(() => null),
      new Promise<"timeout">((r) => timer = setTimeout(() => r("timeout"), deadline - Date.now())),
    ]);
    clearTimeout(timer);
    if (n === "timeout") break;
    if (n === null) return { text, closed: true };
    text += dec.decode(buf.subarray(0, n));
  }
  return { text, closed: false };
}

/** Closes a connection the server may have closed already. */
export function closeConn(conn: Deno.Conn | undefined): void {
  try {
    conn?.close();
  } catch {
    // closed by the server
  }
}
