import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { faceFor } from "../../src/faces/index.ts";
import { maxEventBytes, type RelayOutcome, StreamRelay } from "../../src/proxy/relay.ts";

const enc = new TextEncoder();
const frame = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const content = (c: string) => frame({ choices: [{ index: 0, delta: { content: c } }] });
const usageOnly = frame({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } });

/** An upstream body from pieces; `failAt` errors the stream at that index. */
function body(pieces: (string | Uint8Array)[], failAt?: number): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i === failAt) return c.error(new Error("error reading a body from connection"));
      if (i >= pieces.length) return c.close();
      const p = pieces[i++];
      c.enqueue(typeof p === "string" ? enc.encode(p) : p);
    },
  });
}

/** The OpenAI face's translator of a client that did not ask for stream usage. */
const openaiTranslator = () =>
  faceFor("openai").streamTranslator("/v1/chat/completions", "m", { include_usage: false });

async function relay(
  mode: "raw" | "strip" | "translate",
  pieces: (string | Uint8Array)[],
  failAt?: number,
): Promise<{ text: string; outcome: RelayOutcome; writes: number }> {
  let outcome: RelayOutcome | undefined;
  const translator = mode === "translate"
    ? faceFor("anthropic").streamTranslator("/v1/messages", "req-model")
    : openaiTranslator();
  const r = new StreamRelay({
    mode,
    body: body(pieces, failAt),
    upstream: new AbortController(),
    translator,
    owner: { relayEnded: (o) => (outcome = o) },
    now: Date.now,
    startedAt: Date.now(),
  });
  const reader = new ReadableStream<Uint8Array>(r).getReader();
  let text = "";
  let writes = 0;
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    ok(value.byteLength > 0, "no empty write");
    writes++;
    text += dec.decode(value, { stream: true });
  }
  return { text, outcome: outcome!, writes };
}

Deno.test("relay raw: bytes unchanged, empty reads skipped, usage and content counted", async () => {
  const src = content("Hé") + content("llo") + usageOnly + "data: [DONE]\n\n";
  const pieces = ["", src.slice(0, 7), "", src.slice(7, 50), src.slice(50)];
  const { text, outcome, writes } = await relay("raw", pieces);
  strictEqual(text, src);
  // Whole frames go out: the reads that end inside a frame are held until it ends.
  strictEqual(writes, 1);
  strictEqual(outcome.end, "done");
  deepStrictEqual(outcome.usage, { prompt_tokens: 3, completion_tokens: 2 });
  strictEqual(outcome.contentBytes, 6);
  ok(outcome.ttftMs !== undefined);
});

Deno.test("relay strip: the usage-only chunk is dropped, everything else kept", async () => {
  const src = content("a") + usageOnly + "data: [DONE]\n\n";
  const { text, outcome } = await relay("strip", [src.slice(0, 30), src.slice(30)]);
  strictEqual(text, content("a") + "data: [DONE]\n\n");
  deepStrictEqual(outcome.usage, { prompt_tokens: 3, completion_tokens: 2 });
});

Deno.test("relay strip: one frame per read goes out as read; a UTF-8 character split across reads", async () => {
  const aligned = await relay("strip", [content("a"), usageOnly, "data: [DONE]\n\n"]);
  strictEqual(aligned.text, content("a") + "data: [DONE]\n\n");
  strictEqual(aligned.writes, 2);
  const bytes = enc.encode(content("é") + content("ü") + usageOnly + "data: [DONE]\n\n");
  const cut = enc.encode(content("é")).indexOf(0xa9); // inside "é" (0xc3 0xa9)
  const split = await relay("strip", [bytes.slice(0, cut), bytes.slice(cut)]);
  strictEqual(split.text, content("é") + content("ü") + "data: [DONE]\n\n");
  strictEqual(split.outcome.contentBytes, 4);
});

Deno.test("relay translate: Anthropic events, and an error event when the upstream breaks", async () => {
  const ok1 = await relay("translate", [content("Hi"), "data: [DONE]\n\n"]);
  const names = [...ok1.text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
  strictEqual(names[0], "message_start");
  strictEqual(names.at(-1), "message_stop");
  strictEqual(ok1.outcome.end, "done");
  const broke = await relay("translate", [content("Hi")], 1);
  ok(broke.text.includes("event: error"));
  ok(!broke.text.includes("message_stop"));
  strictEqual(broke.outcome.end, "broken");
  strictEqual(broke.outcome.contentBytes, 2);
});

Deno.test("relay raw: an upstream break is said in-band and reported broken", async () => {
  const { text, outcome } = await relay("raw", [content("x")], 1);
  ok(text.startsWith(content("x")));
  ok(text.includes('"type":"upstream_error"'));
  strictEqual(outcome.end, "broken");
});

Deno.test("relay: a client cancel aborts the upstream and reports aborted once", async () => {
  const upstream = new AbortController();
  const outcomes: RelayOutcome[] = [];
  let cancelled = false;
  const src = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(enc.encode(content("x")));
    },
    cancel() {
      cancelled = true;
    },
  });
  const r = new StreamRelay({
    mode: "raw",
    body: src,
    upstream,
    translator: openaiTranslator(),
    owner: { relayEnded: (o) => outcomes.push(o) },
    now: Date.now,
    startedAt: Date.now(),
  });
  const reader = new ReadableStream<Uint8Array>(r).getReader();
  await reader.read();
  await reader.cancel();
  strictEqual(upstream.signal.aborted, true);
  strictEqual(cancelled, true);
  strictEqual(outcomes.length, 1);
  strictEqual(outcomes[0].end, "aborted");
});

