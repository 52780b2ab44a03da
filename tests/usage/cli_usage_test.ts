import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_assert.ts";
import { run, table } from "../../src/cli/usage.ts";
import { runCli } from "../_helpers/cli.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { createUsageStore } from "../../src/usage/open.ts";
import { event } from "./helpers.ts";
import { exists, tempDir } from "../_helpers/temp.ts";

const env = { env: () => undefined };
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "53995c3f42cd8ad8";

/** Runs `skeid usage` in-process; answers the exit code and what it printed. */
async function usage(args: string[], vars: Record<string, string> = {}) {
  const { code, out, err } = await runCli(run, args, vars);
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/**
 * A store at `raw` holding three events (two keys, two models); key b is `bId` (default `k_b`; a
 * config's `names:` wants a full id).
 */
async function seed(raw: Record<string, unknown>, bId = "k_b"): Promise<void> {
  const store = createUsageStore(normalizeUsageStoreConfig(raw, env));
  await store.prepare();
  await store.write([
    event({
      api_key_id: "k_a",
      model: "m1",
      input_tokens: 100,
      output_tokens: 10,
      cost_total_usd: 0.001,
      created_at: "2026-08-31T12:00:00Z",
    }),
    event({
      api_key_id: bId,
      model: "m2",
      input_tokens: 200,
      output_tokens: 20,
      cost_total_usd: 0.002,
      created_at: "2026-09-01T12:00:00Z",
    }),
    event({
      api_key_id: bId,
      model: "m1",
      input_tokens: 300,
      output_tokens: 30,
      cost_total_usd: 0.003,
      created_at: "2026-09-02T12:00:00Z",
      usage_source: "estimated",
      trace_id: TRACE_ID,
      span_id: SPAN_ID,
    }),
  ]);
  await store.close();
}

Deno.test("skeid usage --db --json: the report of a SQLite store", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await seed({ path: `${dir}/u.sqlite` });
    const r = await usage(["--db", `${dir}/u.sqlite`, "--json"]);
    assertEquals([r.code, r.err], [0, ""]);
    const report = JSON.parse(r.out);
    assertEquals(report.backend, "sqlite");
    assertEquals(report.totals.requests, 3);
    assertEquals(report.totals.input_tokens, 600);
    assertEquals(report.by_key[0], {
      api_key_id: "k_b",
      requests: 2,
      total_tokens: 550,
      total_cost_usd: 0.005,
    });
    assertEquals(
      report.recent.map((e: Record<string, unknown>) => [e.trace_id, e.span_id]),
      [[TRACE_ID, SPAN_ID], ["", ""], ["", ""]],
      "each listed event says its trace and request span",
    );
    const filtered = JSON.parse(
      (await usage([
        "--db",
        `${dir}/u.sqlite`,
        "--json",
        "--since",
        "2026-09-01",
        "--model",
        "m1",
        "--limit",
        "1",
      ])).out,
    );
    assertEquals([filtered.totals.requests, filtered.recent.length], [1, 1]);
    const byKey = JSON.parse(
      (await usage(["--db", `${dir}/u.sqlite`, "--json", "--api-key-id", "k_a"])).out,
    );
    assertEquals(byKey.totals.requests, 1);
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage --since: a time in any spelling counts the same events; a word is refused", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await seed({ backend: "jsonlog", path: `${dir}/u.jsonl`, mode: "file" });
    const count = async (since: string) => {
      const r = await usage([
        "--db",
        `${dir}/u.jsonl`,
        "--backend",
        "jsonlog",
        "--json",
        "--since",
        since,
      ]);
      assertEquals([r.code, r.err], [0, ""], since);
      const report = JSON.parse(r.out);
      return [report.since, report.totals.requests];
    };
    // 12:00 on Sep 1 is the second event: a space instead of `T` once counted it out (" " < "T").
    assertEquals(await count("2026-09-01T12:00:00Z"), ["2026-09-01T12:00:00Z", 2]);
    assertEquals(await count("2026-09-01 12:00"), ["2026-09-01T12:00:00Z", 2]);
    assertEquals(await count("2026-09-01T14:00:00+02:00"), ["2026-09-01T12:00:00Z", 2]);
    assertEquals(await count("2026-09-01 12:00:01"), ["2026-09-01T12:00:01Z", 1]);
    for (const bad of ["yesterday", "zzz", "2026-02-30"]) {
      const r = await usage(["--db", `${dir}/u.jsonl`, "--backend", "jsonlog", "--since", bad]);
      assertEquals(r.code, 1, bad);
      assertStringIncludes(r.err, `skeid usage: --since: '${bad}' is not a time`);
      assertEquals(r.out, "", "no report for a since that names no time");
    }
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage: readable tables (totals, by key, by model, recent)", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await seed({ path: `${dir}/u.sqlite` });
    const r = await usage(["--db", `${dir}/u.sqlite`]);
    assertEquals(r.code, 0);
    assertStringIncludes(r.out, `usage (all time) — sqlite ${dir}/u.sqlite`);
    assertMatch(r.out, /\n {2}requests +3\n/);
    assertMatch(
      r.out,
      /by customer key id\n {2}API KEY ID +REQUESTS +TOKENS +COST USD\n {2}k_b +2 +550 +0\.005\n/,
    );
    assertMatch(r.out, /by model\n {2}MODEL/);
    assertMatch(
      r.out,
      /recent \(newest first, 3\)\n {2}CREATED AT .* USAGE\n {2}2026-09-02T12:00:00Z +k_b +m1 .* estimated\n/,
    );
    // ADR 0027: the estimated part apart.
    assertMatch(r.out, /\n {2}estimated requests +1\n {2}estimated tokens +330\n/);
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage --config: usage_store from YAML (jsonlog), usage_db_path, env", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await seed({ backend: "jsonlog", path: `${dir}/events/` });
    await Deno.writeTextFile(
      `${dir}/a.yaml`,
      `nodes: []\nusage_store:\n  backend: jsonlog\n  path: ${dir}/events/\n`,
    );
    const a = await usage(["--config", `${dir}/a.yaml`, "--json"]);
    assertEquals(a.code, 0, a.err);
    assertEquals(JSON.parse(a.out).backend, "jsonlog");
    assertEquals(JSON.parse(a.out).totals.requests, 3);
    assertEquals(JSON.parse(a.out).recent[0].trace_id, TRACE_ID, "the jsonlog record keeps it");

    await seed({ path: `${dir}/old.sqlite` });
    await Deno.writeTextFile(`${dir}/b.yaml`, `usage_db_path: ${dir}/old.sqlite\n`);
    const b = await usage(["--config", `${dir}/b.yaml`, "--json"]);
    assertEquals([b.code, JSON.parse(b.out).db_path], [0, `${dir}/old.sqlite`]);

    await Deno.writeTextFile(`${dir}/c.yaml`, `nodes: []\n`);
    const c = await usage(["--config", `${dir}/c.yaml`, "--json"], {
      SKEID_USAGE_DB: `${dir}/old.sqlite`,
    });
    assertEquals([c.code, JSON.parse(c.out).totals.requests], [0, 3]);
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage: clear errors, exit 1, nothing created", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const missing = await usage(["--db", `${dir}/none.sqlite`]);
    assertEquals(missing.code, 1);
    assertMatch(missing.err, /^skeid usage: usage_store sqlite .*none\.sqlite: /);
    assertEquals(await exists(`${dir}/none.sqlite`), false, "no database created");

    const flag = await usage(["--nope"]);
    assertEquals(flag.code, 1);
    assertStringIncludes(flag.err, "--nope");
    assertEquals((await usage(["--db", "x", "--limit", "ten"])).code, 1);

    await Deno.writeTextFile(`${dir}/bad.yaml`, "usage_store: [1, 2\n");
    const yaml = await usage(["--config", `${dir}/bad.yaml`]);
    assertEquals(yaml.code, 1);
    assertStringIncludes(yaml.err, "bad.yaml");

    await Deno.writeTextFile(`${dir}/u.yaml`, "usage_store:\n  backend: mongo\n");
    const backend = await usage(["--config", `${dir}/u.yaml`]);
    assertStringIncludes(backend.err, "usage_store.backend: unknown backend 'mongo'");

    const noStore = await usage(["--config", `${dir}/empty.yaml`]);
    assertEquals(noStore.code, 1);
    assertStringIncludes(noStore.err, "cannot read config");
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage --schema prints the shipped schema; --help", async () => {
  const s = await usage(["--schema", "sqlite"]);
  assertEquals(s.code, 0);
  assertStringIncludes(s.out, "CREATE TABLE IF NOT EXISTS usage_events");
  assertStringIncludes((await usage(["--schema", "postgresql"])).out, "BIGSERIAL PRIMARY KEY");
  const h = await usage(["--help"]);
  assertEquals(h.code, 0);
  assertStringIncludes(h.out, "--api-key-id");
});

