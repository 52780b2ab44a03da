/**
 * The client listener: Skeid's own accept loop and HTTP/1.1 server, so that client connections
 * are bounded and timed (ADR 0020) and cost little while open (ADR 0053). `Deno.serve` has no
 * header timeout, no idle timeout and no connection cap, and its accept loop ends the process
 * when `accept()` fails with `EMFILE`; here each accepted connection is served by a
 * `ClientConnection`, and this module keeps the table of open client connections:
 *
 * - a connection that sends no complete request head within the **header timeout** after it was
 *   accepted is closed;
 * - a connection idle between requests past the **idle timeout** is closed;
 * - at most `maxConnections` are open: a new one closes the oldest idle one, or is refused when
 *   none is idle;
 * - an `accept()` that fails (file descriptors exhausted) is logged, the oldest idle connection
 *   is closed, and accepting resumes once a connection ended or after a short pause — never an
 *   uncaught error.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { type Linked, LinkedList } from "../core/linked_list.ts";
import { ClientConnection, type ConnectionParts, type ServeHandler } from "./client_connection.ts";

export type { ServeHandler };

/** Limits and timeouts of client connections. */
export interface ConnectionLimits {
  /** A new connection must complete its first request head within this, ms. */
  headerTimeoutMs: number;
  /** A connection with no request in flight is closed after this long, ms. */
  idleTimeoutMs: number;
  /** Open client connections at most. */
  maxConnections: number;
}

/** Options of `listen`. */
export interface ListenerOptions {
  hostname: string;
  port: number;
  handler: ServeHandler;
  /** A handler that threw: the answer (Deno.serve's `onError`). */
  onError: (err: unknown) => Response | Promise<Response>;
  limits: ConnectionLimits;
  /** Notes a limit that acted (`connection_refused`, `accept_failed`, …); never throws. */
  onEvent?: (event: string, fields: Record<string, unknown>) => void;
  /** Clock, epoch ms (tests inject one). */
  now?: () => number;
  /**
   * Lets the workers of one process each listen on the same address (SO_REUSEPORT; the kernel
   * spreads connections over them, ADR 0025). Needs `--unstable-net`.
   */
  reusePort?: boolean;
}

/** Counters of the listener, for `/skeid/metrics`. */
export interface ListenerStats {
  /** Client connections open now. */
  open: number;
  /** Of those, with no request in flight. */
  idle: number;
  /** Connections accepted since start. */
  accepted: number;
  /** Closed for the header timeout. */
  headerTimeouts: number;
  /** Closed for the idle timeout. */
  idleTimeouts: number;
  /** Idle connections closed to make room for a new one. */
  evicted: number;
  /** New connections refused at the cap with none idle. */
  refused: number;
  /** `accept()` failures (file descriptors exhausted, …). */
  acceptErrors: number;
}

/** A running listener. */
export interface ClientListener {
  readonly addr: Deno.NetAddr;
  /** Resolves when the listener stopped and every connection ended. */
  readonly finished: Promise<void>;
  /**
   * Stops accepting and closes every connection gracefully: an idle one at once, a busy one once
   * the answers of its requests in flight were sent (whatever their kind). A connection still
   * open `deadlineMs` after the call (a client that never reads its answer) is cut.
   */
  shutdown(deadlineMs?: number): Promise<void>;
  stats(): ListenerStats;
}

/**
 * The Deno release Skeid's HTTP/1.1 server is built and measured on (ADR 0053: its whole-body
 * answers are read from where this release keeps a `Response`'s body, with a stream as the
 * fallback); `scripts/deno-env` installs and accepts only this one.
 */
export const LISTENER_DENO_VERSION = "2.9.6";

/** One accepted client connection, as the listener keeps it. */
class ClientConn implements Linked<ClientConn> {
  /** Skeid's HTTP/1.1 server on it. */
  server!: ClientConnection<ClientConn>;
  /** Epoch ms it was accepted or last became idle. */
  since: number;
  /** The `fresh` or `idle` list links through these (a connection is in one at most). */
  linkPrev?: ClientConn;
  linkNext?: ClientConn;
  linkList?: object;
  constructor(now: number) {
    this.since = now;
  }
}

