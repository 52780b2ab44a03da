/**
 * The routing walk: a route plan's tiers in order, each asked for a node admission takes now,
 * waiting (event-driven, in the waiter queue) only where the tier says so. The walk also carries
 * failover: a node whose attempt failed is excluded and the walk goes on from where it was — the
 * same tier first, then the later ones — without waiting again in a tier it already waited in.
 *
 * 403, 429 and 503 tell a client three different things (ADR 0012): the walk decides which one a
 * request that got no node deserves, and never lets one stand in for another.
 *
 * @module
 */
import {
  DEFAULT_RESERVE_TOKENS,
  DEFAULT_SHARE,
  type KeyPolicy,
  type ShareSettings,
} from "../core/key_policy.ts";
import type { PickedNode, RouteState, Selection, Tier } from "../core/types.ts";
import { type EstimatedRequest, requestTokensEstimate } from "./estimate.ts";
import type { ShareTicket, Waiter, WaiterQueue } from "./wait.ts";
import { type RouteHint, routeHint, type RouteHintSource } from "../core/route_hint.ts";
import type { JsonObject } from "../core/json.ts";

/** What the walk needs from the core (a `RoutingCore` satisfies it). */
export interface WalkCore {
  /** Whether any node is eligible for a selection, and whether any would be admitted now. */
  routeState(sel: Selection): RouteState;
  /**
   * The next node admission would take now, by the selection's pick; does not admit. `hint` is
   * read only by the `affinity` pick; `exclude`d nodes are not picked (failover).
   */
  pickNode(
    sel: Selection,
    hint?: RouteHintSource,
    exclude?: ReadonlySet<string>,
  ): PickedNode | undefined;
  /** Admits one request on the node; false when another request took the slot in between. */
  startRequest(id: string): boolean;
  /** The core's clock, epoch ms. */
  now(): number;
  /** What a customer key is held to (its fair share settings); absent: the defaults. */
  keyPolicy?(apiKeyId: string | undefined): KeyPolicy;
}

/** A tier as the fair share metrics name it: its model, then its tags. */
export function tierName(tier: Selection): string {
  const tags = tier.tags ?? [];
  return tags.length > 0 ? `${tier.model}|${tags.join("+")}` : tier.model;
}

/** A node was admitted: the caller owns its slot and must finish it. */
export interface WalkAdmitted {
  /** `admitted`: a node took the request. */
  kind: "admitted";
  /** The admitted node (its slot is taken: `finishRequest` must follow). */
  node: PickedNode;
  /** The tier that admitted it; its `model` is the served model. */
  tier: Tier;
}

/** No node: the refusal the client gets (when no attempt was made before). */
export interface WalkRefused {
  /** `refused`: no node; the client gets `status`. */
  kind: "refused";
  /**
   * 403: only nodes the customer key's deny tags forbid would be eligible; 429: eligible but never
   * admitted within the waits, or the key already had `share.max_queued` waiters; 503: no
   * eligible node.
   */
  status: 403 | 429 | 503;
  /** The error type in the face's error body. */
  type: "permission_error" | "rate_limit_error" | "model_not_found";
  /** Short reason for metrics and logs (the refusal words of CONTEXT.md). */
  reason: "denied_by_tags" | "no_capacity" | "no_eligible_node" | "key_queue_full";
  /** What the client is told. */
  message: string;
  /**
   * `Retry-After` seconds of a 429: capacity and queue places free as requests end, which no one
   * can foretell; a second is the hint (the client's own backoff does the rest).
   */
  retryAfterS?: number;
}

/** The client went away while waiting: nothing was taken. */
export interface WalkAborted {
  /** `aborted`: the client's signal fired while waiting. */
  kind: "aborted";
}

/** The walk's answer. */
export type WalkResult = WalkAdmitted | WalkRefused | WalkAborted;

/** Most picks one admission try makes while skipping excluded nodes (weighted RR repeats ids). */
const MAX_PICKS = 32;

/** One request's walk over its route plan. */
export class RouteWalk implements Waiter, RouteHintSource {
  readonly #core: WalkCore;
  readonly #queue: WaiterQueue;
  readonly #tiers: readonly Tier[];
  readonly #requestedModel: string;
  #index = 0;
  /** Highest tier index whose wait was spent (a revisit during failover does not wait again). */
  #waitedUpTo = -1;
  #excluded: Set<string> | undefined;
  #everEligible = false;
  /** Whether the last admission try saw an eligible node that was not excluded. */
  #sawFresh = false;
  #pickedId: string | undefined;
  #waitedMs = 0;
  #admitted: PickedNode | undefined;
  /** The customer key the walk's waits count to (fair share). */
  keyId: string | undefined;
  /** Waiter: the fair share charge of the current admission, corrected by the usage event. */
  shareTicket: ShareTicket | undefined;
  #charged: EstimatedRequest | undefined;
  #maxReserve = 0;
  #policy: KeyPolicy | undefined;
  /** What the route hint is computed from (`hinting`); undefined: the walk gives none. */
  #hintBody: JsonObject | undefined;
  #hintHeaders: Headers | undefined;
  #hintUpstream: JsonObject | undefined;
  /** The route hint once computed (`#hinted`). */
  #hint: RouteHint | undefined;
  #hinted = false;

