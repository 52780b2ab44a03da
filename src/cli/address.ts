/**
 * The `--listen` address of `serve` and `demo`: whether another process holds it, said before
 * anything is opened. Workers listen with `reusePort` (ADR 0025), and the kernel lets any process
 * that asks for it join such a port: a second `serve --workers N` on a taken port would otherwise
 * start "successfully" and take part of the first one's connections. A socket bound without it is
 * refused while any other socket holds the port, so one such bind, closed at once, tells.
 *
 * @module
 */

/** Says how to get past a taken address. */
export function addressTaken(hostname: string, port: number): string {
  return `${hostname}:${port} is taken (another process listens there): stop it, or pass ` +
    "--listen HOST:PORT";
}

/**
 * Null when `hostname:port` can be listened on now (port 0 always can), else why not. The check
 * and the real bind are two steps: a process that binds in between is not seen.
 */
export function addressInUse(hostname: string, port: number): string | null {
  if (port === 0) return null;
  try {
    Deno.listen({ hostname, port, transport: "tcp" }).close();
    return null;
  } catch (err) {
    if (err instanceof Deno.errors.AddrInUse) return addressTaken(hostname, port);
    // Another trouble (no such interface, no permission) is the real bind's to report.
    return null;
  }
}
