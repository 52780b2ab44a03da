import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { chunksOf, postJson, sseData } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";

const USER = [{ role: "user", content: "say something  nice\nplease" }];

Deno.test("chat JSON answer: deterministic text, requested model, usage", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(`${fake.url}/chat/completions`, { model: "qwen3", messages: USER });
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "application/json");
    const body = await res.json();
    assertEquals(body.object, "chat.completion");
    assertEquals(body.model, "qwen3");
    const text = "tök0 tök1 tök2 tök3 tök4 tök5 tök6 tök7";
    assertEquals(body.choices[0].message, { role: "assistant", content: text });
    assertEquals(body.choices[0].finish_reason, "stop");
    // prompt_tokens = words of the messages; completion_tokens = words answered
    assertEquals(body.usage, { prompt_tokens: 4, completion_tokens: 8, total_tokens: 12 });
    // every word carries a two-byte ö: bytes exceed characters by the token count
    assertEquals(new TextEncoder().encode(text).length, text.length + 8);
  });
});

Deno.test("chat SSE: chunk objects, role first, content joins to the answer, [DONE]", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      stream: true,
      messages: USER,
    });
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "text/event-stream");
    const chunks = chunksOf(await res.text());
    for (const c of chunks) {
      assertEquals(c.object, "chat.completion.chunk");
      assertEquals(c.model, "m");
      assertEquals(c.id, chunks[0].id);
      assertEquals(typeof c.created, "number");
      assertEquals(c.choices.length, 1);
      assertEquals(c.choices[0].index, 0);
      assertEquals(c.usage, undefined);
    }
    assertEquals(chunks[0].choices[0].delta.role, "assistant");
    assertEquals(chunks.slice(1).filter((c) => c.choices[0].delta.role).length, 0);
    const text = chunks.map((c) => c.choices[0].delta.content ?? "").join("");
    assertEquals(text, "tök0 tök1 tök2 tök3 tök4");
    assertEquals(chunks.length, 1 + 5 + 1);
    assertEquals(chunks[chunks.length - 1].choices[0].finish_reason, "stop");
    assertEquals(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null), true);
  }, { tokens: 5 });
});

Deno.test("chat SSE with include_usage: a final choices:[] chunk with usage, then [DONE]", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      stream: true,
      stream_options: { include_usage: true },
      fake_tokens: 3,
      messages: USER,
    });
    const chunks = chunksOf(await res.text());
    const last = chunks[chunks.length - 1];
    assertEquals(last.choices, []);
    assertEquals(last.usage, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
    assertEquals(chunks.slice(0, -1).every((c) => c.usage === undefined), true);
    assertEquals(chunks[chunks.length - 2].choices[0].finish_reason, "stop");
  });
});

Deno.test("fake_text, fake_finish_reason and fake_stop_reason shape the answer", async () => {
  await withFakeModel(async (fake) => {
    const text = "Grüße,  world! 🎉 ";
    const body = {
      model: "m",
      messages: USER,
      fake_text: text,
      fake_finish_reason: "length",
      fake_stop_reason: 128009,
    };
    const json = await (await postJson(`${fake.url}/chat/completions`, body)).json();
    assertEquals(json.choices[0].message.content, text);
    assertEquals(json.choices[0].finish_reason, "length");
    assertEquals(json.choices[0].stop_reason, 128009);
    assertEquals(json.usage.completion_tokens, 3);
    const res = await postJson(`${fake.url}/chat/completions`, { ...body, stream: true });
    const chunks = chunksOf(await res.text());
    assertEquals(chunks.map((c) => c.choices[0].delta.content ?? "").join(""), text);
    const final = chunks[chunks.length - 1].choices[0];
    assertEquals(final.finish_reason, "length");
    assertEquals(final.stop_reason, 128009);
  });
});

