import { assert, assertEquals, assertRejects } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { IdleWatch } from "../../src/proxy/idle_watch.ts";
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

Deno.test("readBody: a small declared body is counted once it arrived; past the cap 503 with Retry-After", async () => {
  const budget = new BufferBudget(10);
  const bytes = await readBody(declared("123456"), 100, { buffered: budget });
  assertEquals(bytes.byteLength, 6);
  assertEquals(budget.used, 6, "held until the caller gives it back");
  const err = await assertRejects(
    () => readBody(declared("12345"), 100, { buffered: budget }),
    Refusal,
  );
  assertEquals(err.status, 503);
  assertEquals(err.headers?.["retry-after"], "1");
  assertEquals(budget.used, 6, "nothing reserved for the refused body");
  budget.release(6);
  assertEquals((await readBody(declared("12345"), 100, { buffered: budget })).byteLength, 5);
});

Deno.test("readBody: a body larger than the whole cap is 413", async () => {
  const err = await assertRejects(
    () => readBody(declared("12345678901"), 100, { buffered: new BufferBudget(10) }),
    Refusal,
  );
  assertEquals(err.status, 413);
});

Deno.test("readBody: a chunked body reserves as it arrives and gives all back when refused", async () => {
  const budget = new BufferBudget(8);
  budget.reserve(3);
  const err = await assertRejects(
    () => readBody(chunked(["abc", "def"]), 100, { buffered: budget }),
    Refusal,
  );
  assertEquals(err.status, 503);
  assertEquals(budget.used, 3, "the first chunk given back");
  budget.release(3);
  assertEquals((await readBody(chunked(["abc", "def"]), 100, { buffered: budget })).byteLength, 6);
  assertEquals(budget.used, 6);
});

/** A body declaring `length` bytes whose chunks the test hands in one by one. */
function trickled(length: number) {
  const pulls: (() => void)[] = [];
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    pull() {
      return new Promise<void>((resolve) => pulls.push(resolve));
    },
  }, { highWaterMark: 0 });
  return {
    req: new Request("http://127.0.0.1/v1/chat/completions", {
      method: "POST",
      headers: { "content-length": String(length) },
      body,
    }),
    /** Hands in `chunk` once the reader asks for more. */
    async send(chunk: Uint8Array): Promise<void> {
      await until(() => pulls.length > 0, "the reader asking for more");
      controller.enqueue(chunk);
      pulls.shift()!();
    },
    close: () => controller.close(),
  };
}

Deno.test("readBody: a large declared body holds what it sent so far, never its declared length up front", async () => {
  const n = 200 * 1024;
  const budget = new BufferBudget(1024 * 1024);
  const body = trickled(n);
  const read = readBody(body.req, 1024 * 1024, { buffered: budget });
  for (let i = 0; i < 10; i++) {
    await body.send(new Uint8Array([0x61]));
    assert(budget.used <= 2 * (i + 1), `after ${i + 1} bytes ${budget.used} reserved`);
  }
  await body.send(new Uint8Array(n - 10).fill(0x62));
  body.close();
  const bytes = await read;
  assertEquals(bytes.byteLength, n);
  assertEquals(bytes.buffer.byteLength, n, "one buffer of its size");
  assertEquals(bytes[9], 0x61);
  assertEquals(bytes[10], 0x62);
  assertEquals(budget.used, n, "held until the caller gives it back");
});

Deno.test("readBody: a large declared body past the cap mid-way is 503 and gives all back", async () => {
  const budget = new BufferBudget(250 * 1024);
  budget.reserve(150 * 1024);
  const body = trickled(200 * 1024);
  const read = readBody(body.req, 1024 * 1024, { buffered: budget });
  read.catch(() => {}); // asserted below
  await body.send(new Uint8Array(64 * 1024));
  await until(() => budget.used === (150 + 64) * 1024, "the first chunk held");
  await body.send(new Uint8Array(64 * 1024));
  const err = await assertRejects(() => read, Refusal);
  assertEquals(err.status, 503);
  assertEquals(err.reason, "buffered_bytes_full");
  assertEquals(budget.used, 150 * 1024, "what it held given back");
});

Deno.test("readBody: a body silent for the body timeout is 408, large or small, and holds nothing after", async () => {
  for (const length of [100, 200 * 1024]) {
    let clock = 1_000;
    const watch = new IdleWatch(300, () => clock);
    const budget = new BufferBudget(1024 * 1024);
    const body = trickled(length);
    const read = readBody(body.req, 1024 * 1024, { buffered: budget, bodyWatch: watch });
    read.catch(() => {}); // asserted below
    await body.send(new Uint8Array(10));
    clock += 299;
    watch.sweep();
    assertEquals(watch.size, 1, `${length}: not cut before the timeout`);
    clock += 1;
    watch.sweep();
    const err = await assertRejects(() => read, Refusal);
    assertEquals(err.status, 408, `${length}: status`);
    assertEquals(err.reason, "body_timeout");
    assertEquals(
      err.message,
      "Request body timed out: no bytes for 300 ms (SKEID_BODY_TIMEOUT_MS)",
    );
    assertEquals(budget.used, 0, `${length}: nothing held`);
    assertEquals(watch.size, 0, `${length}: no longer watched`);
    watch.close();
  }
});

Deno.test("readBody: each chunk restarts the body timeout (it is between reads)", async () => {
  let clock = 1_000;
  const watch = new IdleWatch(300, () => clock);
  const body = trickled(200 * 1024);
  const read = readBody(body.req, 1024 * 1024, { bodyWatch: watch });
  for (let i = 0; i < 5; i++) {
    clock += 250;
    await body.send(new Uint8Array(10));
    watch.sweep();
  }
  assertEquals(watch.size, 1, "5 reads 250 ms apart: still read");
  await body.send(new Uint8Array(200 * 1024 - 50));
  body.close();
  assertEquals((await read).byteLength, 200 * 1024);
  assertEquals(watch.size, 0, "no longer watched");
  watch.close();
});
