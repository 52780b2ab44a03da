/**
 * `deno task soak [--quick] [--duration-s N] [--concurrency N] [--out FILE]`
 *
 * A bounded soak of the gateway: mixed streamed and JSON traffic on the OpenAI, Anthropic and
 * Ollama faces at a fixed concurrency, about one request in ten aborted by the client after a
 * random short delay (some before the response head, some mid-stream), and one config reload per
 * second (the file rewritten by rename, a node's weight toggled). The gateway (`scripts/skeid
 * serve`, jsonlog usage store in file mode without write-behind) and the fake model it forwards
 * to run as child processes on 127.0.0.1 and are stopped by PID at the end.
 *
 * After the load it checks, and exits 1 when one fails: every request that got a response head
 * has exactly one usage event (by request id), no event id repeats and no event names a request
 * never sent; inflight is 0 on every node; the gateway's RSS is back within 20% of its value
 * after warm-up; its open file descriptors are back to the idle count after warm-up. It prints a
 * summary and writes it to `docs/bench/soak.md` (a `--quick` run to `docs/bench/soak-quick.tmp`).
 * See `docs/bench/README.md`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import {
  childEnv,
  childScope,
  countFds,
  loadAverage,
  machine,
  readRss,
  samplePeak,
  sampleRss,
  startFakeChild,
  startGatewayChild,
} from "./procs.ts";
import {
  markdownTable,
  parseEventLines,
  parseNodeInflight,
  reconcile,
  type Reconciliation,
  reconciliationProblems,
  type SentRequest,
} from "./soak_check.ts";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const SKEID = `${ROOT}/scripts/skeid`;
const MODEL = "soak-model";
const MESSAGES = [{ role: "user", content: "Write one short sentence about soaks." }];
/** The fake model's answer: 16 tokens, the first after 10 ms, then one every 10 ms. */
const FAKE_ARGS = ["--tokens", "16", "--ttft-ms", "10", "--itl-ms", "10"];
/**
 * Share of requests the client aborts, and the longest delay before it does. Half of the aborts
 * count the delay from the request's start (most land before the response head when the
 * machine is busy), half from the response head (mid-stream: a stream lasts ~170 ms).
 */
const ABORT_RATE = 0.1;
const ABORT_MAX_DELAY_MS = 250;

/** When the client aborts a request: `delayMs` after its start or after its response head. */
interface AbortPlan {
  from: "start" | "head";
  delayMs: number;
}
/** A request that takes longer than this is a failure (the fake model answers in ~0.2 s). */
const REQUEST_TIMEOUT_MS = 30_000;
/** RSS after the soak may exceed the warm value by this share. */
const RSS_TOLERANCE = 0.2;
/** Longest wait for inflight and the fd count to settle after the load. */
const SETTLE_MS = 15_000;
/**
 * Longest wait for RSS to settle: V8 gives heap pages back only when its memory reducer runs,
 * some seconds after allocation slowed (measured 10–15 s after a soak on a busy machine).
 */
const RSS_SETTLE_MS = 30_000;
const NODES = ["fake-1", "fake-2"] as const;

type FaceName = "openai" | "anthropic" | "ollama";
const FACES: FaceName[] = ["openai", "anthropic", "ollama"];

/** The route and body of a request on `face`. */
function requestOf(face: FaceName, stream: boolean): { path: string; body: string } {
  switch (face) {
    case "openai":
      return {
        path: "/v1/chat/completions",
        body: JSON.stringify({ model: MODEL, messages: MESSAGES, stream }),
      };
    case "anthropic":
      return {
        path: "/v1/messages",
        body: JSON.stringify({ model: MODEL, max_tokens: 64, messages: MESSAGES, stream }),
      };
    case "ollama":
      return {
        path: "/api/chat",
        body: JSON.stringify({ model: MODEL, messages: MESSAGES, stream }),
      };
  }
}

/** One request of the soak: what was sent and what came back. */
interface Outcome extends SentRequest {
  face: FaceName;
  stream: boolean;
  /** The client aborted it before its body was read to the end. */
  aborted: boolean;
  /** It failed without an abort (transport error, timeout). */
  error?: string;
  /** A completed 200 whose body had none of the fake model's words. */
  badBody: boolean;
}

