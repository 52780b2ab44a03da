import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { startFakeModel } from "../../src/fake/model.ts";
import {
  assertIdle,
  chat,
  piecewise,
  post,
  scriptedUpstream,
  startGateway,
  until,
} from "./helpers.ts";

const chunk = (content: string) =>
  `data: ${
    JSON.stringify({
      id: "c1",
      object: "chat.completion.chunk",
      model: "m",
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    })
  }\r\n\r\n`;
const usageChunk = `data: ${
  JSON.stringify({
    id: "c1",
    object: "chat.completion.chunk",
    model: "m",
    choices: [],
    usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
  })
}\n\n`;
const STREAM = chunk("Hé") + chunk("llo") + usageChunk + "data: [DONE]\n\n";

/** The stream cut into awkward pieces: mid-line, mid-CRLF, mid-UTF-8 "é", empty writes. */
function pieces(): string[] {
  const out: string[] = [""];
  for (let i = 0; i < STREAM.length; i += 13) out.push(STREAM.slice(i, i + 13), "");
  return out;
}

function sseUpstream() {
  return scriptedUpstream(() =>
    new Response(piecewise(pieces()), {
      headers: { "content-type": "text/event-stream", "x-upstream-header": "kept" },
    })
  );
}

Deno.test("stream: client asked for usage → upstream bytes relayed unchanged, frames split anywhere", async () => {
  const up = sseUpstream();
  const t = await startGateway({ nodes: [{ id: "n1", url: up.url, model: "m" }] });
  try {
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, stream_options: { include_usage: true } })),
    });
    strictEqual(res.status, 200);
    strictEqual(res.headers.get("x-skeid-node"), "n1");
    strictEqual(res.headers.get("x-upstream-header"), "kept");
    strictEqual(await res.text(), STREAM);
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.input_tokens, 7);
    strictEqual(e.output_tokens, 2);
    strictEqual(e.content_bytes, new TextEncoder().encode("Héllo").byteLength);
    ok(e.ttft_ms !== undefined && e.ttft_ms >= 0);
    strictEqual(e.ok, true);
    // The client's own stream_options went upstream as they were.
    deepStrictEqual(up.requests[0].body.stream_options, { include_usage: true });
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await up.close();
  }
});

Deno.test("stream: client did not ask for usage → Skeid asks upstream and strips the usage chunk", async () => {
  const up = sseUpstream();
  const t = await startGateway({
    nodes: [{ id: "n1", url: up.url, model: "m" }],
    pricing: { m: { input_per_million: 1, output_per_million: 1 } },
  });
  try {
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true })),
    });
    const text = await res.text();
    strictEqual(text, chunk("Hé") + chunk("llo") + "data: [DONE]\n\n");
    deepStrictEqual(up.requests[0].body.stream_options, { include_usage: true });
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.input_tokens, 7, "the stripped usage still bills");
    strictEqual(e.output_tokens, 2);
    strictEqual(e.cost_total_usd, 9 / 1e6);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await up.close();
  }
});

