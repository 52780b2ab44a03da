/**
 * `deno task bench [--quick] [--out FILE] [--gateway-url URL|fake|bare] [--usage jsonlog|jsonlog-direct|sqlite|none]
 * [--transport raw|fetch] [--wrk auto|yes|no] [--streams N] [--limits] [--contended] [--workers N]
 * [--check [--save] [--rounds N]] [--memory [--connections N]]`
 *
 * Measures Skeid's overhead in one run: the same load client against the fake model directly
 * and through the gateway, with the gateway pinned to CPU 0 and the client and fake model to
 * CPU 1. Starts the fake model and the gateway as child processes and stops them (by PID) at
 * the end. Writes the markdown report to `docs/bench/results.md` (a `--quick` run to
 * `docs/bench/results-quick.tmp`) and prints the goal table. See `docs/bench/README.md`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { LoadResult } from "./bench/client.ts";
import {
  canPin,
  type Child,
  childScope,
  freePort,
  machine,
  readProc,
  readRss,
  sampleRss,
  spawnChild,
  waitHealthy,
} from "./bench/procs.ts";
import { ensureWrk, runWrk } from "./bench/wrk.ts";
import {
  type BenchResults,
  type BenchSetup,
  goalTable,
  renderReport,
  type ScenarioRun,
  type SideRun,
  spliceGenerated,
} from "./bench/report.ts";
import {
  type CheckFigures,
  type CheckRound,
  compareFigures,
  type PairedFigures,
  parseFigures,
  ratiosOf,
  renderCheck,
  type SideFigures,
} from "./bench/check.ts";
import { holdIdle, type MemorySide, renderMemory } from "./bench/memory.ts";
import {
  type LiveIdle,
  liveOrder,
  type LiveRound,
  openLiveClients,
  renderLive,
} from "./bench/live.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const MAIN = `${ROOT}/src/main.ts`;
const SKEID = `${ROOT}/scripts/skeid`;
const CLIENT = `${ROOT}/scripts/bench/client.ts`;
const BARE_PROXY = `${ROOT}/scripts/bench/bare_proxy.ts`;
const DENO = Deno.execPath();
const GATEWAY_CPU = 0;
/** The committed figures `--check` compares against (`--check --save` writes them). */
const CHECK_FIGURES = `${ROOT}/docs/bench/check.json`;
const LOAD_CPU = 1;

/** The gateway's CPUs: one core, or (`--workers N`, N > 1) one per worker where there are that many. */
function gatewayCpus(workers: number): string {
  const cores = Math.min(workers, navigator.hardwareConcurrency || 1);
  return cores <= 1 ? String(GATEWAY_CPU) : `${GATEWAY_CPU}-${GATEWAY_CPU + cores - 1}`;
}

/** A load to run on both sides. */
interface Scenario {
  label: string;
  describe: string;
  stream: boolean;
  concurrency: number;
  requests: number;
  durationMs: number;
  warmup: number;
  rampMs?: number;
  /** Measured with wrk when it is available (throughput scenarios). */
  wrk?: boolean;
  body: Record<string, unknown>;
  expectChunks?: number;
}

const MESSAGES = [{ role: "user", content: "Write one short sentence about benchmarks." }];

function scenarios(quick: boolean, streamCount: number) {
  const json = { model: "bench-model", messages: MESSAGES };
  const stream = {
    model: "bench-model",
    messages: MESSAGES,
    stream: true,
    fake_ttft_ms: 20,
    fake_tokens: 64,
    fake_itl_ms: 1,
  };
  // Many streams: a token every 200 ms each (2,000 streams = 10,000 chunks/s in all), so the
  // client and the fake model sharing one CPU stay under half load and the direct baseline is
  // sound; 64 tokens 50 ms apart oversubscribe that CPU and the baseline is noise.
  const manyTokens = quick ? 16 : 32;
  const manyItl = quick ? 100 : 200;
  const many = {
    model: "bench-model",
    messages: MESSAGES,
    stream: true,
    fake_ttft_ms: 20,
    fake_tokens: manyTokens,
    fake_itl_ms: manyItl,
  };
  const c1: Scenario = {
    label: "c=1 JSON",
    describe: "non-streaming chat completion (8 tokens, no delay), one connection, one at a time",
    stream: false,
    concurrency: 1,
    requests: quick ? 1000 : 10_000,
    durationMs: quick ? 3000 : 10_000,
    warmup: quick ? 200 : 1000,
    body: json,
  };
  const c32: Scenario = {
    label: "c=32 JSON",
    describe: "the same request on 32 keep-alive connections, as fast as answered",
    stream: false,
    concurrency: 32,
    requests: 1_000_000,
    durationMs: quick ? 2000 : 6000,
    warmup: quick ? 500 : 3000,
    wrk: true,
    body: json,
  };
  const c256: Scenario = {
    label: "c=256 JSON burst",
    describe: "the same request on 256 connections, a short burst",
    stream: false,
    concurrency: 256,
    requests: 1_000_000,
    durationMs: quick ? 1000 : 2000,
    warmup: 256,
    wrk: true,
    body: json,
  };
  const stream32: Scenario = {
    label: "stream c=32",
    describe:
      "SSE chat completion, 20 ms to the first token, 64 tokens 1 ms apart, 32 connections; " +
      "TTFT = request sent → first content byte",
    stream: true,
    concurrency: 32,
    requests: 1_000_000,
    durationMs: quick ? 2000 : 6000,
    warmup: 32,
    body: stream,
    expectChunks: 64,
  };
  const rampMs = quick ? 200 : 1000;
  const streams: Scenario = {
    label: `${streamCount.toLocaleString("en-US")} streams`,
    describe:
      `${
        streamCount.toLocaleString("en-US")
      } concurrent SSE streams (one per connection, started over ` +
      `${rampMs} ms), 20 ms TTFT, ${manyTokens} tokens ${manyItl} ms apart; gap = time between ` +
      "consecutive content chunks at the client",
    stream: true,
    concurrency: streamCount,
    requests: streamCount,
    durationMs: 120_000,
    warmup: 0,
    rampMs,
    body: many,
    expectChunks: manyTokens,
  };
  return { c1, c32, c256, stream32, streams };
}

