/**
 * `deno task bench:ui`: the console on a large ledger. Writes N usage events (default 1,000,000)
 * into a SQLite ledger through the store's own batch write (events and their hourly roll-ups in
 * one transaction per batch), serves it with `skeid serve`'s code, then measures in Chromium:
 * the Usage page's first 30-day chart from navigation to drawn, the Requests page's first
 * screen, and each admin API call behind them (p50/p95 over repeated calls). Figures to
 * docs/bench/ui.md (or --out).
 *
 *   deno task bench:ui [--events N] [--runs N] [--out FILE] [--browser chromium|firefox]
 *                      [--ledger FILE]
 *
 * `--ledger FILE` keeps the SQLite ledger there and reuses it when it exists (no write is timed
 * then): a page change can be measured again without a minute of writing first.
 *
 * Bounded: at most --events events, --runs page loads and 40 calls per route, each wait ≤ 30 s.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DatabaseSync } from "node:sqlite";
import { stringify } from "yaml";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { createUsageStore } from "../../src/usage/open.ts";
import { freshPgDatabase } from "../../tests/_helpers/pg.ts";
import { buildUsageEvent } from "../../src/usage/event.ts";
import type { UsageEvent } from "../../src/usage/types.ts";
import { startServer } from "../../src/server.ts";
import { memoryLogger } from "../../src/log.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { BROWSER_INFO, type BrowserName, launchBrowser } from "../../tests/console/browser.ts";
import { percentile } from "./stats.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    events: { type: "string", default: "1000000" },
    runs: { type: "string", default: "20" },
    out: { type: "string" },
    store: { type: "string", default: "sqlite" },
    browser: { type: "string", default: "chromium" },
    ledger: { type: "string" },
  },
});
const EVENTS = Math.max(1, Number(values.events));
const RUNS = Math.max(1, Number(values.runs));
const CALLS = 40;
const STORE = values.store === "postgresql" ? "postgresql" : "sqlite";
const BROWSER: BrowserName = values.browser === "firefox" ? "firefox" : "chromium";
const OUT = values.out ?? (STORE === "sqlite" ? "docs/bench/ui.md" : "docs/bench/ui-postgresql.md");
const ADMIN_KEY = "bench-ui-admin-key-0123456789abcdef";
const DAY = 86_400_000;

const KEYS = Array.from({ length: 40 }, (_, i) => `k_${String(i).padStart(40, "0")}`);
const ALIASES = ["chat", "code", "fast", "batch"];
const MODELS = ["llama-3.1-70b", "llama-3.1-8b", "qwen2.5-32b", "mistral-small", "gpt-4o-mini"];
const NODES = Array.from({ length: 8 }, (_, i) => `gpu-${i + 1}`);

/** Deterministic pseudo-random numbers (the same ledger each run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The i-th synthetic event: spread over the last 30 days, newest last. */
function syntheticEvent(i: number, r: () => number, now: number): UsageEvent {
  const at = now - 30 * DAY + Math.floor((i / EVENTS) * 30 * DAY);
  const ok = r() > 0.03;
  // A fleet's shape: a few keys send most requests (skewed), each key mostly uses one alias.
  const k = Math.floor(KEYS.length * r() ** 3);
  const a = r() < 0.9 ? k % ALIASES.length : Math.floor(r() * ALIASES.length);
  const alias = ALIASES[a];
  const model = MODELS[(a + Math.floor(r() * 2)) % MODELS.length];
  const input = 50 + Math.floor(r() * 2000);
  const output = ok ? 10 + Math.floor(r() * 600) : 0;
  const e = buildUsageEvent({
    request_id: `req_bench_${i}`,
    api_format: "openai",
    endpoint: "/v1/chat/completions",
    api_key_id: KEYS[k],
    provider: "skeid",
    engine: "vllm",
    // An alias serves one of two models, each model sits on its own nodes: a fleet's shape.
    requested_model: alias,
    model,
    node_id: NODES[(MODELS.indexOf(model) * 2 + Math.floor(r() * 2)) % NODES.length],
    route_url: "http://127.0.0.1:1/v1",
    status_code: ok ? 200 : 503,
    error_type: ok ? "" : "upstream_error",
    duration_ms: 100 + Math.floor(r() * 3000),
    metrics: {
      usage: {
        prompt_tokens: input,
        completion_tokens: output,
        prompt_tokens_details: { cached_tokens: Math.floor(input * r() * 0.5) },
      },
    },
  }, () => at);
  e.cost_total_usd = (input * 0.5 + output * 1.5) / 1e6;
  return e;
}

