import { assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { Http1Client } from "../../src/proxy/http1.ts";
import { MAX_HEAD_BYTES } from "../../src/proxy/http1_head.ts";
import { sendUpstream, UpstreamTransportError } from "../../src/proxy/call.ts";
import { IdleWatch } from "../../src/proxy/idle_watch.ts";
import { Http1Abort } from "../../src/proxy/http1.ts";
import { bodyText, header, rawServer, readRequest } from "./http1_helpers.ts";

const enc = new TextEncoder();

/** A raw server that answers every request with `answer`. */
function answering(answer: string) {
  return rawServer(async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode(answer));
  });
}

Deno.test("http1 head: bare-LF line endings are parsed, head and chunked body", async () => {
  const s = rawServer(async (conn, n) => {
    await readRequest(conn);
    await conn.write(enc.encode(
      n === 0
        ? "HTTP/1.1 200 OK\nx-a: 1\ncontent-length: 2\n\nok"
        : "HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\n\n2\nab\r\n1\nc\n0\n\n",
    ));
  });
  const client = new Http1Client();
  try {
    const one = await client.send(`${s.url}/a`, "GET", [], new Uint8Array(0));
    assertEquals(one.status, 200);
    assertEquals(header(one, "x-a"), "1");
    assertEquals(await bodyText(one), "ok");
    const two = await client.send(`${s.url}/b`, "GET", [], new Uint8Array(0));
    assertEquals(two.status, 201);
    assertEquals(await bodyText(two), "abc");
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1 head: a head past 64 KiB fails the request naming why", async () => {
  let sent = 0;
  const s = rawServer(async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\n"));
    const line = enc.encode(`x-filler: ${"a".repeat(1000)}\r\n`);
    // Up to 64 MiB of header lines; the client hangs up long before.
    for (let i = 0; i < 64 * 1024; i++) {
      await conn.write(line);
      sent += line.byteLength;
    }
  });
  const client = new Http1Client();
  try {
    const err = await assertRejects(() => client.send(`${s.url}/a`, "GET", [], new Uint8Array(0)));
    assertMatch(err.message, /upstream response head is larger than 64 KiB/);
    assertEquals(client.openConnections, 0, "the connection was closed");
  } finally {
    client.close();
    await s.close();
  }
  assertEquals(sent < 32 * 1024 * 1024, true, `the server stopped early (${sent} bytes)`);
});

Deno.test("http1 head: the reason reaches the proxy's transport error (a 502 naming it)", async () => {
  const s = answering(`HTTP/1.1 200 OK\r\nx-big: ${"b".repeat(MAX_HEAD_BYTES + 10)}\r\n\r\n`);
  const client = new Http1Client();
  const watch = new IdleWatch(5000);
  try {
    const err = await assertRejects(() =>
      sendUpstream({
        client,
        url: `${s.url}/v1/chat/completions`,
        headers: [],
        body: enc.encode("{}"),
        abort: new Http1Abort(),
        timeoutMs: 5000,
        watch,
      }), UpstreamTransportError);
    assertEquals(err.kind, "connect");
    assertMatch(err.message, /response head is larger than 64 KiB/);
  } finally {
    watch.close();
    client.close();
    await s.close();
  }
});

Deno.test("http1 head: obs-fold (a header line continued on the next) is refused", async () => {
  const s = answering("HTTP/1.1 200 OK\r\nx-a: one\r\n  two\r\ncontent-length: 2\r\n\r\nok");
  const client = new Http1Client();
  try {
    const err = await assertRejects(() => client.send(`${s.url}/a`, "GET", [], new Uint8Array(0)));
    assertMatch(err.message, /obs-fold/);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1 head: Content-Length is digits, one value; anything else is refused, never pooled", async () => {
  const bad: [string, RegExp][] = [
    ["content-length: \r\n", /invalid content-length/],
    ["content-length: 1e3\r\n", /invalid content-length/],
    ["content-length: 0x10\r\n", /invalid content-length/],
    ["content-length: +5\r\n", /invalid content-length/],
    ["content-length: -1\r\n", /invalid content-length/],
    ["content-length: 5 5\r\n", /invalid content-length/],
    ["content-length: 99999999999999999999\r\n", /invalid content-length/],
    ["content-length: 5\r\ncontent-length: 2\r\n", /conflicting content-length/],
    ["content-length: 5, 2\r\n", /conflicting content-length/],
  ];
  for (const [lines, why] of bad) {
    const s = answering(`HTTP/1.1 200 OK\r\n${lines}\r\nhello`);
    const client = new Http1Client();
    try {
      const err = await assertRejects(() => client.send(`${s.url}/a`, "POST", [], enc.encode("x")));
      assertMatch(err.message, why, JSON.stringify(lines));
      assertEquals(client.openConnections, 0, `closed, not pooled: ${JSON.stringify(lines)}`);
    } finally {
      client.close();
      await s.close();
    }
  }
  // Identical repeats are one length (RFC 9110 §8.6).
  for (const lines of ["content-length: 5, 5\r\n", "content-length: 5\r\ncontent-length: 5\r\n"]) {
    const s = answering(`HTTP/1.1 200 OK\r\n${lines}\r\nhello`);
    const client = new Http1Client();
    try {
      const res = await client.send(`${s.url}/a`, "POST", [], enc.encode("x"));
      assertEquals(await bodyText(res), "hello", JSON.stringify(lines));
    } finally {
      client.close();
      await s.close();
    }
  }
});
