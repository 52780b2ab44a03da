/**
 * What a request needs from the gateway that runs it (the context every phase reads), and the
 * counters it feeds.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { KeyLimiter } from "./key_step.ts";
import type { Node } from "../core/types.ts";
import type { Logger } from "../log.ts";
import type { UsageRecorder } from "../usage/types.ts";
import type { UpstreamClients } from "./call.ts";
import type { RefusalStatus } from "./errors.ts";
import type { Exchange } from "./handler.ts";
import type { IdleWatch } from "./idle_watch.ts";
import type { KeyIdCache } from "./identity.ts";
import type { IntakeContext } from "./intake.ts";
import type { WaiterQueue } from "./wait.ts";
import type { ResponseKeeper } from "../responses/response_keeper.ts";
import type { Telemetry } from "../telemetry/telemetry.ts";

/** The counters the proxy feeds (the admin plane's GatewayMetrics satisfies it). */
export interface ProxyMetrics {
  /** A request refused before forwarding with `status` (no usage event is written for it). */
  refusal(model: string, status: RefusalStatus, reason: string): void;
  /** A request refused by its customer key's `limit` (`rpm`, `tpm`, `max_inflight`, `budget`). */
  keyLimited?(limit: string): void;
  /** One upstream attempt on a node failed for `reason` (failed over, or ending the request). */
  attemptFailed(nodeId: string, reason: string): void;
  /**
   * A forwarded request ended on a node with `status` after `durationMs` (capacity wait included).
   */
  requestDone(nodeId: string, status: number, durationMs: number): void;
}

/** Everything a request needs from the gateway that runs it. */
export interface ProxyContext extends IntakeContext, UpstreamClients {
  /** The core: routing, admission, inflight, pricing and the injected clock. */
  readonly skeid: RoutingCore;
  /** Where the usage event of every forwarded request goes (the ledger). */
  readonly recorder: UsageRecorder;
  /** The gateway's volatile counters (refusals, failed attempts, durations). */
  readonly metrics: ProxyMetrics;
  /** The gateway's logger; never given a customer key or an upstream key. */
  readonly logger: Logger;
  /** Whether one debug line per request is wanted (checked before building it). */
  readonly logRequests: boolean;
  /** Where the rate windows and budgets per customer key are held (ADR 0023, 0025). */
  readonly keyLimiter: KeyLimiter;
  /** The gateway's requests waiting for a tier's capacity (fair share between keys). */
  readonly waiters: WaiterQueue;
  /** Customer key → customer key id, so the SHA-1 is not redone on every request. */
  readonly keyIds: KeyIdCache;
  /** The one shared deadline watch over upstream header waits, body inactivity and keepalives. */
  readonly idle: IdleWatch;
  /**
   * A translated stream whose upstream is silent this long gets the face's keepalive (Anthropic
   * `ping`), ms; 0 or absent = never. Driven by `idle`'s sweep.
   */
  readonly keepaliveMs?: number;
  /** The abort drain of a stream whose client left (`SKEID_ABORT_DRAIN_MS`, ADR 0027), ms. */
  readonly abortDrainMs?: number;
  /** The largest upstream stream event relayed, bytes (`SKEID_MAX_EVENT_BYTES`). */
  readonly maxEventBytes?: number;
  /**
   * The node's own key: undefined = none configured (client headers go through), null = one is
   * configured but resolved nothing (the node must not be called), else the key.
   */
  nodeKey(node: Node): string | null | undefined | Promise<string | null | undefined>;
  /** The `created_at` stamp of an event recorded at epoch-ms `ms`. */
  createdAt(ms: number): string;
  /** Spans and GenAI metrics of each request (ADR 0039); the quiet one when OpenTelemetry is off. */
  readonly telemetry: Telemetry;
  /** The response store of the Responses face (ADR 0028); absent: nothing is kept. */
  readonly responses?: ResponseKeeper;
  /** In-flight bookkeeping for a graceful drain. */
  exchangeStarted(ex: Exchange): void;
  /** Pairs `exchangeStarted`: called exactly once, when the response (or its stream) has ended. */
  exchangeEnded(ex: Exchange): void;
}
