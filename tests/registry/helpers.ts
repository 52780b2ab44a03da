/**
 * Registry test helpers: a movable clock, a small HTTP server on 127.0.0.1:0, and the secrets
 * the tests sign with.
 *
 * @module
 */

/** A 32-byte signing secret (the shortest accepted). */
export const SECRET = "registry-secret-0123456789abcdef";
/** The registry read key the tests use. */
export const READ_KEY = "registry-read-key-0123";
/** The admin key the tests use. */
export const ADMIN_KEY = "registry-admin-key-0123";

/** A clock tests move by hand (epoch ms). */
export interface Clock {
  now(): number;
  set(ms: number): void;
  advance(ms: number): void;
}

/** A clock starting at `start` epoch ms. */
export function clock(start = 1_700_000_000_000): Clock {
  let t = start;
  return {
    now: () => t,
    set: (ms) => {
      t = ms;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/** A server started for one test. */
export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Requests received, in order. */
  requests: Request[];
  close(): Promise<void>;
}

/** Serves `handler` on 127.0.0.1, on a free port; every request is kept in `requests`. */
export function serve(handler: (req: Request) => Response | Promise<Response>): TestServer {
  const requests: Request[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => {
      requests.push(req);
      return handler(req);
    },
  );
  return {
    origin: `http://127.0.0.1:${server.addr.port}`,
    requests,
    close: () => server.shutdown(),
  };
}

/** An environment reader over a map. */
export function envOf(vars: Record<string, string>): (name: string) => string | undefined {
  return (name) => (Object.hasOwn(vars, name) ? vars[name] : undefined);
}
