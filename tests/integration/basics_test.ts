import { deepStrictEqual, match, ok, strictEqual } from "node:assert/strict";
import { startFakeModel } from "../../src/fake/model.ts";
import { assertIdle, assertNothingForwarded, chat, post, startGateway } from "./helpers.ts";

function oneNode(url: string, extra: Record<string, unknown> = {}) {
  return {
    nodes: [{ id: "n1", url, model: "m1", tags: ["local"] }],
    pricing: { m1: { input_per_million: 1000, output_per_million: 2000 } },
    ...extra,
  };
}

Deno.test("gateway: /health carries the reload state without a message", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const res = await fetch(`${t.base}/health`);
    deepStrictEqual(await res.json(), {
      status: "ok",
      proxy: "skeid",
      config: { ok: true, failed_at: null, failures: 0 },
    });
    const missing = await fetch(`${t.base}/nope`);
    strictEqual(missing.status, 404);
    strictEqual(await missing.text(), "Not Found");
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: non-streamed chat relayed unchanged, priced event, headers", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1"), {
      "x-request-id": "rid-42",
    });
    strictEqual(r.status, 200);
    strictEqual(r.headers.get("x-skeid-node"), "n1");
    strictEqual(r.headers.get("x-request-id"), "rid-42");
    const usage = r.json.usage as Record<string, number>;
    ok(usage.prompt_tokens > 0 && usage.completion_tokens === 8);
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.request_id, "rid-42");
    strictEqual(e.api_format, "openai");
    strictEqual(e.endpoint, "/v1/chat/completions");
    strictEqual(e.api_key_id, "anonymous");
    strictEqual(e.model, "m1");
    strictEqual(e.requested_model, "m1");
    strictEqual(e.node_id, "n1");
    strictEqual(e.status_code, 200);
    strictEqual(e.ok, true);
    strictEqual(e.attempts, 1);
    strictEqual(e.input_tokens, usage.prompt_tokens);
    strictEqual(e.output_tokens, 8);
    const expected = usage.prompt_tokens / 1e6 * 1000 + 8 / 1e6 * 2000;
    ok(Math.abs(e.cost_total_usd - expected) < 1e-12, `cost ${e.cost_total_usd} vs ${expected}`);
    strictEqual(e.content_bytes, undefined, "content_bytes is for streams only");
    // The upstream got the client's body with the served model, nothing else changed.
    const up = fake.requests.at(-1)!;
    deepStrictEqual(up.body, chat("m1"));
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: requests refused before forwarding — 400, 413, model missing — write no event", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url, { routing: { max_body_bytes: 200 } }));
  try {
    const bad = await post(`${t.base}/v1/chat/completions`, "{nope");
    strictEqual(bad.status, 400);
    deepStrictEqual(bad.json, {
      error: {
        message: "Invalid JSON body: at line 1, column 2: expected property name or '}'",
        type: "invalid_request_error",
      },
    });
    const arr = await post(`${t.base}/v1/chat/completions`, "[1,2]");
    strictEqual(arr.status, 400);
    const noModel = await post(`${t.base}/v1/chat/completions`, { messages: [] });
    strictEqual(noModel.status, 400);
    strictEqual((noModel.json.error as Record<string, string>).type, "invalid_request_error");
    ok(noModel.headers.get("x-request-id"));

    const big = chat("m1", { pad: "x".repeat(500) });
    const tooBig = await post(`${t.base}/v1/chat/completions`, big);
    strictEqual(tooBig.status, 413);
    strictEqual((tooBig.json.error as Record<string, string>).type, "invalid_request_error");
    // Without Content-Length (chunked): enforced while reading.
    const chunked = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: ReadableStream.from([new TextEncoder().encode(JSON.stringify(big))]),
    });
    strictEqual(chunked.status, 413);
    await chunked.body?.cancel();
    await assertNothingForwarded(t, fake);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: upstream error answers pass through unchanged on the OpenAI face", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1", { fake_status: 400 }));
    strictEqual(r.status, 400);
    strictEqual(r.headers.get("x-skeid-node"), "n1");
    const direct = await post(`${fake.url}/chat/completions`, chat("m1", { fake_status: 400 }));
    deepStrictEqual(r.json, direct.json);
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.status_code, 400);
    strictEqual(e.ok, false);
    strictEqual(e.error_type, "upstream_error");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: tool calls are counted on the event, streamed or not", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const calls = [{ name: "get_weather", arguments: { city: "Oslo" } }, {
      name: "lookup",
      arguments: { q: "x" },
    }];
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1", { fake_tool_calls: calls }));
    strictEqual(r.status, 200);
    const s = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m1", { stream: true, fake_tool_calls: calls })),
    });
    await s.text();
    const events = await t.sink.waitFor(2);
    deepStrictEqual(events.map((e) => e.tool_calls), [2, 2]);
    ok(events[1].content_bytes! > 0, "tool argument bytes count as content");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: embeddings and completions routes reach their upstream paths", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const emb = await post(`${t.base}/v1/embeddings`, { model: "m1", input: "one two three" });
    strictEqual(emb.status, 200);
    ok(Array.isArray(emb.json.data));
    const comp = await post(`${t.base}/v1/completions`, { model: "m1", prompt: "say" });
    strictEqual(comp.status, 200);
    deepStrictEqual(fake.requests.map((r) => r.path), ["/v1/embeddings", "/v1/completions"]);
    const events = await t.sink.waitFor(2);
    strictEqual(events[0].endpoint, "/v1/embeddings");
    strictEqual(events[0].input_tokens, 3);
    strictEqual(events[1].endpoint, "/v1/completions");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: Anthropic and Ollama faces translate, events carry their api_format", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url));
  try {
    const msg = await post(`${t.base}/v1/messages`, {
      model: "m1",
      max_tokens: 20,
      messages: [{ role: "user", content: "hi" }],
    });
    strictEqual(msg.status, 200);
    strictEqual(msg.json.type, "message");
    strictEqual(msg.headers.get("x-skeid-node"), "n1");

    const stream = await fetch(`${t.base}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m1",
        max_tokens: 20,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    });
    strictEqual(stream.headers.get("content-type"), "text/event-stream");
    const text = await stream.text();
    const names = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    strictEqual(names[0], "message_start");
    strictEqual(names.at(-1), "message_stop");
    ok(!text.includes("[DONE]"));
    const upstreamBody = fake.requests.at(-1)!.body as Record<string, unknown>;
    deepStrictEqual(upstreamBody.stream_options, {
      include_usage: true,
      continuous_usage_stats: true,
    });

    const ol = await fetch(`${t.base}/api/chat`, {
      method: "POST",
      body: JSON.stringify({ model: "m1", messages: [{ role: "user", content: "hi" }] }),
    });
    strictEqual(ol.headers.get("content-type"), "application/x-ndjson");
    const lines = (await ol.text()).trim().split("\n").map((l) => JSON.parse(l));
    strictEqual(lines.at(-1).done, true);

    const gen = await post(`${t.base}/api/generate`, { model: "m1", prompt: "hi", stream: false });
    strictEqual(gen.status, 200);
    strictEqual(gen.json.done, true);
    ok(typeof gen.json.response === "string" && gen.json.response.length > 0);
    const emb = await post(`${t.base}/api/embed`, { model: "m1", input: "one two" });
    strictEqual(emb.status, 200);
    ok(Array.isArray(emb.json.embeddings));
    strictEqual(fake.requests.at(-1)!.path, "/v1/embeddings");

    const events = await t.sink.waitFor(5);
    deepStrictEqual(events.map((e) => e.api_format), [
      "anthropic",
      "anthropic",
      "ollama",
      "ollama",
      "ollama",
    ]);
    deepStrictEqual(events.map((e) => e.endpoint), [
      "/v1/messages",
      "/v1/messages",
      "/api/chat",
      "/api/generate",
      "/api/embed",
    ]);
    ok(events[1].content_bytes! > 0 && events[2].content_bytes! > 0);
    strictEqual(events[1].output_tokens, 8);

    const tags = await (await fetch(`${t.base}/api/tags`)).json();
    deepStrictEqual(tags.models.map((m: { name: string }) => m.name), ["m1"]);
    const ps = await (await fetch(`${t.base}/api/ps`)).json();
    deepStrictEqual(ps, { models: [] });
    const version = await (await fetch(`${t.base}/api/version`)).json();
    match(String(version.version), /^\d+\.\d+/);
    const count = await post(`${t.base}/v1/messages/count_tokens`, {
      model: "m1",
      messages: [{ role: "user", content: "hello there friend" }],
    });
    strictEqual(count.status, 200);
    ok((count.json.input_tokens as number) > 0);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("gateway: admin plane mounted under /skeid with the admin key", async () => {
  const fake = startFakeModel();
  const t = await startGateway(oneNode(fake.url, { admin: { api_key: "admin-secret" } }));
  try {
    const denied = await fetch(`${t.base}/skeid/nodes`);
    strictEqual(denied.status, 401);
    await denied.body?.cancel();
    const nodes = await fetch(`${t.base}/skeid/nodes`, {
      headers: { authorization: "Bearer admin-secret" },
    });
    strictEqual(nodes.status, 200);
    deepStrictEqual((await nodes.json()).nodes.map((n: { id: string }) => n.id), ["n1"]);
    await post(`${t.base}/v1/chat/completions`, chat("m1"));
    const metrics = await fetch(`${t.base}/skeid/metrics`, {
      headers: { authorization: "Bearer admin-secret" },
    });
    match(await metrics.text(), /skeid_node_inflight\{node="n1"\} 0/);
  } finally {
    await t.stop();
    await fake.close();
  }
});