  /**
   * A walk starting at the first tier; nothing is asked until `next()`.
   *
   * @param core the core the walk asks for route states, picks and admissions
   * @param queue where the walk waits for a tier's capacity
   * @param tiers the route plan's tiers, in order
   * @param requestedModel the client's model, for refusal messages
   */
  constructor(core: WalkCore, queue: WaiterQueue, tiers: readonly Tier[], requestedModel: string) {
    this.#core = core;
    this.#queue = queue;
    this.#tiers = tiers;
    this.#requestedModel = requestedModel;
  }

  /**
   * Counts the walk's waits to customer key `keyId` (fair share); `upstream`, the upstream
   * request, is read only to estimate its tokens when it has to share, its output charged at most
   * `maxReserve` tokens (`routing.max_reserve_tokens`). Without it every walk is one key.
   */
  sharing(keyId: string, upstream: EstimatedRequest, maxReserve: number): this {
    this.keyId = keyId;
    this.#charged = upstream;
    this.#maxReserve = maxReserve;
    return this;
  }

  /**
   * Gives the `affinity` pick the request's route hint, of the client's `body` and `headers` and
   * the `upstream` body the node gets: computed at most once, on the first pick that reads it
   * (a `round_robin` walk never does). The walk itself is the pick's hint source, so a request
   * makes nothing for a pick that reads no hint.
   */
  hinting(body: JsonObject, headers: Headers, upstream: JsonObject): this {
    this.#hintBody = body;
    this.#hintHeaders = headers;
    this.#hintUpstream = upstream;
    return this;
  }

  /** The request's route hint (RouteHintSource), computed on the first call. */
  routeHint(): RouteHint | undefined {
    if (!this.#hinted && this.#hintBody !== undefined) {
      this.#hinted = true;
      this.#hint = routeHint(this.#hintBody, this.#hintHeaders, this.#hintUpstream);
    }
    return this.#hint;
  }

  /** Waiter: the customer key's fair share settings, read once per request. */
  get share(): ShareSettings {
    return this.#keyPolicy()?.share ?? DEFAULT_SHARE;
  }