/** The nearest-rank quantile `q` (0–1) of `xs`: p95 of 20 loads is the 19th, not the slowest. */
function quantile(xs: number[], q: number): number {
  return percentile([...xs].sort((a, b) => a - b), q * 100);
}

function fmt(n: number): string {
  return n.toFixed(n < 10 ? 1 : 0);
}

const dir = await Deno.makeTempDir({ prefix: "skeid-bench-ui-" });
const dbPath = values.ledger ?? `${dir}/usage.sqlite`;
/** A kept ledger that is there already: read, not written. */
const reused = STORE === "sqlite" && values.ledger !== undefined &&
  await Deno.stat(dbPath).then(() => true, () => false);
const lines: string[] = [];
const log = (s: string) => {
  console.log(s);
  lines.push(s);
};

// ---- 1. the ledger ------------------------------------------------------------------------
// PostgreSQL: a fresh database on the test server (scripts/pg-ensure), dropped at the end.
const pg = STORE === "postgresql" ? await freshPgDatabase() : undefined;
const storeConfig: Record<string, unknown> = pg
  ? { backend: "postgresql", dsn: pg.dsn }
  : { backend: "sqlite", path: dbPath };
const store = createUsageStore(
  normalizeUsageStoreConfig({ ...storeConfig, flush_interval_ms: 0 }, { env: () => undefined }),
);
await store.prepare();
// A fresh ledger has nothing to build; waited for all the same, so every batch counts in them.
if ("rollupsBuilt" in store && typeof store.rollupsBuilt === "function") await store.rollupsBuilt();
const now = Date.now();
const r = rng(23);
const t0 = performance.now();
const BATCH = 10_000;
for (let i = 0; i < (reused ? 0 : EVENTS); i += BATCH) {
  const batch: UsageEvent[] = [];
  for (let j = i; j < Math.min(EVENTS, i + BATCH); j++) batch.push(syntheticEvent(j, r, now));
  await store.write(batch);
}
const writeS = (performance.now() - t0) / 1000;
await store.close();
const dbBytes = pg ? 0 : (await Deno.stat(dbPath)).size;
const rollupRows = pg ? -1 : (() => {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    return Number((db.prepare("SELECT count(*) AS n FROM usage_rollups").get() as { n: number }).n);
  } finally {
    db.close();
  }
})();

// ---- 2. the gateway -----------------------------------------------------------------------
const fake = startFakeModel();
const configPath = `${dir}/skeid.yaml`;
await Deno.writeTextFile(
  configPath,
  stringify({
    admin_api_key: ADMIN_KEY,
    nodes: NODES.map((id) => ({ id, url: fake.url, model: MODELS[0] })),
    usage_store: storeConfig,
  }),
);
const server = await startServer({
  hostname: "127.0.0.1",
  port: 0,
  configPath,
  env: () => undefined,
  logger: memoryLogger("warn"),
  spillPath: `${dir}/spill.jsonl`,
});
const base = `http://127.0.0.1:${server.addr.port}`;
const auth = { authorization: `Bearer ${ADMIN_KEY}` };