Deno.test("stream: the fake model's split frames through the gateway, usage chunk on request", async () => {
  const fake = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "n1", url: fake.url, model: "m" }] });
  try {
    const asked = await (await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(
        chat("m", {
          stream: true,
          fake_split_frames: true,
          stream_options: { include_usage: true },
        }),
      ),
    })).text();
    ok(asked.includes('"choices":[]'), "the client asked: usage chunk kept");
    const plain = await (await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, fake_split_frames: true })),
    })).text();
    ok(!plain.includes('"choices":[]'), "not asked: no usage chunk");
    ok(plain.trimEnd().endsWith("data: [DONE]"));
    const events = await t.sink.waitFor(2);
    for (const e of events) {
      strictEqual(e.output_tokens, 8);
      ok(e.content_bytes! > 0);
    }
    strictEqual(events[0].content_bytes, events[1].content_bytes);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("stream: client disconnect mid-stream aborts upstream, releases the slot, event 499", async () => {
  const fake = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "n1", url: fake.url, model: "m", max_conns: 1 }] });
  try {
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, fake_tokens: 200, fake_itl_ms: 20 })),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    ok(!first.done && first.value.byteLength > 0);
    await reader.cancel();
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.status_code, 499);
    strictEqual(e.ok, false);
    strictEqual(e.node_id, "n1");
    await until(() => fake.stats.aborted === 1, 3000, "the upstream to see the abort");
    const m = (await t.group.nodeMetrics("n1"))!;
    strictEqual(m.aborted, 1);
    strictEqual(m.error, 0, "a client abort is not the node's failure");
    // The slot is free again: the next request is admitted at once.
    const next = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(next.status, 200);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("stream: an upstream cut after bytes went out → event 502 with what was reported", async () => {
  const enc = new TextEncoder();
  // Two content chunks, then the connection breaks (no finish, no usage, no [DONE]).
  const up = scriptedUpstream(() => {
    let n = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        if (n < 2) {
          c.enqueue(enc.encode(chunk(n++ === 0 ? "Hel" : "lo")));
          await new Promise((r) => setTimeout(r, 5));
        } else c.error(new Error("cut on purpose"));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  const t = await startGateway({ nodes: [{ id: "n1", url: up.url, model: "m" }] });
  try {
    const text = await (await fetch(`${t.base}/v1/messages`, {
      method: "POST",
      body: JSON.stringify({
        model: "m",
        max_tokens: 50,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    })).text();
    ok(text.startsWith("event: message_start"));
    ok(text.includes('"text":"Hel"') && text.includes('"text":"lo"'));
    ok(text.includes("event: error"), "ADR 0015: ends with an error event");
    ok(!text.includes("message_stop"));
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.status_code, 502);
    strictEqual(e.ok, false);
    strictEqual(e.api_format, "anthropic");
    strictEqual(e.content_bytes, 5);
    strictEqual((await t.group.nodeMetrics("n1"))!.error, 1);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await up.close();
  }
});

/**
 * An upstream that sends "Hel", stays silent until `gate` opens, then sends "lo" and ends: the
 * test opens the gate once the client has seen what it waits for (no sleeps).
 */
function silentUpstream(gate: Promise<void>) {
  const enc = new TextEncoder();
  return scriptedUpstream(() => {
    let n = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        if (n === 0) c.enqueue(enc.encode(chunk("Hel")));
        else if (n === 1) {
          await gate;
          c.enqueue(enc.encode(chunk("lo") + usageChunk + "data: [DONE]\n\n"));
        } else c.close();
        n++;
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
}

/** Reads a response body as text until `until(text)` holds, then calls `then` once; to the end. */
async function readAll(
  res: Response,
  until: (text: string) => boolean,
  then: () => void,
): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  let fired = false;
  for await (const piece of res.body!) {
    text += dec.decode(piece, { stream: true });
    if (!fired && until(text)) {
      fired = true;
      then();
    }
  }
  return text;
}

Deno.test("stream: a silent upstream gets Anthropic pings on the client side, frame-aligned", async () => {
  const gate = Promise.withResolvers<void>();
  // Bound: without keepalives the gate still opens, and the assertions below fail.
  const guard = setTimeout(() => gate.resolve(), 5000);
  const up = silentUpstream(gate.promise);
  const t = await startGateway({ nodes: [{ id: "n1", url: up.url, model: "m" }] }, {
    keepaliveMs: 30,
  });
  try {
    const res = await fetch(`${t.base}/v1/messages`, {
      method: "POST",
      body: JSON.stringify({
        model: "m",
        max_tokens: 50,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    });
    // The gate opens only after two pings arrived: the upstream was silent all that time.
    const text = await readAll(
      res,
      (s) => s.split("event: ping\n").length > 2,
      () => gate.resolve(),
    );
    ok(text.startsWith("event: message_start"), text.slice(0, 80));
    const frames = text.split("\n\n").filter((f) => f !== "");
    const pings = frames.filter((f) => f === 'event: ping\ndata: {"type":"ping"}');
    ok(pings.length >= 2, `pings: ${pings.length}`);
    // Every frame is whole: an event line and a data line, pings included.
    for (const f of frames) ok(/^event: \w+\ndata: \{.*\}$/.test(f), `frame ${JSON.stringify(f)}`);
    ok(text.includes('"text":"Hel"') && text.includes('"text":"lo"'));
    ok(text.trimEnd().endsWith('event: message_stop\ndata: {"type":"message_stop"}'));
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.status_code, 200);
    strictEqual(e.content_bytes, 5);
    assertIdle(t.gw);
  } finally {
    clearTimeout(guard);
    await t.stop();
    await up.close();
  }
});

Deno.test("stream: OpenAI and Ollama streams get no keepalive however long the silence", async () => {
  const gate = Promise.withResolvers<void>();
  // Bound: without keepalives the gate still opens, and the assertions below fail.
  const guard = setTimeout(() => gate.resolve(), 5000);
  const up = silentUpstream(gate.promise);
  const t = await startGateway({ nodes: [{ id: "n1", url: up.url, model: "m" }] }, {
    keepaliveMs: 20,
  });
  /** Starts a stream; `seen` resolves once its text satisfies `until`; `done` is the text. */
  const stream = (path: string, body: Record<string, unknown>, until: (s: string) => boolean) => {
    const seen = Promise.withResolvers<void>();
    const done = fetch(`${t.base}${path}`, { method: "POST", body: JSON.stringify(body) })
      .then((res) => readAll(res, until, () => seen.resolve()));
    return { seen: seen.promise, done };
  };
  try {
    const messages = [{ role: "user", content: "x" }];
    const hel = (s: string) => s.includes("Hel");
    const openai = stream("/v1/chat/completions", { model: "m", stream: true, messages }, hel);
    const ollama = stream("/api/chat", { model: "m", messages }, hel);
    await Promise.all([openai.seen, ollama.seen]);
    // Both wait on the silent upstream now. An Anthropic stream on the same gateway opens the
    // gate after its second ping: the other two were silent for two keepalive intervals too.
    const anthropic = stream(
      "/v1/messages",
      { model: "m", max_tokens: 9, stream: true, messages },
      (s) => s.split("event: ping\n").length > 2,
    );
    await anthropic.seen;
    gate.resolve();
    const [a, o, l] = await Promise.all([anthropic.done, openai.done, ollama.done]);
    ok(a.includes("event: ping"));
    ok(!o.includes("ping") && !o.split("\n").some((x) => x.startsWith(":")), o);
    ok(o.includes('"content":"lo"') && o.includes("data: [DONE]"));
    const lines = l.split("\n").filter((x) => x !== "");
    for (const line of lines) JSON.parse(line); // NDJSON, nothing else
    ok(l.includes('"content":"lo"') && !l.includes("ping"), l);
    await t.sink.waitFor(3);
    assertIdle(t.gw);
  } finally {
    clearTimeout(guard);
    await t.stop();
    await up.close();
  }
});
