import zlib from "node:zlib";
import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { Http1Client } from "../../src/proxy/http1.ts";
import { bodyText, concat, header, rawServer, readRequest } from "./http1_helpers.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const JSON_BODY = JSON.stringify({
  choices: [{ message: { content: "hello ".repeat(50) } }],
  usage: { prompt_tokens: 3, completion_tokens: 50 },
});

/** A raw server answering each request with `body` in `coding`, Content-Length framed. */
function encodedServer(coding: string, body: Uint8Array) {
  return rawServer(async (conn) => {
    const carry = { text: "" };
    for (;;) {
      const req = await readRequest(conn, carry);
      if (req === "") return;
      const head =
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: ${coding}` +
        `\r\ncontent-length: ${body.byteLength}\r\n\r\n`;
      await conn.write(concat(enc.encode(head), body));
    }
  });
}

const WHOLE: [string, string, Uint8Array][] = [
  ["gzip", "gzip", zlib.gzipSync(JSON_BODY)],
  ["br", "br", zlib.brotliCompressSync(JSON_BODY)],
  ["deflate", "deflate (zlib)", zlib.deflateSync(JSON_BODY)],
  ["deflate", "deflate (raw, as some servers send it)", zlib.deflateRawSync(JSON_BODY)],
];

for (const [coding, what, bytes] of WHOLE) {
  Deno.test(`http1 decode: a ${what} answer is decoded, headers adjusted`, async () => {
    const s = encodedServer(coding, bytes);
    const client = new Http1Client();
    try {
      const res = await client.send(`${s.url}/v1/chat/completions`, "POST", [], enc.encode("{}"));
      assertEquals(res.status, 200);
      assertEquals(await bodyText(res), JSON_BODY);
      assertEquals(header(res, "content-encoding"), undefined, "content-encoding removed");
      assertEquals(header(res, "content-length"), String(enc.encode(JSON_BODY).byteLength));
      // The connection stays usable.
      assertEquals(
        await bodyText(await client.send(`${s.url}/x`, "POST", [], enc.encode("{}"))),
        JSON_BODY,
      );
      assertEquals(s.connections(), 1);
    } finally {
      client.close();
      await s.close();
    }
  });
}

/** Compresses SSE events one at a time, flushed, into chunked framing, one event per gate. */
function streamingServer(coding: "gzip" | "br", events: string[], gate: Promise<void>) {
  return rawServer(async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode(
      `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: ${coding}\r\n` +
        "transfer-encoding: chunked\r\n\r\n",
    ));
    const z = coding === "gzip" ? zlib.createGzip() : zlib.createBrotliCompress();
    const out: Uint8Array[] = [];
    z.on("data", (d: Uint8Array) => out.push(d));
    const writeChunks = async () => {
      for (const d of out.splice(0)) {
        await conn.write(
          concat(enc.encode(`${d.byteLength.toString(16)}\r\n`), d, enc.encode("\r\n")),
        );
      }
    };
    for (let i = 0; i < events.length; i++) {
      if (i === 1) await gate; // the rest only once the client decoded the first event
      z.write(events[i]);
      await new Promise<void>((r) => z.flush(() => r()));
      await writeChunks();
    }
    await new Promise<void>((r) => z.end(() => r()));
    await new Promise((r) => setTimeout(r, 0));
    await writeChunks();
    await conn.write(enc.encode("0\r\n\r\n"));
  });
}

for (const coding of ["gzip", "br"] as const) {
  Deno.test(`http1 decode: a streamed ${coding} answer is decoded as it arrives`, async () => {
    const events = ['data: {"n":1}\n\n', 'data: {"n":2}\n\n', "data: [DONE]\n\n"];
    const gate = Promise.withResolvers<void>();
    const s = streamingServer(coding, events, gate.promise);
    const client = new Http1Client();
    try {
      const res = await client.send(`${s.url}/v1/chat/completions`, "POST", [], enc.encode("{}"));
      assertEquals(header(res, "content-encoding"), undefined, "content-encoding removed");
      assertEquals(header(res, "content-length"), undefined);
      const body = res.body;
      assert(body !== null && !(body instanceof Uint8Array), "a streamed body");
      let text = "";
      // The first event decodes before the server sent the second.
      for (let i = 0; i < 100 && !text.includes("\n\n"); i++) {
        const piece = await body.read();
        assert(piece !== null, "more before the first event's end");
        text += dec.decode(piece);
      }
      assertEquals(text, events[0]);
      gate.resolve();
      for (let piece = await body.read(); piece !== null; piece = await body.read()) {
        text += dec.decode(piece);
      }
      assertEquals(text, events.join(""));
    } finally {
      gate.resolve();
      client.close();
      await s.close();
    }
  });
}

Deno.test("http1 decode: an unknown coding or a corrupt body is refused naming it", async () => {
  const unknown = encodedServer("zstd", enc.encode("(zstd bytes)"));
  const corrupt = encodedServer("gzip", enc.encode("not gzip at all"));
  const client = new Http1Client();
  try {
    const err = await assertRejects(() =>
      client.send(`${unknown.url}/a`, "POST", [], enc.encode("{}"))
    );
    assertMatch(err.message, /content-encoding 'zstd', which Skeid cannot decode/);
    const bad = await assertRejects(() =>
      client.send(`${corrupt.url}/a`, "POST", [], enc.encode("{}"))
    );
    assertMatch(bad.message, /upstream gzip body could not be decoded/);
  } finally {
    client.close();
    await unknown.close();
    await corrupt.close();
  }
});