/** Starts accepting client connections on `hostname:port`. */
export function listen(opts: ListenerOptions): ClientListener {
  const now = opts.now ?? Date.now;
  const limits = opts.limits;
  const note = opts.onEvent ?? (() => {});
  const listener = Deno.listen({
    hostname: opts.hostname,
    port: opts.port,
    transport: "tcp",
    ...(opts.reusePort ? { reusePort: true } : {}),
  });
  /** Connections never served yet, in accept order (header timeout). */
  const fresh = new LinkedList<ClientConn>();
  /** Served connections with nothing in flight, in the order they became idle (idle timeout). */
  const idle = new LinkedList<ClientConn>();
  const open = new Set<ClientConn>();
  const stats: ListenerStats = {
    open: 0,
    idle: 0,
    accepted: 0,
    headerTimeouts: 0,
    idleTimeouts: 0,
    evicted: 0,
    refused: 0,
    acceptErrors: 0,
  };
  let stopping = false;
  /** Wakes a paused accept loop when a connection ends. */
  let connEnded: (() => void) | undefined;

  const close = (c: ClientConn): void => {
    fresh.delete(c);
    idle.delete(c);
    c.server.close();
  };

  const oldestIdle = (): ClientConn | undefined => {
    const a = idle.first;
    const b = fresh.first;
    if (a === undefined) return b;
    if (b === undefined) return a;
    return a.since <= b.since ? a : b;
  };

  const sweep = (): void => {
    const t = now();
    while (fresh.first !== undefined && t - fresh.first.since >= limits.headerTimeoutMs) {
      stats.headerTimeouts++;
      close(fresh.first);
    }
    while (idle.first !== undefined && t - idle.first.since >= limits.idleTimeoutMs) {
      stats.idleTimeouts++;
      close(idle.first);
    }
  };
  const sweepEveryMs = Math.max(
    50,
    Math.min(1000, Math.floor(Math.min(limits.headerTimeoutMs, limits.idleTimeoutMs) / 4)),
  );
  const sweeper = setInterval(sweep, sweepEveryMs);

  const parts: ConnectionParts<ClientConn> = {
    handler: opts.handler,
    onError: opts.onError,
    onBusy: (c) => {
      fresh.delete(c);
      idle.delete(c);
    },
    onIdle: (c) => {
      // Draining: the connection closes itself once its answer was written.
      if (stopping) return;
      c.since = now();
      idle.add(c);
    },
    onEnd: (c, err) => {
      if (err !== undefined) note("connection_failed", { error: errorMessage(err) });
      open.delete(c);
      fresh.delete(c);
      idle.delete(c);
      const wake = connEnded;
      connEnded = undefined;
      wake?.();
    },
  };

  const serveConn = (conn: Deno.Conn): void => {
    const c = new ClientConn(now());
    open.add(c);
    fresh.add(c);
    stats.accepted++;
    c.server = new ClientConnection(conn, parts, c);
    // Accepted during a drain's last step (the listener closes right after): closed as any other.
    if (stopping) c.server.shutdown();
  };

  const admit = (conn: Deno.Conn): void => {
    if (open.size >= limits.maxConnections) {
      const victim = oldestIdle();
      if (victim === undefined) {
        stats.refused++;
        note("connection_refused", { open: open.size, max_connections: limits.maxConnections });
        try {
          conn.close();
        } catch {
          // already closed
        }
        return;
      }
      stats.evicted++;
      close(victim);
    }
    serveConn(conn);
  };

  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(() => {
        connEnded = undefined;
        resolve();
      }, ms);
      connEnded = () => {
        clearTimeout(t);
        resolve();
      };
    });

  const acceptLoop = async (): Promise<void> => {
    while (!stopping) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (err) {
        if (stopping || err instanceof Deno.errors.BadResource) break;
        // EMFILE and friends: make room, then try again once something closed.
        stats.acceptErrors++;
        note("accept_failed", { error: errorMessage(err), open: open.size });
        const victim = oldestIdle();
        if (victim !== undefined) {
          stats.evicted++;
          close(victim);
        }
        await pause(100);
        continue;
      }
      admit(conn);
    }
  };

  const loop = acceptLoop();
  const finished = (async () => {
    await loop;
    clearInterval(sweeper);
    // Every connection's server finishes once its requests are answered.
    while (open.size > 0) await pause(1000);
  })();

  return {
    addr: listener.addr as Deno.NetAddr,
    finished,
    shutdown(deadlineMs?: number): Promise<void> {
      if (!stopping) {
        stopping = true;
        try {
          listener.close();
        } catch {
          // already closed
        }
        for (const c of open) c.server.shutdown();
        if (deadlineMs !== undefined) {
          const cut = setTimeout(() => {
            for (const c of open) close(c);
          }, Math.max(0, deadlineMs));
          finished.then(() => clearTimeout(cut));
        }
      }
      return finished;
    },
    stats(): ListenerStats {
      return { ...stats, open: open.size, idle: idle.size + fresh.size };
    },
  };
}

