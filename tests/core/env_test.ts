import assert from "node:assert/strict";
import { BUILTIN_ROUTING, routingFromEnv } from "../../src/core/env.ts";
import { core, spec } from "./routing_helpers.ts";

Deno.test("built-in routing settings with nothing in the environment", () => {
  const { skeid } = core();
  assert.deepEqual(skeid.routing, {
    wait_timeout_ms: 2000,
    wait_poll_ms: 25,
    trust_key_id_header: false,
    frontend_count: 1,
    require_known_keys: false,
    max_body_bytes: 64 * 1024 * 1024,
    max_attempts: 3,
    budget_refresh_ms: 2000,
    max_retry_after_ms: 60_000,
    max_reserve_tokens: 1_000_000,
    pick: "round_robin",
    affinity_bound: 1.25,
    prefix_index_blocks: 1_000_000,
    prefix_index_ttl_s: 600,
  });
  assert.equal(skeid.capacityMaxAgeMs, 5000);
  assert.deepEqual(skeid.baseRouting, skeid.routing);
});

Deno.test("SKEID_* variables set the defaults", () => {
  const { skeid } = core({
    vars: {
      SKEID_ROUTE_WAIT_TIMEOUT_MS: "1234",
      SKEID_ROUTE_WAIT_POLL_MS: "0",
      SKEID_TRUST_KEY_ID_HEADER: "Yes",
      SKEID_FRONTEND_COUNT: "3",
      SKEID_CAPACITY_MAX_AGE_MS: "50",
    },
  });
  assert.equal(skeid.routing.wait_timeout_ms, 1234);
  assert.equal(skeid.routing.wait_poll_ms, 1, "poll is at least 1");
  assert.equal(skeid.routing.trust_key_id_header, true);
  assert.equal(skeid.routing.frontend_count, 3);
  assert.equal(skeid.capacityMaxAgeMs, 50);
});

Deno.test("trust flag: only 1/true/yes/on turn it on; bad numbers keep the default", () => {
  for (const v of ["1", "true", "ON", " yes "]) {
    assert.equal(routingFromEnv(() => v).trust_key_id_header, true, v);
  }
  for (const v of ["0", "no", "off", "nope", ""]) {
    assert.equal(
      routingFromEnv((n) => n === "SKEID_TRUST_KEY_ID_HEADER" ? v : undefined)
        .trust_key_id_header,
      false,
      v,
    );
  }
  const r = routingFromEnv((n) =>
    ({ SKEID_ROUTE_WAIT_TIMEOUT_MS: "soon", SKEID_FRONTEND_COUNT: "0" } as Record<string, string>)[
      n
    ]
  );
  assert.equal(r.wait_timeout_ms, BUILTIN_ROUTING.wait_timeout_ms);
  assert.equal(r.frontend_count, 1, "frontend_count is floored at 1");
});

Deno.test("options.routing wins over the environment and is the base routing", () => {
  const { skeid } = core({
    vars: { SKEID_ROUTE_WAIT_TIMEOUT_MS: "1234", SKEID_ROUTE_WAIT_POLL_MS: "40" },
    routing: { wait_timeout_ms: 99 },
  });
  assert.equal(skeid.routing.wait_timeout_ms, 99);
  assert.equal(skeid.routing.wait_poll_ms, 40);
  assert.equal(skeid.baseRouting.wait_timeout_ms, 99);
});

Deno.test("setRouting changes only the keys given; base routing stays", () => {
  const { skeid } = core();
  skeid.setRouting({ wait_timeout_ms: 500, frontend_count: 0 });
  assert.equal(skeid.routing.wait_timeout_ms, 500);
  assert.equal(skeid.routing.frontend_count, 1, "floored at 1");
  assert.equal(skeid.routing.wait_poll_ms, 25, "absent key keeps its value");
  skeid.setRouting({ trust_key_id_header: true });
  assert.equal(skeid.routing.wait_timeout_ms, 500);
  assert.equal(skeid.routing.trust_key_id_header, true);
  assert.equal(skeid.baseRouting.wait_timeout_ms, 2000);
  assert.equal(skeid.baseRouting.trust_key_id_header, false);
});

Deno.test("the environment is read once, at construction", () => {
  let reads = 0;
  const { skeid } = core({
    env: () => {
      reads++;
      return undefined;
    },
  });
  const atConstruction = reads;
  assert.ok(atConstruction > 0);
  skeid.addNode(spec("a"));
  skeid.routePlan({ model: "m" });
  skeid.pickNode({ model: "m" });
  skeid.setRouting({ wait_poll_ms: 5 });
  assert.equal(reads, atConstruction);
});

Deno.test("SKEID_CAPACITY_MAX_AGE_MS ages readings out", () => {
  const { skeid, clock } = core({ vars: { SKEID_CAPACITY_MAX_AGE_MS: "50" } });
  skeid.addNode(spec("a"));
  skeid.setCapacityReading("a", { used: 1, limit: 8 });
  clock.t += 40;
  assert.ok(skeid.capacityReading("a"));
  clock.t += 20;
  assert.equal(skeid.capacityReading("a"), undefined);
});