// ---- 3. the admin calls behind the pages ----------------------------------------------------
const hourStart = Math.floor(Date.now() / 3_600_000) * 3_600_000;
const to = new Date(hourStart + 3_600_000).toISOString();
const from30 = new Date(Math.floor(Date.now() / DAY) * DAY - 29 * DAY).toISOString();
const from24 = new Date(hourStart - 23 * 3_600_000).toISOString();
const routes: [string, string][] = [
  [
    "series 30 days by served model",
    `/skeid/usage/series?from=${from30}&to=${to}&by=model&step=day`,
  ],
  ["series 30 days by key", `/skeid/usage/series?from=${from30}&to=${to}&by=key&step=day`],
  ["series 30 days by node", `/skeid/usage/series?from=${from30}&to=${to}&by=node&step=day`],
  ["series 24 hours by alias", `/skeid/usage/series?from=${from24}&to=${to}&by=alias&step=hour`],
  ["events, first 50", `/skeid/usage/events?limit=50`],
  ["events, first 50 of one node", `/skeid/usage/events?limit=50&node=gpu-3`],
  ["events, first 50 of errors", `/skeid/usage/events?limit=50&status=503`],
  ["session check", `/skeid/session`],
];
const apiRows: string[] = [];
for (const [name, path] of routes) {
  const times: number[] = [];
  let status = 0;
  for (let i = 0; i < CALLS + 3; i++) {
    const s = performance.now();
    const res = await fetch(`${base}${path}`, { headers: auth });
    await res.arrayBuffer();
    status = res.status;
    if (i >= 3) times.push(performance.now() - s);
  }
  apiRows.push(
    `| ${name} | \`${path.replace(/from=[^&]+&to=[^&]+/, "from=…&to=…")}\` | ${status} | ${
      fmt(quantile(times, 0.5))
    } | ${fmt(quantile(times, 0.95))} |`,
  );
}

