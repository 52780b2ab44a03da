import { assertEquals, assertThrows } from "../_assert.ts";
import {
  DEFAULT_RUNNING_METRICS,
  DEFAULT_WAITING_METRICS,
  metricNames,
  parseMetrics,
  queueFromMetrics,
  usedFromMetrics,
} from "../../src/capacity/prometheus.ts";
import { endpointUrl, loggableUrl, pollPeriodMs } from "../../src/capacity/probe.ts";

Deno.test("parseMetrics: labels and timestamps ignored, NaN and malformed lines skipped, comments skipped", () => {
  const values = parseMetrics(`# HELP vllm:num_requests_running Number of requests currently running
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="qwen3-32b"} 3.0
vllm:num_requests_waiting{model_name="qwen3-32b"} 1.0
vllm:gpu_cache_usage_perc{model_name="qwen3-32b"} 0.42
some_broken_line_without_a_value
vllm:nan_metric{x="y"} NaN
two values 1 2
bad-name 4
sci_notation 1.5e3\r
with_timestamp 6 1700000000000
`);
  assertEquals(values.get("vllm:num_requests_running"), 3);
  assertEquals(values.get("vllm:num_requests_waiting"), 1);
  assertEquals(values.get("vllm:gpu_cache_usage_perc"), 0.42);
  assertEquals(values.get("sci_notation"), 1500, "CRLF line endings read too");
  assertEquals(values.has("vllm:nan_metric"), false, "NaN is not a number to admit on");
  assertEquals(values.has("some_broken_line_without_a_value"), false);
  assertEquals(values.get("with_timestamp"), 6, "a sample timestamp is ignored");
  assertEquals(values.size, 5);
});

Deno.test("parseMetrics: several series of one name are summed", () => {
  const values = parseMetrics(
    'vllm:num_requests_running{model_name="a"} 2\nvllm:num_requests_running{model_name="b"} 5\n',
  );
  assertEquals(values.get("vllm:num_requests_running"), 7);
  assertEquals(parseMetrics("").size, 0);
});

Deno.test("engine defaults: vLLM 5+2, SGLang 7+3, TGI 4+6", () => {
  const names = metricNames({});
  const vllm = parseMetrics(`vllm:num_requests_running{model_name="q"} 5.0
vllm:num_requests_waiting{model_name="q"} 2.0
vllm:gpu_cache_usage_perc{model_name="q"} 0.42
vllm:e2e_request_latency_seconds_count{model_name="q"} 1234.0`);
  assertEquals(usedFromMetrics(vllm, names), 7);
  const sglang = parseMetrics(`sglang:num_running_reqs{model="llama"} 7
sglang:num_queue_reqs{model="llama"} 3
sglang:token_usage{model="llama"} 0.91
sglang:gen_throughput{model="llama"} 142.5`);
  assertEquals(usedFromMetrics(sglang, names), 10);
  const tgi = parseMetrics(`tgi_batch_current_size 4.0
tgi_queue_size 6.0
tgi_request_success_total 9876.0`);
  assertEquals(usedFromMetrics(tgi, names), 10);
  assertEquals(names.running, DEFAULT_RUNNING_METRICS);
  assertEquals(names.waiting, DEFAULT_WAITING_METRICS);
});

Deno.test("metric names: one side overridden, the other keeps its defaults; used = running", () => {
  const values = parseMetrics("vllm:num_requests_running 2\nvllm:num_requests_waiting 5\nx 1");
  assertEquals(usedFromMetrics(values, metricNames({ running: "x" })), 6, "x + default waiting");
  assertEquals(usedFromMetrics(values, metricNames({ used: "x" })), 6, "used is an alias");
  assertEquals(usedFromMetrics(values, metricNames({ waiting: ["x", "missing"] })), 3);
  assertEquals(
    usedFromMetrics(values, metricNames({ running: "none", waiting: "nor" })),
    undefined,
  );
  // Only one side present still reads (running alone here).
  assertEquals(usedFromMetrics(values, metricNames({ waiting: "nor" })), 2);
  assertThrows(() => metricNames({ running: 5 }), Error, "capacity.running");
  assertThrows(() => metricNames({ waiting: ["a", 1] }), Error, "capacity.waiting");
});

