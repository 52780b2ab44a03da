import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { buildUsageEvent, formatCreatedAt } from "../../src/usage/event.ts";

const NOW = Date.UTC(2026, 8, 1, 12, 34, 56, 789);

Deno.test("buildUsageEvent: defaults of a bare event", () => {
  const e = buildUsageEvent({ model: "m" }, () => NOW);
  assertEquals(e.created_at, "2026-09-01T12:34:56Z");
  assertEquals(e.requested_model, "m");
  assertEquals(e.request_id, "");
  assertEquals(e.api_key_id, "");
  assertEquals(e.status_code, 0);
  assertEquals(e.ok, false);
  for (
    const k of [
      "input_tokens",
      "output_tokens",
      "total_tokens",
      "cached_tokens",
      "cache_write_tokens",
      "tool_calls",
      "cost_total_usd",
    ] as const
  ) assertEquals(e[k], 0, k);
  assertEquals(e.error_type, "");
  assertMatch(e.event_id, /^[0-9a-f-]{36}$/);
  assert(!("content_bytes" in e), "content_bytes only when given");
  assert(!("ttft_ms" in e), "ttft_ms only when given");
});

Deno.test("buildUsageEvent: event ids are unique; given fields win", () => {
  const ids = new Set(Array.from({ length: 200 }, () => buildUsageEvent({}).event_id));
  assertEquals(ids.size, 200);
  const e = buildUsageEvent({
    created_at: "2025-01-02T03:04:05Z",
    model: "served",
    requested_model: "alias",
    status_code: 200,
    content_bytes: 42,
    ttft_ms: 17,
    event_id: "fixed",
  });
  assertEquals(e.created_at, "2025-01-02T03:04:05Z");
  assertEquals([e.model, e.requested_model], ["served", "alias"]);
  assertEquals(e.ok, true);
  assertEquals(e.content_bytes, 42);
  assertEquals(e.ttft_ms, 17);
  assertEquals(e.event_id, "fixed");
});

Deno.test("buildUsageEvent: derivation chains from metrics and usage (a zero is missing)", () => {
  const e = buildUsageEvent({
    model: "m",
    status_code: 200,
    metrics: {
      input_tokens: 0,
      output_tokens: 25,
      tool_calls: 5,
      cost_input_usd: 0.1,
      output_cost_usd: 0.2,
      cost_total_usd: 0.3,
    },
    usage: {
      prompt_tokens: 100,
      completion_tokens: 0,
      prompt_tokens_details: { cached_tokens: 7 },
    },
    tool_names: ["a", "b"],
  });
  assertEquals(e.input_tokens, 100);
  assertEquals(e.output_tokens, 25);
  assertEquals(e.total_tokens, 125, "input + output when no total is reported");
  assertEquals(e.cached_tokens, 7);
  assertEquals(e.tool_calls, 2, "tool_names count wins over metrics.tool_calls");
  assertEquals([e.cost_input_usd, e.cost_output_usd, e.cost_total_usd], [0.1, 0.2, 0.3]);
});

Deno.test("buildUsageEvent: numbers a store could reject become sane", () => {
  const e = buildUsageEvent({
    input_tokens: 12.7,
    output_tokens: Number.NaN,
    cost_total_usd: Number.POSITIVE_INFINITY,
    duration_ms: -5,
  });
  assertEquals([e.input_tokens, e.output_tokens, e.cost_total_usd, e.duration_ms], [12, 0, 0, 0]);
  assertEquals(formatCreatedAt(0), "1970-01-01T00:00:00Z");
});

Deno.test("a usage event keeps its pick's route; a round_robin one has none", () => {
  const base = { request_id: "r", model: "m", status_code: 200 };
  assertEquals(buildUsageEvent(base).route, undefined);
  const e = buildUsageEvent({
    ...base,
    route: { pick: "affinity", key_kind: "prompt_cache_key", hit: true, spilled: false },
  });
  assertEquals(e.route, {
    pick: "affinity",
    key_kind: "prompt_cache_key",
    hit: true,
    spilled: false,
  });
});
