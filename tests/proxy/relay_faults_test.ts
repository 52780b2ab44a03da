/**
 * Any error inside an answer or a relay ends the request with everything given back: the node's
 * slot, the customer key's `max_inflight` place and its reservation, and its usage event written.
 * The throwing step is injected through the request's face (a parameter of `handleProxy`): each
 * step of the face and of its stream translator throws in turn, and the upstream body breaks.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import type { Face, StreamTranslator } from "../../src/faces/face.ts";
import { faceFor } from "../../src/faces/index.ts";
import { handleProxy } from "../../src/proxy/handler.ts";
import { assertIdle, post, scriptedUpstream, startGateway, until } from "../integration/helpers.ts";

const ALICE = await keyIdForKey("sk-alice");
const AUTH = { authorization: "Bearer sk-alice" };
const enc = new TextEncoder();
const sse = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const CHUNKS = [
  sse({ choices: [{ index: 0, delta: { content: "Hel" } }] }),
  sse({ choices: [{ index: 0, delta: { content: "lo" }, finish_reason: "stop" }] }),
  sse({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } }),
  "data: [DONE]\n\n",
];

/** Where the injected error is thrown. */
type Step =
  | "relayMode"
  | "streamTranslator"
  | "pass"
  | "chunk"
  | "end"
  | "fail"
  | "keepalive"
  | "fromUpstream";

/** A translator that delegates to `base` and throws at `step`. */
function throwingTranslator(base: StreamTranslator, step: Step): StreamTranslator {
  const boom = (): never => {
    throw new RangeError(`injected: ${step} threw`);
  };
  const t: StreamTranslator = {
    get contentType() {
      return base.contentType;
    },
    get contentBytes() {
      return base.contentBytes;
    },
    get usage() {
      return base.usage;
    },
    get toolCalls() {
      return base.toolCalls;
    },
    get final() {
      return base.final;
    },
    chunk: (c) => step === "chunk" ? boom() : base.chunk(c),
    keepalive: () => step === "keepalive" ? boom() : base.keepalive(),
    end: (timings) => step === "end" ? boom() : base.end(timings),
    fail: (status, message) => step === "fail" ? boom() : base.fail(status, message),
  };
  if (base.pass) t.pass = (c) => step === "pass" ? boom() : base.pass!(c);
  return t;
}

/** The face `base` with `step` throwing (its other methods delegate). */
function throwingFace(base: Face, step: Step): Face {
  const boom = (): never => {
    throw new RangeError(`injected: ${step} threw`);
  };
  return {
    name: base.name,
    passesThrough: base.passesThrough,
    toUpstream: (endpoint, body) => base.toUpstream(endpoint, body),
    upstreamBody: (upstream, served, raw) => base.upstreamBody(upstream, served, raw),
    relayMode: (upstream) => step === "relayMode" ? boom() : base.relayMode(upstream),
    fromUpstream: (endpoint, answer, model, context, timings) =>
      step === "fromUpstream"
        ? boom()
        : base.fromUpstream(endpoint, answer, model, context, timings),
    streamTranslator: (endpoint, model, context) =>
      step === "streamTranslator"
        ? boom()
        : throwingTranslator(base.streamTranslator(endpoint, model, context), step),
    errorBody: (status, type, message, code) => base.errorBody(status, type, message, code),
    upstreamErrorBody: (status, body) => base.upstreamErrorBody(status, body),
  };
}

/** What the upstream does with a streamed request. */
type Upstream = "whole" | "breaks" | "silent";

/** The SSE body: all of it, the first chunk then an error, or the first chunk then silence. */
function upstreamBody(kind: Upstream): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (kind === "whole") {
        if (i < CHUNKS.length) c.enqueue(enc.encode(CHUNKS[i++]));
        else c.close();
        return;
      }
      if (i++ === 0) return c.enqueue(enc.encode(CHUNKS[0]));
      if (kind === "breaks") return c.error(new Error("upstream broke"));
      // silent: never another byte (the relay stops it when the request ends)
      return new Promise<void>(() => {});
    },
  });
}

/** The client's text of a response; an errored body reads as what came before the error. */
async function readAll(res: Response): Promise<{ text: string; errored: boolean }> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { text, errored: false };
      text += dec.decode(value, { stream: true });
    }
  } catch {
    return { text, errored: true };
  }
}

interface Case {
  step: Step;
  face: "openai" | "anthropic";
  stream: boolean;
  upstream: Upstream;
}

const CASES: Case[] = [
  { step: "relayMode", face: "openai", stream: true, upstream: "whole" },
  { step: "streamTranslator", face: "openai", stream: true, upstream: "whole" },
  { step: "pass", face: "openai", stream: true, upstream: "whole" },
  { step: "chunk", face: "anthropic", stream: true, upstream: "whole" },
  { step: "end", face: "anthropic", stream: true, upstream: "whole" },
  { step: "fail", face: "openai", stream: true, upstream: "breaks" },
  { step: "keepalive", face: "anthropic", stream: true, upstream: "silent" },
  { step: "fromUpstream", face: "anthropic", stream: false, upstream: "whole" },
];

