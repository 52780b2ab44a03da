/**
 * The messages between the supervisor (the main isolate) and its workers (ADR 0025). Everything
 * that is one per process crosses here: the config text, usage events, capacity readings,
 * stop. Admission does not: it is shared memory (`InflightTable`).
 *
 * @module
 */
import type { InflightTableSize } from "../core/inflight_table.ts";
import type { CapacityReadingInput } from "../core/types.ts";
import type { UsageEvent } from "../usage/types.ts";
import type { LogLevel } from "../log.ts";

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
    buffer: SharedArrayBuffer;
    size: InflightTableSize;
    hostname: string;
    port: number;
    configPath: string | undefined;
    explicitAdminKey: string | undefined;
    config: ConfigVersion;
    gateway: WorkerGatewayOptions;
  }
  | ({ type: "config" } & ConfigVersion)
  | { type: "readings"; readings: [string, CapacityReadingInput | null][] }
  | { type: "stats" }
  | { type: "stop"; graceMs: number };

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
  | { type: "stopped" };