Deno.test("relay keepalive: a translated stream silent for keepaliveMs gets the face's ping", async () => {
  let now = 1_000;
  const gate = Promise.withResolvers<void>();
  let i = 0;
  const src = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (i === 0) c.enqueue(enc.encode(content("Hi")));
      else if (i === 1) {
        await gate.promise;
        c.enqueue(enc.encode("data: [DONE]\n\n"));
      } else c.close();
      i++;
    },
  });
  const outcomes: RelayOutcome[] = [];
  const r = new StreamRelay({
    mode: "translate",
    body: src,
    upstream: new AbortController(),
    translator: faceFor("anthropic").streamTranslator("/v1/messages", "m"),
    owner: { relayEnded: (o) => outcomes.push(o) },
    now: () => now,
    startedAt: now,
    keepaliveMs: 100,
  });
  const reader = new ReadableStream<Uint8Array>(r).getReader();
  const dec = new TextDecoder();
  const first = dec.decode((await reader.read()).value);
  ok(first.includes("message_start") && first.includes('"text":"Hi"'));
  // The upstream is silent now (the relay waits on it); the clock decides.
  now += 99;
  r.tick(now);
  now += 1;
  r.tick(now); // 100 ms of silence: one ping
  r.tick(now); // not again at once
  strictEqual(dec.decode((await reader.read()).value), 'event: ping\ndata: {"type":"ping"}\n\n');
  now += 100;
  r.tick(now); // another interval since the last ping: another one
  strictEqual(dec.decode((await reader.read()).value), 'event: ping\ndata: {"type":"ping"}\n\n');
  gate.resolve();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += dec.decode(value);
  }
  ok(rest.includes("message_stop") && !rest.includes("ping"));
  r.tick(now + 1_000); // ended: nothing, no throw
  strictEqual(outcomes.length, 1);
  strictEqual(outcomes[0].end, "done");
});

Deno.test("relay keepalive: raw and strip streams never get one", async () => {
  for (const mode of ["raw", "strip"] as const) {
    const gate = Promise.withResolvers<void>();
    let i = 0;
    const src = new ReadableStream<Uint8Array>({
      async pull(c) {
        if (i++ === 0) c.enqueue(enc.encode(content("x")));
        else {
          await gate.promise;
          c.close();
        }
      },
    });
    const r = new StreamRelay({
      mode,
      body: src,
      upstream: new AbortController(),
      translator: openaiTranslator(),
      owner: { relayEnded: () => {} },
      now: () => 0,
      startedAt: 0,
      keepaliveMs: 10,
    });
    const reader = new ReadableStream<Uint8Array>(r).getReader();
    await reader.read();
    r.tick(1_000_000);
    gate.resolve();
    const last = await reader.read();
    strictEqual(last.done, true, `${mode}: nothing was sent while silent`);
  }
});

Deno.test("relay raw: a break inside a frame drops its half; the error frame stands alone", async () => {
  const whole = content("a");
  const half = content("b").slice(0, 20);
  const { text, outcome } = await relay("raw", [whole + half], 1);
  strictEqual(outcome.end, "broken");
  const frames = text.split("\n\n").filter((f) => f !== "");
  strictEqual(frames.length, 2, text);
  strictEqual(frames[0] + "\n\n", whole);
  strictEqual(JSON.parse(frames[1].slice(6)).error.type, "upstream_error");
});

/**
 * An upstream body of one `data:` event of `size` content bytes sent in `piece`-byte reads, then
 * `[DONE]`; `cancelled` is set when the relay lets go of it.
 */
