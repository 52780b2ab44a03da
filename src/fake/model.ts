/**
 * The fake model: a deterministic OpenAI-compatible server (chat, completions, embeddings,
 * models, vLLM `/metrics`, `/health`) that every integration test and the benchmark talk to.
 * Request bodies steer it with `fake_*` fields (timing, status, headers, tool calls, faults),
 * and so does the `x-fake-options` header (a JSON object of the same fields, under the body's);
 * see `docs/bench/README.md` for the list.
 *
 * @module
 */
import { responsesAnswer } from "../responses/fake_responses.ts";
import {
  answerDelayMs,
  type AnswerPlan,
  type FakeDefaults,
  FakeRequestError,
  jsonAnswer,
  numberField,
  planAnswer,
  sseSteps,
} from "./answer_plan.ts";
import {
  embeddingBase64,
  embeddingInputs,
  embeddingVector,
  inputTokens,
  promptWords,
} from "./content.ts";
import {
  engineMetricsText,
  type EngineSettings,
  type SequenceStart,
  SequenceTooLong,
  SimEngine,
} from "./engine.ts";
import { wallClock } from "./sim_clock.ts";
import { withFakeOptions } from "./options.ts";
import { FakeCut, timedStream } from "./stream.ts";
import { isJsonObject } from "../core/json.ts";

/** Options of {@link startFakeModel}; every timing is a default a request body can override. */
export interface FakeModelOptions {
  /** Address to listen on (default `127.0.0.1`). */
  hostname?: string;
  /** Port (default 0: any free port; read the real one from `port`). */
  port?: number;
  /** Milliseconds before the first token (default 0). */
  ttftMs?: number;
  /** Words in a generated answer (default 8). */
  tokens?: number;
  /** Milliseconds between tokens (default 0). */
  itlMs?: number;
  /** `model` of answers to requests that name none, and the `/v1/models` entry (default `fake-model`). */
  modelName?: string;
  /** How many requests to keep in `requests` (default 1000; 0 keeps none — the benchmark). */
  record?: number;
  /**
   * Simulate an engine (KV block cache with prefix caching, `max_running` with a queue, TTFT
   * from uncached tokens): chat and completions answers are timed by it, report
   * `prompt_tokens_details.cached_tokens`, and `/metrics` shows its gauges. Absent: the plain
   * fake model (timings from `ttftMs`/`itlMs` and the request's `fake_*` fields).
   */
  engine?: Partial<EngineSettings>;
}

/** One request the fake model received. */
export interface RecordedRequest {
  /** HTTP method. */
  method: string;
  /** URL path without the query (`/v1/chat/completions`). */
  path: string;
  /** Request headers, names lowercase. */
  headers: Record<string, string>;
  /** The parsed JSON body; the raw text when it is not JSON; `null` when empty. */
  body: unknown;
}

/** Live counters of a fake model. */
export interface FakeModelStats {
  /** Model requests (chat, completions, embeddings) being answered now. */
  inflight: number;
  /** Model requests received. */
  started: number;
  /** Model requests answered to the end (error answers included). */
  completed: number;
  /** Model requests not answered to the end: the client went away, or `close()` cut them. */
  aborted: number;
  /** Streams cut on purpose (`fake_cut_after`). */
  cut: number;
  /** `GET /metrics` requests (kept out of `requests`). */
  metricsRequests: number;
}

/** What `GET /metrics` answers instead of the live gauges (see {@link FakeModel.setMetrics}). */
export interface MetricsOverride {
  /** `vllm:num_requests_running` to report. */
  running?: number;
  /** `vllm:num_requests_waiting` to report. */
  waiting?: number;
  /** The whole body instead (other engines' names, malformed lines). */
  text?: string;
  /** Answer status (default 200). */
  status?: number;
}

