import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { DURATION_BUCKETS_S, escapeLabel, GatewayMetrics } from "../../src/admin/metrics.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { adminFixture } from "./helpers.ts";

const LINE =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*")*)?\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/;

/** Parses Prometheus text; every non-comment line must be `name{labels} value`. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  assert(text.endsWith("\n"), "text ends in a newline");
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) {
      if (line.startsWith("#")) assertMatch(line, /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* \S/);
      continue;
    }
    const m = LINE.exec(line);
    assert(m, `not a sample line: ${line}`);
    samples.set(`${m[1]}${m[2] ?? ""}`, Number(m[4]));
  }
  return samples;
}

function core(now = 1_700_000_000_000) {
  return new RoutingCore({ now: () => now, env: () => undefined });
}

Deno.test("escapeLabel escapes backslash, double quote and newline", () => {
  assertEquals(escapeLabel('a"b\\c\nd'), 'a\\"b\\\\c\\nd');
});

Deno.test("render: node gauges and counters from the core, HELP/TYPE for each family", () => {
  const skeid = core();
  skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m", max_conns: 8 });
  skeid.addNode({ id: "gpu-2", url: "http://127.0.0.1:9", model: "m" });
  skeid.setNodeHealth("gpu-2", false);
  assertEquals(skeid.startRequest("gpu-1"), true);
  assertEquals(skeid.startRequest("gpu-1"), true);
  skeid.finishRequest("gpu-1", { ok: true, duration_ms: 5 });
  const text = new GatewayMetrics().render(skeid);
  const s = parse(text);
  assertEquals(s.get('skeid_node_inflight{node="gpu-1"}'), 1);
  assertEquals(s.get('skeid_node_healthy{node="gpu-1"}'), 1);
  assertEquals(s.get('skeid_node_healthy{node="gpu-2"}'), 0);
  assertEquals(s.get('skeid_node_max_conns{node="gpu-1"}'), 8);
  assertEquals(s.get('skeid_node_max_conns{node="gpu-2"}'), 0);
  assertEquals(s.get('skeid_node_requests_started_total{node="gpu-1"}'), 2);
  assertEquals(s.get('skeid_node_requests_ok_total{node="gpu-1"}'), 1);
  assertEquals(s.get('skeid_node_requests_error_total{node="gpu-1"}'), 0);
  assertEquals(s.get('skeid_node_requests_aborted_total{node="gpu-1"}'), 0);
  assertEquals(s.get('skeid_node_backoff_seconds{node="gpu-1"}'), 0);
  for (
    const [name, type] of [
      ["skeid_node_inflight", "gauge"],
      ["skeid_node_requests_started_total", "counter"],
      ["skeid_request_duration_seconds", "histogram"],
      ["skeid_refusals_total", "counter"],
      ["skeid_node_capacity_used", "gauge"],
      ["skeid_node_capacity_limit", "gauge"],
      ["skeid_node_backoff_seconds", "gauge"],
    ]
  ) {
    assert(text.includes(`# TYPE ${name} ${type}\n`), name);
    assert(text.includes(`# HELP ${name} `), name);
  }
});

Deno.test("render: max_conns is this process's share", () => {
  const skeid = new RoutingCore({ now: () => 0, env: () => undefined, workerCount: 4 });
  skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m", max_conns: 8 });
  const s = parse(new GatewayMetrics().render(skeid));
  assertEquals(s.get('skeid_node_max_conns{node="gpu-1"}'), 2);
});

Deno.test("render: capacity used/limit while a reading is current; backoff seconds left", () => {
  const now = 1_700_000_000_000;
  const skeid = core(now);
  skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m" });
  skeid.addNode({ id: "groq-1", url: "http://127.0.0.1:9", model: "m" });
  skeid.setCapacityReading("gpu-1", { used: 6, limit: 8, source: "prometheus" });
  skeid.setCapacityReading("groq-1", { retry_after_ms: 2500, source: "ratelimit" });
  const s = parse(new GatewayMetrics().render(skeid));
  assertEquals(s.get('skeid_node_capacity_used{node="gpu-1",source="prometheus"}'), 6);
  assertEquals(s.get('skeid_node_capacity_limit{node="gpu-1",source="prometheus"}'), 8);
  assertEquals(s.get('skeid_node_backoff_seconds{node="groq-1"}'), 2.5);
  assertEquals(s.get('skeid_node_backoff_seconds{node="gpu-1"}'), 0);
  assertEquals(
    [...s.keys()].some((k) => k.startsWith('skeid_node_capacity_used{node="groq-1"')),
    false,
    "no used/limit sample for a reading without them",
  );
});

Deno.test("requestDone fills the per-node histogram (cumulative buckets, sum, count)", () => {
  const skeid = core();
  const m = new GatewayMetrics();
  m.requestDone("gpu-1", 200, 3); // ≤ 0.005
  m.requestDone("gpu-1", 200, 70); // ≤ 0.1
  m.requestDone("gpu-1", 502, 90_000); // > 60 → +Inf only
  const s = parse(m.render(skeid));
  const b = (le: string) => s.get(`skeid_request_duration_seconds_bucket{node="gpu-1",le="${le}"}`);
  assertEquals(b("0.005"), 1);
  assertEquals(b("0.05"), 1);
  assertEquals(b("0.1"), 2);
  assertEquals(b("60"), 2);
  assertEquals(b("+Inf"), 3);
  assertEquals(DURATION_BUCKETS_S[0], 0.005);
  assertEquals(DURATION_BUCKETS_S.at(-1), 60);
  assertEquals(s.get('skeid_request_duration_seconds_count{node="gpu-1"}'), 3);
  assertEquals(s.get('skeid_request_duration_seconds_sum{node="gpu-1"}'), 0.003 + 0.07 + 90);
  assertEquals(s.get('skeid_responses_total{node="gpu-1",status="502"}'), 1);
  assertEquals(s.get('skeid_responses_total{node="gpu-1",status="200"}'), 2);
});

Deno.test("refusals by model, status and reason; escaped labels still parse", () => {
  const skeid = core();
  const m = new GatewayMetrics();
  m.noNode("ghost");
  m.noNode("ghost");
  m.saturation("qwen3");
  m.refusal("qwen3", 403, "model_not_permitted");
  m.refusal('we"ird\\model\n', 400, "bad_request");
  m.attemptFailed("gpu-1", "connect");
  const s = parse(m.render(skeid));
  assertEquals(
    s.get('skeid_refusals_total{model="ghost",status="503",reason="no_eligible_node"}'),
    2,
  );
  assertEquals(s.get('skeid_refusals_total{model="qwen3",status="429",reason="no_capacity"}'), 1);
  assertEquals(
    s.get('skeid_refusals_total{model="qwen3",status="403",reason="model_not_permitted"}'),
    1,
  );
  assertEquals(
    s.get('skeid_refusals_total{model="we\\"ird\\\\model\\n",status="400",reason="bad_request"}'),
    1,
  );
  assertEquals(s.get('skeid_upstream_attempt_failures_total{node="gpu-1",reason="connect"}'), 1);
});

Deno.test("client-chosen model names cannot grow the refusal series without bound", () => {
  const skeid = core();
  const m = new GatewayMetrics();
  for (let i = 0; i < 1500; i++) m.noNode(`random-${i}`);
  const s = parse(m.render(skeid));
  const refusalSeries = [...s.keys()].filter((k) => k.startsWith("skeid_refusals_total"));
  assertEquals(refusalSeries.length, 1001);
  assertEquals(
    s.get('skeid_refusals_total{model="_other",status="503",reason="no_eligible_node"}'),
    500,
  );
});

Deno.test("GET /skeid/metrics: Prometheus text content type, parses", async () => {
  const f = adminFixture();
  f.skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m" });
  f.metrics.noNode("ghost");
  const res = await f.req("/skeid/metrics");
  assertEquals(res.status, 200);
  assertMatch(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const s = parse(await res.text());
  assertEquals(s.get('skeid_node_inflight{node="gpu-1"}'), 0);
  assertEquals(
    s.get('skeid_refusals_total{model="ghost",status="503",reason="no_eligible_node"}'),
    1,
  );
});

Deno.test("GET /skeid/metrics/nodes: {metrics:[...]} with the reading in epoch seconds", async () => {
  const f = adminFixture();
  f.skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m" });
  f.skeid.setCapacityReading("gpu-1", { used: 1, limit: 4, source: "prometheus" });
  const res = await f.req("/skeid/metrics/nodes");
  assertEquals(res.status, 200);
  const body = await res.json();
  assertEquals(body.metrics.length, 1);
  assertEquals(body.metrics[0].node_id, "gpu-1");
  assertEquals(body.metrics[0].inflight, 0);
  assertEquals(body.metrics[0].capacity, {
    source: "prometheus",
    used: 1,
    limit: 4,
    at: 1_700_000_000,
  });
});
