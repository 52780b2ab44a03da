/**
 * Abort billing (ADR 0027): a client that leaves is billed what it was delivered — the
 * upstream's usage report when the abort drain catches it, else an estimate marked
 * `usage_source: estimated` — and the slot is held until the upstream call really ends.
 */
import { startFakeModel } from "../../src/fake/model.ts";
import { assert, assertEquals } from "../_assert.ts";
import { assertIdle, chat, post, scriptedUpstream, startGateway, until } from "./helpers.ts";

const enc = new TextEncoder();

/** An SSE frame of one OpenAI chunk. */
function frame(chunk: Record<string, unknown>): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

function content(text: string): string {
  return frame({
    id: "c",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta: { content: text } }],
  });
}

const FINISH = frame({
  id: "c",
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
});
const USAGE = frame({
  id: "c",
  object: "chat.completion.chunk",
  choices: [],
  usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
});

/**
 * An upstream that streams some content and `finish_reason`, then (after `usageAfterMs`, when
 * given) its usage chunk and `[DONE]`, else nothing until its client goes away. `ended` resolves
 * when its stream was closed or cancelled.
 */
function finishThenUsage(usageAfterMs?: number) {
  let ended!: () => void;
  const done = new Promise<void>((r) => (ended = r));
  const node = scriptedUpstream(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(content("Hello there, ") + content("general Kenobi.") + FINISH));
        if (usageAfterMs !== undefined) {
          timer = setTimeout(() => {
            c.enqueue(enc.encode(USAGE + "data: [DONE]\n\n"));
            c.close();
            ended();
          }, usageAfterMs);
        }
      },
      cancel() {
        clearTimeout(timer);
        ended();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  return { ...node, ended: done };
}

/** Streams a chat request and leaves once `text` was received; answers what was read. */
async function leaveAfter(url: string, body: unknown, text: string): Promise<string> {
  const res = await fetch(url, { method: "POST", body: JSON.stringify(body) });
  assertEquals(res.status, 200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let got = "";
  // Bounded by the stream: it ends, or the text arrives.
  while (!got.includes(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    got += dec.decode(value, { stream: true });
  }
  await reader.cancel();
  return got;
}

const STREAM = chat("m", { stream: true });

Deno.test("abort billing: leaving right after finish_reason, the drain catches the usage report", async () => {
  const node = finishThenUsage(100);
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] }, {
    env: { SKEID_ABORT_DRAIN_MS: "3000" },
  });
  try {
    const got = await leaveAfter(`${t.base}/v1/chat/completions`, STREAM, '"finish_reason":"stop"');
    assert(!got.includes('"usage"'), "the client left before the usage chunk");
    const [e] = await t.sink.waitFor(1);
    assertEquals(e.status_code, 499);
    assertEquals(e.error_type, "client_closed");
    assertEquals([e.input_tokens, e.output_tokens, e.total_tokens], [11, 7, 18], "exact");
    assertEquals(e.usage_source, "reported");
    await node.ended;
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test("abort billing: no usage report within the drain → estimated tokens, upstream ended", async () => {
  const node = finishThenUsage(undefined);
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] }, {
    env: { SKEID_ABORT_DRAIN_MS: "200" },
  });
  try {
    const started = Date.now();
    await leaveAfter(`${t.base}/v1/chat/completions`, STREAM, '"finish_reason":"stop"');
    // The slot is held through the drain: the node still has the request in flight now.
    assertEquals(t.gw.skeid.nodeMetrics("n")!.inflight, 1, "held while draining");
    const [e] = await t.sink.waitFor(1);
    assert(Date.now() - started >= 150, "the upstream was read on for the drain");
    assertEquals(e.status_code, 499);
    assertEquals(e.usage_source, "estimated");
    // "hello there" ≈ 3 tokens in; "Hello there, general Kenobi." (28 bytes) = 7 out.
    assert(e.input_tokens > 0, `input tokens estimated (${e.input_tokens})`);
    assertEquals(e.output_tokens, 7);
    assertEquals(e.total_tokens, e.input_tokens + 7);
    await node.ended; // the upstream call was ended
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test("abort billing: leaving after most of the content still bills the whole report", async () => {
  const fake = startFakeModel({ tokens: 20, itlMs: 15 });
  const t = await startGateway({ nodes: [{ id: "n", url: fake.url, model: "m" }] });
  try {
    const got = await leaveAfter(`${t.base}/v1/chat/completions`, STREAM, '"content"');
    assert(!got.includes('"usage"'));
    const [e] = await t.sink.waitFor(1);
    assertEquals(e.status_code, 499);
    assertEquals(e.usage_source, "reported");
    assertEquals(e.output_tokens, 20, "the upstream's own count, not 0");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("abort billing: a non-streamed client that leaves stops the upstream call; 499", async () => {
  let upstreamAborted = false;
  const node = scriptedUpstream(async (req) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5000);
      req.signal.addEventListener("abort", () => {
        upstreamAborted = true;
        clearTimeout(timer);
        resolve();
      });
    });
    return Response.json({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } });
  });
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] });
  try {
    const client = new AbortController();
    const answer = fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m")),
      signal: client.signal,
    }).catch(() => undefined);
    await until(() => node.requests.length === 1, 3000, "the call reached the node");
    client.abort();
    await answer;
    const [e] = await t.sink.waitFor(1, 3000);
    assertEquals(e.status_code, 499, "not the node's 200 after the client left");
    assertEquals(e.ok, false);
    assertEquals(e.error_type, "client_closed");
    assertEquals(e.usage_source, "estimated");
    assert(e.input_tokens > 0, "the request's tokens are estimated");
    await until(() => upstreamAborted, 3000, "the upstream call was stopped");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test("abort billing: a completed stream's event says usage_source reported", async () => {
  const fake = startFakeModel({ tokens: 3 });
  const t = await startGateway({ nodes: [{ id: "n", url: fake.url, model: "m" }] });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, STREAM);
    assertEquals(r.status, 200);
    const [e] = await t.sink.waitFor(1);
    assertEquals([e.status_code, e.usage_source, e.output_tokens], [200, "reported", 3]);
  } finally {
    await t.stop();
    await fake.close();
  }
});