/** Counts per face and kind. */
class Tally {
  readonly rows = new Map<string, {
    sent: number;
    answered: number;
    completed: number;
    abortedBeforeHead: number;
    abortedMidBody: number;
    errors: number;
  }>();
  readonly statuses = new Map<number, number>();
  readonly errors = new Map<string, number>();
  badBodies = 0;
  total = 0;

  add(o: Outcome): void {
    this.total++;
    const key = `${o.face} ${o.stream ? "stream" : "JSON"}`;
    let row = this.rows.get(key);
    if (!row) {
      row = {
        sent: 0,
        answered: 0,
        completed: 0,
        abortedBeforeHead: 0,
        abortedMidBody: 0,
        errors: 0,
      };
      this.rows.set(key, row);
    }
    row.sent++;
    if (o.status !== null) {
      row.answered++;
      this.statuses.set(o.status, (this.statuses.get(o.status) ?? 0) + 1);
    }
    if (o.completed) row.completed++;
    if (o.aborted) o.status === null ? row.abortedBeforeHead++ : row.abortedMidBody++;
    if (o.error !== undefined) {
      row.errors++;
      const msg = o.error.slice(0, 120);
      this.errors.set(msg, (this.errors.get(msg) ?? 0) + 1);
    }
    if (o.badBody) this.badBodies++;
  }
}

interface LoadContext {
  base: string;
  client: Deno.HttpClient;
  prefix: string;
  sent: Outcome[];
  tally: Tally;
}

