/**
 * Telemetry of the request path (ADR 0039, 0050): what a request tells its spans at the step
 * boundaries of the exchange. Composed once per gateway before it listens: the OpenTelemetry one
 * (`otel.ts`, Skeid's own recorder and OTLP exporter) when an OTLP endpoint is named, else
 * `QUIET_TELEMETRY`, whose calls do nothing and build nothing (no span objects, no attribute
 * lists), so a gateway without OpenTelemetry pays one empty call per step.
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import type { PickedNode } from "../core/types.ts";
import type { UpstreamRequest } from "../faces/face.ts";
import type { TraceContext } from "../proxy/trace_context.ts";
import type { WalkResult } from "../proxy/walk.ts";
import type { UsageOutcome } from "../proxy/usage_facts.ts";
import type { UsageEvent } from "../usage/types.ts";
import { noCounts, type TelemetryCounts } from "./otlp_export.ts";

/** The telemetry of a gateway: one `RequestTelemetry` per client request. */
export interface Telemetry {
  /** Whether spans are made (false: every call is a no-op). */
  readonly on: boolean;
  /** The request span of a client request on `endpoint`, started now. */
  request(req: InboundRequest, endpoint: string, apiFormat: string): RequestTelemetry;
  /** What the exporter counted (exported, dropped), for `/skeid/metrics`; zeros when off. */
  counts(): Readonly<TelemetryCounts>;
  /**
   * Sends what is queued and the last metrics, bounded by the export timeout (the gateway's
   * close, after the usage store's flush); nothing is recorded after.
   */
  shutdown(): Promise<void>;
}

/** What one request tells its spans, in the order the exchange takes its steps. */
export interface RequestTelemetry {
  /**
   * The request's trace as its request span has it (trace id, the request span's id, the
   * client's sampled flag and `tracestate`); undefined when off: the exchange reads the headers
   * itself (`traceContextOf`).
   */
  readonly trace: TraceContext | undefined;
  /** The requested model is known (the body was read). */
  model(requested: string): void;
  /** The key step starts: the admission span opens here. */
  admitting(): void;
  /** The key step passed; `limited`: the customer key has limits or a budget. */
  keyPassed(limited: boolean): void;
  /** The walk step waits for capacity (the usual step answers at once); `waiting`: the queue's length. */
  queued(waiting: number): void;
  /** A walk step answered (admitted, refused, client gone): the admission span ends with it. */
  walked(step: WalkResult): void;
  /**
   * An upstream attempt starts on `node` for `servedModel` (its number `n`, 1-based): its CLIENT
   * span opens. Answers the attempt span's id for the node's `traceparent`; undefined when off.
   */
  attempt(
    node: PickedNode,
    servedModel: string,
    n: number,
    upstream: UpstreamRequest,
  ): string | undefined;
  /** The attempt failed before the first byte (`status` 0: no answer); it fails over or ends. */
  attemptFailed(reason: string, status: number): void;
  /** The usage event was handed to the ledger: the last attempt ends, read from it. */
  recorded(event: UsageEvent | undefined, outcome: UsageOutcome): void;
  /** The client's status and the request log line's outcome. */
  outcome(status: number, outcome: string): void;
  /** The request ended (answer sent, or its stream's last byte relayed): the request span ends. */
  end(): void;
}

/** Does nothing: a request of a gateway without OpenTelemetry. */
const QUIET_REQUEST: RequestTelemetry = Object.freeze({
  trace: undefined,
  model() {},
  admitting() {},
  keyPassed() {},
  queued() {},
  walked() {},
  attempt() {
    return undefined;
  },
  attemptFailed() {},
  recorded() {},
  outcome() {},
  end() {},
});

const NO_COUNTS: Readonly<TelemetryCounts> = Object.freeze(noCounts());

/** The telemetry of a gateway without OpenTelemetry: one frozen no-op for every request. */
export const QUIET_TELEMETRY: Telemetry = Object.freeze({
  on: false,
  request: () => QUIET_REQUEST,
  counts: () => NO_COUNTS,
  shutdown: () => Promise.resolve(),
});
