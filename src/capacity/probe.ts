/**
 * The capacity probe contract (ADR 0019): something on a timer that reads what a node itself
 * says about its occupancy and reports it as a capacity reading — or forgets, because reporting
 * nothing beats reporting last hour. Two rules are not negotiable: never on the request path
 * (polling is a timer), and a poll that cannot tell forgets rather than keeping an old reading.
 *
 * A probe gets a {@link ProbeContext}: the core, the node as it was when the probe started, its
 * capacity block, and guarded `report`/`forget` calls that do nothing once the probe is stopped,
 * so an answer arriving after a restart or a node removal never writes.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { CapacityReading, CapacitySpec, Node, NodeQueue } from "../core/types.ts";
import { DEFAULT_PROBE_INTERVAL_MS } from "../core/inventory.ts";
import { concatBytes } from "../bytes.ts";

/** The shortest poll period, ms: a probe must not become the load it measures. */
export const MIN_POLL_PERIOD_MS = 100;

/** How long a probe request may take, ms. */
export interface ProbeTimeouts {
  /**
   * Until the answer's headers arrive (default 2000). `fetch` exposes no separate connect
   * phase, so this bounds connecting and the server's first byte together.
   */
  connectMs: number;
  /** The whole request, body included (default 3000): shorter than a poll period. */
  requestMs: number;
}

/** The default probe timeouts: connect 2 s, request 3 s. */
export const DEFAULT_PROBE_TIMEOUTS: Readonly<ProbeTimeouts> = Object.freeze({
  connectMs: 2000,
  requestMs: 3000,
});

/** The largest probe answer read, bytes: a metrics page is kilobytes, not megabytes. */
export const MAX_PROBE_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * How often this process polls, ms: the configured interval times the worker count, at least
 * 100 ms. Every worker runs its own timer, so the node sees the configured rate from the whole
 * process group (ADR 0010); frontend_count does not scale it.
 */
export function pollPeriodMs(intervalMs: number | undefined, workerCount: number): number {
  const interval = typeof intervalMs === "number" && intervalMs > 0
    ? intervalMs
    : DEFAULT_PROBE_INTERVAL_MS;
  const workers = Math.max(1, Math.floor(workerCount) || 1);
  return Math.max(MIN_POLL_PERIOD_MS, interval * workers);
}

/**
 * The endpoint a probe reads: the block's `url` when given; else the node URL with a trailing
 * `/v<digits>` and trailing slashes removed, plus `path` (default `defaultPath`, a leading `/`
 * added when missing). `http://gpu-1:8000/v1` → `http://gpu-1:8000/metrics`.
 */
export function endpointUrl(
  nodeUrl: string,
  block: Readonly<Record<string, unknown>>,
  defaultPath: string,
): string {
  if (typeof block.url === "string" && block.url !== "") return block.url;
  const base = nodeUrl.replace(/\/v\d+\/?$/, "").replace(/\/+$/, "");
  const given = typeof block.path === "string" ? block.path : defaultPath;
  return base + (given.startsWith("/") ? given : `/${given}`);
}

/** A URL fit for a log line: no user info, no query (either could carry a credential). */
export function loggableUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    u.search = "";
    return u.toString();
  } catch {
    return "(invalid url)";
  }
}

/** What a probe reports: a capacity reading without `source` and `interval_ms` (added for it). */
export interface ProbeReading {
  /** Occupancy; absent or null = not measured. */
  used?: number | null;
  /** Ceiling; absent, null or 0 = does not constrain admission. */
  limit?: number | null;
  /** When the reading was taken, epoch ms; default now. */
  at?: number;
  /** Absolute expiry, epoch ms. */
  expires_at?: number;
  /** Absolute backoff end, epoch ms. */
  retry_after?: number;
  /** Which provider quota the reading is about; reports only. */
  quota?: string;
  /** The node's queue and cache gauges, for the picks (`prometheus.ts`). */
  queue?: NodeQueue;
}

/** A probe answer read whole: status, headers and the exact body bytes. */
export interface ProbeAnswer {
  /** The HTTP status code. */
  status: number;
  /** The response headers. */
  headers: Headers;
  /**
   * The whole body, as received (a signed registry snapshot is verified over these exact bytes).
   */
  body: Uint8Array;
}

