import zlib from "node:zlib";
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { concat, fullListener, rawServer, readRequest } from "../proxy/http1_helpers.ts";
import { assertIdle, chat, post, startGateway } from "./helpers.ts";

const enc = new TextEncoder();
const ANSWER = JSON.stringify({
  id: "c1",
  object: "chat.completion",
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
});

/** ANSWER as a kept-alive 200 with its Content-Length. */
function jsonAnswer(): Uint8Array {
  const body = enc.encode(ANSWER);
  return concat(
    enc.encode(
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\n\r\n`,
    ),
    body,
  );
}

/** A raw upstream answering every request on a connection with `answer()`. */
function upstream(answer: () => Uint8Array) {
  const s = rawServer(async (conn) => {
    const carry = { text: "" };
    for (;;) {
      if ((await readRequest(conn, carry)) === "") return;
      await conn.write(answer());
    }
  });
  return { url: `${s.url}/v1`, close: s.close };
}

Deno.test("upstream wire: a gzip answer nobody asked for is decoded, relayed and billed", async () => {
  const gz = zlib.gzipSync(ANSWER);
  const node = upstream(() =>
    concat(
      enc.encode(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n" +
          `content-length: ${gz.byteLength}\r\n\r\n`,
      ),
      gz,
    )
  );
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
    assertEquals(r.status, 200);
    assertEquals(r.json.usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
    assertEquals(r.headers.get("content-encoding"), null);
    const [event] = await t.sink.waitFor(1);
    assertEquals(event.input_tokens, 3, "billed from the decoded answer");
    assertEquals(event.output_tokens, 5);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test("upstream wire: a bare-LF head is answered, not hung on", async () => {
  const body = enc.encode(ANSWER);
  const node = upstream(() =>
    concat(
      enc.encode(
        `HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: ${body.byteLength}\n\n`,
      ),
      body,
    )
  );
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] }, {
    upstreamTimeoutMs: 5000,
  });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
    assertEquals(r.status, 200);
    assertEquals(r.json.usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test("upstream wire: a head past 64 KiB is a 502, and nothing of it is kept", async () => {
  const node = upstream(() =>
    enc.encode(`HTTP/1.1 200 OK\r\nx-big: ${"b".repeat(1024 * 1024)}\r\ncontent-length: 0\r\n\r\n`)
  );
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] }, {
    upstreamTimeoutMs: 5000,
  });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
    assertEquals(r.status, 502);
    const message = String((r.json.error as Record<string, unknown>).message);
    assert(message.startsWith("Upstream error: "), message);
    if (Deno.env.get("SKEID_TEST_UPSTREAM_CLIENT") !== "fetch") {
      assertStringIncludes(message, "response head is larger than 64 KiB");
      // A head Skeid refuses is still the node's answer: no step toward ejection (ADR 0021).
      assertEquals((await t.group.ejection("n")).consecutive_failures, 0);
    }
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

Deno.test({
  name: "upstream wire: a node that never answers a connect costs SKEID_UPSTREAM_CONNECT_TIMEOUT",
  // A connect the kernel never answers stays pending in the runtime after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dead = await fullListener();
    const t = await startGateway({ nodes: [{ id: "dead", url: `${dead.url}/v1`, model: "m" }] }, {
      env: { SKEID_UPSTREAM_CONNECT_TIMEOUT: "0.3" },
      upstreamTimeoutMs: 60_000,
    });
    try {
      const started = Date.now();
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      const took = Date.now() - started;
      assertEquals(r.status, 502);
      assertStringIncludes(
        String((r.json.error as Record<string, unknown>).message),
        "connect timed out after 300 ms",
      );
      assert(took < 5000, `answered after the connect timeout, not the header wait (${took} ms)`);
      assertIdle(t.gw);
    } finally {
      await t.stop();
      dead.close();
    }
  },
});

Deno.test({
  name: "upstream wire: a request a node read and then dropped is not resent; failover counts it",
  // The runtime's fetch resends a request whose pooled connection closed unanswered on its own
  // (ext/fetch's retry on a stale pooled connection): the rule holds for the HTTP/1.1 client.
  ignore: Deno.env.get("SKEID_TEST_UPSTREAM_CLIENT") === "fetch",
  fn: async () => {
    // Node "dies": answers the first request on a connection; the second one it reads whole,
    // works on for a while and closes without answering (an engine that crashed mid-generation).
    let read = 0;
    let answered = 0;
    const dies = rawServer(async (conn) => {
      const carry = { text: "" };
      if ((await readRequest(conn, carry)) === "") return;
      read++;
      await conn.write(jsonAnswer());
      answered++;
      if ((await readRequest(conn, carry)) === "") return;
      read++;
      await new Promise((r) => setTimeout(r, 200));
    });
    const live = upstream(jsonAnswer);
    const t = await startGateway({
      nodes: [
        { id: "dies", url: `${dies.url}/v1`, model: "m" },
        { id: "live", url: live.url, model: "m" },
      ],
    }, { upstreamTimeoutMs: 5000 });
    try {
      // Round-robin alternates the nodes: within a few requests one lands on the kept-alive
      // connection of "dies" and is dropped there.
      let sent = 0;
      for (; sent < 6 && read - answered === 0; sent++) {
        const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
        assertEquals(r.status, 200, "a dropped attempt fails over to the other node");
      }
      assertEquals(read - answered, 1, "one request was dropped by the node");
      const events = await t.sink.waitFor(sent);
      const failedOver = events.filter((e) => e.attempts === 2);
      assertEquals(failedOver.length, 1, "the dropped request shows both attempts");
      assertEquals(failedOver[0].node_id, "live");
      assertEquals(
        read,
        events.filter((e) => e.node_id === "dies").length + 1,
        "each request reached the node that dropped one at most once",
      );
      assertIdle(t.gw);
    } finally {
      await t.stop();
      await dies.close();
      await live.close();
    }
  },
});

Deno.test("upstream wire: conflicting Content-Length values are a 502 naming why", async () => {
  const body = enc.encode(ANSWER);
  const node = upstream(() =>
    enc.encode(
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 20\r\n" +
        `content-length: ${body.byteLength}\r\n\r\n${ANSWER}`,
    )
  );
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] }, {
    upstreamTimeoutMs: 5000,
  });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
    assertEquals(r.status, 502, "never a 200 with a body cut at one of the lengths");
    if (Deno.env.get("SKEID_TEST_UPSTREAM_CLIENT") !== "fetch") {
      assertStringIncludes(
        String((r.json.error as Record<string, unknown>).message),
        "conflicting content-length values",
      );
    }
    const [event] = await t.sink.waitFor(1);
    assertEquals(event.status_code, 502);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});
