/**
 * The benchmark's load client: `concurrency` workers send one prebuilt OpenAI request after
 * another (keep-alive) until `requests` are done or `durationMs` is over, whichever comes
 * first, and measure latency — or, for streams, the time to the first content byte and the
 * gaps between content chunks. Transport `raw` is an HTTP/1.1 client over `Deno.connect`;
 * `fetch` uses the runtime's fetch (kept to compare: it saturates less).
 *
 * Run as a program it prints one JSON line (a {@link LoadResult}):
 *
 *   deno run --allow-net scripts/bench/client.ts --url http://127.0.0.1:8000/v1/chat/completions \
 *     --body '{"model":"m","messages":[]}' --concurrency 32 --requests 100000 --duration-ms 5000
 *
 * @module
 */
import { parseArgs } from "node:util";
import { buildPost, RawHttpConnection } from "./raw_http.ts";
import { Samples, summarize, type Summary } from "./stats.ts";

/** What to run. */
export interface LoadOptions {
  /** Full endpoint URL (`http://host:port/v1/chat/completions`). */
  url: string;
  /** JSON request body. */
  body: string;
  /** Whether the answer is an SSE stream to time chunk by chunk. */
  stream: boolean;
  /** Parallel workers (connections). */
  concurrency: number;
  /** Most requests to send (measured ones; warm-up comes on top). */
  requests: number;
  /** Longest measured phase, milliseconds. */
  durationMs: number;
  /** A request taking longer fails and its connection is dropped. */
  timeoutMs: number;
  /** Requests sent before measuring, spread over the workers. */
  warmup: number;
  /** `raw` or `fetch`. */
  transport: "raw" | "fetch";
  /** Content chunks a complete stream carries (a stream with fewer is an error). */
  expectChunks?: number;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** Spread the workers' first measured requests evenly over this many milliseconds. */
  rampMs?: number;
}

/** What a load run measured. Times in milliseconds. */
export interface LoadResult {
  transport: string;
  stream: boolean;
  concurrency: number;
  /** Requests answered completely with 200. */
  completed: number;
  /** Requests that failed (status, broken connection, short stream, timeout). */
  errors: number;
  /** A few distinct error descriptions. */
  errorSamples: string[];
  /** Length of the measured phase. */
  elapsedMs: number;
  /** completed / elapsed seconds. */
  rps: number;
  /** Whole request latency. */
  latency: Summary;
  /** Streams: request sent → first content byte. */
  ttft?: Summary;
  /** Streams: gaps between consecutive content chunks. */
  gap?: Summary;
}

const QUOTE = 34; // "
const CONTENT_KEY = new TextEncoder().encode('"content":"');
const DONE_KEY = new TextEncoder().encode("[DONE]");

/**
 * Counts content chunks in an SSE body as it arrives — `"content":"` followed by anything but
 * a quote (the role chunk's empty content does not count) — and notes `[DONE]`. Works on bytes
 * across piece boundaries, with no decoding.
 */
class ContentScanner {
  #key = 0; // bytes of CONTENT_KEY matched so far
  #done = 0; // bytes of DONE_KEY matched so far
  /** Content chunks seen. */
  chunks = 0;
  /** Time of the first content chunk, or -1. */
  firstAt = -1;
  /** The stream's `[DONE]` was seen. */
  done = false;
  #lastAt = -1;

  constructor(readonly gaps: Samples | null) {}

  /** Scans one piece of body, arrived at `now`. */
  feed(view: Uint8Array, now: number): void {
    let found = 0;
    let key = this.#key;
    let done = this.#done;
    for (let i = 0; i < view.length; i++) {
      const b = view[i];
      if (key === CONTENT_KEY.length) {
        if (b !== QUOTE) found++;
        key = 0;
      }
      // The key's only repeated byte is the quote at its start: a mismatch restarts there.
      if (b === CONTENT_KEY[key]) key++;
      else key = b === QUOTE ? 1 : 0;
      if (b !== DONE_KEY[done]) done = b === DONE_KEY[0] ? 1 : 0;
      else if (++done === DONE_KEY.length) {
        this.done = true;
        done = 0;
      }
    }
    this.#key = key;
    this.#done = done;
    if (found === 0) return;
    for (let k = 0; k < found; k++) {
      this.chunks++;
      if (this.firstAt < 0) this.firstAt = now;
      else this.gaps?.push(k === 0 ? now - this.#lastAt : 0);
    }
    this.#lastAt = now;
  }
}

/** Runs one load; never throws for request failures (they are counted). */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const url = new URL(opts.url);
  const latency = new Samples();
  const ttft = new Samples();
  const gaps = new Samples();
  const errorSamples = new Set<string>();
  let completed = 0;
  let errors = 0;
  let issued = 0;
  let measuring = false;
  let deadline = Infinity;
  const fail = (what: string) => {
    if (!measuring) return;
    errors++;
    if (errorSamples.size < 5) errorSamples.add(what);
  };