/** Runs the load client (pinned with the fake model) against `baseUrl`; bounded in time. */
async function runClient(
  baseUrl: string,
  s: Scenario,
  transport: string,
  pin: boolean,
): Promise<LoadResult> {
  const args = [
    "run",
    "--quiet",
    "--no-prompt",
    "--allow-net",
    CLIENT,
    "--url",
    `${baseUrl}/chat/completions`,
    "--body",
    JSON.stringify(s.body),
    "--concurrency",
    String(s.concurrency),
    "--requests",
    String(s.requests),
    "--duration-ms",
    String(s.durationMs),
    "--warmup",
    String(s.warmup),
    "--timeout-ms",
    "60000",
    "--transport",
    transport,
  ];
  if (s.stream) args.push("--stream");
  if (s.rampMs) args.push("--ramp-ms", String(s.rampMs));
  if (s.expectChunks !== undefined) args.push("--expect-chunks", String(s.expectChunks));
  const child = spawnChild(`client (${s.label})`, DENO, args, { cpu: pin ? LOAD_CPU : undefined });
  // Warm-up, the measured phase and a per-request timeout, plus start-up slack.
  const limitMs = s.durationMs + 60_000 + 60_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), limitMs);
  });
  try {
    const code = await Promise.race([child.exited, timedOut]);
    if (code === "timeout") throw new Error(`load client ran over ${limitMs} ms`);
    if (code !== 0) throw new Error(`load client exited ${code}: ${child.tail()}`);
    const line = await child.firstLine(1000);
    return JSON.parse(line) as LoadResult;
  } finally {
    clearTimeout(timer);
    await child.stop();
  }
}

