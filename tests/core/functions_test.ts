import assert from "node:assert/strict";
import { FunctionError, FunctionTable } from "../../src/core/functions.ts";
import { SUPPORTED_ENGINE_IDS } from "../../src/core/engines.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";

/** A real core on a hand-driven clock, with no environment. */
function core(start = 1_700_000_000_000) {
  const clock = { t: start };
  const skeid = new RoutingCore({ now: () => clock.t, env: () => undefined });
  return { skeid, clock };
}

/** Asserts that a call rejects with a FunctionError of `status` whose message matches. */
async function rejects(p: Promise<unknown>, status: number, message: RegExp) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof FunctionError, `expected a FunctionError, got ${String(e)}`);
    assert.equal(e.status, status, e.message);
    assert.match(e.message, message);
    return true;
  });
}

const SEED_FUNCTIONS = [
  "alias.set",
  "capacity.forget",
  "capacity.get",
  "capacity.observe",
  "capacity.set",
  "config.reload",
  "config.status",
  "engines.list",
  "metrics.estimate_cost",
  "metrics.normalize",
  "nodes.add",
  "nodes.list",
  "nodes.metrics",
  "nodes.remove",
  "nodes.select",
  "nodes.set_health",
  "policy.for_key",
  "policy.set",
  "pricing.set",
  "request.finish",
  "request.start",
  "route.next",
  "route.plan",
  "route.state",
  "usage.configure",
  "usage.record",
  "usage.report",
];

// ---- argument checks (no core bodies needed) ---------------------------------------------------

Deno.test("names(): every function of the seed's table, sorted", () => {
  const { skeid } = core();
  assert.deepEqual(new FunctionTable(skeid).names(), SEED_FUNCTIONS);
});

Deno.test("an unknown function is a 404 naming it, and runs no reload", async () => {
  const { skeid } = core();
  let reloads = 0;
  const table = new FunctionTable(skeid, { beforeCall: () => Promise.resolve(void reloads++) });
  await rejects(table.call("nodes.explode", {}), 404, /unknown function 'nodes\.explode'/);
  assert.equal(reloads, 0);
});

Deno.test("args that are not an object are a 400 naming the function", async () => {
  const { skeid } = core();
  const table = new FunctionTable(skeid);
  for (const bad of [null, [], "x", 5, true]) {
    await rejects(table.call("route.plan", bad), 400, /^route\.plan: args must be a JSON object$/);
  }
});

Deno.test("a missing required argument is a 400 naming the function and the argument", async () => {
  const { skeid } = core();
  const table = new FunctionTable(skeid, {
    usageRecord: () => Promise.resolve({}),
  });
  const cases: [string, Record<string, unknown>, string][] = [
    ["metrics.estimate_cost", { usage: {} }, "model"],
    ["metrics.normalize", {}, "model"],
    ["pricing.set", { pricing: {} }, "model"],
    ["pricing.set", { model: "m" }, "pricing"],
    ["nodes.remove", {}, "id"],
    ["nodes.set_health", { healthy: true }, "id"],
    ["nodes.set_health", { id: "n" }, "healthy"],
    ["alias.set", { tiers: [] }, "name"],
    ["policy.set", { deny_tags: [] }, "name"],
    ["policy.for_key", {}, "api_key_id"],
    ["route.plan", { api_key_id: "k" }, "model"],
    ["route.next", { tags: ["local"] }, "model"],
    ["route.state", {}, "model"],
    ["capacity.set", { used: 1, limit: 2 }, "id"],
    ["capacity.get", {}, "id"],
    ["capacity.observe", { headers: {} }, "id"],
    ["request.start", {}, "id"],
    ["request.finish", { ok: true }, "id"],
  ];
  for (const [name, args, missing] of cases) {
    const re = new RegExp(`^${name.replace(".", "\\.")}: missing required argument '${missing}'$`);
    await rejects(table.call(name, args), 400, re);
  }
});

Deno.test("a badly typed argument is a 400 naming it", async () => {
  const { skeid } = core();
  const table = new FunctionTable(skeid);
  await rejects(table.call("nodes.set_health", { id: "n", healthy: "yes" }), 400, /'healthy'/);
  await rejects(table.call("capacity.set", { id: "n", used: "lots" }), 400, /'used'/);
  await rejects(table.call("route.next", { model: "m", tags: { a: 1 } }), 400, /'tags'/);
  await rejects(table.call("nodes.add", { node: "gpu-1" }), 400, /'node'/);
  await rejects(table.call("pricing.set", { model: "m", pricing: 3 }), 400, /'pricing'/);
  await rejects(
    table.call("metrics.normalize", { model: "m", tool_calls: "x" }),
    400,
    /tool_calls/,
  );
});

