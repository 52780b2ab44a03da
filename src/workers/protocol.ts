/**
 * The messages between the supervisor (the main isolate) and its workers (ADR 0025). Everything
 * that is one per process crosses here: the config text, usage events, capacity readings,
 * stop. Admission does not: it is shared memory (`InflightTable`).
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import type { InflightTableSize } from "../core/inflight_table.ts";
import type { ShareBoardSize } from "./share_board.ts";
import type {
  CapacityReading,
  CapacityReadingInput,
  NodeMetrics,
  NodeSpec,
} from "../core/types.ts";
import type { EjectionSnapshot } from "../core/ejection.ts";
import type { ShareWire } from "../proxy/share_stats.ts";
import type { UsageEvent } from "../usage/types.ts";
import type { LogLevel } from "../log.ts";
import type { KeyAnswer } from "../keys/broker.ts";
import type { KeyDecision, KeyRequest } from "../core/tenancy.ts";
import type { RateHeaders } from "../core/rate_window.ts";
import type { SettledAmount } from "../proxy/key_step.ts";
import type { Grant } from "../customer_keys/grants.ts";
import type { ConsoleSession, NewSession } from "../admin/sessions.ts";
import type { LiveSnapshot } from "../admin/live.ts";

/** A config the supervisor validated and applied, numbered. */
export interface ConfigVersion {
  /** Counts from 1; a worker acknowledges by it. */
  generation: number;
  /** The file's text as the supervisor read it ("" without a config file). */
  text: string;
}

/** The gateway options a worker is started with (plain data: they cross isolates). */
export interface WorkerGatewayOptions {
  /** The environment the worker's gateway sees; default the process's. */
  env?: Record<string, string>;
  upstreamTimeoutMs?: number;
  keepaliveMs?: number;
  logLevel?: LogLevel;
}

/** Supervisor → worker. */
export type ToWorker =
  | {
    type: "start";
    /** The worker's column in the inflight table (a replacement takes the dead one's). */
    index: number;
    /** Workers in the group (the table has one more column: the supervisor's). */
    workers: number;
    buffer: SharedArrayBuffer;
    size: InflightTableSize;
    hostname: string;
    port: number;
    configPath: string | undefined;
    explicitAdminKey: string | undefined;
    config: ConfigVersion;
    gateway: WorkerGatewayOptions;
    /** Whether the supervisor has a key broker (OpenBao) the worker asks node keys of. */
    keyBroker: boolean;
    /** The customer keys' `max_inflight` table (one column per worker, no supervisor's). */
    keyBuffer: SharedArrayBuffer;
    keySize: InflightTableSize;
    /** The group's fair-share board (`ShareBoard`), keyed by the key table's rows. */
    shareBuffer: SharedArrayBuffer;
    shareSize: ShareBoardSize;
    /** The prefix index the workers' affinity picks share (ADR 0031). */
    prefixBuffer: SharedArrayBuffer;
  }
  | ({ type: "config" } & ConfigVersion)
  | { type: "readings"; readings: [string, CapacityReadingInput | null][] }
  | { type: "stats" }
  | { type: "stop"; graceMs: number }
  /** An admin request to run on the worker's own gateway (a mutation applied to all, metrics). */
  | { type: "local"; id: number; request: WireRequest }
  /** The supervisor's answer to a request the worker forwarded. */
  | { type: "forward_reply"; id: number; response: WireResponse }
  | { type: "key_reply"; id: number; answer: KeyAnswer }
  /** What the worker's gateway holds now (`WorkerView`). */
  | { type: "view"; id: number }
  /** A change to every core of the group (tests and drills: `Supervisor.core`). */
  | { type: "core"; id: number; op: CoreOp }
  /** The group's answer to a `key_admit`. */
  | { type: "key_admit_reply"; id: number; decision: WireKeyDecision }
  /** The supervisor's judgement of an issued key: its grant, or null (401). */
  | { type: "issued_auth_reply"; id: number; grant: Grant | null }
  | { type: "session_reply"; id: number; answer: SessionAnswer }
  /** The group's Live snapshot a worker asked for. */
  | { type: "live_reply"; id: number; snapshot: LiveSnapshot };

/** A question to the group's console sessions (ADR 0035), one per `SessionStore` method. */
export type SessionOp =
  | { op: "create"; keyHash: string; ttlMs: number }
  | { op: "find"; token: string; keyHash: string }
  | { op: "end"; token: string }
  | { op: "wait"; addr: string }
  | { op: "failed"; addr: string };

/** What a session question answers: a session (new or found), none, or a wait in ms. */
export type SessionAnswer = NewSession | ConsoleSession | number | null;

/** Where a customer key's `max_inflight` stands when the worker asks the supervisor. */
export type KeyInflight = "held" | "full" | "supervisor";

/** A change `Supervisor.core` applies to the supervisor's core and every worker's. */
export type CoreOp =
  | { name: "forgetCapacity"; id?: string }
  | { name: "addNode"; spec: NodeSpec };

/** What one worker's gateway holds now: its own counters, ejections, readings and waiters. */
export interface WorkerView {
  nodes: NodeMetrics[];
  ejections: EjectionSnapshot[];
  /** Readings in force, by node id (a passive reading is the worker's own, ADR 0025). */
  readings: [string, CapacityReading][];
  waiters: number;
  inflight: number;
  share: ShareWire;
  /** The worker's own Live snapshot, merged by the supervisor into the group's (ADR 0036). */
  live: LiveSnapshot;
}

