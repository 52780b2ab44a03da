/**
 * The attribute keys Skeid's spans carry beside the GenAI conventions': `skeid.*`, and the HTTP
 * ones of the request span. Each key's protobuf bytes are made once, here.
 *
 * @module
 */
import { attrKey, AttrType } from "./span_record.ts";

/** Skeid's own attribute keys (the GenAI conventions' are `GENAI`, in genai.ts). */
export const SKEID = {
  method: attrKey("http.request.method", AttrType.String),
  route: attrKey("http.route", AttrType.String),
  status: attrKey("http.response.status_code", AttrType.Int),
  apiFormat: attrKey("skeid.api_format", AttrType.String),
  worker: attrKey("skeid.worker", AttrType.Int),
  requestedModel: attrKey("skeid.requested_model", AttrType.String),
  outcome: attrKey("skeid.outcome", AttrType.String),
  keyStep: attrKey("skeid.key_step", AttrType.String),
  result: attrKey("skeid.admission.result", AttrType.String),
  waited: attrKey("skeid.admission.waited_ms", AttrType.Double),
  queued: attrKey("skeid.admission.queued", AttrType.Bool),
  queueLength: attrKey("skeid.admission.queue_length", AttrType.Int),
  reason: attrKey("skeid.admission.reason", AttrType.String),
  tier: attrKey("skeid.tier", AttrType.String),
  node: attrKey("skeid.node.id", AttrType.String),
  pick: attrKey("skeid.pick", AttrType.String),
  keyKind: attrKey("skeid.pick.key_kind", AttrType.String),
  hit: attrKey("skeid.pick.hit", AttrType.Bool),
  spilled: attrKey("skeid.pick.spilled", AttrType.Bool),
  attempt: attrKey("skeid.attempt", AttrType.Int),
  usageSource: attrKey("skeid.usage_source", AttrType.String),
  clientGone: attrKey("skeid.client_gone", AttrType.Bool),
  ttft: attrKey("skeid.time_to_first_chunk_ms", AttrType.Double),
  eventId: attrKey("skeid.usage.event_id", AttrType.String),
  eventStatus: attrKey("skeid.usage.status_code", AttrType.Int),
  eventOk: attrKey("skeid.usage.ok", AttrType.Bool),
  eventSource: attrKey("skeid.usage.source", AttrType.String),
  eventCost: attrKey("skeid.usage.cost_total_usd", AttrType.Double),
} as const;
