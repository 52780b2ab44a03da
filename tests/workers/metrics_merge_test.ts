import { assertEquals } from "../_assert.ts";
import { mergePrometheus } from "../../src/workers/metrics_merge.ts";

Deno.test("metrics merge: counters and histograms summed, gauges the largest, order kept", () => {
  const a = [
    "# HELP skeid_node_inflight In flight.",
    "# TYPE skeid_node_inflight gauge",
    'skeid_node_inflight{node="n"} 3',
    "# TYPE skeid_node_requests_ok_total counter",
    'skeid_node_requests_ok_total{node="n"} 5',
    "# TYPE skeid_request_duration_seconds histogram",
    'skeid_request_duration_seconds_bucket{node="n",le="0.1"} 2',
    'skeid_request_duration_seconds_sum{node="n"} 0.25',
    'skeid_request_duration_seconds_count{node="n"} 2',
    "",
  ].join("\n");
  const b = [
    "# HELP skeid_node_inflight In flight.",
    "# TYPE skeid_node_inflight gauge",
    'skeid_node_inflight{node="n"} 3',
    "# TYPE skeid_node_requests_ok_total counter",
    'skeid_node_requests_ok_total{node="n"} 7',
    'skeid_node_requests_ok_total{node="m"} 1',
    "# TYPE skeid_request_duration_seconds histogram",
    'skeid_request_duration_seconds_bucket{node="n",le="0.1"} 1',
    'skeid_request_duration_seconds_sum{node="n"} 0.5',
    'skeid_request_duration_seconds_count{node="n"} 1',
    "",
  ].join("\n");
  assertEquals(
    mergePrometheus([a, b]).split("\n"),
    [
      "# HELP skeid_node_inflight In flight.",
      "# TYPE skeid_node_inflight gauge",
      'skeid_node_inflight{node="n"} 3',
      "# TYPE skeid_node_requests_ok_total counter",
      'skeid_node_requests_ok_total{node="n"} 12',
      'skeid_node_requests_ok_total{node="m"} 1',
      "# TYPE skeid_request_duration_seconds histogram",
      'skeid_request_duration_seconds_bucket{node="n",le="0.1"} 3',
      'skeid_request_duration_seconds_sum{node="n"} 0.75',
      'skeid_request_duration_seconds_count{node="n"} 3',
      "",
    ],
  );
});
