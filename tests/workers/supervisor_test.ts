import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { tempDir } from "../_helpers/temp.ts";
import { type FakeModel, startFakeModel } from "../../src/fake/model.ts";
import { group } from "./_group.ts";
import { stringify } from "yaml";

/** A config of one fake node with max_conns 4 and events to a .jsonl file. */
function config(url: string, events: string, extra: Record<string, unknown> = {}) {
  return {
    admin_api_key: "adm",
    routing: { wait_timeout_ms: 300 },
    nodes: [{ id: "n", url, model: "m", max_conns: 4 }],
    usage_store: { backend: "jsonlog", path: events },
    ...extra,
  };
}

/** A group of two workers over one fake node, with its fake model and a temp dir, for `fn`. */
async function withGroup(
  extra: Record<string, unknown>,
  fn: (g: Awaited<ReturnType<typeof group>> & { fake: FakeModel; events: string }) => Promise<void>,
): Promise<void> {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0 });
  const events = `${tmp.dir}/events.jsonl`;
  const g = await group(config(fake.url, events, extra), tmp.dir);
  try {
    await fn({ ...g, fake, events });
  } finally {
    await g.sup.stop(2000);
    await fake.close();
    await tmp.cleanup();
  }
}

/** A chat request the fake model holds `holdMs` before answering. */
async function chat(base: string, holdMs = 0): Promise<number> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      fake_ttft_ms: holdMs,
    }),
  });
  await res.body?.cancel();
  return res.status;
}

async function eventLines(path: string): Promise<Record<string, unknown>[]> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
}

Deno.test("workers: max_conns 4 over two workers admits 4 at once and refuses the 5th, 10 times", async () => {
  await withGroup({}, async ({ sup, base, fake }) => {
    for (let round = 0; round < 10; round++) {
      const held = Array.from({ length: 4 }, () => chat(base, 1000));
      await until(
        () => fake.stats.inflight === 4,
        () => `4 at the node (round ${round}, ${fake.stats.inflight})`,
        3000,
      );
      assertEquals(await chat(base), 429, `round ${round}: the 5th waits, then 429`);
      assertEquals(fake.stats.inflight, 4, `round ${round}: never more than max_conns`);
      assertEquals(await Promise.all(held), [200, 200, 200, 200], `round ${round}: all 4 answered`);
    }
    // The kernel spreads connections over the workers by their addresses: a few pooled
    // connections may all land on one. New connections (no pool) reach both, bounded in count.
    const fresh = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
    try {
      for (let i = 0; i < 200; i++) {
        if ((await sup.workers()).every((w) => w.requests > 0)) break;
        const res = await fetch(`${base}/v1/chat/completions`, {
          client: fresh,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
        });
        await res.body?.cancel();
      }
    } finally {
      fresh.close();
    }
    const workers = await sup.workers();
    assertEquals(workers.length, 2, "two workers listed");
    assert(workers.every((w) => w.requests > 0), `both workers served: ${JSON.stringify(workers)}`);
    assertEquals(workers.map((w) => w.inflight), [0, 0], "nothing left in flight");
    assertEquals(sup.table.total(sup.table.slot("n")), 0, "no slot leaked");
  });
});

Deno.test("workers: a waiter is admitted when a slot frees in either worker", async () => {
  await withGroup({ routing: { wait_timeout_ms: 10_000 } }, async ({ base, fake }) => {
    for (let round = 0; round < 3; round++) {
      const held = Array.from({ length: 4 }, () => chat(base, 400));
      await until(() => fake.stats.inflight === 4, "4 at the node", 3000);
      const waiters = Array.from({ length: 4 }, () => chat(base));
      assertEquals(await Promise.all(waiters), [200, 200, 200, 200], "the waiters got in");
      assertEquals(await Promise.all(held), [200, 200, 200, 200], "the held answered");
    }
  });
});

