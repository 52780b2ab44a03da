/**
 * What the spec's `OTEL_*` variables tell Skeid's exporter (ADR 0050): endpoints (shared and per
 * signal), headers, timeouts, the batch settings, the resource, the samplers, and a warning for
 * what is not used as said.
 */
import { assert, assertEquals } from "../_assert.ts";
import { flushBoundMs, otelSettings, parseKeyValues } from "../../src/telemetry/otel_settings.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("otel settings: the spec's defaults, the signal paths added to the shared endpoint", () => {
  const s = otelSettings(env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }), "1.2.3");
  assertEquals(s.traces?.url, "http://c:4318/v1/traces");
  assertEquals(s.metrics?.url, "http://c:4318/v1/metrics");
  assertEquals(s.traces?.timeoutMs, 10_000);
  assertEquals([s.maxQueue, s.maxBatch, s.scheduleDelayMs], [2048, 512, 5000]);
  assertEquals(s.metricIntervalMs, 60_000);
  assertEquals(s.sampler, { parentBased: true, ratio: 1 }, "parentbased_always_on");
  assertEquals(s.captureContent, false);
  assertEquals(s.resource.slice(0, 2), [["service.name", "skeid"], ["service.version", "1.2.3"]]);
  assertEquals(s.warnings, []);
});

Deno.test("otel settings: per-signal endpoints, headers and timeouts win over the shared ones", () => {
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://t.example/otlp/traces",
      OTEL_EXPORTER_OTLP_HEADERS: "x-a=1, authorization=Basic%20abc",
      OTEL_EXPORTER_OTLP_METRICS_HEADERS: "x-a=2",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
      OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: "700",
      OTEL_METRICS_EXPORTER: "otlp",
    }),
    "0",
  );
  assertEquals(s.traces?.url, "https://t.example/otlp/traces", "the signal's own, as it is");
  assertEquals(s.metrics?.url, "http://c:4318/v1/metrics", "one slash");
  assertEquals(s.traces?.headers, {
    "x-a": "1",
    authorization: "Basic abc",
    "content-type": "application/x-protobuf",
  });
  assertEquals(s.metrics?.headers["x-a"], "2");
  assertEquals([s.traces?.timeoutMs, s.metrics?.timeoutMs], [2500, 700]);
});

Deno.test("otel settings: an exporter set to none is off; the batch is never larger than the queue", () => {
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m/v1/metrics",
      OTEL_TRACES_EXPORTER: "none",
      OTEL_BSP_MAX_QUEUE_SIZE: "100",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "512",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_METRIC_EXPORT_INTERVAL: "1000",
    }),
    "0",
  );
  assertEquals(s.traces, undefined);
  assertEquals(s.metrics?.url, "http://m/v1/metrics");
  assertEquals([s.maxQueue, s.maxBatch, s.scheduleDelayMs, s.metricIntervalMs], [
    100,
    100,
    50,
    1000,
  ]);
});

Deno.test("otel settings: the resource — service name, the operator's attributes, the worker", () => {
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_RESOURCE_ATTRIBUTES: "service.name=ignored,deployment.environment=prod,team=a%2Cb",
      OTEL_SERVICE_NAME: "gateway-eu",
    }),
    "1.0.0",
    3,
  );
  assertEquals(s.resource, [
    ["service.name", "gateway-eu"],
    ["service.version", "1.0.0"],
    ["deployment.environment", "prod"],
    ["team", "a,b"],
    ["telemetry.sdk.name", "skeid"],
    ["telemetry.sdk.language", "js"],
    ["skeid.worker", 3],
  ]);
});

Deno.test("otel settings: the spec's samplers and their argument", () => {
  const of = (sampler: string, arg?: string) =>
    otelSettings(
      env({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c",
        OTEL_TRACES_SAMPLER: sampler,
        ...(arg === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: arg }),
      }),
      "0",
    );
  assertEquals(of("always_on").sampler, { parentBased: false, ratio: 1 });
  assertEquals(of("always_off").sampler, { parentBased: false, ratio: 0 });
  assertEquals(of("traceidratio", "0.25").sampler, { parentBased: false, ratio: 0.25 });
  assertEquals(of("parentbased_traceidratio", "0.1").sampler, { parentBased: true, ratio: 0.1 });
  assertEquals(of("parentbased_always_off").sampler, { parentBased: true, ratio: 0 });
  const bad = of("traceidratio", "2");
  assertEquals(bad.sampler.ratio, 1);
  assert(bad.warnings.some((w) => w.includes("OTEL_TRACES_SAMPLER_ARG")), bad.warnings.join());
  const unknown = of("jaeger_remote");
  assertEquals(unknown.sampler, { parentBased: true, ratio: 1 });
  assertEquals(unknown.warnings.length, 1);
});

Deno.test("otel settings: what is not used as said is warned about", () => {
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_DENO: "true",
      OTEL_BSP_MAX_QUEUE_SIZE: "-1",
      OTEL_SDK_DISABLED: "1",
    }),
    "0",
  );
  assertEquals(s.maxQueue, 2048);
  assertEquals(s.warnings.length, 4, s.warnings.join("\n"));
  assert(s.warnings.some((w) => w.startsWith("OTEL_SDK_DISABLED=1 ")), s.warnings.join("\n"));
  const off = otelSettings(
    env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_SDK_DISABLED: "FALSE" }),
    "0",
  );
  assertEquals(off.warnings, [], "false is a boolean the spec knows");
});

Deno.test("otel settings: key=value lists, percent-decoded, blanks and bare members skipped", () => {
  assertEquals(parseKeyValues(" a = 1 ,b=x%3Dy,,bare, =v"), [["a", "1"], ["b", "x=y"]]);
  assertEquals(parseKeyValues(undefined), []);
});

Deno.test("otel settings: header names are case-insensitive, the signal's own one wins", () => {
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=shared",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=own",
    }),
    "0",
  );
  assertEquals(s.traces?.headers, {
    authorization: "own",
    "content-type": "application/x-protobuf",
  });
  assertEquals(s.metrics?.headers.authorization, "shared");
});

Deno.test("otel settings: a bad endpoint or header is left out, its variable named, no value", () => {
  const secret = "sk-very-secret";
  const s = otelSettings(
    env({
      OTEL_EXPORTER_OTLP_ENDPOINT: `localhost:4318`,
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m:4318/v1/metrics",
      OTEL_EXPORTER_OTLP_HEADERS: `x-key=${secret}%0Aevil,bad name=${secret},x-ok=1`,
    }),
    "0",
  );
  assertEquals(s.traces, undefined, "no traces to a URL that is none");
  assertEquals(s.metrics?.headers, { "x-ok": "1", "content-type": "application/x-protobuf" });
  const text = s.warnings.join("\n");
  assert(text.includes("OTEL_EXPORTER_OTLP_ENDPOINT"), text);
  assert(text.includes("OTEL_EXPORTER_OTLP_HEADERS: the value of 'x-key'"), text);
  assert(!text.includes(secret), `no value in a warning: ${text}`);
});

Deno.test("otel settings: a stop leaves the flush its longest export timeout, none when off", () => {
  assertEquals(flushBoundMs(env({})), 0);
  assertEquals(flushBoundMs(env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })), 10_000);
  assertEquals(
    flushBoundMs(env({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
      OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: "3500",
    })),
    3500,
  );
  assertEquals(
    flushBoundMs(env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })),
    0,
  );
});