Deno.test("table: numbers right-aligned, text left-aligned", () => {
  assertEquals(table(["NAME", "N"], [["a", 1], ["bbb", 100]]), "NAME    N\na       1\nbbb   100");
});

Deno.test("table: costs in plain decimals, without rounding noise or exponents", () => {
  // 52 input and 4 output tokens at 1 and 2 USD per million: what the ledger sums to.
  const cost = 52 * 1e-6 + 4 * 2e-6;
  assertEquals(cost === 0.00006, false);
  assertEquals(
    table(["COST USD"], [[cost], [1e-7], [0.1 + 0.2], [12.5], [0]]),
    " COST USD\n  0.00006\n0.0000001\n      0.3\n     12.5\n        0",
  );
});

Deno.test("skeid usage through the real entry point (subprocess)", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await seed({ path: `${dir}/u.sqlite` });
    const root = new URL("../../", import.meta.url).pathname;
    const cmd = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--allow-read",
        "--allow-write",
        "--allow-env",
        "src/main.ts",
        "usage",
        "--db",
        `${dir}/u.sqlite`,
        "--json",
      ],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    });
    const res = await cmd.output();
    const stderr = new TextDecoder().decode(res.stderr);
    assertEquals(res.code, 0, stderr);
    assertEquals(JSON.parse(new TextDecoder().decode(res.stdout)).totals.requests, 3);
    const bad = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--allow-read",
        "--allow-env",
        "src/main.ts",
        "usage",
        "--db",
        `${dir}/no.sqlite`,
      ],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(bad.code, 1);
    assert(new TextDecoder().decode(bad.stderr).includes("no.sqlite"));
  } finally {
    await cleanup();
  }
});

