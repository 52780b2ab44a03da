import { assert, assertEquals, assertRejects } from "../_assert.ts";
import {
  asRequest,
  ClientRequest,
  heldRequestBody,
  withBody,
} from "../../src/edge/inbound_request.ts";

const encoder = new TextEncoder();

function held(text: string): ClientRequest {
  return new ClientRequest(
    "POST",
    "http://a/v1/chat/completions",
    new Headers({ "content-type": "application/json" }),
    encoder.encode(text) as Uint8Array<ArrayBuffer>,
  );
}

function streamed(...pieces: string[]): ClientRequest {
  const body = new ReadableStream<Uint8Array<ArrayBuffer>>({
    start(c) {
      for (const p of pieces) c.enqueue(encoder.encode(p) as Uint8Array<ArrayBuffer>);
      c.close();
    },
  });
  return new ClientRequest("POST", "http://a/x", new Headers(), body);
}

Deno.test("inbound request: a body is read once, as a Request's is", async () => {
  const req = held('{"a":1}');
  assertEquals(req.bodyUsed, false);
  assertEquals(await req.json(), { a: 1 });
  assertEquals(req.bodyUsed, true);
  await assertRejects(() => req.text(), TypeError);

  const s = streamed("ab", "cd", "é");
  assertEquals(await s.text(), "abcdé");
  await assertRejects(() => s.bytes(), TypeError);

  // Asking for the stream (to see that there is a body) leaves the bytes whole for a read.
  const asked = held('{"b":2}');
  assert(asked.body !== null);
  assertEquals(await asked.json(), { b: 2 });
  assert(asked.bodyUsed);

  const none = new ClientRequest("GET", "http://a/", new Headers(), null);
  assertEquals([none.body, (await none.bytes()).byteLength], [null, 0]);
});

Deno.test("inbound request: held bytes are taken once and stay the body; a read stream counts as used", async () => {
  const req = held("xyz");
  assertEquals(new TextDecoder().decode(heldRequestBody(req)), "xyz");
  assertEquals(heldRequestBody(req), undefined);
  assertEquals(await req.text(), "xyz");

  const other = held("pqr");
  const reader = other.body!.getReader();
  assertEquals(new TextDecoder().decode((await reader.read()).value), "pqr");
  assert(other.bodyUsed, "a reader took the stream");
  assertEquals(heldRequestBody(other), undefined);
  // A Request made elsewhere holds nothing.
  assertEquals(heldRequestBody(new Request("http://a/", { method: "POST", body: "x" })), undefined);
});

Deno.test("inbound request: asRequest makes a Request of the same parts; a Request stays itself", async () => {
  const req = streamed("hello");
  const made = asRequest(req);
  assert(made instanceof Request);
  assertEquals([made.method, made.url, await made.text()], ["POST", "http://a/x", "hello"]);
  assert(req.bodyUsed, "the body went to the Request");

  const fromHeld = asRequest(held('{"b":2}'));
  assertEquals(
    [fromHeld.headers.get("content-type"), await fromHeld.json()],
    ["application/json", { b: 2 }],
  );
  const real = new Request("http://a/");
  assert(asRequest(real) === real);
});

Deno.test("inbound request: the signal aborts when the client leaves, before or after it is asked for", () => {
  const early = held("");
  const signal = early.signal;
  assertEquals(signal.aborted, false);
  early.leave();
  assert(signal.aborted);

  const late = held("");
  late.leave();
  assert(late.signal.aborted, "asked for after the client left");

  // A copy with another body keeps the original's signal.
  const copy = withBody(early, encoder.encode("other") as Uint8Array<ArrayBuffer>);
  assert(copy.signal === signal);
});