/** A key admission as it crosses: a hold is the supervisor's number for it. */
export type WireKeyDecision =
  | { ok: true; hold: number; headers: RateHeaders }
  | Extract<KeyDecision, { ok: false }>;

/** What a worker says about itself for `GET /skeid/workers`. */
export interface WorkerStats {
  /** Requests served since the worker started. */
  requests: number;
  /** Requests in flight in this worker now. */
  inflight: number;
}

/** Worker → supervisor. */
export type FromWorker =
  | { type: "listening"; hostname: string; port: number }
  | { type: "failed"; error: string }
  | { type: "config_ack"; generation: number; error?: string }
  | { type: "usage"; events: UsageEvent[] }
  | ({ type: "stats" } & WorkerStats)
  | { type: "stopped" }
  /** An admin request that is the group's business, for the supervisor to answer. */
  | { type: "forward"; id: number; request: WireRequest }
  /** The group's Live snapshot, for a worker's live stream. */
  | { type: "live"; id: number }
  /** A question to the group's console sessions, held by the supervisor. */
  | { type: "session"; id: number; op: SessionOp }
  | { type: "local_reply"; id: number; response: WireResponse }
  /** A node key (`api_key_ref`) the worker's cache does not hold: the supervisor's broker asks. */
  | { type: "key"; id: number; ref: string }
  /**
   * Rate windows and budget of a customer key that has them, for the group (ADR 0025);
   * `inflight` says where its `max_inflight` stands (`KeyGroupOwner.admit`).
   */
  | { type: "key_admit"; id: number; keyId: string; request: KeyRequest; inflight: KeyInflight }
  /** A hold's usage event was recorded. */
  | { type: "key_settle"; hold: number; actual: SettledAmount }
  /** A hold is given back unbilled. */
  | { type: "key_cancel"; hold: number }
  /** An issued key presented to the worker, judged by the supervisor's directory (ADR 0029). */
  | { type: "issued_auth"; id: number; key: string }
  /** A JWT identity's grant the worker judged: the supervisor's core admits its limits. */
  | { type: "grant"; grant: Grant }
  | { type: "view_reply"; id: number; view: WorkerView }
  | { type: "core_reply"; id: number; error?: string }
  /**
   * A log line of the worker's, written by the supervisor's logger (one writer); lines said while
   * applying a config are not sent (the supervisor applied the same text and said them).
   */
  | { type: "log"; line: string };

/** An HTTP request as plain data. */
export interface WireRequest {
  method: string;
  /** Path and query. */
  path: string;
  headers: [string, string][];
  body: string;
}

/** An HTTP response as plain data. */
export interface WireResponse {
  status: number;
  headers: [string, string][];
  body: string;
}

/** A request as plain data (its body read). */
export async function toWire(req: InboundRequest): Promise<WireRequest> {
  const url = new URL(req.url);
  const body = req.method === "GET" || req.method === "HEAD" ? "" : await req.text();
  return { method: req.method, path: url.pathname + url.search, headers: [...req.headers], body };
}

/** A wire request as a Request (the host is a placeholder: routes look at the path only). */
export function fromWire(w: WireRequest): Request {
  const init: RequestInit = { method: w.method, headers: w.headers };
  if (w.body !== "" && w.method !== "GET" && w.method !== "HEAD") init.body = w.body;
  return new Request(`http://skeid.invalid${w.path}`, init);
}

/** A response as plain data (its body read). */
export async function responseToWire(res: Response): Promise<WireResponse> {
  return { status: res.status, headers: [...res.headers], body: await res.text() };
}

/** A wire response as a Response. */
export function responseFromWire(w: WireResponse): Response {
  return new Response(w.status === 204 ? null : w.body, { status: w.status, headers: w.headers });
}

/**
 * Requests a worker hands to the supervisor: `/health` (the group's reload state), and what changes the inventory (applied to every
 * worker), the config status and reload (the group's), the usage report (the one ledger), the
 * group's metrics and the worker list.
 */
export function forwardedToSupervisor(method: string, path: string): boolean {
  // `/health` carries the config reload state, which is the supervisor's.
  if (path === "/health") return method === "GET";
  if (!path.startsWith("/skeid/")) return false;
  // Issued keys (ADR 0029) live in the supervisor's directory, the one copy of the group's.
  if (isKeysPath(path)) return true;
  if (method === "GET") {
    return path === "/skeid/config" || path === "/skeid/workers" || path === "/skeid/metrics" ||
      path === "/skeid/live/snapshot" ||
      path === "/skeid/metrics/nodes" || path === "/skeid/usage" ||
      path === "/skeid/usage/series" || path === "/skeid/tenancy" ||
      path === "/skeid/usage/events" || path.startsWith("/skeid/usage/events/") ||
      // A customer key's windows and budget are the group's, held by the supervisor.
      path.startsWith("/skeid/keys/");
  }
  if (method === "POST") {
    return path === "/skeid/nodes" || path === "/skeid/config/reload" ||
      path === "/skeid/config/check" ||
      /^\/skeid\/nodes\/[^/]+\/(health|drain)$/.test(path);
  }
  return method === "DELETE" && /^\/skeid\/nodes\/[^/]+$/.test(path);
}

/** Whether a forwarded admin request changes the inventory (then every worker applies it). */
export function isInventoryMutation(method: string, path: string): boolean {
  return (method === "POST" || method === "DELETE") && path !== "/skeid/config/reload" &&
    path !== "/skeid/config/check" && !isKeysPath(path);
}

/** `/skeid/keys` and what is under it: customer keys, the supervisor's business. */
function isKeysPath(path: string): boolean {
  return path === "/skeid/keys" || path.startsWith("/skeid/keys/");
}
