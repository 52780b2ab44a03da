/**
 * The response store (ADR 0028) through the `openai` SDK against a real gateway and fake model:
 * `previous_response_id` continues a conversation (the node gets the earlier input and output in
 * order), `responses.retrieve` / `responses.delete` for the key that owns a response, another
 * key's id refused, `store: false` honoured, `max_per_key`, a streamed response kept before its
 * terminal event — on SQLite and on PostgreSQL.
 */
import OpenAI from "openai";
import { assert, assertEquals } from "../_assert.ts";
import { CHAT_MODEL, type E2E, fakeWords, withGateway } from "./helpers.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { tempDir } from "../_helpers/temp.ts";
import { DatabaseSync } from "node:sqlite";

const gate = await pgTestGate();
const OWNER = "sk-responses-owner";
const OTHER = "sk-responses-other";

function client(e: E2E, key = OWNER): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${e.base}/v1`, maxRetries: 0 });
}

/** Runs `fn` against a gateway keeping responses in a fresh SQLite usage store. */
async function withSqliteStore(
  fn: (e: E2E) => Promise<void>,
  responses: Record<string, unknown> = {},
): Promise<void> {
  const { dir, cleanup } = await tempDir();
  try {
    await withGateway(fn, {
      usage_store: { backend: "sqlite", sqlite_path: `${dir}/usage.sqlite` },
      responses: { store: true, ...responses },
    });
  } finally {
    await cleanup();
  }
}

/** The response's `store` field (on the wire; the SDK's type leaves it out). */
function storeOf(r: OpenAI.Responses.Response): unknown {
  return (r as unknown as Record<string, unknown>).store;
}

/** The chat messages the fake model got last. */
function lastMessages(e: E2E): unknown {
  return (e.fake.requests.at(-1)?.body as Record<string, unknown>).messages;
}

/** The rejection of `p` (fails when it resolves). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return await p.then(() => {
    throw new Error("expected the call to fail");
  }, (err: unknown) => err);
}

/** A conversation of three turns, each continuing the one before. */
async function conversation(e: E2E): Promise<OpenAI.Responses.Response[]> {
  const sdk = client(e);
  const r1 = await sdk.responses.create({ model: CHAT_MODEL, input: "first question here" });
  assertEquals(storeOf(r1), true, "kept: the response says store true");
  assertEquals(r1.previous_response_id, null);
  const r2 = await sdk.responses.create({
    model: CHAT_MODEL,
    input: "second question",
    previous_response_id: r1.id,
  });
  assertEquals(r2.previous_response_id, r1.id);
  assertEquals(lastMessages(e), [
    { role: "user", content: "first question here" },
    { role: "assistant", content: fakeWords(8) },
    { role: "user", content: "second question" },
  ], "the node got the earlier input and output, in order");
  const r3 = await sdk.responses.create({
    model: CHAT_MODEL,
    instructions: "Be brief.",
    input: [{ role: "user", content: "third one" }],
    previous_response_id: r2.id,
  });
  assertEquals(lastMessages(e), [
    { role: "system", content: "Be brief." },
    { role: "user", content: "first question here" },
    { role: "assistant", content: fakeWords(8) },
    { role: "user", content: "second question" },
    { role: "assistant", content: fakeWords(8) },
    { role: "user", content: "third one" },
  ], "a chain of two continues the whole conversation");
  assertEquals(r3.usage?.input_tokens, 2 + 3 + 8 + 2 + 8 + 2, "the earlier turns are billed");
  const events = await e.t.sink.waitFor(3);
  assertEquals(events[2].input_tokens, r3.usage?.input_tokens, "usage event = response usage");
  return [r1, r2, r3];
}

/** retrieve and delete for the owner; 404 and `previous_response_not_found` for another key. */
async function ownership(e: E2E, kept: OpenAI.Responses.Response): Promise<void> {
  const owner = client(e);
  const other = client(e, OTHER);
  const got = await owner.responses.retrieve(kept.id);
  assertEquals(got.id, kept.id);
  assertEquals(got.output_text, kept.output_text);
  assertEquals(got.usage, kept.usage);

  const before = e.t.sink.events.length;
  const refused = await rejection(other.responses.create({
    model: CHAT_MODEL,
    input: "let me in",
    previous_response_id: kept.id,
  }));
  assert(refused instanceof OpenAI.BadRequestError, `a 400, got ${refused}`);
  assertEquals(refused.code, "previous_response_not_found");
  assertEquals(refused.type, "invalid_request_error");
  const unknown = await rejection(owner.responses.create({
    model: CHAT_MODEL,
    input: "x",
    previous_response_id: "resp_never_was",
  }));
  assert(unknown instanceof OpenAI.BadRequestError, `a 400, got ${unknown}`);
  assertEquals(unknown.code, "previous_response_not_found");
  assertEquals(e.t.sink.events.length, before, "a refusal writes no usage event");

  const notTheirs = await rejection(other.responses.retrieve(kept.id));
  assert(notTheirs instanceof OpenAI.NotFoundError, `a 404, got ${notTheirs}`);
  assertEquals(notTheirs.type, "invalid_request_error");
  const notTheirsToDelete = await rejection(other.responses.delete(kept.id));
  assert(notTheirsToDelete instanceof OpenAI.NotFoundError, `a 404, got ${notTheirsToDelete}`);

  const res = await fetch(`${e.base}/v1/responses/${kept.id}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${OWNER}` },
  });
  assertEquals(res.status, 200);
  assertEquals(await res.json(), { id: kept.id, object: "response.deleted", deleted: true });
  const gone = await rejection(owner.responses.retrieve(kept.id));
  assert(gone instanceof OpenAI.NotFoundError, `deleted: a 404, got ${gone}`);
}

Deno.test("responses store (openai SDK, sqlite): previous_response_id, retrieve, delete, another key refused", async () => {
  await withSqliteStore(async (e) => {
    const [r1] = await conversation(e);
    await ownership(e, r1);
  });
});

Deno.test("responses store (openai SDK, sqlite): store false is not kept; it may still continue", async () => {
  await withSqliteStore(async (e) => {
    const sdk = client(e);
    const kept = await sdk.responses.create({ model: CHAT_MODEL, input: "keep me" });
    const loose = await sdk.responses.create({
      model: CHAT_MODEL,
      input: "forget me",
      store: false,
      previous_response_id: kept.id,
    });
    assertEquals(storeOf(loose), false);
    assertEquals(loose.previous_response_id, kept.id);
    assertEquals(lastMessages(e), [
      { role: "user", content: "keep me" },
      { role: "assistant", content: fakeWords(8) },
      { role: "user", content: "forget me" },
    ]);
    const err = await rejection(sdk.responses.retrieve(loose.id));
    assert(err instanceof OpenAI.NotFoundError, `not kept: a 404, got ${err}`);
  });
});

Deno.test("responses store (openai SDK, sqlite): max_per_key keeps the newest", async () => {
  await withSqliteStore(async (e) => {
    const sdk = client(e);
    const ids: string[] = [];
    for (const input of ["one", "two", "three"]) {
      ids.push((await sdk.responses.create({ model: CHAT_MODEL, input })).id);
    }
    const oldest = await rejection(sdk.responses.retrieve(ids[0]));
    assert(oldest instanceof OpenAI.NotFoundError, `the oldest was dropped, got ${oldest}`);
    assertEquals((await sdk.responses.retrieve(ids[1])).id, ids[1]);
    assertEquals((await sdk.responses.retrieve(ids[2])).id, ids[2]);
  }, { max_per_key: 2 });
});

Deno.test("responses store (openai SDK, sqlite): 30 chained turns are stored once each, not their histories", async () => {
  const { dir, cleanup } = await tempDir();
  const path = `${dir}/usage.sqlite`;
  try {
    await withGateway(async (e) => {
      const sdk = client(e);
      const turns = 30;
      const chunk = "x".repeat(20_000);
      let previous: string | undefined;
      for (let i = 0; i < turns; i++) {
        const r = await sdk.responses.create({
          model: CHAT_MODEL,
          input: `turn ${i} ${chunk}`,
          ...(previous !== undefined ? { previous_response_id: previous } : {}),
        });
        previous = r.id;
      }
      const messages = lastMessages(e) as { role: string; content: string }[];
      assertEquals(messages.length, 2 * turns - 1, "the node got the whole conversation");
      assertEquals(messages[0].content, `turn 0 ${chunk}`);
      const db = new DatabaseSync(path, { readOnly: true });
      try {
        const row = db.prepare(
          "SELECT COUNT(*) AS n, SUM(length(input) + length(response)) AS stored FROM responses",
        ).get() as { n: number; stored: number };
        assertEquals(row.n, turns);
        // Each turn's 20 KB once (~600 KB); a row per history would be ~9.3 MB.
        assert(row.stored < 2 * turns * chunk.length, `stored ${row.stored} bytes`);
      } finally {
        db.close();
      }
    }, {
      usage_store: { backend: "sqlite", sqlite_path: path },
      responses: { store: true },
    });
  } finally {
    await cleanup();
  }
});

Deno.test("responses store (openai SDK, sqlite): a turn over a byte cap is a 400 naming it; store false still answers", async () => {
  await withSqliteStore(async (e) => {
    const sdk = client(e);
    const before = e.fake.requests.length;
    const tooBig = await rejection(
      sdk.responses.create({ model: CHAT_MODEL, input: "y".repeat(5000) }),
    );
    assert(tooBig instanceof OpenAI.BadRequestError, `a 400, got ${tooBig}`);
    assertEquals(tooBig.code, "response_store_full");
    assert(tooBig.message.includes("responses.max_response_bytes"), tooBig.message);
    assertEquals(e.fake.requests.length, before, "nothing was forwarded");
    const unkept = await sdk.responses.create({
      model: CHAT_MODEL,
      input: "y".repeat(5000),
      store: false,
    });
    assertEquals(unkept.status, "completed");

    // Three turns of ~3 KB fill the key's 10,000 bytes; the fourth is refused.
    const ids: string[] = [];
    let refused: unknown;
    for (let i = 0; i < 5 && refused === undefined; i++) {
      try {
        ids.push((await sdk.responses.create({ model: CHAT_MODEL, input: "z".repeat(3000) })).id);
      } catch (err) {
        refused = err;
      }
    }
    assert(refused instanceof OpenAI.BadRequestError, `the key is full: a 400, got ${refused}`);
    assert(refused.message.includes("responses.max_bytes_per_key"), refused.message);
    assert(ids.length >= 2, `some were kept first (${ids.length})`);
    // Deleting one makes room again.
    await sdk.responses.delete(ids[0]);
    await sdk.responses.create({ model: CHAT_MODEL, input: "z".repeat(3000) });
    // Another key is not held back by this one.
    await client(e, OTHER).responses.create({ model: CHAT_MODEL, input: "z".repeat(3000) });
  }, { max_response_bytes: 4000, max_bytes_per_key: 10_000 });
});

Deno.test("responses store (openai SDK, sqlite): a stream is kept before its terminal event", async () => {
  await withSqliteStore(async (e) => {
    const sdk = client(e);
    const stream = sdk.responses.stream({ model: CHAT_MODEL, input: "stream this please" });
    let seenWhileOpen: OpenAI.Responses.Response | undefined;
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      if (event.type === "response.completed") {
        completed = event.response;
        // The stream is still open here: the response was kept before this event went out.
        seenWhileOpen = await sdk.responses.retrieve(event.response.id);
      }
    }
    assert(completed !== undefined, "response.completed arrived");
    assert(seenWhileOpen !== undefined, "retrieved while the stream was open");
    assertEquals(seenWhileOpen.output_text, fakeWords(8));
    assertEquals(seenWhileOpen.usage, completed.usage);
    assertEquals(storeOf(completed), true);

    const next = sdk.responses.stream({
      model: CHAT_MODEL,
      input: "and again",
      previous_response_id: completed.id,
    });
    const final = await next.finalResponse();
    assertEquals(final.previous_response_id, completed.id);
    assertEquals(lastMessages(e), [
      { role: "user", content: "stream this please" },
      { role: "assistant", content: fakeWords(8) },
      { role: "user", content: "and again" },
    ]);
  });
});

Deno.test({
  name:
    "responses store (openai SDK, postgresql): previous_response_id, retrieve, delete, another key refused",
  ignore: gate.ignore,
  async fn() {
    const db = await freshPgDatabase();
    try {
      await withGateway(async (e) => {
        const [r1] = await conversation(e);
        await ownership(e, r1);
      }, {
        usage_store: { backend: "postgresql", dsn: db.dsn },
        responses: { store: true },
      });
    } finally {
      await db.drop();
    }
  },
});

Deno.test("responses store (openai SDK): without it, previous_response_id says how to enable it; GET is 404", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const err = await rejection(sdk.responses.create({
      model: CHAT_MODEL,
      input: "x",
      previous_response_id: "resp_1",
    }));
    assert(err instanceof OpenAI.BadRequestError, `a 400, got ${err}`);
    assert(err.message.includes("previous_response_id"), err.message);
    assert(err.message.includes("responses: {store: true}"), err.message);
    const r = await sdk.responses.create({ model: CHAT_MODEL, input: "not kept" });
    assertEquals(storeOf(r), false);
    const gone = await rejection(sdk.responses.retrieve(r.id));
    assert(gone instanceof OpenAI.NotFoundError, `a 404, got ${gone}`);
    assert(gone.message.includes("set responses.store"), gone.message);
  });
});