// ---- 4. the pages in the browser -----------------------------------------------------------
const tb = await launchBrowser(BROWSER);
const pageRows: string[] = [];
/** One load's times, ms from its navigation's start (Navigation Timing's time origin). */
interface LoadTimes {
  /** The page's HTML in (the navigation entry's responseEnd), its first answers in it. */
  html: number;
  /** Requests the page made before its drawn mark (none: its first answers are in the HTML). */
  asked: number;
  /** The page's `skeid:<page>-drawn` mark: its rows or charts are in the document. */
  drawn: number;
  /** `skeid:<page>-painted`: the frame that shows them was laid out and painted. */
  painted: number;
  /** Drawn on the bench's own clock: from just before its `goto` call (tool overhead in). */
  fromGoto: number;
}
try {
  const page = await tb.browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${base}/skeid/ui`, { waitUntil: "load" });
  await page.waitForSelector("#admin-key", { timeout: 30_000 });
  await page.type("#admin-key", ADMIN_KEY);
  await page.click("form.signin button[type=submit]");
  await page.waitForSelector("#top:not([hidden])", { timeout: 30_000 });
  const measure = async (hash: string, name: string): Promise<LoadTimes[]> => {
    const loads: LoadTimes[] = [];
    for (let i = 0; i < RUNS + 1; i++) {
      // Each load starts afresh, as a new tab would: a new document, the files from the cache.
      await page.goto("about:blank");
      const before = performance.timeOrigin + performance.now();
      await page.goto(`${base}/skeid/ui${hash}`, { waitUntil: "domcontentloaded" });
      await page.waitForFunction(
        `performance.getEntriesByName("skeid:${name}-painted").length > 0`,
        { timeout: 30_000, polling: 20 },
      );
      const t = await page.evaluate(
        `(() => { const mark = (m) => performance.getEntriesByName(m)[0]?.startTime ?? -1;` +
          `const drawn = mark("skeid:${name}-drawn");` +
          `return { origin: performance.timeOrigin,` +
          `html: performance.getEntriesByType("navigation")[0]?.responseEnd ?? -1,` +
          `asked: performance.getEntriesByType("resource").filter((e) => e.startTime < drawn)` +
          `.length, drawn, painted: mark("skeid:${name}-painted") }; })()`,
      ) as Omit<LoadTimes, "fromGoto"> & { origin: number };
      // The first load warms the browser's cache.
      if (i > 0) loads.push({ ...t, fromGoto: t.origin + t.drawn - before });
    }
    return loads;
  };
  const usage = await measure("/usage?range=30d", "usage");
  const events = await fetch(`${base}/skeid/usage/events?limit=1`, { headers: auth });
  await events.body?.cancel();
  const requests = events.ok ? await measure("/requests", "requests") : null;
  const row = (label: string, loads: LoadTimes[], goal: number) => {
    const q = (k: keyof LoadTimes, p: number) => fmt(quantile(loads.map((l) => l[k]), p));
    const p95 = quantile(loads.map((l) => l.drawn), 0.95);
    return `| ${label} | ${q("html", 0.5)} | ${Math.max(...loads.map((l) => l.asked))} | ${
      q("drawn", 0.5)
    } | ${q("drawn", 0.95)} | ${q("drawn", 1)} | ${q("painted", 0.5)} | ${q("painted", 0.95)} | ${
      q("fromGoto", 0.5)
    } | ≤ ${goal} | ${p95 <= goal ? "met" : "missed"} |`;
  };
  pageRows.push(row("Usage, 30 days, first chart drawn", usage, 300));
  pageRows.push(
    requests
      ? row("Requests, first screen", requests, 200)
      : `| Requests, first screen | not measured: /skeid/usage/events answered ${events.status} | | | | | | | | ≤ 200 | |`,
  );
} finally {
  await tb.close();
  await server.stop(2000);
  await fake.close();
  // A --ledger file lives outside this folder: kept for the next run.
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await pg?.drop();
}

// ---- 5. the report --------------------------------------------------------------------------
log("# Console on a large ledger (`deno task bench:ui`)");
log("");
log(
  `Run ${new Date().toISOString().slice(0, 16)}Z on ${navigator.hardwareConcurrency} cores ` +
    `(Deno ${Deno.version.deno}, ${STORE === "sqlite" ? "SQLite" : "PostgreSQL"} ledger, ${
      EVENTS.toLocaleString("en-US")
    } events over ` +
    `30 days: ${KEYS.length} keys, ${ALIASES.length} aliases, ${MODELS.length} served models, ` +
    `${NODES.length} nodes).`,
);
log("");
log(
  reused
    ? `Ledger reused from an earlier run (--ledger): ${
      ((await Deno.stat(dbPath)).size / 1e6).toFixed(0)
    } MB, ${rollupRows.toLocaleString("en-US")} hourly roll-up rows.`
    : `Ledger written through the store's batch write (events and roll-ups in one transaction per ` +
      `${BATCH.toLocaleString("en-US")} events): ${writeS.toFixed(1)} s, ` +
      `${Math.round(EVENTS / writeS).toLocaleString("en-US")} events/s, ` +
      (pg
        ? "the same shape as the SQLite run."
        : `${(dbBytes / 1e6).toFixed(0)} MB; ${rollupRows.toLocaleString("en-US")} hourly ` +
          "roll-up rows (one per hour, key, alias, served model and node that had events)."),
);
log("");
log(
  `## Pages in ${BROWSER_INFO[BROWSER].label} (ms from the navigation's start, ${RUNS} loads ` +
    "after one warm-up)",
);
log("");
log(
  "| page | HTML in, p50 | requests before drawn, most | drawn, p50 | drawn, p95 | drawn, slowest | " +
    "painted, p50 | painted, p95 | drawn from the bench's goto, p50 | goal (drawn, p95) | |",
);
log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
for (const row of pageRows) log(row);
log("");
log(`## Admin API calls behind them (ms, ${CALLS} calls each after 3 warm-up)`);
log("");
log("| call | path | status | p50 | p95 |");
log("|---|---|---:|---:|---:|");
for (const row of apiRows) log(row);
log("");
await Deno.writeTextFile(OUT, lines.join("\n"));
console.log(`wrote ${OUT}`);
