import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import {
  AppendTarget,
  jsonlogRecordId,
  JsonlogStore,
  REOPEN_CHECK_MS,
} from "../../src/usage/jsonlog.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import { memoryLogger } from "../../src/log.ts";
import { assertUsageSourceApart, event } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

const env = { env: () => undefined };

function twoEvents() {
  return [
    event({
      api_key_id: "k_a",
      model: "m1",
      input_tokens: 100,
      output_tokens: 25,
      cost_total_usd: 0.0001,
      created_at: "2026-09-01T10:00:00Z",
    }),
    event({
      api_key_id: "k_b",
      model: "m2",
      input_tokens: 200,
      output_tokens: 50,
      cost_total_usd: 0.0003,
      created_at: "2026-09-01T10:00:01Z",
    }),
  ];
}

async function jsonFiles(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".json")) names.push(e.name);
  return names.sort();
}

Deno.test("jsonlog dir mode: one file per event; totals, keys, models and filters", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(
      normalizeUsageStoreConfig({ backend: "jsonlog", path: `${dir}/events/` }, env),
    );
    for (const e of twoEvents()) ledger.record(e);
    assertEquals((await ledger.flush()).ok, true);
    const files = await jsonFiles(`${dir}/events`);
    assertEquals(files.length, 2);
    assertMatch(files[0], /^20260901-100000-[0-9a-f-]{36}\.json$/);

    const r = await ledger.report({});
    assertEquals([r.ok, r.enabled, r.backend], [true, true, "jsonlog"]);
    assertEquals(r.totals?.requests, 2);
    assertEquals([r.totals?.input_tokens, r.totals?.output_tokens], [300, 75]);
    assertEquals(r.by_key?.map((g) => g.api_key_id), ["k_b", "k_a"], "by cost, descending");
    assertEquals(r.by_model?.length, 2);
    assertEquals(r.recent?.[0].model, "m2", "newest first");
    assertEquals(r.recent?.[0].ok, true);
    assertEquals(typeof r.recent?.[0].id, "string");

    const byModel = await ledger.report({ model: "m1" });
    assertEquals([byModel.totals?.requests, byModel.totals?.input_tokens], [1, 100]);
    const byKey = await ledger.report({ api_key_id: "k_b" });
    assertEquals([byKey.totals?.requests, byKey.totals?.output_tokens], [1, 50]);
    const since = await ledger.report({ since: "2026-09-01T10:00:01Z" });
    assertEquals(since.totals?.requests, 1);
    assertEquals(since.since, "2026-09-01T10:00:01Z");
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("jsonlog file mode: JSON lines, limit 1 → one recent row, totals 2", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(
      normalizeUsageStoreConfig(
        { backend: "jsonlog", path: `${dir}/usage.jsonl`, mode: "file", fsync: true },
        env,
      ),
    );
    for (const e of twoEvents()) ledger.record(e);
    await ledger.flush();
    const lines = (await Deno.readTextFile(`${dir}/usage.jsonl`)).trim().split("\n");
    assertEquals(lines.length, 2);
    assertEquals(JSON.parse(lines[0]).model, "m1");
    const r = await ledger.report({ limit: 1 });
    assertEquals(r.recent?.length, 1);
    assertEquals(r.totals?.requests, 2);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("jsonlog: a replayed event is stored once (dir: same file; file: first line)", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    for (const mode of ["dir", "file"] as const) {
      const cfg = normalizeUsageStoreConfig(
        { backend: "jsonlog", path: `${dir}/${mode}`, mode },
        env,
      );
      assert(cfg.backend === "jsonlog");
      const store = new JsonlogStore(cfg);
      await store.prepare();
      const batch = twoEvents();
      await store.write(batch);
      await store.write(batch);
      const r = await store.report({ limit: 20 });
      assertEquals(r.totals?.requests, 2, mode);
      await store.close();
    }
    assertEquals((await jsonFiles(`${dir}/dir`)).length, 2);
  } finally {
    await cleanup();
  }
});