Deno.test("tool calls: JSON message.tool_calls, and a stream that reassembles per index", async () => {
  await withFakeModel(async (fake) => {
    const calls = [
      { name: "get_weather", arguments: { city: "Zürich", days: 3 } },
      { name: "lookup", arguments: '{"q":"ünïcode ☃ and more text"}' },
    ];
    const expected = ['{"city":"Zürich","days":3}', '{"q":"ünïcode ☃ and more text"}'];
    const req = {
      model: "m",
      messages: USER,
      tools: [{ type: "function", function: { name: "get_weather", parameters: {} } }],
      fake_tool_calls: calls,
    };
    const json = await (await postJson(`${fake.url}/chat/completions`, req)).json();
    const msg = json.choices[0].message;
    assertEquals(json.choices[0].finish_reason, "tool_calls");
    assertEquals(msg.content, null);
    assertEquals(
      msg.tool_calls.map((c: { function: { name: string; arguments: string } }) => c.function),
      [{ name: "get_weather", arguments: expected[0] }, {
        name: "lookup",
        arguments: expected[1],
      }],
    );
    assertEquals(msg.tool_calls[0].type, "function");
    assertEquals(msg.tool_calls[0].id, "call_fake_0");

    const res = await postJson(`${fake.url}/chat/completions`, { ...req, stream: true });
    const chunks = chunksOf(await res.text());
    const byIndex = new Map<number, { id?: string; name?: string; args: string }>();
    const order: number[] = [];
    for (const c of chunks) {
      for (const tc of c.choices[0]?.delta.tool_calls ?? []) {
        order.push(tc.index);
        const cur = byIndex.get(tc.index) ?? { args: "" };
        if (tc.id) cur.id = tc.id;
        if (tc.function.name) cur.name = tc.function.name;
        cur.args += tc.function.arguments;
        byIndex.set(tc.index, cur);
      }
    }
    assertEquals(byIndex.get(0), { id: "call_fake_0", name: "get_weather", args: expected[0] });
    assertEquals(byIndex.get(1), { id: "call_fake_1", name: "lookup", args: expected[1] });
    // arguments arrive in several chunks, parallel calls interleaved
    assert(order.filter((i) => i === 0).length >= 3, `tool 0 chunks: ${order}`);
    assert(order.join(",").includes("0,1,0,1"), `interleaving: ${order}`);
    assertEquals(chunks[chunks.length - 1].choices[0].finish_reason, "tool_calls");
  });
});

Deno.test("with tools: no tool call unless asked; a tool result is quoted back", async () => {
  await withFakeModel(async (fake) => {
    const tools = [{ type: "function", function: { name: "f", parameters: {} } }];
    const first = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      tools,
      tool_choice: "auto",
      messages: USER,
    })).json();
    assertEquals(first.choices[0].message.tool_calls, undefined);
    assertEquals(first.choices[0].finish_reason, "stop");
    const final = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      tools,
      messages: [
        ...USER,
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: "21 degrees" },
      ],
    })).json();
    assertEquals(final.choices[0].message.content, "The tool said: 21 degrees");
    assertEquals(final.choices[0].finish_reason, "stop");
  });
});

Deno.test("fake_status answers an OpenAI error; 429 carries Retry-After; fake_headers", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
      fake_status: 429,
      fake_retry_after: 7,
      fake_headers: { "x-ratelimit-remaining-requests": 0 },
    });
    assertEquals(res.status, 429);
    assertEquals(res.headers.get("retry-after"), "7");
    assertEquals(res.headers.get("x-ratelimit-remaining-requests"), "0");
    const body = await res.json();
    assertEquals(body.error.type, "rate_limit_error");
    assertEquals(typeof body.error.message, "string");

    const res500 = await postJson(`${fake.url}/embeddings`, { input: "x", fake_status: 503 });
    assertEquals(res500.status, 503);
    assertEquals((await res500.json()).error.type, "server_error");

    const ok = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      fake_headers: { "x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": 42 },
    });
    assertEquals(ok.status, 200);
    assertEquals(ok.headers.get("x-ratelimit-limit-requests"), "100");
    assertEquals(ok.headers.get("x-ratelimit-remaining-requests"), "42");
    await ok.body?.cancel();
    assertEquals(fake.stats.inflight, 0);
  });
});