/** Sends one request and reads its answer to the end (or until the planned abort). */
async function oneRequest(
  ctx: LoadContext,
  face: FaceName,
  stream: boolean,
  plan: AbortPlan | null,
): Promise<void> {
  const id = `${ctx.prefix}-${ctx.sent.length}`;
  const o: Outcome = {
    id,
    face,
    stream,
    status: null,
    completed: false,
    aborted: false,
    badBody: false,
  };
  ctx.sent.push(o);
  const { path, body } = requestOf(face, stream);
  const abort = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (p: AbortPlan) => {
    timer = setTimeout(() => abort.abort(), p.delayMs);
  };
  if (plan?.from === "start") arm(plan);
  try {
    const res = await fetch(`${ctx.base}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: "Bearer sk-soak",
        "x-request-id": id,
      },
      body,
      signal: AbortSignal.any([abort.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
      client: ctx.client,
    });
    o.status = res.status;
    if (plan?.from === "head") arm(plan);
    let text = "";
    if (res.body) {
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      // bounded: the fake model's answer is a few dozen chunks
      for (let i = 0; i < 100_000; i++) {
        const { done, value } = await reader.read();
        if (done) break;
        if (text.length < 65_536) text += decoder.decode(value, { stream: true });
      }
    }
    o.completed = true;
    o.badBody = res.status === 200 && !text.includes("tök");
  } catch (e) {
    if (abort.signal.aborted) o.aborted = true;
    else o.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  } finally {
    clearTimeout(timer);
    ctx.tally.add(o);
  }
}

/**
 * `concurrency` workers send mixed requests until `durationMs` passed or `maxRequests` were
 * sent; then one request per worker, JSON and never aborted, so the gateway's upstream pool ends
 * every phase equally full.
 */
async function runLoad(
  ctx: LoadContext,
  concurrency: number,
  durationMs: number,
  maxRequests: number,
): Promise<void> {
  const end = Date.now() + durationMs;
  let started = 0;
  const worker = async (w: number) => {
    for (let i = 0; i < maxRequests && Date.now() < end && started < maxRequests; i++) {
      started++;
      const face = FACES[(w + i) % FACES.length];
      const stream = Math.random() < 0.5;
      const plan: AbortPlan | null = Math.random() < ABORT_RATE
        ? {
          from: Math.random() < 0.5 ? "start" : "head",
          delayMs: Math.floor(Math.random() * ABORT_MAX_DELAY_MS),
        }
        : null;
      await oneRequest(ctx, face, stream, plan);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  await Promise.all(
    Array.from({ length: concurrency }, (_, w) => oneRequest(ctx, FACES[w % 3], false, null)),
  );
}

/** Polls `probe` every `everyMs` until `done` holds or `ms` passed; answers the last value. */
async function pollUntil<T>(
  probe: () => Promise<T>,
  done: (v: T) => boolean,
  ms: number,
  everyMs = 250,
): Promise<{ value: T; ok: boolean; waitedMs: number }> {
  const start = Date.now();
  let value = await probe();
  for (let i = 0; i < 10_000 && !done(value) && Date.now() - start < ms; i++) {
    await new Promise((r) => setTimeout(r, everyMs));
    value = await probe();
  }
  return { value, ok: done(value), waitedMs: Date.now() - start };
}

function gatewayConfig(fakeUrl: string, usageFile: string, weight: number): string {
  const node = (id: string, w: number) => [
    `  - id: ${id}`,
    `    url: ${fakeUrl}`,
    "    engine: vllm",
    `    weight: ${w}`,
  ];
  return [
    "# generated by scripts/bench/soak.ts",
    "nodes:",
    ...node(NODES[0], 1),
    ...node(NODES[1], weight),
    "pricing:",
    '  "*": { input_per_million: 0.5, output_per_million: 1.5 }',
    "usage_store:",
    "  backend: jsonlog",
    `  path: ${usageFile}`,
    "  mode: file",
    "",
  ].join("\n");
}

/** GET of an admin route; answers the parsed JSON or the text, throws on a non-200. */
async function admin(base: string, key: string, path: string): Promise<string> {
  const res = await fetch(`${base}${path}`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${text}`);
  return text;
}

interface ReloadStats {
  /** Config rewrites (renames). */
  written: number;
  /** `config_applied` log lines of the gateway during the soak. */
  applied: number;
  /** Whether `/skeid/nodes` showed the last rewrite's weight after the load. */
  lastInForce: boolean;
  /** `/skeid/config` answers that were not ok (a failed reload), or failed probes. */
  failedStatus: string[];
}

/**
 * One config rewrite per second for `durationMs` (a temp file in the same folder, then rename),
 * toggling fake-2's weight between 1 and 3, each followed by a read of `/skeid/config` (the
 * reload status must stay ok). Answers the rewrites and the weight last written.
 */
async function reloadLoop(
  config: string,
  render: (weight: number) => string,
  adminGet: (path: string) => Promise<string>,
  durationMs: number,
): Promise<{ written: number; lastWeight: number; failedStatus: string[] }> {
  const failedStatus: string[] = [];
  const start = Date.now();
  const count = Math.floor(durationMs / 1000);
  let lastWeight = 1;
  let written = 0;
  for (let i = 1; i <= count; i++) {
    const wait = start + i * 1000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    lastWeight = i % 2 === 1 ? 3 : 1;
    const tmp = `${config}.tmp-${i}`;
    await Deno.writeTextFile(tmp, render(lastWeight));
    await Deno.rename(tmp, config);
    written++;
    try {
      const status = JSON.parse(await adminGet("/skeid/config")) as { ok: boolean; error: string };
      if (!status.ok) failedStatus.push(`rewrite ${i}: ${status.error}`);
    } catch (e) {
      failedStatus.push(`rewrite ${i}: ${e instanceof Error ? e.message : e}`);
    }
  }
  return { written, lastWeight, failedStatus };
}

/** The weight `/skeid/nodes` shows for `id`, or undefined. */
async function nodeWeight(
  adminGet: (path: string) => Promise<string>,
  id: string,
): Promise<number | undefined> {
  try {
    const { nodes } = JSON.parse(await adminGet("/skeid/nodes")) as {
      nodes: { id: string; weight: number }[];
    };
    return nodes.find((n) => n.id === id)?.weight;
  } catch {
    return undefined;
  }
}

/** Waits until `url` answers 200, or the child exits; throws naming what happened. */
interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

const mb = (n: number | undefined) => n === undefined ? "?" : `${n.toFixed(1)} MB`;

function renderSummary(args: {
  command: string;
  date: string;
  machine: string;
  opts: { durationS: number; concurrency: number; warmupS: number };
  warm: Tally;
  soak: Tally;
  reloads: ReloadStats;
  rec: Reconciliation;
  rss: { warm: number; peak: number; after: number };
  fds: { idle: number; peak: number; after: number | null };
  inflight: Map<string, number>;
  checks: Check[];
  elapsedS: number;
}): string {
  const { soak, warm, rec, rss, fds, reloads } = args;
  const faceRows = [...soak.rows].sort(([a], [b]) => a.localeCompare(b)).map(([k, r]) => [
    k,
    r.sent,
    r.answered,
    r.completed,
    r.abortedBeforeHead,
    r.abortedMidBody,
    r.errors,
  ]);
  const sum = (f: (r: typeof soak.rows extends Map<string, infer R> ? R : never) => number) =>
    [...soak.rows.values()].reduce((s, r) => s + f(r), 0);
  faceRows.push([
    "**all**",
    sum((r) => r.sent),
    sum((r) => r.answered),
    sum((r) => r.completed),
    sum((r) => r.abortedBeforeHead),
    sum((r) => r.abortedMidBody),
    sum((r) => r.errors),
  ]);
  const statuses = [...soak.statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`)
    .join(", ") || "none";
  const errors = [...soak.errors].map(([m, n]) => `${n} × ${m}`).join("; ") || "none";
  const figures = markdownTable(["figure", "value"], [
    [
      "requests (warm-up + soak)",
      `${warm.total} + ${soak.total} (${(soak.total / args.opts.durationS).toFixed(0)}/s)`,
    ],
    ["soak statuses (response heads)", statuses],
    ["soak errors (no abort)", errors],
    ["completed 200s without the fake model's words", warm.badBodies + soak.badBodies],
    ["usage events", `${rec.events} for ${rec.answered} answered requests`],
    ["aborted before the head, with an event", rec.headlessWithEvent],
    [
      "config rewrites / configs applied",
      `${reloads.written} / ${reloads.applied}`,
    ],
    ["RSS warm / peak / after", `${mb(rss.warm)} / ${mb(rss.peak)} / ${mb(rss.after)}`],
    ["open fds idle / peak / after", `${fds.idle} / ${fds.peak} / ${fds.after ?? "?"}`],
    ["inflight per node after", [...args.inflight].map(([n, v]) => `${n}: ${v}`).join(", ")],
  ]);
  const checks = markdownTable(
    ["check", "pass?", "detail"],
    args.checks.map((c) => [c.name, c.ok ? "yes" : "**NO**", c.detail.replaceAll("|", "\\|")]),
  );
  return [
    "# Soak",
    "",
    `${args.date} · \`${args.command}\` · ${args.elapsedS.toFixed(0)} s in all`,
    "",
    `Machine: ${args.machine}`,
    "",
    `Load: ${args.opts.warmupS} s warm-up, then ${args.opts.durationS} s at concurrency ` +
    `${args.opts.concurrency}; OpenAI \`/v1/chat/completions\`, Anthropic \`/v1/messages\`, ` +
    "Ollama `/api/chat`, half streamed; ~10% aborted by the client after 0–" +
    `${ABORT_MAX_DELAY_MS} ms (half counted from the request's start, half from its response ` +
    "head); one config rewrite (by rename) per second. Gateway: `skeid " +
    "serve`, jsonlog usage store (file mode, no write-behind), two nodes → one fake model " +
    "(16 tokens, 10 ms apart).",
    "",
    "## Checks",
    "",
    checks,
    "",
    "## Requests of the soak by face and kind",
    "",
    markdownTable(
      [
        "face / kind",
        "sent",
        "answered",
        "completed",
        "aborted before head",
        "aborted mid-body",
        "errors",
      ],
      faceRows,
    ),
    "",
    "## Figures",
    "",
    figures,
    "",
  ].join("\n");
}

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    throw new Error(`--${name}: expected a whole number >= 1, got '${value}'`);
  }
  return n;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      quick: { type: "boolean", default: false },
      "duration-s": { type: "string" },
      concurrency: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log("usage: deno task soak [--quick] [--duration-s N] [--concurrency N] [--out FILE]");
    return 0;
  }
  const quick = values.quick;
  let durationS: number;
  let concurrency: number;
  try {
    durationS = positive("duration-s", values["duration-s"], quick ? 10 : 60);
    concurrency = positive("concurrency", values.concurrency, quick ? 64 : 256);
  } catch (e) {
    console.error(`soak: ${e instanceof Error ? e.message : e}`);
    return 2;
  }
  const warmupS = quick ? 3 : 5;
  const out = values.out ?? `${ROOT}/docs/bench/${quick ? "soak-quick.tmp" : "soak.md"}`;
  const command = ["deno task soak", ...Deno.args].join(" ");
  const started = Date.now();
  const log = (msg: string) =>
    console.error(`soak [${((Date.now() - started) / 1000).toFixed(1)}s]: ${msg}`);

  const adminKey = `soak-admin-${crypto.randomUUID()}`;
  const env = childEnv(adminKey);
  const scope = await childScope("skeid-soak-", log);
  const { children, dir } = scope;
  try {
    const { child: fake, url: fakeUrl } = await startFakeChild(SKEID, FAKE_ARGS, env, children);

    // The usage file in a folder of its own: the config watcher reads the config's folder.
    const config = `${dir}/skeid.yaml`;
    const usageFile = `${dir}/usage/usage.jsonl`;
    await Deno.mkdir(`${dir}/usage`);
    const render = (weight: number) => gatewayConfig(fakeUrl, usageFile, weight);
    await Deno.writeTextFile(config, render(1));
    // The gateway logs `config_applied` (at info) once per applied config.
    let configApplied = 0;
    const { child: gw, base } = await startGatewayChild(SKEID, config, {
      env: { ...env, SKEID_LOG_LEVEL: "info" },
      onLine: (line) => {
        if (line.includes('"config_applied"')) configApplied++;
      },
    });
    children.push(gw);
    const adminGet = (path: string) => admin(base, adminKey, path);
    log(`fake model ${fakeUrl} (pid ${fake.pid}), gateway ${base} (pid ${gw.pid})`);

    const sent: Outcome[] = [];
    const maxRequests = 1_000_000;
    const warm = new Tally();
    log(`warm-up: ${warmupS} s at concurrency ${concurrency}`);
    const warmClient = Deno.createHttpClient({});
    await runLoad(
      { base, client: warmClient, prefix: "soak-w", sent, tally: warm },
      concurrency,
      warmupS * 1000,
      maxRequests,
    );
    warmClient.close();
    // Idle: the client's connections closed, the count steady over a second.
    let last: number | null = null;
    const idleFds = (await pollUntil(
      async () => {
        const prev = last;
        last = await countFds(gw.pid);
        return { n: last, steady: last !== null && last === prev };
      },
      (v) => v.steady,
      10_000,
      1000,
    )).value.n;
    if (idleFds === null) throw new Error(`cannot list /proc/${gw.pid}/fd`);
    const warmRss = (await readRss(gw.pid))?.rssMb ?? NaN;
    log(`after warm-up: ${warm.total} requests, RSS ${mb(warmRss)}, ${idleFds} open fds`);

    log(`soak: ${durationS} s at concurrency ${concurrency}, one reload a second`);
    const soak = new Tally();
    const client = Deno.createHttpClient({});
    const rssSampler = sampleRss(gw.pid);
    const fdSampler = samplePeak(() => countFds(gw.pid), 500);
    const appliedBefore = configApplied;
    const [, rewrites] = await Promise.all([
      runLoad(
        { base, client, prefix: "soak-s", sent, tally: soak },
        concurrency,
        durationS * 1000,
        maxRequests,
      ),
      reloadLoop(config, render, adminGet, durationS * 1000),
    ]);
    client.close();
    const peakRss = await rssSampler.stop();
    const peakFds = await fdSampler.stop();
    const lastPoll = await pollUntil(
      () => nodeWeight(adminGet, NODES[1]),
      (w) => w === rewrites.lastWeight,
      SETTLE_MS,
    );
    const reloads: ReloadStats = {
      written: rewrites.written,
      applied: configApplied - appliedBefore,
      lastInForce: lastPoll.ok,
      failedStatus: rewrites.failedStatus,
    };
    log(
      `load done: ${soak.total} requests; ${reloads.applied}/${reloads.written} rewrites applied`,
    );

    const checks: Check[] = [];
    const inflightPoll = await pollUntil(
      async () => {
        try {
          return parseNodeInflight(await adminGet("/skeid/metrics"));
        } catch {
          return new Map<string, number>();
        }
      },
      (m) => NODES.every((n) => m.get(n) === 0),
      SETTLE_MS,
    );
    const inflight = inflightPoll.value;
    checks.push({
      name: "inflight 0 on every node",
      ok: inflightPoll.ok,
      detail: `${NODES.map((n) => `${n}: ${inflight.get(n) ?? "absent"}`).join(", ")} ` +
        `(after ${inflightPoll.waitedMs} ms)`,
    });
    const rssPoll = await pollUntil(
      async () => (await readRss(gw.pid))?.rssMb ?? NaN,
      (r) => r <= warmRss * (1 + RSS_TOLERANCE),
      RSS_SETTLE_MS,
      500,
    );
    checks.push({
      name: `RSS back within ${RSS_TOLERANCE * 100}% of warm`,
      ok: rssPoll.ok,
      detail: `warm ${mb(warmRss)}, peak ${mb(peakRss)}, after ${mb(rssPoll.value)} ` +
        `(${((rssPoll.value / warmRss - 1) * 100).toFixed(1)}%, after ${rssPoll.waitedMs} ms)`,
    });
    const fdPoll = await pollUntil(
      () => countFds(gw.pid),
      (n) => n !== null && n <= idleFds,
      SETTLE_MS,
    );
    checks.push({
      name: "open fds back to the idle count",
      ok: fdPoll.ok,
      detail:
        `idle ${idleFds}, peak ${peakFds}, after ${fdPoll.value} (after ${fdPoll.waitedMs} ms)`,
    });
    checks.push({
      name: "every config rewrite applied",
      ok: reloads.applied === reloads.written && reloads.lastInForce &&
        reloads.failedStatus.length === 0,
      detail: `${reloads.applied} \`config_applied\` for ${reloads.written} rewrites; the last ` +
        `rewrite ${reloads.lastInForce ? "is" : "is **not**"} in force in /skeid/nodes` +
        (reloads.failedStatus.length ? `; /skeid/config: ${reloads.failedStatus.join("; ")}` : ""),
    });
    const unanswered = [...warm.errors, ...soak.errors].reduce((s, [, n]) => s + n, 0);
    checks.push({
      name: "no request failed without an abort",
      ok: unanswered === 0 && warm.badBodies + soak.badBodies === 0,
      detail: `${unanswered} errors, ${warm.badBodies + soak.badBodies} bad bodies`,
    });

    // SIGTERM: the gateway drains and flushes its usage store, then the file is complete.
    log("stopping the gateway (SIGTERM)");
    await gw.stop(30_000);
    const code = await gw.exited;
    const text = await Deno.readTextFile(usageFile).catch(() => "");
    const rec = reconcile(sent, parseEventLines(text));
    const problems = reconciliationProblems(rec);
    checks.unshift({
      name: "one usage event per answered request",
      ok: problems.length === 0 && code === 0,
      detail: `${rec.events} events, ${rec.answered} answered requests` +
        (code === 0 ? "" : `; the gateway exited ${code}`) +
        (problems.length ? `; ${problems.join("; ")}` : ""),
    });

    const summary = renderSummary({
      command,
      date: new Date().toISOString(),
      machine: `${await machine()}; load average at the end ${await loadAverage()}`,
      opts: { durationS, concurrency, warmupS },
      warm,
      soak,
      reloads,
      rec,
      rss: { warm: warmRss, peak: peakRss, after: rssPoll.value },
      fds: { idle: idleFds, peak: peakFds, after: fdPoll.value },
      inflight,
      checks,
      elapsedS: (Date.now() - started) / 1000,
    });
    await Deno.writeTextFile(out, summary);
    console.log(`\n${summary}`);
    console.log(`report: ${out}`);
    const failed = checks.filter((c) => !c.ok);
    if (failed.length) {
      console.error(`soak: FAILED: ${failed.map((c) => c.name).join("; ")}`);
      return 1;
    }
    return 0;
  } finally {
    await scope.close();
  }
}

if (import.meta.main) Deno.exit(await main());