function bigEvent(
  size: number,
  piece: number,
): { body: ReadableStream<Uint8Array>; cancelled: () => boolean } {
  const head = enc.encode('data: {"choices":[{"index":0,"delta":{"content":"');
  const tail = enc.encode('"}}]}\n\ndata: [DONE]\n\n');
  const fill = new Uint8Array(piece).fill(120); // "x"
  let sent = -1;
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (sent < 0) {
        sent = 0;
        return c.enqueue(head);
      }
      if (sent >= size) {
        c.enqueue(tail);
        return c.close();
      }
      sent += piece;
      c.enqueue(fill.slice());
      // A turn of the event loop now and then, as a socket's reads give (timers can fire).
      if (sent % (1024 * 1024) === 0) await new Promise((r) => setTimeout(r, 0));
    },
    cancel() {
      cancelled = true;
    },
  });
  return { body, cancelled: () => cancelled };
}

/** How long a relay of `relayBody` may take (a linear relay of 24 MiB takes a few seconds). */
const RELAY_DEADLINE_MS = 30_000;

/** Relays `body` in `mode` with `maxEventBytes`; answers the client's bytes and the outcome. */
async function relayBody(
  mode: "raw" | "strip" | "translate",
  body: ReadableStream<Uint8Array>,
  maxEventBytes?: number,
): Promise<{ bytes: number; text: string; outcome: RelayOutcome; aborted: boolean }> {
  let outcome: RelayOutcome | undefined;
  const upstream = new AbortController();
  const r = new StreamRelay({
    mode,
    body,
    upstream,
    translator: mode === "translate"
      ? faceFor("anthropic").streamTranslator("/v1/messages", "m")
      : openaiTranslator(),
    owner: { relayEnded: (o) => (outcome = o) },
    now: Date.now,
    startedAt: Date.now(),
    maxEventBytes,
  });
  const reader = new ReadableStream<Uint8Array>(r).getReader();
  let bytes = 0;
  let text = "";
  const dec = new TextDecoder();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reader.cancel().catch(() => {});
      reject(new Error(`relaying took over ${RELAY_DEADLINE_MS} ms (${bytes} bytes out)`));
    }, RELAY_DEADLINE_MS);
  });
  try {
    for (;;) {
      const { value, done } = await Promise.race([reader.read(), late]);
      if (done) break;
      bytes += value.byteLength;
      // Only the end of the stream is kept (the error frame, if any).
      text = (text + dec.decode(value, { stream: true })).slice(-2000);
    }
  } finally {
    clearTimeout(timer);
  }
  return { bytes, text, outcome: outcome!, aborted: upstream.signal.aborted };
}

Deno.test("relay raw: one 24 MiB event in 4 KiB reads costs its bytes once, not once per read", async () => {
  // Copying the held part again on every read makes this ~6,000 reads × 12 MB on average: minutes
  // of CPU. Read once, it is a couple of seconds even on a loaded machine.
  const size = 24 * 1024 * 1024;
  const { body } = bigEvent(size, 4096);
  // relayBody fails past RELAY_DEADLINE_MS.
  const { bytes, outcome } = await relayBody("raw", body, 64 * 1024 * 1024);
  strictEqual(outcome.end, "done");
  strictEqual(outcome.contentBytes, size);
  ok(bytes > size, "every byte relayed");
});

Deno.test("relay: an event over maxEventBytes ends the stream broken, in the face's shape, upstream stopped", async () => {
  for (const mode of ["raw", "strip", "translate"] as const) {
    const { body, cancelled } = bigEvent(1024 * 1024, 4096);
    const { text, outcome, aborted } = await relayBody(mode, body, 64 * 1024);
    strictEqual(outcome.end, "broken", mode);
    ok(outcome.error?.includes("SKEID_MAX_EVENT_BYTES"), `${mode}: ${outcome.error}`);
    ok(aborted && cancelled(), `${mode}: the upstream call is stopped and its body let go`);
    if (mode === "translate") ok(text.includes("event: error"), text);
    else {
      const last = text.split("\n\n").filter((f) => f !== "").at(-1)!;
      strictEqual(JSON.parse(last.slice(6)).error.type, "upstream_error", mode);
      ok(!text.includes("xxxx"), `${mode}: no half of the big event reaches the client`);
    }
  }
  // At the bound exactly, the event goes through.
  const { body } = bigEvent(60 * 1024, 4096);
  strictEqual((await relayBody("raw", body, 64 * 1024)).outcome.end, "done");
});

Deno.test("SKEID_MAX_EVENT_BYTES: whole bytes > 0, capped below V8's string limit, else 16 MiB", () => {
  strictEqual(maxEventBytes(undefined), 16 * 1024 * 1024);
  strictEqual(maxEventBytes(""), 16 * 1024 * 1024);
  strictEqual(maxEventBytes("1048576"), 1048576);
  strictEqual(maxEventBytes("0"), 16 * 1024 * 1024);
  strictEqual(maxEventBytes("-5"), 16 * 1024 * 1024);
  strictEqual(maxEventBytes("1.5"), 16 * 1024 * 1024);
  strictEqual(maxEventBytes("1e12"), 256 * 1024 * 1024);
});
