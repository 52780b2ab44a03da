/**
 * `deno task bench:otel-parts`: where OpenTelemetry's µs per request go (ADR 0050), measured in
 * this one process, each part on its own: the request path recording one request's three spans
 * (the spans then dropped), encoding them, and one export's POST of 512 encoded spans through the
 * HTTP/1.1 client and through `fetch` to a receiver in a child process. Best of three runs each;
 * pin it to one CPU (`taskset -c 1`) for steadier figures. Prints a Markdown table.
 *
 * @module
 */
import process from "node:process";
import { Http1Client } from "../../src/proxy/http1.ts";
import type { PickedNode } from "../../src/core/types.ts";
import type { UpstreamRequest } from "../../src/faces/face.ts";
import type { WalkResult } from "../../src/proxy/walk.ts";
import type { UsageEvent } from "../../src/usage/types.ts";
import { OtelTelemetry } from "../../src/telemetry/otel.ts";
import { UnixClock, writeSpan } from "../../src/telemetry/otlp_encode.ts";
import { ProtoWriter } from "../../src/telemetry/proto_writer.ts";
import type { SpanRecord } from "../../src/telemetry/span_record.ts";

const env: Record<string, string> = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" };
const t = new OtelTelemetry({ env: (name) => env[name] });
let sink: (s: SpanRecord) => void = () => {};
// The exporter's queue is bypassed: each part is measured alone.
Object.defineProperty(t.spans, "push", { value: (s: SpanRecord) => sink(s) });

const node = {
  id: "gpu-1",
  url: "http://10.0.0.7:8000/v1",
  engine: "vllm",
  model: "qwen3-32b",
  inflight: 0,
  route_key: "qwen3-32b|vllm||",
} as unknown as PickedNode;
const step = {
  kind: "admitted",
  node,
  tier: { tags: [], model: "qwen3-32b", engine: "", wait_ms: 0, deny_tags: [] },
} as unknown as WalkResult;
const upstream = {
  path: "/chat/completions",
  body: { model: "qwen3-32b", max_tokens: 64, messages: [] },
  stream: false,
} as unknown as UpstreamRequest;
const event = {
  event_id: "8f3c2a10-5b7e-4c1d-9a2b-3e4f5a6b7c8d",
  status_code: 200,
  ok: true,
  usage_source: "reported",
  cost_total_usd: 0.0000123,
  input_tokens: 25,
  output_tokens: 64,
  cached_tokens: 0,
  cache_write_tokens: 0,
  error_type: "",
  error_message: "",
} as unknown as UsageEvent;
const response = {
  id: "chatcmpl-9c1d",
  model: "qwen3-32b",
  choices: [{ finish_reason: "stop", message: { role: "assistant", content: "x" } }],
};
const req = new Request("http://gw/v1/chat/completions", { method: "POST" });

/** One request's telemetry calls, in the exchange's order. */
function oneRequest(): void {
  const r = t.request(req, "/v1/chat/completions", "openai");
  r.model("qwen3-32b");
  r.admitting();
  r.keyPassed(false);
  r.walked(step);
  r.attempt(node, "qwen3-32b", 1, upstream);
  r.recorded(event, { response });
  r.outcome(200, "ok");
  r.end();
}

/** µs per call of `fn`, best of three runs of `n`. */
function best(n: number, fn: () => void): number {
  let min = Infinity;
  for (let run = 0; run < 3; run++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    min = Math.min(min, ((performance.now() - t0) * 1000) / n);
  }
  return min;
}

const N = 100_000;
for (let i = 0; i < 20_000; i++) oneRequest();
const record = best(N, oneRequest);

const spans: SpanRecord[] = [];
sink = (s) => spans.push(s);
oneRequest();
sink = () => {};
const w = new ProtoWriter();
const clock = new UnixClock();
let bytes = 0;
for (const s of spans) {
  w.reset();
  writeSpan(w, clock, s);
  bytes += w.pos;
}
let n = 0;
const encode = best(N, () => {
  if ((n++ & 511) === 0) w.reset();
  for (const s of spans) writeSpan(w, clock, s);
});

/** User + system CPU of this process so far (every thread), ms. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

// A receiver in a child process: reads and drops every export, answers an empty 200.
const receiver = new Deno.Command(Deno.execPath(), {
  args: [
    "eval",
    `Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: (a) => console.log(a.port) },
      async (r) => { await r.arrayBuffer(); return new Response(new Uint8Array(0)); });`,
  ],
  stdout: "piped",
}).spawn();
const reader = receiver.stdout.pipeThrough(new TextDecoderStream()).getReader();
const port = Number((await reader.read()).value?.trim());
const url = `http://127.0.0.1:${port}/v1/traces`;
const body = new Uint8Array((bytes / 3) * 512).fill(0x0a);
const headers: [string, string][] = [["content-type", "application/x-protobuf"]];
const http1 = new Http1Client({ maxIdlePerHost: 2 });

/** CPU ms per POST of `post`, best of three runs of 300. */
async function postCost(post: () => Promise<void>): Promise<number> {
  for (let i = 0; i < 30; i++) await post();
  let min = Infinity;
  for (let run = 0; run < 3; run++) {
    const c0 = cpuMs();
    for (let i = 0; i < 300; i++) await post();
    min = Math.min(min, (cpuMs() - c0) / 300);
  }
  return min;
}
const viaHttp1 = await postCost(async () => {
  const a = await http1.send(url, "POST", headers, body);
  const rest = a.body;
  if (rest !== null && !(rest instanceof Uint8Array)) { while ((await rest.read()) !== null); }
});
const viaFetch = await postCost(async () => {
  const res = await fetch(url, { method: "POST", headers, body });
  await res.body?.cancel();
});
http1.close();
receiver.kill();
await receiver.status;

const f = (x: number) => x.toFixed(2);
console.log(
  [
    `| part (one request: 3 spans, ${bytes} bytes encoded) | µs per request |`,
    "|---|---:|",
    `| recording the spans on the request path (dropped after) | ${f(record)} |`,
    `| encoding them (protobuf, into the queue's bytes) | ${f(encode)} |`,
    `| one export of 512 spans (${(body.length / 1000).toFixed(0)} KB) via the HTTP/1.1 client, ` +
    `per request (CPU ${f(viaHttp1 * 1000)} µs a POST) | ${f((viaHttp1 * 1000 * 3) / 512)} |`,
    `| the same via fetch, per request (CPU ${f(viaFetch * 1000)} µs a POST) | ${
      f((viaFetch * 1000 * 3) / 512)
    } |`,
  ].join("\n"),
);