/** A running fake model. */
export interface FakeModel {
  /** Base URL including `/v1`: `http://127.0.0.1:PORT/v1`. */
  url: string;
  /** The port it listens on. */
  port: number;
  /** The last requests received, oldest first (`/metrics` and `/health` polls are not kept). */
  requests: RecordedRequest[];
  /** Live counters. */
  stats: FakeModelStats;
  /** Resolves once the server listens (it already does when `startFakeModel` returns). */
  ready: Promise<void>;
  /** The simulated engine, when `engine` was given. */
  engine?: SimEngine;
  /** Replaces the live `/metrics` gauges; `null` goes back to live values. */
  setMetrics(override: MetricsOverride | null): void;
  /** Stops listening and ends open streams. */
  close(): Promise<void>;
}

const JSON_HEADERS = { "content-type": "application/json" };

/** OpenAI error `type` for an HTTP status. */
export function errorType(status: number): string {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

function errorBody(message: string, type: string): string {
  return JSON.stringify({ error: { message, type, param: null, code: null } });
}

/** Extra response headers of a request (`fake_headers`, and `fake_retry_after` on errors). */
function extraHeaders(body: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  const h = body.fake_headers;
  if (h !== undefined && h !== null) {
    if (!isJsonObject(h)) throw new FakeRequestError("fake_headers must be an object");
    for (const [k, v] of Object.entries(h)) out[k] = String(v);
  }
  return out;
}

/** Starts a fake model; it listens when this returns. */
export function startFakeModel(opts: FakeModelOptions = {}): FakeModel {
  const defaults: FakeDefaults = {
    ttftMs: opts.ttftMs ?? 0,
    tokens: opts.tokens ?? 8,
    itlMs: opts.itlMs ?? 0,
    modelName: opts.modelName ?? "fake-model",
  };
  const keep = opts.record ?? 1000;
  const requests: RecordedRequest[] = [];
  const stats: FakeModelStats = {
    inflight: 0,
    started: 0,
    completed: 0,
    aborted: 0,
    cut: 0,
    metricsRequests: 0,
  };
  let metricsOverride: MetricsOverride | null = null;
  const engine = opts.engine ? new SimEngine(wallClock, opts.engine) : undefined;
  let seq = 0;
  // Aborted by close(): ends open streams and waits, which would otherwise hold shutdown().
  const stopping = new AbortController();

  const record = (req: Request, path: string, body: unknown) => {
    if (keep <= 0) return;
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => (headers[k] = v));
    requests.push({ method: req.method, path, headers, body });
    if (requests.length > keep) requests.shift();
  };

  const metricsText = (): { status: number; text: string } => {
    const o = metricsOverride;
    if (o?.text !== undefined) return { status: o.status ?? 200, text: o.text };
    if (engine && !o) return { status: 200, text: engineMetricsText(engine, defaults.modelName) };
    const running = o?.running ?? stats.inflight;
    const waiting = o?.waiting ?? 0;
    const label = `{model_name=${JSON.stringify(defaults.modelName)}}`;
    const text = "# HELP vllm:num_requests_running Number of requests currently running on GPU.\n" +
      "# TYPE vllm:num_requests_running gauge\n" +
      `vllm:num_requests_running${label} ${running.toFixed(1)}\n` +
      "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n" +
      "# TYPE vllm:num_requests_waiting gauge\n" +
      `vllm:num_requests_waiting${label} ${waiting.toFixed(1)}\n`;
    return { status: o?.status ?? 200, text };
  };

  /**
   * Submits a chat or completions request to the engine and waits for its first token: answers
   * the start and a cancel (the client left mid-answer), `aborted` when the client left first
   * (the sequence is taken back), or a 400 answer when the prompt can never fit the cache.
   */
  const engineStart = (
    engine: SimEngine,
    plan: AnswerPlan,
    words: string[],
    req: Request,
  ): Promise<{ start: SequenceStart; cancel: () => void } | "aborted" | Response> => {
    const output = plan.pieces.length > 0
      ? plan.pieces.map((p) => p.trim())
      : Array.from({ length: Math.max(1, plan.completionTokens) }, (_, i) => `tök${i}`);
    const { promise, resolve } = Promise.withResolvers<
      { start: SequenceStart; cancel: () => void } | "aborted" | Response
    >();
    const signal = AbortSignal.any([req.signal, stopping.signal]);
    let sequence: { cancel(): void };
    const onAbort = () => {
      sequence.cancel();
      resolve("aborted");
    };
    try {
      sequence = engine.submit(words, output, {
        onFirstToken: (start) => {
          signal.removeEventListener("abort", onAbort);
          resolve({ start, cancel: () => sequence.cancel() });
        },
      });
    } catch (e) {
      if (!(e instanceof SequenceTooLong)) throw e;
      return Promise.resolve(
        new Response(errorBody(e.message, "invalid_request_error"), {
          status: 400,
          headers: JSON_HEADERS,
        }),
      );
    }
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    return promise;
  };

  /**
   * Waits `ms` unless the client goes away (or the server closes) first; answers whether it
   * did. Only a waiting answer reads `req.signal`: an instant one cannot be aborted.
   */
  const waitOrAbort = (ms: number, req: Request): Promise<boolean> =>
    new Promise((resolve) => {
      const signal = AbortSignal.any([req.signal, stopping.signal]);
      if (signal.aborted) return resolve(true);
      const onAbort = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener("abort", onAbort);
        resolve(false);
      }, ms);
      signal.addEventListener("abort", onAbort, { once: true });
    });

  const finished = () => {
    stats.inflight--;
    stats.completed++;
  };
  const abortedNow = () => {
    stats.inflight--;
    stats.aborted++;
  };

  const streamAnswer = (
    plan: AnswerPlan,
    headers: Record<string, string>,
    onAbort?: () => void,
  ): Response => {
    const stream = timedStream(sseSteps(plan), {
      cut: plan.cutAfter !== null,
      split: plan.splitFrames,
      stop: stopping.signal,
      onEnd: (outcome) => {
        if (outcome === "aborted" || outcome === "stopped") {
          onAbort?.();
          abortedNow();
        } else if (outcome === "cut") {
          onAbort?.();
          stats.cut++;
          finished();
        } else finished();
      },
    });
    return new Response(stream, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers },
    });
  };

  const modelRequest = async (
    req: Request,
    path: string,
    body: Record<string, unknown>,
  ): Promise<Response> => {
    const headers = extraHeaders(body);
    const status = numberField(body, "fake_status");
    if (status !== undefined && status >= 400) {
      if (body.fake_retry_after !== undefined) {
        headers["retry-after"] = String(body.fake_retry_after);
      }
      const delay = numberField(body, "fake_ttft_ms") ?? 0;
      if (delay > 0 && await waitOrAbort(delay, req)) {
        abortedNow();
        return new Response(null, { status: 499 });
      }
      finished();
      return new Response(errorBody(`fake error: status ${status}`, errorType(status)), {
        status,
        headers: { ...JSON_HEADERS, ...headers },
      });
    }
    let answer: string;
    let delay: number;
    if (path === "/v1/responses") {
      finished();
      return responsesAnswer(body, defaults, ++seq);
    }
    if (path === "/v1/embeddings") {
      answer = embeddingsAnswer(body, defaults.modelName);
      delay = numberField(body, "fake_ttft_ms") ?? defaults.ttftMs;
    } else {
      const plan = planAnswer(
        path === "/v1/chat/completions" ? "chat" : "completion",
        body,
        defaults,
        ++seq,
        Date.now(),
      );
      let cancel: (() => void) | undefined;
      if (engine) {
        // The engine decides when the first token comes and how fast the rest follow.
        const started = await engineStart(engine, plan, promptWords(plan.kind, body), req);
        if (started === "aborted") {
          abortedNow();
          return new Response(null, { status: 499 });
        }
        if (started instanceof Response) {
          finished();
          return started;
        }
        cancel = started.cancel;
        plan.ttftMs = 0;
        plan.itlMs = started.start.itlMs;
        plan.cachedTokens = started.start.cachedTokens;
      }
      if (plan.stream) return streamAnswer(plan, headers, cancel);
      answer = JSON.stringify(jsonAnswer(plan));
      delay = answerDelayMs(plan);
    }
    // Only a waiting answer watches for the client leaving: an instant one cannot be aborted.
    if (delay > 0 && await waitOrAbort(delay, req)) {
      abortedNow();
      return new Response(null, { status: 499 });
    }
    finished();
    return new Response(answer, { headers: { ...JSON_HEADERS, ...headers } });
  };

  const handler = async (req: Request): Promise<Response> => {
    const url = req.url;
    const start = url.indexOf("/", url.indexOf("//") + 2);
    const q = url.indexOf("?", start);
    const path = q < 0 ? url.slice(start) : url.slice(start, q);
    const method = req.method;
    if (method === "GET") {
      if (path === "/metrics") {
        stats.metricsRequests++;
        const m = metricsText();
        return new Response(m.text, {
          status: m.status,
          headers: { "content-type": "text/plain; version=0.0.4" },
        });
      }
      if (path === "/health") return new Response('{"status":"ok"}', { headers: JSON_HEADERS });
      record(req, path, null);
      if (path === "/v1/models") {
        return new Response(
          JSON.stringify({
            object: "list",
            data: [{
              id: defaults.modelName,
              object: "model",
              created: 0,
              owned_by: "skeid-fake",
            }],
          }),
          { headers: JSON_HEADERS },
        );
      }
      return notFound(method, path);
    }
    const text = await req.text();
    let body: unknown = null;
    if (text !== "") {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    record(req, path, body);
    if (
      method !== "POST" ||
      (path !== "/v1/chat/completions" && path !== "/v1/completions" &&
        path !== "/v1/embeddings" && path !== "/v1/responses")
    ) return notFound(method, path);
    if (!isJsonObject(body)) {
      return new Response(errorBody("body must be a JSON object", "invalid_request_error"), {
        status: 400,
        headers: JSON_HEADERS,
      });
    }
    stats.started++;
    stats.inflight++;
    try {
      // Recorded above as sent; answered with the x-fake-options fields under the body's.
      return await modelRequest(req, path, withFakeOptions(body, req.headers));
    } catch (e) {
      finished();
      if (!(e instanceof FakeRequestError)) throw e;
      return new Response(errorBody(e.message, "invalid_request_error"), {
        status: 400,
        headers: JSON_HEADERS,
      });
    }
  };

  const server = Deno.serve({
    hostname: opts.hostname ?? "127.0.0.1",
    port: opts.port ?? 0,
    onListen: () => {},
    onError: (e) => {
      // A cut stream ends with FakeCut on purpose; anything else is a bug worth seeing.
      if (!(e instanceof FakeCut)) console.error("fake model:", e);
      return new Response(errorBody("fake model failed", "server_error"), {
        status: 500,
        headers: JSON_HEADERS,
      });
    },
  }, handler);
  const addr = server.addr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${addr.port}/v1`,
    port: addr.port,
    requests,
    stats,
    ready: Promise.resolve(),
    engine,
    setMetrics(override) {
      metricsOverride = override;
    },
    close() {
      closing ??= (async () => {
        stopping.abort();
        await server.shutdown();
      })();
      return closing;
    },
  };
}

function notFound(method: string, path: string): Response {
  return new Response(errorBody(`no route ${method} ${path}`, "not_found_error"), {
    status: 404,
    headers: JSON_HEADERS,
  });
}

/** The `/v1/embeddings` answer: one deterministic vector per input. */
function embeddingsAnswer(body: Record<string, unknown>, modelName: string): string {
  const inputs = embeddingInputs(body.input);
  if (inputs.length === 0) throw new FakeRequestError("input must be a string or an array");
  const base64 = body.encoding_format === "base64";
  const tokens = inputTokens(body.input);
  return JSON.stringify({
    object: "list",
    data: inputs.map((text, index) => {
      const v = embeddingVector(text);
      return { object: "embedding", index, embedding: base64 ? embeddingBase64(v) : v };
    }),
    model: typeof body.model === "string" && body.model !== "" ? body.model : modelName,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}
