/**
 * `GET /skeid/route?model=…[&prompt=…][&session=…][&api_key_id=…]`: how each tier of a model's
 * route plan would pick for a sample request now — its pick, the load bound, every admitting
 * candidate with its load, cached tokens, predicted wait and prefill, and the winner. It reads
 * and changes nothing (no index entry, no counter, no cursor).
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import { routeHint } from "../core/route_hint.ts";
import type { CandidateScore } from "../core/pick.ts";

/** The sample request to explain. */
export interface RouteQuery {
  /** The requested model (an alias or a node model). */
  model: string;
  /** The sample's user message (default empty: a request with nothing to key on). */
  prompt?: string;
  /** A session key for it (sent as `prompt_cache_key`). */
  session?: string;
  /** The customer key id whose policy the plan is made under (default: the default policy). */
  apiKeyId?: string;
}

/** One tier's explanation. */
export interface TierExplanation {
  /** The tier's served model. */
  model: string;
  /** The tier's tags. */
  tags: string[];
  /** The pick in force for the tier. */
  pick: string;
  /** The session key kind the sample gave. */
  key_kind: string;
  /** `affinity`: a node takes the request while its load + 1 ≤ this. */
  bound_load: number | null;
  /** The node the pick would choose now; null when none admits. */
  winner: string | null;
  /** Whether the winner is the affinity node, and whether the bound moved the request. */
  hit: boolean;
  /** See `hit`. */
  spilled: boolean;
  /** The admitting nodes, in the session key's rendezvous order (affinity). */
  candidates: readonly CandidateScore[];
}

/** The explanation of a model's route plan for a sample request. */
export function explainRoute(skeid: RoutingCore, q: RouteQuery): Record<string, unknown> {
  const plan = skeid.routePlan({ model: q.model, api_key_id: q.apiKeyId });
  if (!plan.permitted) return { ok: false, model: q.model, reason: plan.reason, tiers: [] };
  // No prompt is no message: an empty one would still be hashed (its role) and keyed as `prompt`.
  const prompt = q.prompt ?? "";
  const body: Record<string, unknown> = {
    model: q.model,
    messages: prompt === "" ? [] : [{ role: "user", content: prompt }],
  };
  if (q.session !== undefined && q.session !== "") body.prompt_cache_key = q.session;
  const hint = routeHint(body);
  const tiers: TierExplanation[] = plan.tiers.map((tier) => {
    const pick = tier.pick ?? skeid.routing.pick;
    const d = skeid.explainPick(tier, hint);
    return {
      model: tier.model,
      tags: [...tier.tags],
      pick,
      key_kind: pick === "affinity" ? hint.key_kind : "none",
      bound_load: pick === "affinity" && d ? d.bound_load : null,
      // round_robin's choice is its cursor's, not a score: no winner to show.
      winner: d && pick !== "round_robin" ? d.node_id : null,
      hit: d?.hit ?? false,
      spilled: d?.spilled ?? false,
      candidates: d?.candidates ?? [],
    };
  });
  return {
    ok: true,
    model: q.model,
    bound: skeid.routing.affinity_bound,
    tiers,
  };
}