/** The soft limit of open file descriptors of this process, or undefined where unknown. */
export async function openFileLimit(): Promise<number | undefined> {
  try {
    const text = await Deno.readTextFile("/proc/self/limits");
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(text);
    if (!m || m[1] === "unlimited") return undefined;
    return Number(m[1]);
  } catch {
    return undefined;
  }
}

/** Default header timeout, ms: generous for any real client, short for a slowloris. */
export const DEFAULT_HEADER_TIMEOUT_MS = 15_000;
/** Default idle timeout, ms: above the 60 s idle timeout of common load balancers in front. */
export const DEFAULT_IDLE_TIMEOUT_MS = 75_000;
/** Connections cap when the file-descriptor limit is unknown. */
export const DEFAULT_MAX_CONNECTIONS = 10_000;

/**
 * Default body timeout, ms: the longest a client body may send nothing between reads (nginx's
 * `client_body_timeout` is 60 s as well).
 */
export const DEFAULT_BODY_TIMEOUT_MS = 60_000;

/** A positive number from the environment variable `name` (floored), else `dflt`; throws naming it. */
function envPositive(
  env: (name: string) => string | undefined,
  name: string,
  dflt: number,
): number {
  const raw = env(name);
  if (raw === undefined || raw.trim() === "") return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  }
  return Math.floor(n);
}

/**
 * The connection limits from the environment (`SKEID_HEADER_TIMEOUT_MS`,
 * `SKEID_IDLE_TIMEOUT_MS`, `SKEID_MAX_CONNECTIONS`), the cap kept below the file-descriptor
 * limit: a quarter of it (at least 64) stays for upstream connections, the ledger and config.
 */
export function connectionLimits(
  env: (name: string) => string | undefined,
  fdLimit: number | undefined,
): ConnectionLimits {
  const room = fdLimit === undefined
    ? DEFAULT_MAX_CONNECTIONS
    : Math.max(1, fdLimit - Math.max(64, Math.floor(fdLimit / 4)));
  const asked = envPositive(env, "SKEID_MAX_CONNECTIONS", Math.min(DEFAULT_MAX_CONNECTIONS, room));
  return {
    headerTimeoutMs: envPositive(env, "SKEID_HEADER_TIMEOUT_MS", DEFAULT_HEADER_TIMEOUT_MS),
    idleTimeoutMs: envPositive(env, "SKEID_IDLE_TIMEOUT_MS", DEFAULT_IDLE_TIMEOUT_MS),
    maxConnections: Math.min(asked, room),
  };
}

/**
 * The body timeout (`SKEID_BODY_TIMEOUT_MS`), ms: a client body that sends nothing for this long
 * between reads is refused with 408. The fourth client connection limit; the intake holds it
 * (the listener hands the body over unread).
 */
export function bodyTimeoutMs(env: (name: string) => string | undefined): number {
  return envPositive(env, "SKEID_BODY_TIMEOUT_MS", DEFAULT_BODY_TIMEOUT_MS);
}