Deno.test("fake_split_frames: frames arrive split mid-line, bytes unchanged", async () => {
  await withFakeModel(async (fake) => {
    const req = { model: "m", messages: USER, stream: true, fake_tokens: 4 };
    const whole = await (await postJson(`${fake.url}/chat/completions`, req)).text();
    const res = await postJson(`${fake.url}/chat/completions`, { ...req, fake_split_frames: true });
    const reader = res.body!.getReader();
    const reads: Uint8Array[] = [];
    for (let i = 0; i < 1000; i++) {
      const { done, value } = await reader.read();
      if (done) break;
      reads.push(value);
    }
    const bytes = new Uint8Array(reads.reduce((n, r) => n + r.length, 0));
    let at = 0;
    for (const r of reads) {
      bytes.set(r, at);
      at += r.length;
    }
    const text = new TextDecoder().decode(bytes);
    // same frames as unsplit (ids differ by the request counter)
    assertEquals(
      text.replaceAll(/chatcmpl-fake-\d+/g, "ID"),
      whole.replaceAll(/chatcmpl-fake-\d+/g, "ID"),
    );
    const partial = reads.filter((r) => {
      const s = new TextDecoder().decode(r.subarray(Math.max(0, r.length - 2)));
      return r.length > 0 && s !== "\n\n";
    });
    // 7 frames, each written in two halves: at least 7 reads end inside a frame
    assert(partial.length >= 7, `expected reads ending mid-frame, got ${partial.length}`);
    // some splits land inside the two-byte ö: a chunk-by-chunk decoder must keep state
    const cutInChar = reads.filter((r) => r.length > 0 && r[r.length - 1] === 0xc3);
    assert(cutInChar.length >= 4, `expected splits inside ö, got ${cutInChar.length}`);
  });
});

Deno.test("fake_cut_after: the connection breaks after N content chunks", async () => {
  await withFakeModel(async (fake) => {
    for (const itl of [0, 2]) {
      const res = await postJson(`${fake.url}/chat/completions`, {
        model: "m",
        messages: USER,
        stream: true,
        stream_options: { include_usage: true },
        fake_cut_after: 3,
        fake_itl_ms: itl,
      });
      assertEquals(res.status, 200);
      const reader = res.body!.getReader();
      let text = "";
      const decoder = new TextDecoder();
      await assertRejects(async () => {
        for (let i = 0; i < 1000; i++) {
          const { done, value } = await reader.read();
          if (done) return;
          text += decoder.decode(value, { stream: true });
        }
      });
      const data = sseData(text);
      assertEquals(data.includes("[DONE]"), false);
      const chunks = data.map((d) => JSON.parse(d));
      assertEquals(chunks.length, 1 + 3, `itl ${itl}`);
      assertEquals(chunks.map((c) => c.choices[0].delta.content).join(""), "tök0 tök1 tök2");
      assertEquals(chunks.some((c) => c.usage || c.choices[0].finish_reason), false);
    }
    assertEquals(fake.stats.cut, 2);
    await until(() => fake.stats.inflight === 0, "inflight 0");
  }, { tokens: 10 });
});

Deno.test("timing: fake_ttft_ms delays the first content; itl spaces the tokens", async () => {
  await withFakeModel(async (fake) => {
    const t0 = performance.now();
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
      fake_ttft_ms: 60,
      fake_itl_ms: 10,
      fake_tokens: 4,
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const contentAt: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const { done, value } = await reader.read();
      if (done) break;
      const s = decoder.decode(value, { stream: true });
      const n = s.match(/"content":"[^"]/g)?.length ?? 0;
      for (let k = 0; k < n; k++) contentAt.push(performance.now() - t0);
    }
    assertEquals(contentAt.length, 4);
    assert(contentAt[0] >= 55, `first content at ${contentAt[0]} ms`);
    assert(contentAt[3] - contentAt[0] >= 25, `tokens spread ${contentAt[3] - contentAt[0]} ms`);

    const t1 = performance.now();
    await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      fake_ttft_ms: 40,
    })).json();
    assert(performance.now() - t1 >= 35, "non-streamed answer waits for ttft");
  });
});