Deno.test("engines.list answers the supported engine ids", async () => {
  const { skeid } = core();
  const out = await new FunctionTable(skeid).call("engines.list", undefined);
  assert.deepEqual(out, { engines: [...SUPPORTED_ENGINE_IDS] });
  assert.ok((out as { engines: string[] }).engines.includes("openaibase"));
});

Deno.test("functions whose hook is not wired answer 501 with what is missing", async () => {
  const { skeid } = core();
  const table = new FunctionTable(skeid);
  await rejects(table.call("usage.report", {}), 501, /^usage\.report: no usage store$/);
  await rejects(table.call("usage.record", {}), 501, /^usage\.record: no usage store$/);
  await rejects(table.call("usage.configure", {}), 501, /^usage\.configure: no usage store/);
  await rejects(table.call("config.reload", {}), 501, /^config\.reload: no config source/);
  await rejects(table.call("config.status", {}), 501, /^config\.status: no config source/);
});

Deno.test("usage hooks: filters (empty ones dropped), record args, configure inline or nested", async () => {
  const { skeid } = core();
  const seen: unknown[] = [];
  const table = new FunctionTable(skeid, {
    usageReport: (f) => Promise.resolve(seen.push(["report", f]) && { ok: true, enabled: true }),
    usageRecord: (a) => Promise.resolve(seen.push(["record", a]) && { ok: true }),
    usageConfigure: (c) => Promise.resolve(seen.push(["configure", c]) && { backend: "x" }),
  });
  assert.deepEqual(
    await table.call("usage.report", { since: "", model: "m", api_key_id: "k_1", limit: 5 }),
    { ok: true, enabled: true },
  );
  assert.deepEqual(await table.call("usage.record", { model: "m", ok: 1 }), { ok: true });
  assert.deepEqual(await table.call("usage.configure", { usage_store: { backend: "jsonlog" } }), {
    usage_store: { backend: "x" },
  });
  await table.call("usage.configure", { backend: "sqlite", path: "/tmp/u.db" });
  assert.deepEqual(seen, [
    ["report", { model: "m", api_key_id: "k_1", limit: 5 }],
    ["record", { model: "m", ok: 1 }],
    ["configure", { backend: "jsonlog" }],
    ["configure", { backend: "sqlite", path: "/tmp/u.db" }],
  ]);
});

Deno.test("config.reload answers {config}; a failure is a 500 with the reason", async () => {
  const { skeid } = core();
  let fail = false;
  const table = new FunctionTable(skeid, {
    reload: () =>
      fail
        ? Promise.reject(new Error("nodes[2].engine: unknown engine 'x'"))
        : Promise.resolve({ ok: true }),
    reloadStatus: () => ({ ok: true, error: null, failed_at: null, failures: 0 }),
  });
  assert.deepEqual(await table.call("config.reload", {}), { config: { ok: true } });
  fail = true;
  await rejects(
    table.call("config.reload", {}),
    500,
    /^config\.reload: nodes\[2\]\.engine: unknown engine 'x'$/,
  );
  assert.deepEqual(await table.call("config.status", {}), {
    ok: true,
    error: null,
    failed_at: null,
    failures: 0,
  });
});

Deno.test("beforeCall (maybe reload) runs once before every dispatch", async () => {
  const { skeid } = core();
  const order: string[] = [];
  const table = new FunctionTable(skeid, {
    beforeCall: () => Promise.resolve(void order.push("reload")),
    reloadStatus: () => (order.push("status"), { ok: true }),
  });
  await table.call("config.status", {});
  await table.call("engines.list", {});
  assert.deepEqual(order, ["reload", "status", "reload"]);
});

// ---- round trips through the real core ---------------------------------------------------------

const NODE = { id: "gpu-1", url: "http://127.0.0.1:9/v1", model: "qwen3", max_conns: 1 };