  /** Waiter: the tokens charged at dispatch (input estimate + output limit or default). */
  estimateTokens(): number {
    if (this.#charged === undefined) return 1;
    const reserve = this.#keyPolicy()?.budget?.default_reserve_tokens ?? DEFAULT_RESERVE_TOKENS;
    return requestTokensEstimate(this.#charged, reserve, this.#maxReserve);
  }

  /** Waiter: the requested model waited for (the Live page). */
  get aliasName(): string {
    return this.#requestedModel;
  }

  /** Waiter: the tier waited for, as metrics name it. */
  get tierName(): string {
    const tier = this.#tiers[this.#index];
    return tier === undefined ? "" : tierName(tier);
  }

  #keyPolicy(): KeyPolicy | undefined {
    return this.#policy ??= this.#core.keyPolicy?.(this.keyId);
  }

  /** Milliseconds spent waiting for capacity so far. */
  get waitedMs(): number {
    return this.#waitedMs;
  }

  /** Leaves a node out of every later admission try (its attempt failed). */
  exclude(id: string): void {
    (this.#excluded ??= new Set()).add(id);
  }

  /**
   * The next admitted node, or why there is none. `client.signal` (the client went away) is read
   * only when the walk has to wait: creating a request's signal costs the server work on every
   * request, and most requests never wait.
   */
  next(client?: { readonly signal: AbortSignal }): WalkResult | Promise<WalkResult> {
    // The usual case answers synchronously: the first tier admits at once (no promise, no
    // microtask); waiting goes on in `#nextAsync`.
    if (this.shareTicket !== undefined) {
      // A failover: the attempt the last admission was charged for served nothing.
      this.#queue.uncharge(this.shareTicket);
      this.shareTicket = undefined;
    }
    const tiers = this.#tiers;
    while (this.#index < tiers.length) {
      const tier = tiers[this.#index];
      const state = this.#core.routeState(tier);
      if (!state.has_eligible) {
        this.#index++;
        continue;
      }
      this.#everEligible = true;
      if (this.#waitOf(tier) > 0 && this.#excluded === undefined && this.#queue.yields()) {
        // A waiter of another worker comes first: queue (the queue's round decides at once).
        this.#sawFresh = true;
        return this.#nextAsync(client, true);
      }
      if (this.tryAdmit()) return this.#take(tier, true);
      return this.#nextAsync(client, true);
    }
    return this.#refusal();
  }

  /** `next` from the current tier on; `tried`: its admission was just tried (by `next`). */
  async #nextAsync(
    client: { readonly signal: AbortSignal } | undefined,
    tried: boolean,
  ): Promise<WalkResult> {
    let signal: AbortSignal | undefined;
    const tiers = this.#tiers;
    while (this.#index < tiers.length) {
      const tier = tiers[this.#index];
      if (!tried) {
        const state = this.#core.routeState(tier);
        if (!state.has_eligible) {
          // Nothing could ever serve this tier: on at once, whatever its wait.
          this.#index++;
          continue;
        }
        this.#everEligible = true;
        if (this.tryAdmit()) return this.#take(tier, true);
      }
      tried = false;
      const wait = this.#waitOf(tier);
      if (wait > 0 && this.#waitedUpTo < this.#index && this.#sawFresh) {
        this.#waitedUpTo = this.#index;
        const started = this.#core.now();
        signal ??= client?.signal;
        const result = await this.#queue.wait(this, started + wait, signal);
        this.#waitedMs += this.#core.now() - started;
        if (result === "admitted") return this.#take(tier, false);
        if (result === "aborted") return { kind: "aborted" };
        if (result === "queue_full") return this.#queueFull();
      }
      this.#index++;
    }
    if (signal?.aborted) return { kind: "aborted" };
    return this.#refusal();
  }

  /** Tries the current tier once: true when a node was admitted (Waiter contract). */
  tryAdmit(): boolean {
    const tier = this.#tiers[this.#index];
    if (tier === undefined) return false;
    const excluded = this.#excluded;
    this.#sawFresh = excluded === undefined;
    for (let i = 0; i < MAX_PICKS; i++) {
      const node = this.#core.pickNode(tier, this, excluded);
      if (node === undefined) return false;
      if (excluded !== undefined && excluded.has(node.id)) continue;
      this.#sawFresh = true;
      this.#pickedId = node.id;
      if (this.#core.startRequest(node.id)) {
        this.#admitted = node;
        return true;
      }
      // Another request took the slot between pick and start: pick again.
    }
    return false;
  }

  #waitOf(tier: Tier): number {
    return tier.wait_ms > 0 ? tier.wait_ms : 0;
  }

  /** `direct`: admitted without waiting (charged to the key while others wait, ADR 0024). */
  #take(tier: Tier, direct: boolean): WalkAdmitted {
    // `charge` itself does nothing unless requests wait (here or in another worker).
    if (direct) this.shareTicket = this.#queue.charge(this);
    const node = this.#admitted!;
    this.#admitted = undefined;
    this.#waitedUpTo = Math.max(this.#waitedUpTo, this.#index);
    return { kind: "admitted", node, tier };
  }

  #queueFull(): WalkRefused {
    const max = this.share.max_queued;
    return {
      kind: "refused",
      status: 429,
      type: "rate_limit_error",
      reason: "key_queue_full",
      message: `Too many requests of this key waiting for capacity (share.max_queued: ${max})`,
      retryAfterS: 1,
    };
  }

  #refusal(): WalkRefused {
    const model = this.#requestedModel;
    if (this.#everEligible) {
      const waited = Math.round(this.#waitedMs);
      const where = this.#pickedId !== undefined
        ? `on node '${this.#pickedId}'`
        : `for model '${model}'`;
      return {
        kind: "refused",
        status: 429,
        type: "rate_limit_error",
        reason: "no_capacity",
        message: `Timed out waiting for free capacity ${where} (waited ${waited}ms)`,
        retryAfterS: 1,
      };
    }
    // No tier had an eligible node. If one would have without the key's deny_tags, the key may
    // not reach this model: that is a permission answer, not an availability one.
    for (const tier of this.#tiers) {
      if (tier.deny_tags.length === 0) continue;
      if (this.#core.routeState({ ...tier, deny_tags: [] }).has_eligible) {
        return {
          kind: "refused",
          status: 403,
          type: "permission_error",
          reason: "denied_by_tags",
          message: `Model '${model}' is not available for this key`,
        };
      }
    }
    return {
      kind: "refused",
      status: 503,
      type: "model_not_found",
      reason: "no_eligible_node",
      message: `No healthy node available for model '${model}'`,
    };
  }
}
