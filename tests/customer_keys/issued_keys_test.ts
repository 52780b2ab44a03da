/**
 * Issued keys through a real gateway on SQLite (ADR 0029): created through the admin API and
 * shown once, judged only as issued keys, revoked, rotated with a grace window, expired, and held
 * to their policy; the hash is never shown.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { admin, ask, PEPPER, withGateway } from "./helpers.ts";
import { startGateway } from "../integration/helpers.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { tempDir } from "../_helpers/temp.ts";
import { until } from "../_helpers/poll.ts";

Deno.test("issued keys: created once, routed and billed under the public id", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {
      name: "alice",
      policy: "std",
      metadata: { team: "search" },
    });
    assertEquals(made.status, 200, made.text);
    const key = String(made.json.key);
    const id = String(made.json.id);
    assert(/^sk-skeid-ik_[0-9a-f]{16}-[0-9a-f]{48}$/.test(key), key);
    assertStringIncludes(key, id);
    const secret = key.slice(`sk-skeid-${id}-`.length, -8);
    assert(secret.length * 4 >= 128, "at least 128 bits of secret");
    assertEquals(made.json.metadata, { team: "search" });

    const res = await ask(t, key);
    assertEquals(res.status, 200, res.text);
    await t.group.flushUsage();
    assertEquals(t.sink.events.map((e) => e.api_key_id), [id], "billed as the public id");

    // No later answer carries the key, its secret or anything of its hash.
    const got = await admin(t.base, "GET", `/skeid/keys/${id}`);
    const listed = await admin(t.base, "GET", "/skeid/keys");
    for (const answer of [got, listed]) {
      assertEquals(answer.status, 200, answer.text);
      assert(!answer.text.includes(secret), "no secret");
      assert(!/"(hash|salt|prev_hash|prev_salt)"/.test(answer.text), "no hash or salt");
    }
    assertEquals(got.json.name, "alice");
    assertEquals(got.json.state, "active");
    assertEquals(got.json.policy, "std");
  });
});

Deno.test("issued keys: a revoked key is refused at the next request, never as anonymous", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", { name: "bob" });
    const key = String(made.json.key);
    assertEquals((await ask(t, key)).status, 200);
    const revoked = await admin(t.base, "DELETE", `/skeid/keys/${made.json.id}`);
    assertEquals(revoked.status, 200, revoked.text);
    assertEquals(revoked.json.state, "revoked");
    const res = await ask(t, key);
    assertEquals(res.status, 401, res.text);
    assertStringIncludes(res.text, "invalid or revoked key");
    assert(!res.text.includes(key), "the key is not echoed");
    // Listings filter by state.
    const list = await admin(t.base, "GET", "/skeid/keys?state=revoked");
    assertEquals((list.json.keys as { id: string }[]).map((k) => k.id), [made.json.id]);
  });
});

Deno.test("issued keys: unknown, wrong-secret, malformed and truncated keys get one 401", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {});
    const key = String(made.json.key);
    const id = String(made.json.id);
    const flip = (s: string, i: number) =>
      s.slice(0, i) + (s[i] === "0" ? "1" : "0") + s.slice(i + 1);
    const wrongSecret = flip(key, key.length - 20); // checksum no longer matches either
    const unknownId = key.replace(id, "ik_0000000000000000");
    const bad = [
      wrongSecret,
      unknownId,
      key.slice(0, -3),
      "sk-skeid-nonsense",
      `${key}0`,
    ];
    const bodies = new Set<string>();
    for (const k of bad) {
      const res = await ask(t, k);
      assertEquals(res.status, 401, `${k}: ${res.text}`);
      bodies.add(JSON.stringify((res.json.error as Record<string, unknown>).message));
    }
    assertEquals([...bodies], [JSON.stringify("invalid or revoked key")], "one message for all");
    await t.group.flushUsage();
    assertEquals(t.sink.events.length, 0, "nothing forwarded");
  });
});

Deno.test("issued keys: require_known_keys counts an issued key as known", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {});
    assertEquals((await ask(t, String(made.json.key))).status, 200);
    assertEquals((await ask(t, "sk-unlisted")).status, 401);
  }, { config: { routing: { require_known_keys: true } } });
});

Deno.test("issued keys: rotation keeps the old secret for the grace window, 0 ends it at once", async () => {
  let now = Date.parse("2026-12-01T00:00:00Z");
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {});
    const id = String(made.json.id);
    const first = String(made.json.key);
    const rotated = await admin(t.base, "POST", `/skeid/keys/${id}/rotate`, { grace_s: 60 });
    assertEquals(rotated.status, 200, rotated.text);
    const second = String(rotated.json.key);
    assert(second !== first && second.includes(id), "a new secret, the same public id");
    assertEquals((await ask(t, first)).status, 200, "old key within its grace window");
    assertEquals((await ask(t, second)).status, 200, "new key");
    now += 61_000;
    assertEquals((await ask(t, first)).status, 401, "old key after its grace window");
    assertEquals((await ask(t, second)).status, 200);

    const third = String(
      (await admin(t.base, "POST", `/skeid/keys/${id}/rotate`, { grace_s: 0 }))
        .json.key,
    );
    assertEquals((await ask(t, second)).status, 401, "grace_s 0: the old key ends at once");
    assertEquals((await ask(t, third)).status, 200);
    const bad = await admin(t.base, "POST", `/skeid/keys/${id}/rotate`, { grace_s: -1 });
    assertEquals(bad.status, 400);
    assertStringIncludes(bad.text, "grace_s");
  }, { now: () => now });
});

Deno.test("issued keys: an expired key is refused; expiry in the past is a 400", async () => {
  let now = Date.parse("2026-12-01T00:00:00Z");
  await withGateway(async (t) => {
    const past = await admin(t.base, "POST", "/skeid/keys", {
      expires_at: "2026-11-30T00:00:00Z",
    });
    assertEquals(past.status, 400);
    assertStringIncludes(past.text, "expires_at");
    const made = await admin(t.base, "POST", "/skeid/keys", {
      expires_at: "2026-12-01T01:00:00Z",
    });
    assertEquals(made.status, 200, made.text);
    assertEquals((await ask(t, String(made.json.key))).status, 200);
    now += 3_600_000;
    assertEquals((await ask(t, String(made.json.key))).status, 401);
    const got = await admin(t.base, "GET", `/skeid/keys/${made.json.id}`);
    assertEquals(got.json.state, "expired");
  }, { now: () => now });
});

Deno.test("issued keys: bad fields are a 400 naming the field", async () => {
  await withGateway(async (t) => {
    const cases: [Record<string, unknown>, string][] = [
      [{ policy: "nope" }, "policy: unknown policy 'nope'"],
      [{ budget: { usd: -1 } }, "budget.usd"],
      [{ limits: { rpm: 0 } }, "limits.rpm"],
      [{ colour: "red" }, "colour: unknown field"],
      [{ metadata: "x" }, "metadata"],
      [{ policy: { models: ["m1"], wings: 2 } }, "policy.wings"],
    ];
    for (const [body, field] of cases) {
      const res = await admin(t.base, "POST", "/skeid/keys", body);
      assertEquals(res.status, 400, JSON.stringify(body));
      assertStringIncludes(res.text, field);
    }
    const made = await admin(t.base, "POST", "/skeid/keys", {});
    const patched = await admin(t.base, "PATCH", `/skeid/keys/${made.json.id}`, {
      budget: { tokens: -5 },
    });
    assertEquals(patched.status, 400);
    assertStringIncludes(patched.text, "budget.tokens");
    assertEquals((await admin(t.base, "GET", "/skeid/keys/ik_0123456789abcdef")).status, 404);
  });
});

Deno.test("issued keys: policy, budget and a patch apply from the next request", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", { policy: { models: ["other"] } });
    const key = String(made.json.key);
    assertEquals((await ask(t, key)).status, 403, "inline models: m1 not permitted");
    const opened = await admin(t.base, "PATCH", `/skeid/keys/${made.json.id}`, {
      policy: "tiny",
    });
    assertEquals(opened.status, 200, opened.text);
    const res = await ask(t, key, { max_tokens: 2 });
    assertEquals(res.status, 200, `on tiny: m1 is permitted (${res.text})`);
    // tiny's budget is 5 tokens: what was spent plus the next reservation does not fit.
    const over = await ask(t, key, { max_tokens: 50 });
    assertEquals(over.status, 403, over.text);
    assertStringIncludes(over.text, "budget");
  });
});

Deno.test("issued keys: GET /skeid/keys lists config and issued keys in one paged order", async () => {
  const ALICE = "k_" + "a".repeat(40);
  await withGateway(async (t) => {
    const ids: string[] = [];
    for (const name of ["one", "two", "three"]) {
      const made = await admin(t.base, "POST", "/skeid/keys", { name, policy: "std" });
      ids.push(String(made.json.id));
    }
    const seen: Record<string, unknown>[] = [];
    let after: string | null = "";
    for (let page = 0; page < 5 && after !== null; page++) {
      const q: string = after === "" ? "" : `&after=${after}`;
      const res = await admin(t.base, "GET", `/skeid/keys?limit=2${q}`);
      assertEquals(res.status, 200, res.text);
      seen.push(...res.json.keys as Record<string, unknown>[]);
      after = res.json.next_after as string | null;
    }
    assertEquals(
      seen.map((k) => k.id),
      [...ids.sort(), ALICE],
      "every key once, in id order",
    );
    assertEquals(seen.at(-1)?.kind, "config");
    assertEquals(seen.at(-1)?.name, "alice");
    const byName = await admin(t.base, "GET", "/skeid/keys?name=two");
    assertEquals((byName.json.keys as Record<string, unknown>[]).map((k) => k.name), ["two"]);
    const byKind = await admin(t.base, "GET", "/skeid/keys?kind=config");
    assertEquals((byKind.json.keys as Record<string, unknown>[]).map((k) => k.id), [ALICE]);
    assertEquals((await admin(t.base, "GET", "/skeid/keys?state=gone")).status, 400);
  }, { config: { names: { alice: ALICE }, keys: { alice: "std" } } });
});

Deno.test("issued keys: a jsonlog store refuses them, naming the stores to use", async () => {
  await withGateway(async (t) => {
    const res = await admin(t.base, "POST", "/skeid/keys", {});
    assertEquals(res.status, 503);
    assertStringIncludes(res.text, "sqlite or postgresql");
    const key = "sk-skeid-ik_0123456789abcdef-" + "0".repeat(48);
    assertEquals((await ask(t, key)).status, 401, "an issued-shape key is never opaque");
  }, { store: (dir) => ({ backend: "jsonlog", path: `${dir}/events.jsonl` }) });
});

Deno.test("issued keys: without the pepper no key is made, naming the variable", async () => {
  await withGateway(async (t) => {
    const res = await admin(t.base, "POST", "/skeid/keys", {});
    assertEquals(res.status, 503);
    assertStringIncludes(res.text, "MY_PEPPER");
  }, { env: {}, config: { api_keys: { pepper_env: "MY_PEPPER" } } });
});

Deno.test("issued keys: GET /skeid/keys/{id} shows the key's limits and budget at once", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {
      policy: "tiny",
      limits: { rpm: 7 },
    });
    const got = await admin(t.base, "GET", `/skeid/keys/${made.json.id}`);
    assertEquals((got.json.limits as Record<string, unknown>).rpm, 7, got.text);
    assertEquals((got.json.budget as { cap: { tokens: number } }).cap.tokens, 5);
    await admin(t.base, "PATCH", `/skeid/keys/${made.json.id}`, { limits: { rpm: 9 } });
    const patched = await admin(t.base, "GET", `/skeid/keys/${made.json.id}`);
    assertEquals((patched.json.limits as Record<string, unknown>).rpm, 9, patched.text);
  });
});

Deno.test("issued keys: two gateways on one SQLite file: a revocation holds on both within the refresh", async () => {
  const tmp = await tempDir();
  const fake = startFakeModel({});
  const cfg = {
    admin_api_key: "adm",
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    routing: { budget_refresh_ms: 100 },
    usage_store: { backend: "sqlite", path: `${tmp.dir}/usage.db` },
  };
  const a = await startGateway(cfg, { env: PEPPER });
  const b = await startGateway(cfg, { env: PEPPER });
  try {
    const made = await admin(a.base, "POST", "/skeid/keys", {});
    const key = String(made.json.key);
    assertEquals((await ask(b, key)).status, 200, "b reads a's key from the file");
    assertEquals((await admin(a.base, "DELETE", `/skeid/keys/${made.json.id}`)).status, 200);
    await until(async () => (await ask(b, key)).status === 401, "b refuses it", 1000);
    assertEquals((await ask(b, key)).status, 401, "and keeps refusing it");
  } finally {
    await a.stop();
    await b.stop();
    await fake.close();
    await tmp.cleanup();
  }
});

Deno.test("issued keys: a request in flight when its key is revoked finishes and is billed", async () => {
  await withGateway(async (t) => {
    const made = await admin(t.base, "POST", "/skeid/keys", {});
    const key = String(made.json.key);
    const inflight = ask(t, key);
    const inflightNow = async () =>
      ((await admin(t.base, "GET", "/skeid/metrics/nodes")).json.metrics as { inflight: number }[])[
        0
      ]
        .inflight;
    await until(async () => await inflightNow() === 1, "the request is in flight");
    assertEquals((await admin(t.base, "DELETE", `/skeid/keys/${made.json.id}`)).status, 200);
    assertEquals((await inflight).status, 200, "it finishes");
    assertEquals((await ask(t, key)).status, 401, "the next one is refused");
    await t.group.flushUsage();
    assertEquals(t.sink.events.map((e) => e.api_key_id), [made.json.id], "and it is billed");
  }, { ttftMs: 300 });
});