Deno.test("relay faults: a throw at any step gives back the slot, the key's place and reservation, and writes the event", async (t) => {
  let kind: Upstream = "whole";
  const up = scriptedUpstream((_req, body) =>
    body.stream === true
      ? new Response(upstreamBody(kind), { headers: { "content-type": "text/event-stream" } })
      : Response.json({
        id: "c1",
        object: "chat.completion",
        model: "m1",
        choices: [{ index: 0, message: { role: "assistant", content: "Hello" } }],
        usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
      })
  );
  const gw = await startGateway({
    admin_api_key: "adm",
    nodes: [{ id: "n1", url: up.url, model: "m1" }],
    policies: { std: { limits: { max_inflight: 1 }, budget: { tokens: 1_000_000 } } },
    names: { alice: ALICE },
    keys: { alice: "std" },
  }, { keepaliveMs: 20 });
  try {
    let events = 0;
    for (const c of CASES) {
      await t.step(`${c.step} (${c.face}${c.stream ? ", stream" : ""})`, async () => {
        kind = c.upstream;
        const face = throwingFace(faceFor(c.face), c.step);
        const endpoint = c.face === "openai" ? "/v1/chat/completions" : "/v1/messages";
        const body = {
          model: "m1",
          max_tokens: 16,
          stream: c.stream,
          messages: [{ role: "user", content: "hi" }],
        };
        const req = new Request(`${gw.base}${endpoint}`, {
          method: "POST",
          headers: { ...AUTH, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const res = await handleProxy(gw.gw, face, endpoint, req);
        const { text, errored } = await readAll(res);
        // The client learns the request failed: a 500, an error frame, or a body cut short.
        const failed = res.status >= 500 || errored || /error/.test(text);
        assert(
          failed,
          `the client sees a failure (status ${res.status}, body ${text.slice(-200)})`,
        );
        assert(!/message_stop|\[DONE\]/.test(text) || c.step === "fail", "not a complete stream");

        const all = await gw.sink.waitFor(++events);
        assertEquals(all.length, events, "one usage event per request");
        const event = all.at(-1)!;
        if (c.step === "fail") {
          assertEquals(
            event.status_code,
            502,
            "the upstream broke (the translator's failure after)",
          );
        } else {
          assertEquals(event.status_code, 500, "the gateway's own failure");
          assertEquals(event.error_type, "api_error");
          assertStringIncludes(event.error_message ?? "", `injected: ${c.step} threw`);
        }
        await until(() => gw.gw.inflight === 0, 3000, "the exchange ended");
        assertIdle(gw.gw);
        const view = await fetch(`${gw.base}/skeid/keys/alice`, {
          headers: { authorization: "Bearer adm" },
        });
        const status = await view.json();
        assertEquals(status.budget.reserved.tokens, 0, "the reservation is given back or settled");
        // max_inflight 1: a place never given back would refuse this one with 429.
        const next = await post(`${gw.base}/v1/chat/completions`, {
          model: "m1",
          max_tokens: 16,
          messages: [{ role: "user", content: "hi" }],
        }, AUTH);
        assertEquals(next.status, 200, "the key's max_inflight place is free again");
        await gw.sink.waitFor(++events);
      });
    }
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("relay bound: an upstream event over SKEID_MAX_EVENT_BYTES ends the stream broken, everything released", async () => {
  const big = 256 * 1024;
  const up = scriptedUpstream(() => {
    const event = sse({ choices: [{ index: 0, delta: { content: "x".repeat(big) } }] });
    let i = 0;
    // The event in 4 KiB writes after a first small one; the rest never comes once it is cut.
    const pieces = [
      CHUNKS[0],
      ...Array.from(
        { length: Math.ceil(event.length / 4096) },
        (_, k) => event.slice(k * 4096, (k + 1) * 4096),
      ),
      ...CHUNKS.slice(2),
    ];
    return new Response(
      new ReadableStream<Uint8Array>({
        pull(c) {
          if (i < pieces.length) c.enqueue(enc.encode(pieces[i++]));
          else c.close();
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  });
  const gw = await startGateway({
    admin_api_key: "adm",
    nodes: [{ id: "n1", url: up.url, model: "m1" }],
    policies: { std: { limits: { max_inflight: 1 } } },
    names: { alice: ALICE },
    keys: { alice: "std" },
  }, { env: { SKEID_MAX_EVENT_BYTES: String(64 * 1024) } });
  try {
    let events = 0;
    for (
      const [path, face] of [["/v1/chat/completions", "openai"], ["/v1/messages", "anthropic"]]
    ) {
      const res = await fetch(`${gw.base}${path}`, {
        method: "POST",
        headers: { ...AUTH, "content-type": "application/json" },
        body: JSON.stringify({
          model: "m1",
          max_tokens: 16,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }),
      });
      assertEquals(res.status, 200, face);
      const text = await res.text();
      assert(!text.includes("xxxx"), `${face}: no part of the big event reaches the client`);
      if (face === "openai") {
        const last = text.split("\n\n").filter((f) => f !== "").at(-1)!;
        assertEquals(JSON.parse(last.slice(6)).error.type, "upstream_error");
        assert(!text.includes("[DONE]"), "the stream does not end as if complete");
      } else {
        assertStringIncludes(text, "event: error");
        assert(!text.includes("message_stop"), "the stream does not end as if complete");
      }
      const event = (await gw.sink.waitFor(++events)).at(-1)!;
      assertEquals(event.status_code, 502, face);
      assertStringIncludes(event.error_message ?? "", "SKEID_MAX_EVENT_BYTES");
      await until(() => gw.gw.inflight === 0, 3000, "the exchange ended");
      assertIdle(gw.gw);
      const next = await post(`${gw.base}/v1/chat/completions`, {
        model: "m1",
        max_tokens: 16,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }, AUTH);
      // max_inflight 1: the cut stream's place is free again (its event is a 502 too).
      assertEquals(next.status, 200, `${face}: the key's place is free again`);
      await gw.sink.waitFor(++events);
      await until(() => gw.gw.inflight === 0, 3000, "the next exchange ended");
    }
  } finally {
    await gw.stop();
    await up.close();
  }
});