Deno.test("workers: a killed worker is replaced and its slots are given back", async () => {
  await withGroup({}, async ({ sup, base, fake, logger }) => {
    const held = Array.from({ length: 4 }, () => chat(base, 3000).catch(() => 0));
    await until(() => fake.stats.inflight === 4, "4 at the node", 3000);
    const row = sup.table.slot("n");
    const victim = sup.table.held(row, 0) > 0 ? 0 : 1;
    const heldByVictim = sup.table.held(row, victim);
    sup.kill(victim);
    assertEquals(sup.table.total(row), 4 - heldByVictim, "the dead worker's slots are free");
    const died = logger.lines.find((l) => l.event === "worker_died");
    assertEquals(died?.failed_requests, heldByVictim, "its requests are counted as failed");
    await until(async () => (await sup.workers())[victim].restarts === 1, "the replacement", 5000);
    await Promise.all(held);
    await until(() => fake.stats.inflight === 0, "the node idle", 5000);
    for (let i = 0; i < 6; i++) assertEquals(await chat(base), 200, `request ${i} after`);
    assertEquals(sup.table.total(row), 0, "no slot leaked");
  });
});

Deno.test("workers: a reload reaches every worker before it counts as applied", async () => {
  await withGroup({}, async ({ sup, base, fake, configPath, events }) => {
    const cfg = config(fake.url, events);
    cfg.nodes.push({ id: "b", url: fake.url, model: "new-model", max_conns: 4 });
    const text = stringify(cfg);
    await Deno.writeTextFile(configPath, text);
    await sup.gateway.config.reload();
    await sup.configApplied();
    // New connections land on either worker: each must already serve the new config.
    await assertEveryWorkerLists(base, "new-model");
    // And the operator can tell which file text is in force (`sha256sum` of the file).
    const res = await fetch(`${base}/skeid/config`, {
      headers: { authorization: "Bearer adm", connection: "close" },
    });
    const status = await res.json();
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0"));
    assertEquals(status.ok, true);
    assertEquals(status.file_sha256, hex.join(""), "the file text in force");
    assertMatch(status.applied_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });
});

Deno.test("workers: usage events of both workers are stored once each", async () => {
  await withGroup({}, async ({ sup, base, events }) => {
    const statuses = await Promise.all(Array.from({ length: 24 }, () => chat(base, 50)));
    assert(statuses.every((s) => s === 200 || s === 429), `answers: ${statuses}`);
    const ok = statuses.filter((s) => s === 200).length;
    const workers = await sup.workers();
    assert(workers.every((w) => w.requests > 0), `both workers served: ${JSON.stringify(workers)}`);
    await sup.stop(2000);
    const lines = await eventLines(events);
    assertEquals(lines.length, ok, "one event per answered request");
    assertEquals(new Set(lines.map((l) => l.request_id)).size, ok, "each request once");
  });
});

Deno.test("workers: admin changes reach every worker; workers, node metrics and config are the group's", async () => {
  await withGroup({}, async ({ base, fake, configPath, events }) => {
    const admin = { authorization: "Bearer adm", connection: "close" };
    const added = await fetch(`${base}/skeid/nodes`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ id: "c", url: fake.url, model: "added" }),
    });
    assertEquals(added.status, 200, "node added");
    await added.body?.cancel();
    await assertEveryWorkerLists(base, "added");
    const unauth = await fetch(`${base}/skeid/workers`, { headers: { connection: "close" } });
    assertEquals(unauth.status, 401, "the worker list is admin only");
    await unauth.body?.cancel();
    for (let i = 0; i < 8; i++) assertEquals(await chat(base), 200, `request ${i}`);
    const listed = await (await fetch(`${base}/skeid/workers`, { headers: admin })).json();
    assertEquals(listed.workers.map((w: { index: number }) => w.index), [0, 1], "both listed");
    const served = listed.workers.reduce((n: number, w: { requests: number }) => n + w.requests, 0);
    assertEquals(served, 8, "requests served, all workers");
    const nodes = await (await fetch(`${base}/skeid/metrics/nodes`, { headers: admin })).json();
    const n = nodes.metrics.find((m: { node_id: string }) => m.node_id === "n");
    assertEquals([n.started, n.ok, n.inflight], [8, 8, 0], "node metrics summed over workers");
    const prom = await (await fetch(`${base}/skeid/metrics`, { headers: admin })).text();
    assertMatch(prom, /^skeid_node_requests_ok_total\{node="n"\} 8$/m, "Prometheus summed");
    const cfg = config(fake.url, events);
    cfg.nodes.push({ id: "b", url: fake.url, model: "new-model", max_conns: 4 });
    await Deno.writeTextFile(configPath, stringify(cfg));
    const reload = await fetch(`${base}/skeid/config/reload`, { method: "POST", headers: admin });
    assertEquals(reload.status, 200, "reloaded");
    await reload.body?.cancel();
    await assertEveryWorkerLists(base, "new-model");
    const status = await (await fetch(`${base}/skeid/config`, { headers: admin })).json();
    assertEquals(status.ok, true, "config status ok");
  });
});