Deno.test("a client that goes away mid-stream is counted and the stream stops", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
    });
    const reader = res.body!.getReader();
    await reader.read();
    assertEquals(fake.stats.inflight, 1);
    await reader.cancel();
    await until(() => fake.stats.aborted === 1, "abort counted");
    assertEquals(fake.stats.inflight, 0);
    assertEquals(fake.stats.completed, 0);

    // a non-streamed answer still waiting when its client leaves
    const ac = new AbortController();
    const pending = postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      fake_ttft_ms: 5000,
    }, { signal: ac.signal });
    await until(() => fake.stats.inflight === 1, "request arrived");
    ac.abort();
    await assertRejects(() => pending);
    await until(() => fake.stats.aborted === 2, "second abort counted");
    assertEquals(fake.stats.inflight, 0);
  }, { tokens: 1000, itlMs: 2 });
});

Deno.test("requests are recorded: method, path, lowercase headers, parsed body; last N kept", async () => {
  await withFakeModel(async (fake) => {
    const res = await fetch(`${fake.url}/chat/completions?x=1`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Custom-Thing": "abc" },
      body: JSON.stringify({ model: "a", messages: USER }),
    });
    await res.body?.cancel();
    await (await fetch(`${fake.url}/models`)).body?.cancel();
    await (await fetch(`${fake.url.replace("/v1", "")}/metrics`)).body?.cancel();
    await (await fetch(`${fake.url.replace("/v1", "")}/health`)).body?.cancel();
    assertEquals(fake.requests.length, 2);
    const [chat, models] = fake.requests;
    assertEquals(chat.method, "POST");
    assertEquals(chat.path, "/v1/chat/completions");
    assertEquals(chat.headers["x-custom-thing"], "abc");
    assertEquals(chat.headers["content-type"], "application/json");
    assertEquals(chat.body, { model: "a", messages: USER });
    assertEquals(models, {
      method: "GET",
      path: "/v1/models",
      headers: models.headers,
      body: null,
    });
    assertEquals(fake.stats.metricsRequests, 1);

    await (await postJson(`${fake.url}/embeddings`, { input: "third" })).body?.cancel();
    assertEquals(fake.requests.length, 2);
    assertEquals(fake.requests[0].path, "/v1/models");
    assertEquals(fake.requests[1].body, { input: "third" });
  }, { record: 2 });
});

Deno.test("/metrics: vLLM gauges from live inflight, and an override", async () => {
  const fake = startFakeModel({ tokens: 100, itlMs: 5, modelName: "llama" });
  const base = fake.url.replace(/\/v1$/, "");
  try {
    const res = await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
    });
    const reader = res.body!.getReader();
    await reader.read();
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const lines = metrics.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
    assertEquals(lines, [
      'vllm:num_requests_running{model_name="llama"} 1.0',
      'vllm:num_requests_waiting{model_name="llama"} 0.0',
    ]);
    assertMatch(metrics, /^# TYPE vllm:num_requests_running gauge$/m);
    assertMatch(metrics, /^# TYPE vllm:num_requests_waiting gauge$/m);
    await reader.cancel();
    await until(() => fake.stats.inflight === 0, "stream ended");

    fake.setMetrics({ running: 5, waiting: 2 });
    const over = await (await fetch(`${base}/metrics`)).text();
    assertMatch(over, /^vllm:num_requests_running\{model_name="llama"\} 5\.0$/m);
    assertMatch(over, /^vllm:num_requests_waiting\{model_name="llama"\} 2\.0$/m);
    fake.setMetrics({ text: "sglang:num_running_reqs 7\n", status: 200 });
    assertEquals(await (await fetch(`${base}/metrics`)).text(), "sglang:num_running_reqs 7\n");
    fake.setMetrics({ text: "down", status: 503 });
    const down = await fetch(`${base}/metrics`);
    assertEquals(down.status, 503);
    await down.body?.cancel();
    fake.setMetrics(null);
    assertMatch(await (await fetch(`${base}/metrics`)).text(), /running\{[^}]*\} 0\.0/);
  } finally {
    await fake.close();
  }
});