Deno.test("SGLang names on vLLM metrics: neither side present → no reading", () => {
  const values = parseMetrics("vllm:num_requests_running 5\nvllm:num_requests_waiting 2");
  const names = metricNames({
    running: "sglang:num_running_reqs",
    waiting: "sglang:num_queue_reqs",
  });
  assertEquals(usedFromMetrics(values, names), undefined);
});

Deno.test("endpointUrl: derived from the node URL; an explicit url wins; path fixed up", () => {
  assertEquals(endpointUrl("http://gpu-1:8000/v1", {}, "/metrics"), "http://gpu-1:8000/metrics");
  assertEquals(endpointUrl("http://gpu-1:8000/v2/", {}, "/metrics"), "http://gpu-1:8000/metrics");
  assertEquals(
    endpointUrl("http://gpu-1:8000/v1", { url: "http://side-car:9100/m" }, "/metrics"),
    "http://side-car:9100/m",
  );
  assertEquals(
    endpointUrl("http://gpu-1:8000/api/v1", { path: "prom" }, "/metrics"),
    "http://gpu-1:8000/api/prom",
  );
  assertEquals(
    endpointUrl("http://skeid-b:8090/v1", {}, "/skeid/registry/snapshot"),
    "http://skeid-b:8090/skeid/registry/snapshot",
  );
});

Deno.test("pollPeriodMs: interval × workers, floor 100 ms, default 2000", () => {
  assertEquals(pollPeriodMs(2000, 1), 2000);
  assertEquals(pollPeriodMs(2000, 4), 8000);
  assertEquals(pollPeriodMs(10, 1), 100);
  assertEquals(pollPeriodMs(30, 4), 120);
  assertEquals(pollPeriodMs(undefined, 1), 2000);
  assertEquals(pollPeriodMs(500, 0), 500, "at least one worker");
});

Deno.test("loggableUrl: user info and query never reach a log line", () => {
  assertEquals(
    loggableUrl("http://user:pw@host:9/metrics?token=abc"),
    "http://host:9/metrics",
  );
  assertEquals(loggableUrl("not a url"), "(invalid url)");
});

Deno.test("queue and cache gauges through the engine table: vLLM new and old names, SGLang, llama.cpp", () => {
  const names = metricNames({});
  const vllmNew = parseMetrics(`vllm:num_requests_running{model_name="q"} 5
vllm:num_requests_waiting{model_name="q"} 2
vllm:kv_cache_usage_perc{model_name="q"} 0.5
vllm:gpu_cache_usage_perc{model_name="q"} 0.5
vllm:prefix_cache_queries_total{model_name="q"} 1000
vllm:prefix_cache_hits_total{model_name="q"} 800`);
  assertEquals(queueFromMetrics(vllmNew, names), {
    running: 5,
    waiting: 2,
    kv_usage: 0.5,
    prefix_queries: 1000,
    prefix_hits: 800,
  });
  // Before the rename: the old names alone still give the same reading.
  const vllmOld = parseMetrics(`vllm:num_requests_running 1
vllm:num_requests_waiting 0
vllm:gpu_cache_usage_perc 0.25
vllm:gpu_prefix_cache_queries_total 10
vllm:gpu_prefix_cache_hits_total 4`);
  assertEquals(queueFromMetrics(vllmOld, names), {
    running: 1,
    waiting: 0,
    kv_usage: 0.25,
    prefix_queries: 10,
    prefix_hits: 4,
  });
  const sglang = parseMetrics(
    "sglang:num_running_reqs 7\nsglang:num_queue_reqs 3\nsglang:token_usage 0.9",
  );
  assertEquals(queueFromMetrics(sglang, names), { running: 7, waiting: 3, kv_usage: 0.9 });
  const llama = parseMetrics(
    "llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\nllamacpp:kv_cache_usage_ratio 0.3",
  );
  assertEquals(queueFromMetrics(llama, names), { running: 2, waiting: 1, kv_usage: 0.3 });
  assertEquals(usedFromMetrics(llama, names), 3);
  assertEquals(queueFromMetrics(parseMetrics("other 1"), names), undefined);
});