Deno.test("nodes: add, list, select, set_health, remove", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  const added = await t.call("nodes.add", { ...NODE, tags: "local, GB10" }) as {
    ok: boolean;
    node: { id: string; tags: string[] };
  };
  assert.equal(added.ok, true);
  assert.deepEqual(added.node.tags, ["local", "gb10"]);
  await t.call("nodes.add", {
    node: { id: "cloud-1", url: "http://127.0.0.1:9", model: "qwen3", tags: ["cloud"] },
  });
  const list = await t.call("nodes.list", {}) as { nodes: { id: string }[] };
  assert.deepEqual(list.nodes.map((n) => n.id).sort(), ["cloud-1", "gpu-1"]);
  const sel = await t.call("nodes.select", { tags: "local" }) as { nodes: { id: string }[] };
  assert.deepEqual(sel.nodes.map((n) => n.id), ["gpu-1"]);
  assert.deepEqual(await t.call("nodes.set_health", { id: "gpu-1", healthy: false }), { ok: true });
  assert.equal(skeid.getNode("gpu-1")?.healthy, false);
  assert.deepEqual(await t.call("nodes.set_health", { id: "nope", healthy: 1 }), { ok: false });
  assert.equal(skeid.getNode("nope"), undefined);
  assert.deepEqual(await t.call("nodes.remove", { id: "gpu-1" }), { ok: true });
  assert.deepEqual(await t.call("nodes.remove", { id: "gpu-1" }), { ok: false });
});

Deno.test("nodes.add with a bad spec is a 400 carrying the core's reason", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  await rejects(
    t.call("nodes.add", { ...NODE, engine: "openai-compatible" }),
    400,
    /^nodes\.add: .*unknown engine 'openai-compatible'/,
  );
  assert.equal(skeid.getNode("gpu-1"), undefined);
});

Deno.test("capacity.set takes epoch seconds and retry_after_ms; get answers seconds", async () => {
  const { skeid, clock } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", NODE);
  const nowS = clock.t / 1000;
  const set = await t.call("capacity.set", {
    id: "gpu-1",
    used: 3,
    limit: 3,
    source: "registry",
    at: nowS - 1,
    expires_at: nowS + 9,
    interval_ms: 2000,
  });
  assert.deepEqual(set, {
    capacity: {
      source: "registry",
      used: 3,
      limit: 3,
      at: nowS - 1,
      expires_at: nowS + 9,
      interval_ms: 2000,
    },
  });
  const inCore = skeid.capacityReading("gpu-1");
  assert.equal(inCore?.at, clock.t - 1000, "the core keeps milliseconds");
  assert.equal(inCore?.expires_at, clock.t + 9000);
  assert.deepEqual(await t.call("capacity.get", { id: "gpu-1" }), set);

  const backoff = await t.call("capacity.set", {
    id: "gpu-1",
    reading: { retry_after_ms: 2500, source: "registry" },
  }) as { capacity: { retry_after: number } };
  assert.equal(backoff.capacity.retry_after, nowS + 2.5);
  assert.equal(skeid.startRequest("gpu-1"), false);

  assert.deepEqual(await t.call("capacity.forget", { id: "gpu-1", source: "ratelimit" }), {
    ok: true,
  });
  assert.notEqual(skeid.capacityReading("gpu-1"), undefined, "another source's reading stays");
  await t.call("capacity.forget", { id: "gpu-1" });
  assert.deepEqual(await t.call("capacity.get", { id: "gpu-1" }), { capacity: null });
});

Deno.test("capacity.observe reads rate-limit headers off a response", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", NODE);
  const out = await t.call("capacity.observe", {
    id: "gpu-1",
    headers: { "X-RateLimit-Limit-Requests": "100", "x-ratelimit-remaining-requests": 40 },
    status: 200,
  }) as { capacity: Record<string, unknown> };
  assert.deepEqual([out.capacity.source, out.capacity.used, out.capacity.limit], [
    "ratelimit",
    60,
    100,
  ]);
  assert.deepEqual(
    await t.call("capacity.observe", { id: "gpu-1", headers: {}, status: 200 }),
    { capacity: null },
  );
});

Deno.test("request.start / request.finish / nodes.metrics", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", NODE);
  assert.deepEqual(await t.call("request.start", { id: "gpu-1" }), { ok: true });
  assert.deepEqual(await t.call("request.start", { id: "gpu-1" }), { ok: false }, "max_conns 1");
  assert.deepEqual(await t.call("request.finish", { id: "gpu-1", ok: 1, duration_ms: 12 }), {
    ok: true,
  });
  const one = await t.call("nodes.metrics", { id: "gpu-1" }) as {
    metrics: Record<string, unknown>;
  };
  assert.equal(one.metrics.ok, 1);
  assert.equal(one.metrics.duration_ms_total, 12);
  assert.equal(one.metrics.inflight, 0);
  const all = await t.call("nodes.metrics", {}) as { metrics: unknown[] };
  assert.equal(all.metrics.length, 1);
  assert.deepEqual(await t.call("nodes.metrics", { id: "nope" }), { metrics: null });
});

