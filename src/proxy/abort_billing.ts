/**
 * Abort billing (ADR 0027): a request whose client left still gets a usage event that bills
 * what was delivered. A stream's relay keeps reading the upstream for the abort drain
 * (`SKEID_ABORT_DRAIN_MS`) to catch its usage report, which is exact; when none comes, the tokens
 * are estimated here from the request (about 4 characters a token, the `count_tokens` rule) and
 * from the content relayed, and the event says `usage_source: estimated`. A non-streamed request
 * whose client left stops its upstream call (`ClientWatch`) and is recorded the same way.
 *
 * @module
 */
import type { JsonObject } from "../core/json.ts";
import type { UsageSource } from "../usage/types.ts";
import type { Abortable } from "./upstream_answer.ts";
import { CHARS_PER_TOKEN, estimateInputTokens } from "./estimate.ts";
import type { RelayOutcome } from "./relay.ts";
import type { UsageOutcome } from "./usage_facts.ts";

/** Default abort drain, ms: long enough for a usage chunk that follows the last token. */
export const DEFAULT_ABORT_DRAIN_MS = 2000;
/** The longest abort drain allowed, ms (the slot stays held through it). */
export const MAX_ABORT_DRAIN_MS = 60_000;

/** `SKEID_ABORT_DRAIN_MS`: a whole number of ms, 0 = stop at once; default 2000, at most 60000. */
export function abortDrainMs(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === "") return DEFAULT_ABORT_DRAIN_MS;
  const n = Number(raw.trim());
  if (!Number.isInteger(n) || n < 0) return DEFAULT_ABORT_DRAIN_MS;
  return Math.min(n, MAX_ABORT_DRAIN_MS);
}

/** An estimated usage object (OpenAI shape) for `inputTokens` and `contentBytes` relayed. */
export function estimatedUsage(inputTokens: number, contentBytes: number): JsonObject {
  const output = Math.ceil(Math.max(0, contentBytes) / CHARS_PER_TOKEN);
  return {
    prompt_tokens: inputTokens,
    completion_tokens: output,
    total_tokens: inputTokens + output,
  };
}

/** What a stream's end puts in its usage event and the node's finish. */
export interface StreamEnd {
  /** The status recorded: the upstream's, 499 (client gone), 502 (broken) or 500 (failed). */
  status: number;
  /** Error type of a stream that did not end well. */
  errorType?: string;
  /** What went wrong. */
  errorMessage?: string;
  /** The usage to bill: reported by the upstream, or estimated for a client that left. */
  usage: JsonObject | undefined;
  /** Where `usage` comes from. */
  usageSource: UsageSource;
}

/**
 * The usage event's facts of a relayed stream that ended as `outcome`: a client that left
 * without a usage report is billed the estimate of `inputTokens` and the content relayed.
 */
export function streamEnd(outcome: RelayOutcome, status: number, inputTokens: number): StreamEnd {
  const end: StreamEnd = { status, usage: outcome.usage, usageSource: "reported" };
  if (outcome.end === "aborted") {
    end.status = 499;
    end.errorType = "client_closed";
    end.errorMessage = "client closed the stream";
    if (outcome.usage === undefined) {
      end.usage = estimatedUsage(inputTokens, outcome.contentBytes);
      end.usageSource = "estimated";
    }
  } else if (outcome.end === "broken") {
    end.status = 502;
    end.errorType = "upstream_error";
    end.errorMessage = `Upstream error: ${outcome.error ?? "stream broke"}`;
  } else if (outcome.end === "failed") {
    // The gateway stopped the stream itself: billed like a client that left (the node worked).
    end.status = 500;
    end.errorType = "api_error";
    end.errorMessage = `Internal gateway error: ${outcome.error ?? "relay failed"}`;
    if (outcome.usage === undefined) {
      end.usage = estimatedUsage(inputTokens, outcome.contentBytes);
      end.usageSource = "estimated";
    }
  }
  return end;
}

/** The usage event's facts of a non-streamed request whose client left during the call. */
export function clientLeft(body: JsonObject): UsageOutcome {
  return {
    usage: estimatedUsage(estimateInputTokens(body), 0),
    usageSource: "estimated",
    errorType: "client_closed",
    errorMessage: "client closed the connection",
  };
}

/**
 * Watches a non-streamed request's client while its upstream call runs: when the client goes
 * away the call is stopped (the node stops generating for nobody) and `gone` is set, so the
 * exchange records 499 instead of failing over. A stream's relay sees its client leave by
 * itself (the body is cancelled), so streams are never watched.
 */
export class ClientWatch {
  /** The client went away during the call. */
  gone = false;
  readonly #signal: AbortSignal;
  readonly #call: Abortable;
  readonly #onAbort = () => {
    this.gone = true;
    this.#call.abort();
  };

  /** Starts watching `client.signal` for the upstream call `call` stops. */
  constructor(client: { readonly signal: AbortSignal }, call: Abortable) {
    this.#signal = client.signal;
    this.#call = call;
    if (this.#signal.aborted) this.gone = true;
    else this.#signal.addEventListener("abort", this.#onAbort, { once: true });
  }

  /** Stops watching (the answer is in hand, or the call is over). */
  stop(): void {
    this.#signal.removeEventListener("abort", this.#onAbort);
  }
}

/** A watch over the client of a non-streamed attempt; none for a stream (its relay sees it). */
export function watchClient(
  client: { readonly signal: AbortSignal },
  call: Abortable,
  stream: boolean,
): ClientWatch | undefined {
  return stream ? undefined : new ClientWatch(client, call);
}