Deno.test("completions: JSON and SSE text_completion answers", async () => {
  await withFakeModel(async (fake) => {
    const json = await (await postJson(`${fake.url}/completions`, {
      model: "base",
      prompt: "once upon a time",
    })).json();
    assertEquals(json.object, "text_completion");
    assertEquals(json.model, "base");
    assertEquals(json.choices[0].text, "tök0 tök1 tök2");
    assertEquals(json.usage, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
    const res = await postJson(`${fake.url}/completions`, {
      model: "base",
      prompt: "once",
      stream: true,
      stream_options: { include_usage: true },
    });
    const data = sseData(await res.text());
    assertEquals(data[data.length - 1], "[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    assertEquals(chunks.every((c) => c.object === "text_completion"), true);
    assertEquals(
      chunks.slice(0, -1).map((c) => c.choices[0]?.text ?? "").join(""),
      "tök0 tök1 tök2",
    );
    assertEquals(chunks[chunks.length - 2].choices[0].finish_reason, "stop");
    assertEquals(chunks[chunks.length - 1].usage.completion_tokens, 3);
  }, { tokens: 3 });
});

Deno.test("embeddings: deterministic 8-float vectors, word-count usage, base64 form", async () => {
  await withFakeModel(async (fake) => {
    const a = await (await postJson(`${fake.url}/embeddings`, {
      model: "emb",
      input: ["hello world", "bye"],
    })).json();
    assertEquals(a.object, "list");
    assertEquals(a.model, "emb");
    assertEquals(a.usage, { prompt_tokens: 3, total_tokens: 3 });
    assertEquals(a.data.length, 2);
    assertEquals(a.data[0].embedding.length, 8);
    assertEquals(a.data[1].index, 1);
    const again = await (await postJson(`${fake.url}/embeddings`, { input: "hello world" }))
      .json();
    assertEquals(again.data[0].embedding, a.data[0].embedding);
    assert(
      JSON.stringify(a.data[0].embedding) !== JSON.stringify(a.data[1].embedding),
      "inputs differ, vectors differ",
    );
    const b64 = await (await postJson(`${fake.url}/embeddings`, {
      input: "hello world",
      encoding_format: "base64",
    })).json();
    const raw = Uint8Array.from(atob(b64.data[0].embedding), (ch) => ch.charCodeAt(0));
    const floats = Array.from(new Float32Array(raw.buffer));
    assertEquals(floats, Array.from(new Float32Array(a.data[0].embedding)));
  });
});

Deno.test("models, health, 404, bad bodies and bad fake fields", async () => {
  await withFakeModel(async (fake) => {
    const models = await (await fetch(`${fake.url}/models`)).json();
    assertEquals(models.object, "list");
    assertEquals(models.data[0].id, "house");
    const health = await fetch(`${fake.url.replace(/\/v1$/, "")}/health`);
    assertEquals(await health.json(), { status: "ok" });
    const missing = await postJson(`${fake.url}/nope`, {});
    assertEquals(missing.status, 404);
    assertEquals((await missing.json()).error.type, "not_found_error");
    const notJson = await fetch(`${fake.url}/chat/completions`, { method: "POST", body: "[1" });
    assertEquals(notJson.status, 400);
    assertEquals((await notJson.json()).error.type, "invalid_request_error");
    const badKnob = await postJson(`${fake.url}/chat/completions`, {
      messages: USER,
      fake_tokens: "many",
    });
    assertEquals(badKnob.status, 400);
    assertMatch((await badKnob.json()).error.message, /fake_tokens/);
    const noModel = await (await postJson(`${fake.url}/chat/completions`, { messages: USER }))
      .json();
    assertEquals(noModel.model, "house");
    assertEquals(fake.stats.inflight, 0);
  }, { modelName: "house" });
});

Deno.test("close() ends open streams and waiting answers at once", async () => {
  const fake = startFakeModel({ tokens: 100_000, itlMs: 50 });
  const res = await postJson(`${fake.url}/chat/completions`, {
    model: "m",
    messages: USER,
    stream: true,
  });
  const reader = res.body!.getReader();
  await reader.read();
  const waiting = postJson(`${fake.url}/chat/completions`, {
    model: "m",
    messages: USER,
    fake_ttft_ms: 60_000,
  }).then((r) => r.body?.cancel(), () => {});
  await until(() => fake.stats.inflight === 2, "both requests in flight");
  const t0 = performance.now();
  await fake.close();
  assert(performance.now() - t0 < 2000, "close did not wait for the stream to finish");
  await reader.read().then(() => reader.cancel(), () => {});
  await waiting;
  assertEquals(fake.stats.inflight, 0);
});