Deno.test("jsonlog: reconfiguring the path moves later writes there", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(normalizeUsageStoreConfig({ log_path: `${dir}/a/` }, env));
    ledger.record(event());
    await ledger.configure(normalizeUsageStoreConfig({ log_path: `${dir}/b/` }, env));
    ledger.record(event());
    ledger.record(event());
    await ledger.flush();
    assertEquals((await jsonFiles(`${dir}/a`)).length, 1);
    assertEquals((await jsonFiles(`${dir}/b`)).length, 2);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("jsonlog: record ids sort by time and are stable per event", () => {
  const e = event({ created_at: "2026-01-02T03:04:05Z", event_id: "abc/def" });
  assertEquals(jsonlogRecordId(e), "20260102-030405-abc_def");
  assertEquals(jsonlogRecordId(e), jsonlogRecordId({ ...e }));
});

Deno.test("jsonlog: prepare fails with the path when the directory cannot be made", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await Deno.writeTextFile(`${dir}/plain`, "x");
    const cfg = normalizeUsageStoreConfig({ backend: "jsonlog", path: `${dir}/plain/sub/` }, env);
    assert(cfg.backend === "jsonlog");
    let msg = "";
    await new JsonlogStore(cfg).prepare().catch((e: Error) => msg = e.message);
    assertMatch(msg, /^usage_store jsonlog dir .*plain\/sub: /);
  } finally {
    await cleanup();
  }
});

Deno.test("jsonlog: usage_source round-trips and is shown apart; bill_estimated: false prices 0", async () => {
  for (const bill of [true, false]) {
    const { dir, cleanup } = await tempDir();
    const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
    try {
      await ledger.configure(
        normalizeUsageStoreConfig(
          { backend: "jsonlog", path: `${dir}/u.jsonl`, bill_estimated: bill },
          env,
        ),
      );
      await assertUsageSourceApart(ledger, bill);
    } finally {
      await ledger.close();
      await cleanup();
    }
  }
});

Deno.test("jsonlog: a write that failed part-way leaves one skipped line; the retry's lines are whole", async () => {
  const tmp = await tempDir();
  try {
    const path = `${tmp.dir}/usage.jsonl`;
    const target = new AppendTarget(path);
    const enc = new TextEncoder();
    const real = await target.file();
    await target.append(real, enc.encode('{"a":1}\n'));
    // A disk that takes 4 bytes of the next batch, then fails.
    let calls = 0;
    const failing = {
      write: async (b: Uint8Array) => {
        if (calls++ > 0) throw new Error("No space left on device");
        return await real.write(b.subarray(0, 4));
      },
    } as unknown as Deno.FsFile;
    await assertRejects(() => target.append(failing, enc.encode('{"b":2}\n{"c":3}\n')));
    const again = await target.file();
    await target.append(again, enc.encode('{"b":2}\n{"c":3}\n'));
    assertEquals(await Deno.readTextFile(path), '{"a":1}\n{"b"\n{"b":2}\n{"c":3}\n');
    target.close();
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("jsonlog: a rotated or deleted file is reopened at its path within the check interval", async () => {
  const tmp = await tempDir();
  try {
    const path = `${tmp.dir}/usage.jsonl`;
    let now = 1_000_000;
    const target = new AppendTarget(path, () => now);
    const enc = new TextEncoder();
    await target.append(await target.file(), enc.encode("one\n"));
    await Deno.rename(path, `${path}.1`);
    // Within the interval the open file (now `.1`) still takes the lines: none is lost.
    await target.append(await target.file(), enc.encode("two\n"));
    now += REOPEN_CHECK_MS;
    await target.append(await target.file(), enc.encode("three\n"));
    assertEquals(await Deno.readTextFile(`${path}.1`), "one\ntwo\n");
    assertEquals(await Deno.readTextFile(path), "three\n");
    await Deno.remove(path);
    now += REOPEN_CHECK_MS;
    await target.append(await target.file(), enc.encode("four\n"));
    assertEquals(await Deno.readTextFile(path), "four\n");
    target.close();
  } finally {
    await tmp.cleanup();
  }
});
