/**
 * Issued keys in a group of two workers (ADR 0029): the supervisor's directory judges every
 * issued key, so a revocation made through any worker is in force in both at the next request,
 * and an issued key's budget holds for the group. Every request comes on its own connection
 * (`connection: close`), so the kernel spreads them over both workers.
 */
import { assert, assertEquals } from "../_assert.ts";
import { tempDir } from "../_helpers/temp.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { group } from "./_group.ts";

const ADMIN = { authorization: "Bearer adm", "content-type": "application/json" };
const PEPPER: Record<string, string> = { SKEID_KEY_PEPPER: "pepper-for-tests-0123456789" };

/** `n` chat requests with `key` at once, each on its own connection; their statuses. */
function burst(base: string, key: string, n: number, extra: Record<string, unknown> = {}) {
  return Promise.all(Array.from({ length: n }, async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, connection: "close" },
      body: JSON.stringify({
        model: "m1",
        messages: [{ role: "user", content: "hello there" }],
        ...extra,
      }),
    });
    await res.body?.cancel();
    return res.status;
  }));
}

/** Requests each worker served, from `GET /skeid/workers`. */
async function served(base: string): Promise<number[]> {
  const res = await fetch(`${base}/skeid/workers`, { headers: ADMIN });
  const body = await res.json();
  return (body.workers as { requests: number }[]).map((w) => w.requests);
}

async function withGroup(fn: (base: string) => Promise<void>): Promise<void> {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0 });
  const { sup, base } = await group(
    {
      admin_api_key: "adm",
      nodes: [{ id: "n1", url: fake.url, model: "m1", max_conns: 64 }],
      pricing: { m1: { input_per_million: 1000, output_per_million: 2000 } },
      policies: { std: {} },
      usage_store: { backend: "sqlite", path: `${tmp.dir}/usage.db` },
    },
    tmp.dir,
    { env: (name) => PEPPER[name], workerEnv: PEPPER },
  );
  try {
    await fn(base);
  } finally {
    await sup.stop(2000);
    await fake.close();
    await tmp.cleanup();
  }
}

async function create(base: string, body: Record<string, unknown>) {
  const res = await fetch(`${base}/skeid/keys`, {
    method: "POST",
    headers: ADMIN,
    body: JSON.stringify(body),
  });
  assertEquals(res.status, 200);
  return await res.json() as { id: string; key: string };
}

Deno.test("workers: a revoked issued key is refused by both workers at the next request", async () => {
  await withGroup(async (base) => {
    const made = await create(base, { name: "alice", policy: "std" });
    const before = await burst(base, made.key, 16);
    assertEquals(before, Array(16).fill(200), "served by the group");
    const perWorker = await served(base);
    assert(perWorker.every((n) => n > 0), `both workers served it: ${perWorker}`);
    const revoked = await fetch(`${base}/skeid/keys/${made.id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    assertEquals(revoked.status, 200);
    await revoked.body?.cancel();
    const after = await burst(base, made.key, 16);
    assertEquals(after, Array(16).fill(401), "refused on every connection, whichever worker");
  });
});

Deno.test("workers: an issued key's budget holds for the group", async () => {
  // "hello there": 3 tokens in + max_tokens 8 out reserved → $0.019 each; 3 fit $0.06.
  await withGroup(async (base) => {
    const made = await create(base, { budget: { usd: 0.06, period: "month" } });
    const results = await burst(base, made.key, 12, { max_tokens: 8 });
    assertEquals(results.filter((s) => s === 200).length, 3, `served: ${results}`);
    assertEquals(results.filter((s) => s === 403).length, 9, "the rest refused");
  });
});
