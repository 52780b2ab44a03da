/**
 * `skeid fake-model [--listen HOST:PORT] [--ttft-ms N] [--tokens N] [--itl-ms N] [--model NAME]
 * [--record N] [--sim] [engine flags] [--nodes N]`: runs the deterministic fake model — or, with
 * `--sim` or any engine flag, a simulated engine with a KV prefix cache — prints its base URL on
 * stdout (one line per node) and serves until SIGINT or SIGTERM.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { type FakeModel, type FakeModelOptions, startFakeModel } from "../fake/model.ts";
import { DEFAULT_ENGINE, type EngineSettings } from "../fake/engine.ts";
import { errorMessage } from "../error_message.ts";

const USAGE =
  "usage: skeid fake-model [--listen HOST:PORT] [--ttft-ms N] [--tokens N] [--itl-ms N] " +
  "[--model NAME] [--record N] [--nodes N] [--sim] [--block-size N] [--kv-blocks N] " +
  "[--max-running N] [--ttft-base-ms N] [--prefill-ms-per-token N] [--decode-slowdown N]";

const E = DEFAULT_ENGINE;
const HELP = `${USAGE}

A deterministic OpenAI-compatible model server (chat completions, streamed or not, completions,
embeddings, /v1/models, /metrics). Prints its base URL and serves until SIGINT or SIGTERM.

options:
  --listen HOST:PORT  where to listen (default 127.0.0.1:8000; port 0: a free one)
  --ttft-ms N         milliseconds before the first token (default 0; not with the engine)
  --tokens N          output tokens per answer (default 8)
  --itl-ms N          milliseconds between tokens (default 0; with the engine: per token with
                      one sequence running, default ${E.itlMs})
  --model NAME        its /v1/models entry, and the model of answers to requests naming none
                      (default fake-model)
  --record N          requests kept for inspection (default 1000; 0 keeps none)
  --nodes N           serve N independent nodes on N ports: PORT, PORT+1, ... (port 0: N free
                      ports), one URL a line (default 1)
  -h, --help          this help

engine simulation (--sim, or any flag below, turns it on; each node has its own engine):
  --sim                     simulate an engine with the defaults below
  --block-size N            tokens per KV block (default ${E.blockSize})
  --kv-blocks N             KV blocks per node (default ${E.numBlocks})
  --max-running N           sequences running at once; the rest wait in a FIFO queue (default ${E.maxRunning})
  --ttft-base-ms N          fixed part of the time to first token, ms (default ${E.ttftBaseMs})
  --prefill-ms-per-token N  prefill time per uncached prompt token, ms (default ${E.prefillMsPerToken})
  --decode-slowdown N       decoding is this much slower with a full batch (default ${E.decodeSlowdown})

With the engine: TTFT = queue wait + base + uncached prompt tokens x prefill cost, where a prompt
token is a word of the messages' content; the full blocks of prompt and answer stay cached (LRU of
chained block hashes) for the next request sharing the prefix; answers carry
usage.prompt_tokens_details.cached_tokens; /metrics shows vllm:num_requests_running and _waiting,
vllm:kv_cache_usage_perc (and the old vllm:gpu_cache_usage_perc),
vllm:prefix_cache_queries_total and _hits_total, and vllm:cache_config_info.

Without it, a request may set its timings with fake_ttft_ms, fake_itl_ms and fake_tokens.`;

/** Splits `HOST:PORT` (`[::1]:8080` for IPv6); throws naming the bad value. */
export function parseListen(value: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error(`--listen: expected HOST:PORT, got '${value}'`);
  return { hostname: m[1] ?? (m[2] || "127.0.0.1"), port };
}

function count(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0) {
    throw new Error(`--${name}: expected a non-negative number, got '${value}'`);
  }
  return n;
}

/** Engine flags: option name → setting. */
const ENGINE_FLAGS: readonly [string, keyof EngineSettings][] = [
  ["block-size", "blockSize"],
  ["kv-blocks", "numBlocks"],
  ["max-running", "maxRunning"],
  ["ttft-base-ms", "ttftBaseMs"],
  ["prefill-ms-per-token", "prefillMsPerToken"],
  ["decode-slowdown", "decodeSlowdown"],
];

/** The options of every node, and how many nodes; throws naming the bad flag. */
export function fakeModelOptions(args: string[]): { opts: FakeModelOptions; nodes: number } | null {
  const engineOptions = Object.fromEntries(
    ENGINE_FLAGS.map(([flag]) => [flag, { type: "string" as const }]),
  );
  const { values } = parseArgs({
    args,
    options: {
      listen: { type: "string", default: "127.0.0.1:8000" },
      "ttft-ms": { type: "string" },
      tokens: { type: "string" },
      "itl-ms": { type: "string" },
      model: { type: "string" },
      record: { type: "string" },
      nodes: { type: "string" },
      sim: { type: "boolean" },
      ...engineOptions,
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return null;
  const raw = values as Record<string, string | boolean | undefined>;
  const engine: Partial<EngineSettings> = {};
  let simulated = values.sim === true;
  for (const [flag, key] of ENGINE_FLAGS) {
    const n = count(flag, raw[flag] as string | undefined);
    if (n === undefined) continue;
    if ((key === "blockSize" || key === "numBlocks" || key === "maxRunning") && n < 1) {
      throw new Error(`--${flag}: expected at least 1, got '${raw[flag]}'`);
    }
    engine[key] = n;
    simulated = true;
  }
  const itl = count("itl-ms", values["itl-ms"]);
  if (simulated && itl !== undefined) engine.itlMs = itl;
  const nodes = count("nodes", values.nodes) ?? 1;
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 256) {
    throw new Error(`--nodes: expected an integer from 1 to 256, got '${values.nodes}'`);
  }
  return {
    opts: {
      ...parseListen(values.listen),
      ttftMs: count("ttft-ms", values["ttft-ms"]),
      tokens: count("tokens", values.tokens),
      itlMs: simulated ? undefined : itl,
      modelName: values.model,
      record: count("record", values.record),
      engine: simulated ? engine : undefined,
    },
    nodes,
  };
}

/** Runs the subcommand; answers the exit code (0 after a signal). */
export async function run(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = fakeModelOptions(args);
  } catch (e) {
    console.error(`skeid fake-model: ${errorMessage(e)}\n${USAGE}`);
    return 2;
  }
  if (parsed === null) {
    console.log(HELP);
    return 0;
  }
  const { opts, nodes } = parsed;
  const fakes: FakeModel[] = [];
  for (let i = 0; i < nodes; i++) {
    const port = opts.port === 0 || opts.port === undefined ? 0 : opts.port + i;
    try {
      fakes.push(startFakeModel({ ...opts, port }));
    } catch (e) {
      console.error(`skeid fake-model: cannot listen on ${opts.hostname}:${port}: ${e}`);
      await Promise.all(fakes.map((f) => f.close()));
      return 1;
    }
  }
  console.log(fakes.map((f) => f.url).join("\n"));
  const { promise, resolve } = Promise.withResolvers<void>();
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, resolve);
  await promise;
  for (const s of signals) Deno.removeSignalListener(s, resolve);
  await Promise.all(fakes.map((f) => f.close()));
  return 0;
}