/** `/v1/models` on 10 new connections (they land on either worker) lists `model` every time. */
async function assertEveryWorkerLists(base: string, model: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    const res = await fetch(`${base}/v1/models`, { headers: { connection: "close" } });
    const ids = ((await res.json()).data as { id: string }[]).map((m) => m.id);
    assert(ids.includes(model), `request ${i}: every worker lists ${model} (${ids})`);
  }
}

Deno.test("workers: node keys come from the supervisor's one key broker, asked once per ref", async () => {
  const tmp = await tempDir();
  const fake = startFakeModel();
  const asked: string[] = [];
  const broker = {
    keyFor(ref: string) {
      asked.push(ref);
      return Promise.resolve({ key: `key-of-${ref}` });
    },
    cached: () => undefined,
    forget() {},
    close: () => Promise.resolve(),
  };
  const nodes = [{ id: "n", url: fake.url, model: "m", api_key_ref: "kv/node-n" }];
  const { sup, base } = await group({ nodes }, tmp.dir, { keyBroker: broker });
  try {
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { connection: "close", "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
      assertEquals(res.status, 200, `request ${i}`);
      await res.body?.cancel();
    }
    const auth = fake.requests.map((r) => r.headers.authorization);
    assertEquals(auth.length, 10, "10 forwarded");
    assert(auth.every((a) => a === "Bearer key-of-kv/node-n"), `the broker's key: ${auth}`);
    const fromWorkers = asked.filter((r) => r === "kv/node-n").length;
    assert(fromWorkers <= 3, `cached per worker (asked ${fromWorkers} times, warm-up included)`);
  } finally {
    await sup.stop(2000);
    await fake.close();
    await tmp.cleanup();
  }
});

Deno.test("workers: /health answers 200 only once every worker listens", async () => {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0 });
  // A free port known before the start, so /health can be asked while the workers come up.
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  let ready = false;
  const starting = group(config(fake.url, `${tmp.dir}/events.jsonl`), tmp.dir, { port });
  // Settles in the same turn as the start's end: before any answer given after it arrives here.
  starting.then(() => ready = true, () => ready = true);
  const early: number[] = [];
  try {
    while (!ready) {
      const status = await fetch(`http://127.0.0.1:${port}/health`, {
        headers: { connection: "close" },
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      }, () => 0); // not listening yet
      if (!ready && status !== 0) early.push(status);
      if (!ready && status === 0) await new Promise((r) => setTimeout(r, 5));
    }
    const g = await starting;
    assert(early.every((s) => s === 503), `answers before every worker listened: ${early}`);
    const res = await fetch(`${g.base}/health`);
    assertEquals(res.status, 200);
    assertEquals((await res.json()).status, "ok");
  } finally {
    await (await starting).sup.stop(2000);
    await fake.close();
    await tmp.cleanup();
  }
});
