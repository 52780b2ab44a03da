/**
 * `skeid fake-model [--listen HOST:PORT] [--ttft-ms N] [--tokens N] [--itl-ms N] [--model NAME]
 * [--record N]`: runs the deterministic fake model, prints its base URL on stdout (one line) and
 * serves until SIGINT or SIGTERM.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { startFakeModel } from "../fake/model.ts";
import { errorMessage } from "../error_message.ts";

const USAGE =
  "usage: skeid fake-model [--listen HOST:PORT] [--ttft-ms N] [--tokens N] [--itl-ms N] " +
  "[--model NAME] [--record N]";

const HELP = `${USAGE}

A deterministic OpenAI-compatible model server (chat completions, streamed or not, completions,
embeddings, /v1/models, /metrics). Prints its base URL and serves until SIGINT or SIGTERM.

options:
  --listen HOST:PORT  where to listen (default 127.0.0.1:8000; port 0: a free one)
  --ttft-ms N         milliseconds before the first token (default 0)
  --tokens N          output tokens per answer (default 8)
  --itl-ms N          milliseconds between tokens (default 0)
  --model NAME        its /v1/models entry, and the model of answers to requests naming none
                      (default fake-model)
  --record N          requests kept for inspection (default 1000; 0 keeps none)
  -h, --help          this help

A request may override the timings with fake_ttft_ms, fake_itl_ms and fake_tokens in its body.`;

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

/** Runs the subcommand; answers the exit code (0 after a signal). */
export async function run(args: string[]): Promise<number> {
  let opts;
  try {
    const { values } = parseArgs({
      args,
      options: {
        listen: { type: "string", default: "127.0.0.1:8000" },
        "ttft-ms": { type: "string" },
        tokens: { type: "string" },
        "itl-ms": { type: "string" },
        model: { type: "string" },
        record: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    opts = {
      ...parseListen(values.listen),
      ttftMs: count("ttft-ms", values["ttft-ms"]),
      tokens: count("tokens", values.tokens),
      itlMs: count("itl-ms", values["itl-ms"]),
      modelName: values.model,
      record: count("record", values.record),
    };
  } catch (e) {
    console.error(`skeid fake-model: ${errorMessage(e)}\n${USAGE}`);
    return 2;
  }
  let fake;
  try {
    fake = startFakeModel(opts);
  } catch (e) {
    console.error(`skeid fake-model: cannot listen on ${opts.hostname}:${opts.port}: ${e}`);
    return 1;
  }
  console.log(fake.url);
  const { promise, resolve } = Promise.withResolvers<void>();
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, resolve);
  await promise;
  for (const s of signals) Deno.removeSignalListener(s, resolve);
  await fake.close();
  return 0;
}
