/**
 * A connection's input buffer: the idle wait's outcome told to a waiter (`fillFor`) as `fill`
 * resolves it — bytes, the peer's close, a failed socket, a read already in flight, no room.
 */
import { assertEquals, assertThrows } from "../_assert.ts";
import { ConnInput, type FillWaiter, IDLE_BUFFER_BYTES } from "../../src/edge/conn_input.ts";

/** A socket whose reads are answered one by one by the test. */
class ScriptedConn {
  reads = 0;
  #answer: ((n: number | null) => void) | undefined;
  #fail: ((err: unknown) => void) | undefined;
  #buf: Uint8Array | undefined;
  read(buf: Uint8Array): Promise<number | null> {
    this.reads++;
    this.#buf = buf;
    return new Promise((resolve, reject) => {
      this.#answer = resolve;
      this.#fail = reject;
    });
  }
  /** Answers the pending read with `bytes` (or the peer's close). */
  send(bytes: Uint8Array | null): void {
    if (bytes !== null) this.#buf!.set(bytes);
    this.#answer!(bytes === null ? null : bytes.length);
  }
  break(): void {
    this.#fail!(new Error("connection reset"));
  }
}

/** A waiter that records what it is told, and a promise of the first. */
function recorder(): FillWaiter & { told: boolean[]; next: Promise<boolean> } {
  let first: (more: boolean) => void = () => {};
  const next = new Promise<boolean>((resolve) => first = resolve);
  const told: boolean[] = [];
  return {
    told,
    next,
    filled(more) {
      told.push(more);
      first(more);
    },
  };
}

function input(conn: ScriptedConn): ConnInput {
  return new ConnInput(conn as unknown as Deno.Conn);
}

Deno.test("conn input: fillFor tells its waiter once bytes are buffered", async () => {
  const conn = new ScriptedConn();
  const inp = input(conn);
  const w = recorder();
  inp.fillFor(64 * 1024, w);
  assertEquals([inp.reading, w.told], [true, []]);
  conn.send(new TextEncoder().encode("GET / HTTP/1.1\r\n"));
  assertEquals(await w.next, true);
  assertEquals([inp.available, inp.reading, inp.ended, w.told], [16, false, false, [true]]);
});

Deno.test("conn input: the peer's close and a failed socket are told as no more, and stay so", async () => {
  for (const end of ["close", "reset"] as const) {
    const conn = new ScriptedConn();
    const inp = input(conn);
    const w = recorder();
    inp.fillFor(64 * 1024, w);
    if (end === "close") conn.send(null);
    else conn.break();
    assertEquals(await w.next, false, end);
    assertEquals(inp.ended, true, end);
    // Once ended, the answer is given at once and no read is started.
    const again = recorder();
    inp.fillFor(64 * 1024, again);
    assertEquals([again.told, conn.reads], [[false], 1], end);
  }
});

Deno.test("conn input: fillFor during a read in flight shares it; fill and fillFor agree", async () => {
  const conn = new ScriptedConn();
  const inp = input(conn);
  const filled = inp.fill(64 * 1024);
  const w = recorder();
  inp.fillFor(64 * 1024, w);
  assertEquals(conn.reads, 1);
  conn.send(new Uint8Array([1, 2, 3]));
  assertEquals([await filled, await w.next, inp.available], [true, true, 3]);
});

Deno.test("conn input: fillFor with no room left at the bound throws before reading", async () => {
  const conn = new ScriptedConn();
  const inp = input(conn);
  // Fill the idle buffer to its end without using any of it.
  const w = recorder();
  inp.fillFor(IDLE_BUFFER_BYTES, w);
  conn.send(new Uint8Array(IDLE_BUFFER_BYTES));
  assertEquals([await w.next, inp.available], [true, IDLE_BUFFER_BYTES]);
  assertThrows(() => inp.fillFor(IDLE_BUFFER_BYTES, recorder()), RangeError, "full");
  assertEquals(conn.reads, 1);
});