Deno.test("skeid usage --api-key-id: the key's budget lines from the config and the store", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const bob = "k_" + "b".repeat(40);
    await seed({ path: `${dir}/u.sqlite` }, bob);
    const cfg = `${dir}/skeid.yaml`;
    await Deno.writeTextFile(
      cfg,
      `usage_store: { backend: sqlite, path: ${dir}/u.sqlite }\n` +
        "policies:\n  std:\n    budget: { usd: 1, tokens: 1000, period: total }\n" +
        `names: { bob: ${bob} }\nkeys:\n  bob: std\n`,
    );
    const text = await usage(["--config", cfg, "--api-key-id", bob]);
    assertEquals([text.code, text.err], [0, ""]);
    assertStringIncludes(text.out, "\nbudget\n");
    assertMatch(text.out, /period\s+total from 1970-01-01T00:00:00Z, resets never/);
    assertMatch(text.out, /spent USD\s+0\.005\n/);
    assertMatch(text.out, /remaining USD\s+0\.995\n/);
    assertMatch(text.out, /spent tokens\s+550\n/);
    assertMatch(text.out, /remaining tokens\s+450$/);
    const json = await usage(["--config", cfg, "--api-key-id", "bob", "--json"]);
    assertEquals(json.code, 0);
    const budget = JSON.parse(json.out).budget;
    assertEquals(budget.spent.tokens, 550, "a names: name finds the key's budget too");
    assertEquals(budget.cap, { usd: 1, tokens: 1000 });
    assertEquals(
      JSON.parse(json.out).totals.requests,
      2,
      "a names: name filters the report by the customer key id it names",
    );
    const other = await usage(["--config", cfg, "--api-key-id", "k_a", "--json"]);
    assertEquals(JSON.parse(other.out).budget, undefined, "a key without a budget has no lines");
  } finally {
    await cleanup();
  }
});