Deno.test("route.plan / route.next / route.state", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", NODE);
  const plan = await t.call("route.plan", { model: "qwen3" }) as {
    permitted: boolean;
    tiers: unknown[];
  };
  assert.equal(plan.permitted, true);
  assert.equal(plan.tiers.length, 1);
  const next = await t.call("route.next", { model: "qwen3" }) as { node: { id: string } | null };
  assert.equal(next.node?.id, "gpu-1");
  assert.deepEqual(await t.call("route.next", { model: "other" }), { node: null });
  const state = await t.call("route.state", { model: "qwen3" }) as Record<string, unknown>;
  assert.equal(state.eligible_count, 1);
  assert.equal(state.has_available, true);
});

Deno.test("pricing.set then metrics.estimate_cost and metrics.normalize", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  assert.deepEqual(
    await t.call("pricing.set", {
      model: "gpt-4o-mini",
      pricing: { input_per_million: 0.15, output_per_million: 0.6 },
    }),
    { input_per_million: 0.15, output_per_million: 0.6 },
  );
  const cost = await t.call("metrics.estimate_cost", {
    model: "gpt-4o-mini",
    usage: { prompt_tokens: 1000, completion_tokens: 200 },
  }) as Record<string, unknown>;
  assert.equal(cost.total_cost_usd, 0.00027);
  const m = await t.call("metrics.normalize", {
    model: "gpt-4o-mini",
    response: { usage: { prompt_tokens: 1000, completion_tokens: 200 } },
    tool_calls: [{ function: { name: "lookup" } }],
  }) as Record<string, unknown>;
  assert.equal(m.cost_total_usd, 0.00027);
  assert.equal(m.tool_calls, 1);
  assert.deepEqual(m.tool_names, ["lookup"]);
  await rejects(
    t.call("pricing.set", { model: "m", pricing: { cached_input_per_million: -1 } }),
    400,
    /^pricing\.set: pricing for 'm': cached_input_per_million must be a number >= 0$/,
  );
});

Deno.test("alias.set and policy.set / policy.for_key", async () => {
  const { skeid } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", { ...NODE, tags: ["local"] });
  const alias = await t.call("alias.set", {
    name: "house-model",
    tiers: [{ tags: ["local"], model: "qwen3", wait_ms: 200 }],
  }) as { ok: boolean };
  assert.equal(alias.ok, true);
  const plan = await t.call("route.plan", { model: "house-model" }) as {
    tiers: { model: string }[];
  };
  assert.equal(plan.tiers[0].model, "qwen3");
  await rejects(t.call("alias.set", { name: "empty", alias: { tiers: [] } }), 400, /^alias\.set: /);
  const set = await t.call("policy.set", { name: "local-only", deny_tags: ["Cloud"] }) as {
    ok: boolean;
    policy: { models: unknown; deny_tags: string[] };
  };
  assert.deepEqual(set, { ok: true, policy: { models: null, deny_tags: ["cloud"] } });
  const forKey = await t.call("policy.for_key", { api_key_id: "k_0000" });
  assert.ok(typeof forKey === "object" && forKey !== null && "policy" in forKey);
});

Deno.test("capacity.set: an absolute retry_after in epoch seconds; forget with no id drops all", async () => {
  const { skeid, clock } = core();
  const t = new FunctionTable(skeid);
  await t.call("nodes.add", NODE);
  await t.call("nodes.add", { ...NODE, id: "gpu-2" });
  const until = clock.t / 1000 + 1.5;
  const out = await t.call("capacity.set", { id: "gpu-1", retry_after: until }) as {
    capacity: Record<string, unknown>;
  };
  assert.equal(out.capacity.retry_after, until);
  assert.equal(out.capacity.source, "custom");
  assert.equal(skeid.capacityReading("gpu-1")?.retry_after, clock.t + 1500);
  await t.call("capacity.set", { id: "gpu-2", used: 1, limit: 1 });
  assert.deepEqual(await t.call("capacity.forget", {}), { ok: true });
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.capacityReading("gpu-2"), undefined);
});
