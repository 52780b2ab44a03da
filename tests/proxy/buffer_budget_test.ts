import { assertEquals, assertRejects } from "../_assert.ts";
import {
  BufferBudget,
  DEFAULT_MAX_BUFFERED_BYTES,
  maxBufferedBytes,
} from "../../src/proxy/buffer_budget.ts";
import { Refusal } from "../../src/proxy/errors.ts";
import { readBody } from "../../src/proxy/intake.ts";

function declared(body: string): Request {
  return new Request("http://127.0.0.1/v1/chat/completions", {
    method: "POST",
    headers: { "content-length": String(body.length) },
    body,
  });
}

function chunked(parts: string[]): Request {
  const enc = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(enc.encode(p));
      c.close();
    },
  });
  return new Request("http://127.0.0.1/", { method: "POST", body: stream });
}

Deno.test("SKEID_MAX_BUFFERED_BYTES: a whole number > 0, else the default", () => {
  assertEquals(maxBufferedBytes("1000"), 1000);
  assertEquals(maxBufferedBytes(undefined), DEFAULT_MAX_BUFFERED_BYTES);
  assertEquals(maxBufferedBytes("-5"), DEFAULT_MAX_BUFFERED_BYTES);
  assertEquals(maxBufferedBytes("1.5"), DEFAULT_MAX_BUFFERED_BYTES);
});

Deno.test("readBody: a declared body is reserved whole; past the cap 503 with Retry-After", async () => {
  const budget = new BufferBudget(10);
  const bytes = await readBody(declared("123456"), 100, budget);
  assertEquals(bytes.byteLength, 6);
  assertEquals(budget.used, 6, "held until the caller gives it back");
  const err = await assertRejects(() => readBody(declared("12345"), 100, budget), Refusal);
  assertEquals(err.status, 503);
  assertEquals(err.headers?.["retry-after"], "1");
  assertEquals(budget.used, 6, "nothing reserved for the refused body");
  budget.release(6);
  assertEquals((await readBody(declared("12345"), 100, budget)).byteLength, 5);
});

Deno.test("readBody: a body larger than the whole cap is 413", async () => {
  const err = await assertRejects(
    () => readBody(declared("12345678901"), 100, new BufferBudget(10)),
    Refusal,
  );
  assertEquals(err.status, 413);
});

Deno.test("readBody: a chunked body reserves as it arrives and gives all back when refused", async () => {
  const budget = new BufferBudget(8);
  budget.reserve(3);
  const err = await assertRejects(() => readBody(chunked(["abc", "def"]), 100, budget), Refusal);
  assertEquals(err.status, 503);
  assertEquals(budget.used, 3, "the first chunk given back");
  budget.release(3);
  assertEquals((await readBody(chunked(["abc", "def"]), 100, budget)).byteLength, 6);
  assertEquals(budget.used, 6);
});