  const headers = { authorization: "Bearer sk-bench", ...opts.headers };
  const rawRequest = buildPost(url.host, url.pathname, opts.body, headers);
  const hostname = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port || 80);

  /** One request on `conn` (raw) or through fetch; records when measuring. */
  const one = async (conn: { c: RawHttpConnection | null }, started: { at: number }) => {
    const scanner = new ContentScanner(measuring && opts.stream ? gaps : null);
    const t0 = performance.now();
    started.at = t0;
    let status: number;
    let bodyBytes = 0;
    if (opts.transport === "raw") {
      if (!conn.c || conn.c.closed) conn.c = await RawHttpConnection.open(hostname, port);
      const head = await conn.c.request(rawRequest, (view) => {
        bodyBytes += view.length;
        if (opts.stream) scanner.feed(view, performance.now());
      });
      status = head.status;
    } else {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: opts.body,
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      status = res.status;
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        bodyBytes += value.length;
        if (opts.stream) scanner.feed(value, performance.now());
      }
    }
    const t1 = performance.now();
    started.at = -1;
    if (status !== 200) return fail(`status ${status}`);
    if (bodyBytes === 0) return fail("empty body");
    if (opts.stream) {
      if (!scanner.done) return fail("stream ended without [DONE]");
      if (opts.expectChunks !== undefined && scanner.chunks !== opts.expectChunks) {
        return fail(`stream had ${scanner.chunks} content chunks, expected ${opts.expectChunks}`);
      }
    }
    if (!measuring) return;
    completed++;
    latency.push(t1 - t0);
    if (opts.stream && scanner.firstAt >= 0) ttft.push(scanner.firstAt - t0);
  };

  const workers = Array.from({ length: opts.concurrency }, () => ({
    conn: { c: null as RawHttpConnection | null },
    started: { at: -1 },
  }));
  // Drops connections whose request overran the timeout (raw: no per-request timer).
  const watchdog = setInterval(() => {
    const now = performance.now();
    for (const w of workers) {
      if (w.started.at >= 0 && now - w.started.at > opts.timeoutMs) w.conn.c?.close();
    }
  }, 100);

  const guarded = async (w: (typeof workers)[number]) => {
    try {
      await one(w.conn, w.started);
    } catch (e) {
      w.started.at = -1;
      w.conn.c?.close();
      fail(e instanceof Error ? e.message : String(e));
    }
  };

  try {
    // Connect every worker first so the measured phase holds no connection storm.
    if (opts.transport === "raw") {
      await Promise.all(workers.map(async (w) => {
        try {
          w.conn.c = await RawHttpConnection.open(hostname, port);
        } catch {
          // counted when the worker's first request fails again
        }
      }));
    }
    const perWorker = Math.ceil(opts.warmup / opts.concurrency);
    if (perWorker > 0) {
      await Promise.all(workers.map(async (w) => {
        for (let i = 0; i < perWorker; i++) await guarded(w);
      }));
    }
    measuring = true;
    const t0 = performance.now();
    deadline = t0 + opts.durationMs;
    const ramp = opts.rampMs ?? 0;
    await Promise.all(workers.map(async (w, i) => {
      if (ramp > 0) await new Promise((r) => setTimeout(r, (i * ramp) / workers.length));
      while (issued < opts.requests && performance.now() < deadline) {
        issued++;
        await guarded(w);
      }
    }));
    const elapsedMs = performance.now() - t0;
    const result: LoadResult = {
      transport: opts.transport,
      stream: opts.stream,
      concurrency: opts.concurrency,
      completed,
      errors,
      errorSamples: [...errorSamples],
      elapsedMs,
      rps: completed / (elapsedMs / 1000),
      latency: summarize(latency.values()),
    };
    if (opts.stream) {
      result.ttft = summarize(ttft.values());
      result.gap = summarize(gaps.values());
    }
    return result;
  } finally {
    clearInterval(watchdog);
    for (const w of workers) w.conn.c?.close();
  }
}

function numberOption(values: Record<string, unknown>, name: string, fallback: number): number {
  const v = values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name}: expected a number, got '${v}'`);
  return n;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      url: { type: "string" },
      body: { type: "string" },
      stream: { type: "boolean", default: false },
      concurrency: { type: "string" },
      requests: { type: "string" },
      "duration-ms": { type: "string" },
      "timeout-ms": { type: "string" },
      warmup: { type: "string" },
      transport: { type: "string", default: "raw" },
      "expect-chunks": { type: "string" },
      "ramp-ms": { type: "string" },
    },
  });
  if (!values.url || !values.body) {
    console.error("client.ts: --url and --body are required");
    Deno.exit(2);
  }
  if (values.transport !== "raw" && values.transport !== "fetch") {
    console.error(`client.ts: --transport must be raw or fetch, got '${values.transport}'`);
    Deno.exit(2);
  }
  const result = await runLoad({
    url: values.url,
    body: values.body,
    stream: values.stream,
    concurrency: Math.max(1, numberOption(values, "concurrency", 1)),
    requests: numberOption(values, "requests", 1000),
    durationMs: numberOption(values, "duration-ms", 5000),
    timeoutMs: numberOption(values, "timeout-ms", 30_000),
    warmup: numberOption(values, "warmup", 0),
    transport: values.transport,
    rampMs: numberOption(values, "ramp-ms", 0),
    expectChunks: values["expect-chunks"] === undefined
      ? undefined
      : numberOption(values, "expect-chunks", 0),
  });
  console.log(JSON.stringify(result));
}
