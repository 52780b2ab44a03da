/**
 * The server: a gateway composed from its parts, then served on the client listener. `skeid serve`,
 * `skeid demo`, each worker of `--workers N` and the integration tests start one here; the app it
 * serves is built in `app.ts`.
 *
 * @module
 */
import { Gateway, type GatewayOptions } from "./gateway.ts";
import { buildApp } from "./app.ts";
import { errorMessage } from "./error_message.ts";
import {
  type ClientListener,
  type ConnectionLimits,
  connectionLimits,
  listen,
  openFileLimit,
  type ServeHandler,
} from "./edge/listener.ts";

/** A running server: its address and how to stop it. */
export interface RunningServer {
  /** The gateway being served; `stop` closes it. */
  gateway: Gateway;
  /** The address it listens on (the real port when 0 was asked). */
  addr: Deno.NetAddr;
  /** Stops accepting, drains (bounded by `graceMs`), closes the gateway. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves once the server stopped. */
  finished: Promise<void>;
  /** The client listener (connection counters). */
  listener: ClientListener;
}

/** Options of `startServer`. */
export interface StartServerOptions extends GatewayOptions {
  /** Interface to listen on (e.g. `127.0.0.1`, `0.0.0.0`). */
  hostname: string;
  /** Port to listen on; 0 asks the OS for a free one (read the real one from `addr`). */
  port: number;
  /** Client connection limits; default from the environment and the file-descriptor limit. */
  limits?: ConnectionLimits;
  /** Listen with reusePort (the workers of one process share the address, ADR 0025). */
  reusePort?: boolean;
  /** Watch the config file; default true (a worker's supervisor watches it instead). */
  watch?: boolean;
  /** Wraps the app's handler (a worker hands the group's admin requests to its supervisor). */
  wrap?: (handler: ServeHandler) => ServeHandler;
}

/** How long past the grace the last answers (an ended stream's final frames) may take to go out. */
const DRAIN_LINGER_MS = 1000;

/** Opens a gateway and serves it (used by `serve`, `demo` and the integration tests). */
export async function startServer(opts: StartServerOptions): Promise<RunningServer> {
  const gateway = await Gateway.open(opts);
  // The handler clients reach, chosen before it listens; the console asks its first calls through
  // it too (a worker's hands the group's admin requests to its supervisor).
  const app = buildApp(gateway, (req, info) => front(req, info));
  const front: ServeHandler = opts.wrap ? opts.wrap(app) : app;
  let server: ClientListener;
  try {
    const limits = opts.limits ?? connectionLimits((n) => Deno.env.get(n), await openFileLimit());
    server = listen({
      hostname: opts.hostname,
      port: opts.port,
      limits,
      reusePort: opts.reusePort,
      handler: front,
      onError: (err) => {
        gateway.logger.error("http_error", {
          error: errorMessage(err),
        });
        return new Response("Internal Server Error", { status: 500 });
      },
      // A client that closed first is routine; a limit that acted is worth a warning.
      onEvent: (event, fields) =>
        event === "connection_close_failed"
          ? gateway.logger.debug(event, fields)
          : gateway.logger.warn(event, fields),
    });
  } catch (err) {
    await gateway.close();
    throw err;
  }
  if (opts.watch !== false) gateway.config.watch();
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 10_000): Promise<void> => {
    stopping ??= (async () => {
      // Stop accepting and let in-flight requests finish; past the grace, stop their upstreams
      // so the streams end (their usage events are still written). Each connection closes once
      // its answers were written; one still open a moment after the grace (a client that does
      // not read) is cut.
      // Live streams never end by themselves: ended first, so their connections can close.
      gateway.live.close();
      const shutdown = server.shutdown(graceMs + DRAIN_LINGER_MS);
      await gateway.drain(graceMs);
      await shutdown;
      await gateway.close();
    })();
    return stopping;
  };
  return { gateway, addr: server.addr, stop, finished: server.finished, listener: server };
}