/** What a probe works with. Everything here belongs to one probe of one node. */
export interface ProbeContext {
  /** The core to report to. */
  readonly skeid: RoutingCore;
  /**
   * The node as it was when the probe started (a copy). Its url and capacity block do not
   * change while the probe runs: a change restarts it.
   */
  readonly node: Readonly<Node>;
  /** The node's capacity block. */
  readonly config: Readonly<CapacitySpec>;
  /** The `source` its readings carry (`prometheus`, `registry`, `custom`). */
  readonly source: string;
  /** How often it polls, ms (interval_ms × worker_count, at least 100). */
  readonly periodMs: number;
  /** Environment (secret and key variables are read per poll, in memory only). */
  readonly env: (name: string) => string | undefined;
  /** Aborted when the probe stops. */
  readonly signal: AbortSignal;
  /** True once the probe was stopped: nothing it says is recorded any more. */
  readonly stopped: boolean;
  /** Now, epoch ms (the core's clock). */
  now(): number;
  /**
   * Records a reading with this probe's `source` and `interval_ms` (its poll period, so a
   * tighter reading holds off another source for one poll); nothing once stopped.
   */
  report(reading: ProbeReading): CapacityReading | undefined;
  /** Drops this probe's own reading (never another source's backoff); nothing once stopped. */
  forget(): void;
  /**
   * Enters a named state (`ok`, `unreachable`, `stale`, …) with a detail for the log. Each
   * change is logged once, not every poll; the first `ok`/`accepted` is not worth a line.
   */
  enter(state: string, detail?: string): void;
  /**
   * GETs `url` with the probe timeouts (connect 2 s, request 3 s) and the stop signal, and
   * reads the whole answer (at most 8 MiB). Throws on a network error, timeout or stop.
   */
  get(url: string, headers?: HeadersInit): Promise<ProbeAnswer>;
}

/** A running probe. */
export interface CapacityProbe {
  /** One poll: read the source, then `report` or `forget`. Must not block. */
  poll(): void | Promise<void>;
  /** The endpoint it reads, when it reads one (for status and logs). */
  readonly url?: string;
}

/** Builds a probe for one node; throws when the capacity block cannot work (not started). */
export type ProbeFactory = (ctx: ProbeContext) => CapacityProbe;

/** Reads a response body to the end, failing past `max` bytes. */
async function readBody(res: Response, max: number): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array(0);
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > max) throw new Error(`answer larger than ${max} bytes`);
      parts.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => {});
    throw err;
  } finally {
    reader.releaseLock();
  }
  return concatBytes(parts, size);
}

/** The text of a failed probe request: timeouts named, aborts and network errors as given. */
function requestError(err: unknown, timeouts: ProbeTimeouts, stage: string): Error {
  if (err instanceof DOMException && err.name === "TimeoutError") {
    const ms = stage === "connect" ? timeouts.connectMs : timeouts.requestMs;
    return new Error(`${stage} timed out after ${ms} ms`);
  }
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * One probe GET: headers within `connectMs`, the whole answer within `requestMs`, aborted by
 * `stop`. Answers the status, headers and body bytes.
 */
export async function probeGet(
  fetchFn: typeof fetch,
  url: string,
  init: { headers?: HeadersInit; stop: AbortSignal; timeouts: ProbeTimeouts },
): Promise<ProbeAnswer> {
  const { timeouts } = init;
  const early = new AbortController();
  const signal = AbortSignal.any([
    init.stop,
    AbortSignal.timeout(timeouts.requestMs),
    early.signal,
  ]);
  // The connect deadline applies until the headers are in; after that only the request one.
  const connect = AbortSignal.timeout(timeouts.connectMs);
  const onConnectTimeout = () => early.abort(connect.reason);
  connect.addEventListener("abort", onConnectTimeout, { once: true });
  let res: Response;
  try {
    res = await fetchFn(url, { method: "GET", headers: init.headers, signal });
  } catch (err) {
    throw requestError(
      signal.reason ?? err,
      timeouts,
      early.signal.aborted ? "connect" : "request",
    );
  } finally {
    connect.removeEventListener("abort", onConnectTimeout);
  }
  try {
    const body = await readBody(res, MAX_PROBE_ANSWER_BYTES);
    return { status: res.status, headers: res.headers, body };
  } catch (err) {
    throw requestError(signal.aborted ? signal.reason : err, timeouts, "request");
  }
}