/** Waits until `url` answers 200 or `child` exits (bounded); null then, else why not. */
async function healthProblem(url: string, child: Child, ms: number): Promise<string | null> {
  try {
    await waitHealthy(url, child, ms);
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/** One chat request through `baseUrl`; null when it answers like the fake model would. */
async function sanityCheck(baseUrl: string): Promise<string | null> {
  try {
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
      body: JSON.stringify({ model: "bench-model", messages: MESSAGES, fake_tokens: 3 }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (res.status !== 200) return `a test request answered ${res.status}: ${text.slice(0, 300)}`;
    if (!text.includes("tök0 tök1 tök2")) return `a test request answered: ${text.slice(0, 300)}`;
    return null;
  } catch (e) {
    return `a test request failed: ${e instanceof Error ? e.message : String(e)}`;
  }
}

/**
 * The gateway's usage store: jsonlog file mode (one append per batch, no database on the request
 * path's CPU) with write-behind (`flush_interval_ms`), in a folder of its own — the config
 * watcher reads every event of the config's folder, so appends next to the config file would
 * cost it an inotify event each. Every request still writes its usage event.
 */
const USAGE_FLUSH_MS = 1000;

function usageFile(dir: string): string {
  return `${dir}/usage/usage.jsonl`;
}

/**
 * `--limits`: every customer key (the bench's among them) on a policy with rate limits and a
 * budget far above what the bench sends, so every request goes through the key step (windows,
 * reservation, settlement, `x-ratelimit-*`) without ever being refused (ADR 0023).
 */
const LIMITS_POLICY = [
  "policies:",
  "  bench:",
  "    limits: { rpm: 1000000000, tpm: 1000000000000, max_inflight: 1000000 }",
  "    budget: { usd: 1000000000, tokens: 1000000000000, period: month }",
  "default_policy: bench",
];

/**
 * `--contended`: the node takes half the c=32 load at once (`max_conns: 16`), so half the
 * requests wait in the waiter queue for a slot (fair share between customer keys orders it, ADR
 * 0024) within a routing wait far above any queueing the bench causes.
 */
const CONTENDED_NODE = ["    max_conns: 16"];
const CONTENDED_ROUTING = ["routing:", "  wait_timeout_ms: 60000"];

function gatewayConfig(
  fakeUrl: string,
  usage: string,
  dir: string,
  limits = false,
  contended = false,
): string {
  const lines = [
    "# generated by scripts/bench.ts",
    "nodes:",
    "  - id: fake-1",
    `    url: ${fakeUrl}`,
    "    engine: vllm",
    ...(contended ? CONTENDED_NODE : []),
    "pricing:",
    '  "*": { input_per_million: 0.5, output_per_million: 1.5 }',
  ];
  if (contended) lines.push(...CONTENDED_ROUTING);
  if (limits) lines.push(...LIMITS_POLICY);
  if (usage === "sqlite") {
    // The SQLite store with write-behind: its inserts run on the event loop, once a second.
    lines.push(
      "usage_store:",
      "  backend: sqlite",
      `  path: ${dir}/usage/usage.sqlite`,
      `  flush_interval_ms: ${USAGE_FLUSH_MS}`,
    );
  }
  if (usage === "jsonlog" || usage === "jsonlog-direct") {
    // jsonlog-direct: what an operator gets by default, every event appended as it is recorded.
    const flushMs = usage === "jsonlog" ? USAGE_FLUSH_MS : 0;
    lines.push(
      "usage_store:",
      "  backend: jsonlog",
      `  path: ${usageFile(dir)}`,
      "  mode: file",
      `  flush_interval_ms: ${flushMs}`,
    );
  }
  return lines.join("\n") + "\n";
}

/** Lines in a file (0 when it does not exist). */
async function countLines(path: string): Promise<number> {
  try {
    const text = await Deno.readTextFile(path);
    let n = 0;
    for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
    return n;
  } catch {
    return 0;
  }
}

/** `skeid fake-model` on a free port, keeping no requests. */
const FAKE_MODEL_ARGS = [
  "run",
  "--quiet",
  "--no-prompt",
  "--allow-net",
  MAIN,
  "fake-model",
  "--listen",
  "127.0.0.1:0",
  "--record",
  "0",
];

/** Starts the fake model on the load CPU; its base URL once healthy. */
async function startFake(children: Child[], pin: boolean): Promise<{ url: string; pid: number }> {
  const fake = spawnChild("fake model", DENO, FAKE_MODEL_ARGS, { cpu: pin ? LOAD_CPU : undefined });
  children.push(fake);
  const url = (await fake.firstLine(60_000)).trim();
  if (!/^http:\/\/[^/]+\/v1$/.test(url)) throw new Error(`fake model printed '${url}'`);
  const problem = await healthProblem(`${url.replace(/\/v1$/, "")}/health`, fake, 30_000) ??
    await sanityCheck(url);
  if (problem) throw new Error(`fake model not usable: ${problem}`);
  return { url, pid: fake.pid };
}

/** Starts the bare Deno proxy on the gateway CPU; its base URL and PID. */
async function startBare(
  children: Child[],
  fakeUrl: string,
  pin: boolean,
): Promise<{ url: string; pid: number }> {
  const bare = spawnChild("bare Deno proxy", DENO, [
    "run",
    "--quiet",
    "--no-prompt",
    "--allow-net",
    BARE_PROXY,
    "--upstream",
    fakeUrl,
  ], { cpu: pin ? GATEWAY_CPU : undefined });
  children.push(bare);
  return { url: (await bare.firstLine(60_000)).trim(), pid: bare.pid };
}

/** Why a started gateway is not ready to measure (not healthy within 60 s, or a bad answer). */
async function notReady(
  gw: { url: string; port: number; child: Child },
): Promise<string | null> {
  return await healthProblem(`http://127.0.0.1:${gw.port}/health`, gw.child, 60_000) ??
    await sanityCheck(gw.url);
}

/** Starts `skeid serve` with the bench's config in `dir`; its base URL and child (not yet healthy). */

async function startSkeid(
  children: Child[],
  opts: Pick<GatewayChoice, "usage" | "limits" | "contended" | "workers" | "pin"> & {
    fakeUrl: string;
    dir: string;
    /** Variables added to the gateway's environment (`--otel`: OTEL_*). */
    env?: Record<string, string>;
  },
): Promise<{ url: string; port: number; child: Child }> {
  const config = `${opts.dir}/skeid.yaml`;
  await Deno.mkdir(`${opts.dir}/usage`, { recursive: true });
  await Deno.writeTextFile(
    config,
    gatewayConfig(opts.fakeUrl, opts.usage, opts.dir, opts.limits, opts.contended),
  );
  const port = freePort();
  // Through the launcher, as an operator runs it (and as the soak and bench:fair do): the
  // permissions and V8 flags of scripts/flags. It execs Deno, so the PID is the gateway's.
  const gw = spawnChild("gateway", SKEID, [
    "serve",
    "--config",
    config,
    "--listen",
    `127.0.0.1:${port}`,
    "--workers",
    String(opts.workers),
  ], {
    cpu: opts.pin ? gatewayCpus(opts.workers) : undefined,
    env: {
      // scripts/skeid uses the Deno on PATH when it is the pinned one: this one.
      PATH: `${DENO.replace(/\/[^/]*$/, "")}:${Deno.env.get("PATH") ?? ""}`,
      SKEID_LOG_LEVEL: "warn",
      ...opts.env,
    },
  });
  children.push(gw);
  return { url: `http://127.0.0.1:${port}/v1`, port, child: gw };
}

/** User + system CPU time of a process so far, ms (/proc/PID/stat, 100 ticks a second). */
async function cpuMs(pid: number): Promise<number | null> {
  const stat = await readProc(`/proc/${pid}/stat`);
  if (!stat) return null;
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Every thread's time on CPU so far, ms with ns resolution (the schedstat of each of /proc/PID/task); a
 * thread that ended since is not counted, so only for windows where the threads stay.
 */
async function threadCpuMs(pid: number): Promise<number | null> {
  // Through `cat`, as readProc: this process may not read /proc itself.
  try {
    const out = await new Deno.Command("sh", {
      args: ["-c", `cat /proc/${pid}/task/*/schedstat`],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!out.success) return null;
    let ns = 0;
    for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
      if (line.trim() !== "") ns += Number(line.split(" ")[0]);
    }
    return ns / 1e6;
  } catch {
    return null;
  }
}

/** The gateway setup a bench mode measures, as the command line chose it. */
interface GatewayChoice {
  /** Whether the gateway and the load are pinned to CPUs of their own. */
  pin: boolean;
  /** The usage store (`--usage`). */
  usage: string;
  /** A customer key with limits and a budget (`--limits`). */
  limits: boolean;
  /** Fair share contended (`--contended`). */
  contended: boolean;
  /** `serve --workers N`. */
  workers: number;
  /** The command line, for the report. */
  command: string;
  log: (msg: string) => void;
}

/** What `--check` needs from the command line. */
interface CheckOptions extends GatewayChoice {
  useWrk: boolean;
  rounds: number;
  save: boolean;
  transport: string;
}

/**
 * `--check`: direct, the bare proxy and Skeid measured back to back in `rounds` rounds (c=1
 * latency, c=32 throughput and gateway CPU), reduced to ratios within each round and compared
 * with the committed figures (`scripts/bench/check.ts`); `--save` writes them instead. Exit 1
 * when a ratio is worse by more than the run-to-run spread.
 */
async function runCheck(opts: CheckOptions): Promise<number> {
  const { log, pin } = opts;
  let committed: CheckFigures | undefined;
  if (!opts.save) {
    let text: string;
    try {
      text = await Deno.readTextFile(CHECK_FIGURES);
    } catch {
      console.error(
        `bench --check: no committed figures at docs/bench/check.json (run deno task bench --check --save)`,
      );
      return 1;
    }
    committed = parseFigures(text, "docs/bench/check.json");
  }
  const scope = await childScope("skeid-bench-check-", log);
  try {
    const { children, dir } = scope;
    const fake = await startFake(children, pin);
    const bare = await startBare(children, fake.url, pin);
    const gw = await startSkeid(children, { ...opts, fakeUrl: fake.url, dir });
    const problem = await sanityCheck(bare.url) ??
      await notReady(gw);
    if (problem) {
      console.error(`bench --check: ${problem}`);
      return 1;
    }
    const measure = (url: string, pid?: number) => measureSide(url, pid, opts, dir, pin);
    await warmAll(
      [["the bare proxy", bare], ["skeid", { url: gw.url, pid: gw.child.pid }]],
      opts,
      dir,
      pin,
    );
    const rounds: CheckRound[] = [];
    for (let i = 0; i < opts.rounds; i++) {
      log(`check round ${i + 1} of ${opts.rounds}: direct, bare proxy, skeid, both at once`);
      const direct = await measure(fake.url);
      const bareSide = await measure(bare.url, bare.pid);
      const skeid = await measure(gw.url, gw.child.pid);
      const paired = await measurePair(
        { url: bare.url, pid: bare.pid },
        { url: gw.url, pid: gw.child.pid },
        opts,
        dir,
        pin,
      );
      rounds.push({ direct, bare: bareSide, skeid, paired });
    }
    const figures: CheckFigures = {
      date: new Date().toISOString(),
      machine: await machine(),
      command: opts.command,
      rounds,
      ratios: ratiosOf(rounds),
    };
    const json = JSON.stringify(figures, null, 2) + "\n";
    if (opts.save) {
      await Deno.writeTextFile(CHECK_FIGURES, json);
      console.log(renderCheck(compareFigures(figures.ratios, figures.ratios)));
      console.log(`figures: ${CHECK_FIGURES}`);
      return 0;
    }
    await Deno.writeTextFile(`${ROOT}/docs/bench/check-last.tmp`, json);
    const rows = compareFigures(committed!.ratios, figures.ratios);
    console.log(`\ncommitted: ${committed!.date}; now: ${figures.date}\n`);
    console.log(renderCheck(rows));
    return rows.length > 0 && rows.every((r) => r.pass) ? 0 : 1;
  } finally {
    await scope.close();
  }
}

/** Where `--otel` writes its figures. */
const OTEL_FIGURES = `${ROOT}/docs/bench/otel.md`;

/**
 * `--otel`'s collector, run with `deno eval`: reads and drops every export, answers an empty 200
 * (a full success), counts them for `GET /stats`; prints its port first.
 */
const OTLP_RECEIVER = `
let posts = 0, bytes = 0;
Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: (a) => console.log(a.port) }, async (req) => {
  if (req.method === "GET") return Response.json({ posts, bytes });
  posts++;
  bytes += (await req.arrayBuffer()).byteLength;
  return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
});`;

/** The 1-, 5- and 15-minute load averages (\`uptime\`'s), or undefined. */
async function loadAverage(): Promise<string | undefined> {
  return (await readProc("/proc/loadavg"))?.split(" ").slice(0, 3).join(", ");
}

/**
 * One `--otel` round: c=1 p50 and c=32 req/s of direct, Skeid with OTel off, Skeid with it on,
 * then both gateways loaded at the same time (a = off, b = on).
 */
interface OtelRound {
  direct: SideFigures;
  off: SideFigures;
  on: SideFigures;
  paired: PairedFigures;
}

/** Seconds of c=32 load in one side of a `--check` or `--otel` round. */
const SIDE_LOAD_S = 3;

/**
 * One side of a `--check` or `--otel` round: c=1 p50, then c=32 throughput and, with `pid`, the
 * gateway's CPU per request over the c=32 run (less swayed by a busy machine than latency).
 */
async function measureSide(
  url: string,
  pid: number | undefined,
  opts: CheckOptions,
  dir: string,
  pin: boolean,
): Promise<SideFigures> {
  const sc = scenarios(false, 1);
  const c1: Scenario = { ...sc.c1, requests: 3000, durationMs: 3000, warmup: 500 };
  const one = await runClient(url, c1, opts.transport, pin);
  const before = pid === undefined ? null : await cpuMs(pid);
  const many = await c32Load(url, SIDE_LOAD_S, "side", opts, dir, pin);
  const after = pid === undefined ? null : await cpuMs(pid);
  const errors = one.errors + many.errors;
  if (errors > 0) {
    throw new Error(
      `${url}: ${errors} failed requests (${[...one.errorSamples, ...many.errorSamples][0]})`,
    );
  }
  const cpu = cpuPerRequest(before, after, many.completed);
  return { c1P50Ms: one.latency.p50, c32Rps: many.rps, c32CpuUs: cpu };
}

/** A gateway under load: its base URL and PID (for its CPU). */
interface LoadedSide {
  url: string;
  pid: number;
}

/** c=32 JSON on `url` for `seconds`, from wrk or the Deno client; `name` keeps wrk's files apart. */
async function c32Load(
  url: string,
  seconds: number,
  name: string,
  opts: CheckOptions,
  dir: string,
  pin: boolean,
): Promise<LoadResult> {
  const c32: Scenario = { ...scenarios(false, 1).c32, durationMs: seconds * 1000, warmup: 1000 };
  // Each client its own folder: wrk's script file is named by the concurrency alone.
  const sub = `${dir}/load-${name.replace(/[^A-Za-z0-9]+/g, "-")}`;
  await Deno.mkdir(sub, { recursive: true });
  return opts.useWrk
    ? runWrk({
      url: `${url}/chat/completions`,
      concurrency: c32.concurrency,
      seconds,
      body: JSON.stringify(c32.body),
      dir: sub,
      cpu: pin ? LOAD_CPU : undefined,
    })
    : runClient(url, c32, opts.transport, pin);
}

/** Gateway CPU per request between two `cpuMs` readings, µs; undefined when unreadable. */
function cpuPerRequest(t0: number | null, t1: number | null, completed: number) {
  return t0 !== null && t1 !== null && completed > 0 ? ((t1 - t0) * 1000) / completed : undefined;
}

/** Windows of `warmUp`: at least, at most, and each window's length in seconds. */
const WARM_MIN_WINDOWS = 3;
const WARM_WINDOWS = 12;
const WARM_WINDOW_S = 2;

/**
 * Loads a gateway at c=32 until its CPU per request has settled: V8 goes on compiling Skeid's
 * request path for several seconds of load (the first windows cost twice the later ones, most of
 * it on V8's compiler thread), and a round measured before that reads as a slower gateway.
 * Settled = at least `WARM_MIN_WINDOWS` windows, the last two within 5 % of each other; at most
 * `WARM_WINDOWS` windows.
 * Answers the windows' CPU per request, for the log.
 */
async function warmUp(
  side: LoadedSide,
  name: string,
  opts: CheckOptions,
  dir: string,
  pin: boolean,
): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < WARM_WINDOWS; i++) {
    const t0 = await cpuMs(side.pid);
    const r = await c32Load(side.url, WARM_WINDOW_S, `warm-${name}`, opts, dir, pin);
    const cpu = cpuPerRequest(t0, await cpuMs(side.pid), r.completed);
    if (cpu === undefined) return seen;
    seen.push(cpu);
    const prev = seen.at(-2);
    if (seen.length < WARM_MIN_WINDOWS || prev === undefined) continue;
    if (Math.abs(cpu - prev) <= 0.05 * prev) return seen;
  }
  return seen;
}

/**
 * The c=32 load on two gateways at the same time, each from its own client (`PairedFigures`):
 * both gateways share the gateway CPU for the whole window, so what the machine does to that CPU
 * meanwhile it does to both.
 */
async function measurePair(
  a: LoadedSide,
  b: LoadedSide,
  opts: CheckOptions,
  dir: string,
  pin: boolean,
): Promise<PairedFigures> {
  const seconds = 4;
  const before = await Promise.all([cpuMs(a.pid), cpuMs(b.pid)]);
  const [ra, rb] = await Promise.all([
    c32Load(a.url, seconds, "pair-a", opts, dir, pin),
    c32Load(b.url, seconds, "pair-b", opts, dir, pin),
  ]);
  const after = await Promise.all([cpuMs(a.pid), cpuMs(b.pid)]);
  const errors = ra.errors + rb.errors;
  if (errors > 0) {
    throw new Error(
      `paired c=32: ${errors} failed requests (${[...ra.errorSamples, ...rb.errorSamples][0]})`,
    );
  }
  return {
    aRps: ra.rps,
    bRps: rb.rps,
    aCpuUs: cpuPerRequest(before[0], after[0], ra.completed),
    bCpuUs: cpuPerRequest(before[1], after[1], rb.completed),
  };
}

/** Warms each gateway (`warmUp`) and logs what its CPU per request did meanwhile. */
async function warmAll(
  sides: [string, LoadedSide][],
  opts: CheckOptions,
  dir: string,
  pin: boolean,
): Promise<void> {
  for (const [name, side] of sides) {
    const seen = await warmUp(side, name, opts, dir, pin);
    opts.log(`warm-up of ${name}: CPU per request ${seen.map((x) => x.toFixed(0)).join(", ")} µs`);
  }
}

/**
 * `--otel`: two gateways side by side, OpenTelemetry off and on (`OTEL_EXPORTER_OTLP_ENDPOINT`
 * naming a local OTLP receiver, a child pinned beside the load, that reads and discards every
 * export), measured back to back
 * in `rounds` rounds (the order alternating), and reduced to on/off ratios per round; written to
 * docs/bench/otel.md.
 */
async function runOtel(opts: CheckOptions): Promise<number> {
  const { log, pin } = opts;
  const scope = await childScope("skeid-bench-otel-", log);
  try {
    const { children, dir } = scope;
    const fake = await startFake(children, pin);
    // The receiver is a child pinned beside the load (like the fake model): a collector sharing
    // the gateway's CPU would be measured as the gateway's cost.
    const receiver = spawnChild("otlp receiver", DENO, ["eval", OTLP_RECEIVER], {
      cpu: pin ? LOAD_CPU : undefined,
    });
    children.push(receiver);
    const receiverPort = Number(await receiver.firstLine(30_000));
    const side = async (name: string, env: Record<string, string> | undefined) => {
      const sub = `${dir}/${name}`;
      await Deno.mkdir(sub, { recursive: true });
      const gw = await startSkeid(children, { ...opts, fakeUrl: fake.url, dir: sub, env });
      const problem = await notReady(gw);
      if (problem) throw new Error(`${name}: ${problem}`);
      return gw;
    };
    const off = await side("off", undefined);
    const on = await side("on", {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiverPort}`,
      OTEL_SERVICE_NAME: "skeid-bench",
    });
    const measure = (url: string, pid?: number) => measureSide(url, pid, opts, dir, pin);
    await warmAll(
      [
        ["skeid, OpenTelemetry off", { url: off.url, pid: off.child.pid }],
        ["skeid, OpenTelemetry on", { url: on.url, pid: on.child.pid }],
      ],
      opts,
      dir,
      pin,
    );
    const loadBefore = (await loadAverage()) ?? "?";
    const rounds: OtelRound[] = [];
    for (let i = 0; i < opts.rounds; i++) {
      log(`otel round ${i + 1} of ${opts.rounds}`);
      const direct = await measure(fake.url);
      // Alternating order: whichever side runs second in a round is not always the same one.
      const first = i % 2 === 0 ? off : on;
      const second = i % 2 === 0 ? on : off;
      const a = await measure(first.url, first.child.pid);
      const b = await measure(second.url, second.child.pid);
      const paired = await measurePair(
        { url: off.url, pid: off.child.pid },
        { url: on.url, pid: on.child.pid },
        opts,
        dir,
        pin,
      );
      rounds.push(
        i % 2 === 0 ? { direct, off: a, on: b, paired } : { direct, off: b, on: a, paired },
      );
    }
    const stats = await fetch(`http://127.0.0.1:${receiverPort}/stats`);
    const received = await stats.json() as { posts: number; bytes: number };
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    const f = (n: number, d = 3) => n.toFixed(d);
    const rows = rounds.map((r, i) =>
      `| ${i + 1} | ${f(r.direct.c1P50Ms)} | ${f(r.off.c1P50Ms)} | ${f(r.on.c1P50Ms)} | ${
        f(r.on.c1P50Ms - r.off.c1P50Ms)
      } | ${f(r.direct.c32Rps, 0)} | ${f(r.off.c32Rps, 0)} | ${f(r.on.c32Rps, 0)} | ${
        f(r.on.c32Rps / r.off.c32Rps)
      } | ${f(r.off.c32CpuUs ?? NaN, 0)} | ${f(r.on.c32CpuUs ?? NaN, 0)} | ${
        f((r.on.c32CpuUs ?? NaN) - (r.off.c32CpuUs ?? NaN), 0)
      } |`
    );
    const pairedRows = rounds.map((r, i) =>
      `| ${i + 1} | ${f(r.paired.aRps, 0)} | ${f(r.paired.bRps, 0)} | ${
        f(r.paired.bRps / r.paired.aRps)
      } | ${f(r.paired.aCpuUs ?? NaN, 0)} | ${f(r.paired.bCpuUs ?? NaN, 0)} | ${
        f((r.paired.bCpuUs ?? NaN) / (r.paired.aCpuUs ?? NaN))
      } |`
    );
    const pairedRatio = median(rounds.map((r) => r.paired.bRps / r.paired.aRps));
    const cpuAdded = median(rounds.map((r) => (r.on.c32CpuUs ?? NaN) - (r.off.c32CpuUs ?? NaN)));
    const added = median(rounds.map((r) => r.on.c1P50Ms - r.off.c1P50Ms));
    const ratio = median(rounds.map((r) => r.on.c32Rps / r.off.c32Rps));
    const text = [
      "# OpenTelemetry on vs off",
      "",
      `Measured ${new Date().toISOString()} on ${await machine()} with \`${opts.command}\`.`,
      "Two gateways side by side (one node, the fake model), one with OpenTelemetry on exporting",
      "(`OTEL_EXPORTER_OTLP_ENDPOINT`, default batch settings) to a local OTLP/HTTP receiver that",
      "reads and discards every export (a child pinned beside the load and the fake model),",
      "measured back to back in each round, the order alternating. The machine is shared and",
      "noisy: read the per-round ratios, not the absolute figures.",
      "",
      "| round | c=1 p50 direct ms | off ms | on ms | on − off ms | c=32 direct req/s | off req/s | on req/s | on/off | CPU/req off µs | on µs | on − off µs |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|",
      ...rows,
      "",
      "Then, in each round, both gateways at the same time, each loaded by its own c=32 client:",
      "they share the gateway's CPU for the whole window, so a slower phase of the machine slows",
      "both alike and their ratio holds where the back-to-back ratios above drift.",
      "",
      "| round | off req/s | on req/s | on/off | CPU/req off µs | on µs | on/off CPU |",
      "|---|---|---|---|---|---|---|",
      ...pairedRows,
      "",
      `Median c=1 added latency with OTel on: **${f(added)} ms** (goal ≤ 0.05 ms); median c=32 ` +
      `throughput on/off: **${f(ratio)}** back to back, **${f(pairedRatio)}** at the same time ` +
      `(goal ≥ 0.97); median gateway CPU added per c=32 ` +
      `request: **${f(cpuAdded, 0)} µs**. The receiver got ${received.posts} ` +
      `exports (${(received.bytes / 1e6).toFixed(1)} MB); \`uptime\` before and after: ` +
      `${loadBefore} / ${(await loadAverage()) ?? "?"}.`,
      "",
    ].join("\n");
    // Only the generated part: the notes written by hand below it (earlier runs, the profile's
    // breakdown) stay.
    const existing = await Deno.readTextFile(OTEL_FIGURES).catch(() => undefined);
    await Deno.writeTextFile(OTEL_FIGURES, spliceGenerated(existing, text));
    console.log(text);
    return 0;
  } finally {
    await scope.close();
  }
}

/** Where `--live` writes its figures. */
const LIVE_FIGURES = `${ROOT}/docs/bench/live.md`;

/** Seconds of c=32 load per `--live` measurement. */
const LIVE_LOAD_S = 4;

/** The bench gateway's admin key under `--live` (a throwaway value, this run only). */
const LIVE_ADMIN_KEY = "bench-live-admin-key-0123456789abcdef";

/** `--live`'s idle windows: rounds of every client count, each window this long, ms. */
const LIVE_IDLE_ROUNDS = 3;
const LIVE_IDLE_MS = 6000;
const LIVE_SETTLE_MS = 3000;

/** Live clients of each `--live` state: the page closed, open once, open in three tabs. */
const LIVE_CLIENTS = [0, 1, 3];

/**
 * `--live`: one gateway with the admin API on, c=32 measured with 0, 1 and 3 `GET /skeid/live`
 * clients connected, the order alternating over `rounds` rounds; per round the gateway CPU per
 * request against none. Written to docs/bench/live.md.
 */
async function runLive(opts: CheckOptions): Promise<number> {
  const { log, pin } = opts;
  const load = (await readProc("/proc/loadavg") ?? "").split(" ").slice(0, 3).join(" ");
  const scope = await childScope("skeid-bench-live-", log);
  try {
    const { children, dir } = scope;
    const fake = await startFake(children, pin);
    const gw = await startSkeid(children, {
      ...opts,
      fakeUrl: fake.url,
      dir,
      contended: false,
      env: { SKEID_ADMIN_API_KEY: LIVE_ADMIN_KEY },
    });
    const problem = await notReady(gw);
    if (problem) {
      console.error(`bench --live: ${problem}`);
      return 1;
    }
    const adminUrl = `http://127.0.0.1:${gw.port}`;
    const rounds: LiveRound[] = [];
    for (let i = 0; i < opts.rounds; i++) {
      const order = liveOrder(LIVE_CLIENTS, i);
      log(`live round ${i + 1} of ${opts.rounds}: ${order.join(", ")} live clients`);
      const round: LiveRound = [];
      for (const n of order) {
        const clients = await openLiveClients(adminUrl, LIVE_ADMIN_KEY, n);
        try {
          const events0 = clients.events();
          const before = await cpuMs(gw.child.pid);
          const many = await c32Load(gw.url, LIVE_LOAD_S, "live", opts, dir, pin);
          const after = await cpuMs(gw.child.pid);
          if (many.errors > 0 || many.completed === 0 || before === null || after === null) {
            throw new Error(
              `${n} live clients: ${many.errors} failed requests of ${many.completed}, ` +
                `gateway CPU ${before === null || after === null ? "not read" : "read"}`,
            );
          }
          round.push({
            clients: n,
            rps: many.rps,
            cpuUs: ((after - before) * 1000) / many.completed,
            events: clients.events() - events0,
          });
        } finally {
          await clients.close();
        }
      }
      rounds.push(round);
    }
    // The live feed alone: idle windows with each client count, the order alternating, after a
    // pause that lets the load's last usage flush and collections pass.
    await new Promise((r) => setTimeout(r, LIVE_SETTLE_MS));
    const idle: LiveIdle[] = [];
    const windows = Array.from({ length: LIVE_IDLE_ROUNDS }, (_, i) => liveOrder(LIVE_CLIENTS, i))
      .flat();
    for (const [i, n] of windows.entries()) {
      log(`live idle window ${i + 1} of ${windows.length}: ${n} live clients`);
      const clients = await openLiveClients(adminUrl, LIVE_ADMIN_KEY, n);
      try {
        const events0 = clients.events();
        const t0 = performance.now();
        const before = await threadCpuMs(gw.child.pid);
        await new Promise((r) => setTimeout(r, LIVE_IDLE_MS));
        const after = await threadCpuMs(gw.child.pid);
        const ms = performance.now() - t0;
        if (before === null || after === null) throw new Error("gateway CPU not read");
        idle.push({ clients: n, ms, cpuMs: after - before, events: clients.events() - events0 });
      } finally {
        await clients.close();
      }
    }
    const text = renderLive(rounds, idle, {
      date: new Date().toISOString(),
      machine: await machine(),
      command: opts.command,
      load,
      tickMs: 1000,
    });
    await Deno.writeTextFile(LIVE_FIGURES, text);
    console.log(text);
    return 0;
  } finally {
    await scope.close();
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      quick: { type: "boolean", default: false },
      out: { type: "string" },
      "gateway-url": { type: "string" },
      usage: { type: "string", default: "jsonlog" },
      transport: { type: "string", default: "raw" },
      wrk: { type: "string", default: "auto" },
      streams: { type: "string" },
      limits: { type: "boolean", default: false },
      contended: { type: "boolean", default: false },
      workers: { type: "string", default: "1" },
      check: { type: "boolean", default: false },
      save: { type: "boolean", default: false },
      rounds: { type: "string", default: "3" },
      otel: { type: "boolean", default: false },
      live: { type: "boolean", default: false },
      memory: { type: "boolean", default: false },
      connections: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "usage: deno task bench [--quick] [--out FILE] [--gateway-url URL|fake|bare] " +
        "[--usage jsonlog|jsonlog-direct|sqlite|none] [--transport raw|fetch] [--wrk auto|yes|no] [--streams N] " +
        "[--limits] [--contended] [--workers N] [--check [--save] [--rounds N]] [--otel [--rounds N]] [--live [--rounds N]] [--memory [--connections N]]",
    );
    return 0;
  }
  if (!["jsonlog", "jsonlog-direct", "sqlite", "none"].includes(values.usage)) {
    console.error(
      `bench: --usage must be jsonlog, jsonlog-direct, sqlite or none, got '${values.usage}'`,
    );
    return 2;
  }
  const workers = Number(values.workers);
  if (!Number.isInteger(workers) || workers < 1) {
    console.error(`bench: --workers must be a whole number >= 1, got '${values.workers}'`);
    return 2;
  }
  if (values.wrk !== "auto" && values.wrk !== "yes" && values.wrk !== "no") {
    console.error(`bench: --wrk must be auto, yes or no, got '${values.wrk}'`);
    return 2;
  }
  if (values.transport !== "raw" && values.transport !== "fetch") {
    console.error(`bench: --transport must be raw or fetch, got '${values.transport}'`);
    return 2;
  }
  const quick = values.quick;
  const streamCount = Number(values.streams ?? (quick ? 200 : 2000));
  if (!Number.isInteger(streamCount) || streamCount < 1) {
    console.error(`bench: --streams must be a whole number >= 1, got '${values.streams}'`);
    return 2;
  }
  const connections = Number(values.connections ?? (quick ? 1000 : 10_000));
  if (!Number.isInteger(connections) || connections < 1) {
    console.error(`bench: --connections must be a whole number >= 1, got '${values.connections}'`);
    return 2;
  }
  const out = values.out ??
    `${ROOT}/docs/bench/${
      values.memory
        ? (quick ? "memory-quick.tmp" : "memory.md")
        : (quick ? "results-quick.tmp" : "results.md")
    }`;
  const command = ["deno task bench", ...Deno.args].join(" ");
  const started = Date.now();
  const log = (msg: string) =>
    console.error(`bench [${((Date.now() - started) / 1000).toFixed(1)}s]: ${msg}`);

  const pin = await canPin();
  const notes: string[] = [
    `load client: Deno, ${
      values.transport === "raw" ? "raw HTTP/1.1 over Deno.connect" : "fetch"
    }` +
    ", keep-alive, connections opened before measuring",
    `usage store of the gateway: ${
      values.usage === "jsonlog"
        ? `jsonlog file mode, write-behind (flush_interval_ms ${USAGE_FLUSH_MS}), in its own folder`
        : values.usage === "jsonlog-direct"
        ? "jsonlog file mode without write-behind (the default operator setup), in its own folder"
        : values.usage === "sqlite"
        ? `SQLite, write-behind (flush_interval_ms ${USAGE_FLUSH_MS}), in its own folder`
        : "none"
    }`,
  ];
  let useWrk = false;
  if (values.wrk !== "no") {
    const problem = await ensureWrk(log);
    if (problem && values.wrk === "yes") {
      console.error(`bench: ${problem}`);
      return 1;
    }
    useWrk = problem === null;
    notes.push(
      useWrk
        ? "c=32 and c=256 throughput: wrk (1 thread, pinned with the fake model; on one shared " +
          "CPU it keeps up where the Deno client does not)"
        : `c=32 and c=256 throughput: the Deno client (${problem})`,
    );
  }
  if (values.live) {
    const rounds = Number(values.rounds);
    if (!Number.isInteger(rounds) || rounds < 2) {
      console.error(`bench: --rounds must be a whole number >= 2, got '${values.rounds}'`);
      return 2;
    }
    return await runLive({
      pin,
      useWrk,
      usage: values.usage,
      limits: values.limits,
      contended: false,
      workers,
      rounds,
      save: false,
      transport: values.transport,
      command,
      log,
    });
  }
  if (values.otel) {
    const rounds = Number(values.rounds);
    if (!Number.isInteger(rounds) || rounds < 2) {
      console.error(`bench: --rounds must be a whole number >= 2, got '${values.rounds}'`);
      return 2;
    }
    return await runOtel({
      pin,
      useWrk,
      usage: values.usage,
      limits: values.limits,
      contended: values.contended,
      workers,
      rounds,
      save: false,
      transport: values.transport,
      command,
      log,
    });
  }
  if (values.check || values.save) {
    const rounds = Number(values.rounds);
    if (!Number.isInteger(rounds) || rounds < 2) {
      console.error(`bench: --rounds must be a whole number >= 2, got '${values.rounds}'`);
      return 2;
    }
    return await runCheck({
      pin,
      useWrk,
      usage: values.usage,
      limits: values.limits,
      contended: values.contended,
      workers,
      rounds,
      save: values.save,
      transport: values.transport,
      command,
      log,
    });
  }
  if (values.memory) {
    return await runMemory({
      pin,
      usage: values.usage,
      limits: values.limits,
      contended: values.contended,
      workers,
      connections,
      streams: streamCount,
      quick,
      command,
      out,
      log,
    });
  }
  const scope = await childScope("skeid-bench-", log);
  const { children, dir } = scope;

  try {
    // The fake model: the upstream of both sides.
    const fake = await startFake(children, pin);
    const fakeUrl = fake.url;
    log(`fake model at ${fakeUrl} (pid ${fake.pid})`);

    // The gateway, or what stands in for it.
    let gatewayUrl: string | undefined;
    let gatewayPid: number | undefined;
    let gatewayNote: string;
    let unavailable: string | null = null;
    const given = values["gateway-url"];
    if (given && given !== "fake" && given !== "bare") {
      gatewayUrl = given.replace(/\/$/, "");
      gatewayNote = `external OpenAI-compatible URL ${gatewayUrl} (not started here; no RSS)`;
      unavailable = await sanityCheck(gatewayUrl);
    } else if (given === "bare") {
      const bare = await startBare(children, fakeUrl, pin);
      gatewayUrl = bare.url;
      gatewayPid = bare.pid;
      gatewayNote = "a bare Deno proxy (Deno.serve + Skeid's HTTP/1.1 client, nothing else) " +
        "standing in for Skeid: the runtime's floor, not Skeid";
      unavailable = await sanityCheck(gatewayUrl);
    } else if (given === "fake") {
      const second = spawnChild("second fake model", DENO, FAKE_MODEL_ARGS, {
        cpu: pin ? GATEWAY_CPU : undefined,
      });
      children.push(second);
      gatewayUrl = (await second.firstLine(60_000)).trim();
      gatewayPid = second.pid;
      gatewayNote = "a second fake model standing in for Skeid (harness check, not Skeid)";
      unavailable = await sanityCheck(gatewayUrl);
    } else {
      const gw = await startSkeid(children, {
        fakeUrl,
        usage: values.usage,
        dir,
        limits: values.limits,
        contended: values.contended,
        workers,
        pin,
      });
      const port = gw.port;
      gatewayUrl = gw.url;
      gatewayPid = gw.child.pid;
      gatewayNote = `\`skeid serve --workers ${workers}\` (src/main.ts) on 127.0.0.1:${port}, ` +
        "one node → the fake model" +
        (values.limits ? "; every key on a policy with rate limits and a budget (--limits)" : "") +
        (values.contended
          ? "; the node at max_conns 16, half the c=32 load waiting (--contended)"
          : "");
      unavailable = await notReady(gw);
    }
    if (unavailable) {
      log(`gateway not available: ${unavailable}`);
      gatewayNote = `**gateway not available** — ${unavailable.replaceAll("\n", " ")}`;
    } else log(`gateway at ${gatewayUrl}${gatewayPid ? ` (pid ${gatewayPid})` : ""}`);
    const useGateway = !unavailable && gatewayUrl !== undefined;
    const gatewayChild = children.find((c) => c.pid === gatewayPid && c.name === "gateway");
    const idle = useGateway && gatewayPid ? await readRss(gatewayPid) : null;

    const sc = scenarios(quick, streamCount);
    const runSide = async (url: string, s: Scenario, sampleRssOf?: number): Promise<SideRun> => {
      const sampler = sampleRssOf ? sampleRss(sampleRssOf) : undefined;
      const cpuBefore = url === gatewayUrl && gatewayPid ? await cpuMs(gatewayPid) : null;
      try {
        const result = useWrk && s.wrk
          ? await runWrk({
            url: `${url}/chat/completions`,
            concurrency: s.concurrency,
            seconds: Math.max(1, Math.round(s.durationMs / 1000)),
            body: JSON.stringify(s.body),
            dir,
            cpu: pin ? LOAD_CPU : undefined,
          })
          : await runClient(url, s, values.transport, pin);
        const cpuAfter = cpuBefore !== null && gatewayPid ? await cpuMs(gatewayPid) : null;
        if (cpuBefore !== null && cpuAfter !== null && result.completed > 0) {
          // Whole-process CPU (every worker and the supervisor), warm-up included: an upper bound.
          const us = ((cpuAfter - cpuBefore) * 1000) / result.completed;
          notes.push(
            `${s.label}: gateway CPU ${us.toFixed(0)} µs per request ` +
              `(${result.completed.toLocaleString("en-US")} requests, --workers ${workers})`,
          );
        }
        return { result, rssPeakMb: sampler ? await sampler.stop() : undefined };
      } catch (e) {
        await sampler?.stop();
        return { error: e instanceof Error ? e.message : String(e) };
      }
    };
    const runScenario = async (s: Scenario, sampleGateway = false): Promise<ScenarioRun> => {
      log(`${s.label}: direct`);
      const direct = await runSide(fakeUrl, s);
      let skeid: SideRun = { error: "gateway not available" };
      if (useGateway && gatewayUrl) {
        log(`${s.label}: through the gateway`);
        skeid = await runSide(gatewayUrl, s, sampleGateway ? gatewayPid : undefined);
      }
      return { label: s.label, describe: s.describe, direct, skeid };
    };

    const results: BenchResults = {
      c1: await runScenario(sc.c1),
      c32: await runScenario(sc.c32),
      c256: await runScenario(sc.c256),
      stream32: await runScenario(sc.stream32),
      streams: await runScenario(sc.streams, true),
      streamCount,
      idleRssMb: idle?.rssMb,
    };
    if (useGateway && gatewayPid) results.hwmMb = (await readRss(gatewayPid))?.hwmMb;
    if (gatewayChild && values.usage.startsWith("jsonlog")) {
      // Stop the gateway (SIGTERM: it drains and flushes its ledger), then count its events:
      // the bench measures the gateway with its ledger, and says so with a number.
      await gatewayChild.stop(30_000);
      const events = await countLines(usageFile(dir));
      notes.push(
        `usage events the gateway wrote (all scenarios, warm-ups and sanity request included): ` +
          `${events.toLocaleString("en-US")}`,
      );
    }

    const setup: BenchSetup = {
      date: new Date().toISOString(),
      command,
      machine: await machine(),
      quick,
      gateway: gatewayNote,
      gatewayAvailable: useGateway,
      pinning: pin
        ? `gateway on CPU ${gatewayCpus(workers)}; load client and fake model on CPU ${LOAD_CPU} ` +
          "(taskset)"
        : "none (taskset missing or fewer than 2 CPUs): all processes share every CPU",
      notes,
    };
    const report = renderReport(results, setup);
    await Deno.mkdir(out.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.writeTextFile(out, report);
    console.log(`\n${goalTable(results)}\n`);
    if (!useGateway) console.log(`gateway not available: ${unavailable ?? "not started"}\n`);
    console.log(`report: ${out} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return 0;
  } finally {
    await scope.close();
  }
}

/** `--memory`: the gateway's upstream connect timeout, s. */
const MEMORY_CONNECT_TIMEOUT_S = 30;

/** What `--memory` needs from the command line. */
interface MemoryOptions extends GatewayChoice {
  connections: number;
  streams: number;
  quick: boolean;
  out: string;
}

/**
 * `--memory`: the bare proxy and Skeid, each on a fresh process per measurement, holding
 * `connections` idle keep-alive client connections (RSS once all are open) and running `streams`
 * concurrent streams (peak RSS). Fresh processes, so one load's leftovers (V8 pages, malloc
 * arenas) never count in the other's figure.
 */
async function runMemory(opts: MemoryOptions): Promise<number> {
  const { log, pin } = opts;
  const scope = await childScope("skeid-bench-memory-", log);
  try {
    const { children, dir } = scope;
    const fake = await startFake(children, pin);
    const sc = scenarios(opts.quick, opts.streams);
    type Started = { url: string; pid: number; child?: Child };
    const starters: Record<"bare" | "skeid", () => Promise<Started>> = {
      bare: async () => {
        const b = await startBare(children, fake.url, pin);
        const problem = await sanityCheck(b.url);
        if (problem) throw new Error(problem);
        return { url: b.url, pid: b.pid, child: children.find((c) => c.pid === b.pid) };
      },
      skeid: async () => {
        const gw = await startSkeid(children, {
          ...opts,
          fakeUrl: fake.url,
          dir,
          // Memory, not connect latency: on a busy machine the fake model, sharing its CPU with
          // the client, takes over the default 3 s to accept some of 2,000 new connections, and a
          // stream that failed holds nothing.
          env: { SKEID_UPSTREAM_CONNECT_TIMEOUT: String(MEMORY_CONNECT_TIMEOUT_S) },
        });
        const problem = await notReady(gw);
        if (problem) throw new Error(problem);
        return { url: gw.url, pid: gw.child.pid, child: gw.child };
      },
    };
    const sides: { bare: MemorySide; skeid: MemorySide } = { bare: {}, skeid: {} };
    for (const name of ["bare", "skeid"] as const) {
      const side = sides[name];
      try {
        log(`${name}: ${opts.streams.toLocaleString("en-US")} streams on a fresh process`);
        let p = await starters[name]();
        const before = (await readRss(p.pid))?.rssMb ?? 0;
        const sampler = sampleRss(p.pid);
        let result: LoadResult;
        try {
          result = await runClient(p.url, sc.streams, "raw", pin);
        } finally {
          side.streams = {
            beforeMb: before,
            peakMb: await sampler.stop(),
            completed: 0,
            errors: 0,
          };
        }
        side.streams.completed = result.completed;
        side.streams.errors = result.errors;
        side.streams.errorSample = result.errorSamples[0];
        await p.child?.stop(30_000);
        log(
          `${name}: ${
            opts.connections.toLocaleString("en-US")
          } idle connections on a fresh process`,
        );
        p = await starters[name]();
        side.idle = await holdIdle({
          deno: DENO,
          url: p.url,
          pid: p.pid,
          connections: opts.connections,
          cpu: pin ? LOAD_CPU : undefined,
          children,
        });
        await p.child?.stop(30_000);
      } catch (e) {
        side.error = e instanceof Error ? e.message : String(e);
        log(`${name}: ${side.error}`);
      }
    }
    const report = renderMemory(sides, {
      date: new Date().toISOString(),
      command: opts.command,
      machine: await machine(),
      connections: opts.connections,
      streams: opts.streams,
    });
    await Deno.writeTextFile(opts.out, report);
    console.log(`\n${report}`);
    console.log(`report: ${opts.out}`);
    return sides.skeid.error ? 1 : 0;
  } finally {
    await scope.close();
  }
}

if (import.meta.main) Deno.exit(await main());
