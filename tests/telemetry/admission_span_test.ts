/**
 * The admission span's attributes as a collector decodes them, driven through the telemetry
 * itself: an admitted step's are encoded once per key step, node, tier and pick decision and
 * reused, so steps that differ in any one of them must each say their own.
 */
import { assertEquals } from "../_assert.ts";
import { OtlpReceiver } from "../_helpers/otlp_receiver.ts";
import type { PickedNode, Tier } from "../../src/core/types.ts";
import type { PickDecision } from "../../src/core/pick.ts";
import type { UpstreamRequest } from "../../src/faces/face.ts";
import type { WalkResult } from "../../src/proxy/walk.ts";
import { OtelTelemetry } from "../../src/telemetry/otel.ts";

function tier(model: string, tags: string[] = []): Tier {
  return { model, tags, engine: "", wait_ms: 0, deny_tags: [] };
}

function node(id: string, route?: Partial<PickDecision>): PickedNode {
  return {
    id,
    url: "http://10.0.0.7:8000/v1",
    engine: "vllm",
    inflight: 0,
    route_key: "m|||",
    route: route === undefined ? undefined : {
      pick: "affinity",
      key_kind: "session_header",
      hit: true,
      spilled: false,
      ...route,
    },
  } as unknown as PickedNode;
}

Deno.test("otel: each admission span says its own key step, tier, node and pick decision", async () => {
  const receiver = new OtlpReceiver();
  const t = new OtelTelemetry({
    env: (name) => name === "OTEL_EXPORTER_OTLP_ENDPOINT" ? receiver.endpoint : undefined,
  });
  try {
    const req = new Request("http://gw/v1/chat/completions", { method: "POST" });
    const upstream = {
      path: "/chat/completions",
      body: { model: "m", messages: [] },
      stream: false,
    } as unknown as UpstreamRequest;
    // The same node again and again, each step differing from the one before in one thing.
    const steps: [boolean, WalkResult, Record<string, unknown>][] = [];
    const admitted = (limited: boolean, n: PickedNode, t: Tier, want: Record<string, unknown>) =>
      steps.push([limited, { kind: "admitted", node: n, tier: t } as WalkResult, want]);
    const base = { "skeid.admission.result": "admitted", "skeid.node.id": "gpu-1" };
    const rr = { ...base, "skeid.pick": "round_robin", "skeid.tier": "m" };
    const affinity = (hit: boolean, spilled: boolean, kind = "session_header") => ({
      ...base,
      "skeid.tier": "m",
      "skeid.pick": "affinity",
      "skeid.pick.key_kind": kind,
      "skeid.pick.hit": hit,
      "skeid.pick.spilled": spilled,
    });
    admitted(false, node("gpu-1"), tier("m"), { ...rr, "skeid.key_step": "passed" });
    admitted(true, node("gpu-1"), tier("m"), { ...rr, "skeid.key_step": "passed_limited" });
    admitted(false, node("gpu-1"), tier("m"), { ...rr, "skeid.key_step": "passed" });
    admitted(false, node("gpu-1"), tier("m", ["fast"]), {
      ...rr,
      "skeid.key_step": "passed",
      "skeid.tier": "m|fast",
    });
    admitted(false, node("gpu-1"), tier("m2"), {
      ...rr,
      "skeid.key_step": "passed",
      "skeid.tier": "m2",
    });
    admitted(false, node("gpu-2"), tier("m"), {
      ...rr,
      "skeid.key_step": "passed",
      "skeid.node.id": "gpu-2",
    });
    admitted(false, node("gpu-1", {}), tier("m"), {
      ...affinity(true, false),
      "skeid.key_step": "passed",
    });
    admitted(false, node("gpu-1", { hit: false }), tier("m"), {
      ...affinity(false, false),
      "skeid.key_step": "passed",
    });
    admitted(false, node("gpu-1", { hit: false, spilled: true }), tier("m"), {
      ...affinity(false, true),
      "skeid.key_step": "passed",
    });
    admitted(false, node("gpu-1", { key_kind: "prompt" }), tier("m"), {
      ...affinity(true, false, "prompt"),
      "skeid.key_step": "passed",
    });
    admitted(false, node("gpu-1", { pick: "least_loaded", hit: false }), tier("m"), {
      ...affinity(false, false),
      "skeid.pick": "least_loaded",
      "skeid.key_step": "passed",
    });
    steps.push([false, {
      kind: "refused",
      status: 503,
      type: "model_not_found",
      reason: "no_eligible_node",
      message: "no node",
    } as WalkResult, {
      "skeid.key_step": "passed",
      "skeid.admission.result": "refused",
      "skeid.admission.reason": "no_eligible_node",
      "http.response.status_code": 503,
    }]);
    const traces: string[] = [];
    for (const [limited, step] of steps) {
      const r = t.request(req, "/v1/chat/completions", "openai");
      traces.push(r.trace!.traceId);
      r.model("m");
      r.admitting();
      r.keyPassed(limited);
      r.walked(step);
      if (step.kind === "admitted") {
        r.attempt(step.node, step.tier.model, 1, upstream);
        r.recorded(undefined, { response: undefined });
      }
      r.outcome(200, "ok");
      r.end();
    }
    await t.shutdown();
    steps.forEach(([, , want], i) => {
      const admission = receiver.trace(traces[i]).find((s) => s.name === "skeid.admission");
      const got = { ...admission?.attributes };
      assertEquals(typeof got["skeid.admission.waited_ms"], "number", `step ${i}`);
      delete got["skeid.admission.waited_ms"];
      assertEquals(got, want, `step ${i}`);
    });
  } finally {
    await receiver.close();
  }
});
