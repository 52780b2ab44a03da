/**
 * `wrk` as the benchmark's throughput client: on one shared CPU with the fake model it keeps
 * up at high concurrency where the Deno client falls behind (c=256: ~24k vs ~10k req/s).
 * Installs it with apt-get when missing and running as root; parses its report into a
 * {@link LoadResult}.
 *
 * @module
 */
import type { LoadResult } from "./client.ts";
import { spawnChild } from "./procs.ts";

/** Milliseconds of a wrk duration (`412.00us`, `1.20ms`, `2.01s`); NaN when unreadable. */
export function wrkMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) return NaN;
  const x = Number(m[1]);
  return m[2] === "us" ? x / 1000 : m[2] === "ms" ? x : m[2] === "s" ? x * 1000 : x * 60_000;
}

/** Reads a `wrk --latency` report. */
export function parseWrk(text: string, concurrency: number): LoadResult {
  const total = Number(/(\d+) requests in ([\d.]+)(us|ms|s|m)/.exec(text)?.[1]);
  const took = /\d+ requests in ([\d.]+(?:us|ms|s|m))/.exec(text)?.[1];
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]);
  if (!Number.isFinite(total) || !Number.isFinite(rps) || !took) {
    throw new Error(`unreadable wrk report: ${text.slice(0, 300)}`);
  }
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const socketErrors = socket ? socket.slice(1).reduce((n, x) => n + Number(x), 0) : 0;
  const pct = (p: string) => wrkMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, "m").exec(text)?.[1] ?? "");
  const lat = /^\s+Latency\s+(\S+)\s+\S+\s+(\S+)/m.exec(text);
  const errorSamples: string[] = [];
  if (non2xx) errorSamples.push(`${non2xx} non-2xx answers`);
  if (socketErrors) errorSamples.push(socket![0]);
  const errors = non2xx + socketErrors;
  return {
    transport: "wrk",
    stream: false,
    concurrency,
    completed: total - non2xx,
    errors,
    errorSamples,
    elapsedMs: wrkMs(took),
    rps: rps * (total === 0 ? 0 : (total - non2xx) / total),
    latency: {
      n: total,
      p50: pct("50"),
      p90: pct("90"),
      p99: pct("99"),
      max: lat ? wrkMs(lat[2]) : NaN,
      mean: lat ? wrkMs(lat[1]) : NaN,
    },
  };
}

/** Whether `wrk` runs. */
async function hasWrk(): Promise<boolean> {
  try {
    await new Deno.Command("wrk", { args: ["-v"], stdout: "null", stderr: "null" }).output();
    return true;
  } catch {
    return false;
  }
}

/** null when wrk is ready (installed with apt-get if needed and allowed), else why not. */
export async function ensureWrk(log: (msg: string) => void): Promise<string | null> {
  if (await hasWrk()) return null;
  if (Deno.uid() !== 0) return "wrk is not installed (and not root to install it)";
  log("installing wrk with apt-get ...");
  const child = spawnChild("apt-get", "apt-get", ["install", "-y", "-q", "wrk"], {
    env: { DEBIAN_FRONTEND: "noninteractive" },
  });
  const timer = setTimeout(() => child.stop(), 180_000);
  const code = await child.exited;
  clearTimeout(timer);
  if (code !== 0 || !(await hasWrk())) return `apt-get install wrk failed: ${child.tail()}`;
  return null;
}

/** Runs `wrk -t1 -c<c> -d<seconds>s --latency` POSTing `body` to `url`. */
export async function runWrk(opts: {
  url: string;
  concurrency: number;
  seconds: number;
  body: string;
  dir: string;
  cpu?: number;
}): Promise<LoadResult> {
  const script = `${opts.dir}/post-${opts.concurrency}.lua`;
  await Deno.writeTextFile(
    script,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(opts.body)}\n` +
      `wrk.headers["Content-Type"] = "application/json"\n` +
      `wrk.headers["Authorization"] = "Bearer sk-bench"\n`,
  );
  const child = spawnChild(
    `wrk c=${opts.concurrency}`,
    "wrk",
    ["-t1", `-c${opts.concurrency}`, `-d${opts.seconds}s`, "--latency", "-s", script, opts.url],
    { cpu: opts.cpu },
  );
  const limitMs = opts.seconds * 1000 + 30_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), limitMs)));
  try {
    const code = await Promise.race([child.exited, timedOut]);
    if (code === "timeout") throw new Error(`wrk ran over ${limitMs} ms`);
    if (code !== 0) throw new Error(`wrk exited ${code}: ${child.tail()}`);
    return parseWrk(child.tail(200), opts.concurrency);
  } finally {
    clearTimeout(timer);
    await child.stop();
  }
}
