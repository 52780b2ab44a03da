/**
 * What Skeid's OTLP exporter is told by the environment (ADR 0050): the OpenTelemetry spec's own
 * variables, read once when a gateway is composed. On when an OTLP endpoint is named
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the traces or metrics one) and `OTEL_SDK_DISABLED` is not
 * `true`; everything else has the spec's default.
 *
 * @module
 */

/** A signal's export target: where, with which headers, bounded by which timeout. */
export interface OtlpTarget {
  /** The full URL (`…/v1/traces`, `…/v1/metrics`). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** One export's bound, ms (`OTEL_EXPORTER_OTLP[_SIGNAL]_TIMEOUT`, default 10 s). */
  readonly timeoutMs: number;
}

/** The parsed settings; undefined parts are off. */
export interface OtelSettings {
  /** Spans go here; undefined: `OTEL_TRACES_EXPORTER=none`. */
  readonly traces: OtlpTarget | undefined;
  /** Metrics go here; undefined: `OTEL_METRICS_EXPORTER=none`. */
  readonly metrics: OtlpTarget | undefined;
  /** The resource's attributes (`service.name` first). */
  readonly resource: ReadonlyArray<readonly [string, string | number]>;
  /** `OTEL_BSP_MAX_QUEUE_SIZE` (2048): spans waiting at most; one more is dropped, counted. */
  readonly maxQueue: number;
  /** `OTEL_BSP_SCHEDULE_DELAY` (5000 ms): how long a span waits at most before its batch goes. */
  readonly scheduleDelayMs: number;
  /** `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512): spans in one export at most. */
  readonly maxBatch: number;
  /** `OTEL_METRIC_EXPORT_INTERVAL` (60000 ms). */
  readonly metricIntervalMs: number;
  /** `OTEL_TRACES_SAMPLER` and its argument. */
  readonly sampler: SamplerSetting;
  /** `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`. */
  readonly captureContent: boolean;
  /** What the environment said that is not used as said (logged once at start). */
  readonly warnings: readonly string[];
}

/** The spec's samplers (`OTEL_TRACES_SAMPLER`), `parentbased_always_on` by default. */
export interface SamplerSetting {
  /** Whether a trace with a valid inbound `traceparent` keeps the client's sampled flag. */
  readonly parentBased: boolean;
  /** The share of new traces kept, 0..1 (always_on 1, always_off 0, traceidratio its argument). */
  readonly ratio: number;
}

type Env = (name: string) => string | undefined;

function text(env: Env, name: string): string | undefined {
  const v = env(name)?.trim();
  return v === undefined || v === "" ? undefined : v;
}

/** A whole number ≥ `min` from `name`, else `fallback` (and a warning when it was set). */
function whole(env: Env, name: string, fallback: number, min: number, warn: string[]): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (Number.isSafeInteger(n) && n >= min) return n;
  warn.push(`${name}=${raw} is not a whole number >= ${min}: ${fallback} used`);
  return fallback;
}

/**
 * `k=v,k2=v2` (the spec's list: values percent-decoded, blanks around members dropped) as pairs;
 * a member without `=` is skipped.
 */
export function parseKeyValues(raw: string | undefined): [string, string][] {
  const out: [string, string][] = [];
  if (raw === undefined) return out;
  for (const member of raw.split(",")) {
    const eq = member.indexOf("=");
    if (eq <= 0) continue;
    const key = member.slice(0, eq).trim();
    let value = member.slice(eq + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {
      // Not percent-encoded after all: kept as written.
    }
    if (key !== "") out.push([key, value]);
  }
  return out;
}

/** Whether OpenTelemetry export is on: an OTLP endpoint named, the SDK not disabled. */
export function otelEnabled(env: Env): boolean {
  if ((text(env, "OTEL_SDK_DISABLED") ?? "").toLowerCase() === "true") return false;
  return text(env, "OTEL_EXPORTER_OTLP_ENDPOINT") !== undefined ||
    text(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") !== undefined ||
    text(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") !== undefined;
}

/** An HTTP header name (RFC 9110's token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
/** What no header value may hold: line breaks and NUL. */
const BAD_HEADER_VALUE = /[\r\n\0]/;

/** Whether `url` parses as an http: or https: URL. */
function isHttpUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === "http:" || protocol === "https:";
  } catch {
    return false;
  }
}

/**
 * The longest a gateway's telemetry flush may take at shutdown, ms: its longest export timeout,
 * or 0 when telemetry is off. Whoever bounds a worker's stop leaves it this much more time.
 */
export function flushBoundMs(env: Env): number {
  if (!otelEnabled(env)) return 0;
  const s = otelSettings(env, "0");
  return Math.max(s.traces?.timeoutMs ?? 0, s.metrics?.timeoutMs ?? 0);
}

/** The target of one signal (`TRACES` or `METRICS`), or undefined when its exporter is `none`. */
function target(env: Env, signal: "TRACES" | "METRICS", warn: string[]): OtlpTarget | undefined {
  const exporter = (text(env, `OTEL_${signal}_EXPORTER`) ?? "otlp").toLowerCase();
  if (exporter === "none") return undefined;
  if (exporter !== "otlp") warn.push(`OTEL_${signal}_EXPORTER=${exporter}: only otlp is sent`);
  const path = signal === "TRACES" ? "v1/traces" : "v1/metrics";
  const own = text(env, `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`);
  const base = text(env, "OTEL_EXPORTER_OTLP_ENDPOINT") ?? "http://localhost:4318";
  // The signal's own endpoint is used as it is; the shared one gets the signal's path (spec).
  const url = own ?? `${base.endsWith("/") ? base : `${base}/`}${path}`;
  if (!isHttpUrl(url)) {
    // Never echoed: an endpoint may carry credentials.
    const variable = own !== undefined
      ? `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`
      : "OTEL_EXPORTER_OTLP_ENDPOINT";
    warn.push(`${variable} is not an http:// or https:// URL: ${signal.toLowerCase()} not sent`);
    return undefined;
  }
  const headers: Record<string, string> = {};
  for (const variable of ["OTEL_EXPORTER_OTLP_HEADERS", `OTEL_EXPORTER_OTLP_${signal}_HEADERS`]) {
    for (const [k, v] of parseKeyValues(env(variable))) {
      // Header names are case-insensitive: the signal's own `authorization` replaces the
      // shared `Authorization`, never joins it.
      const key = k.toLowerCase();
      if (!HEADER_NAME.test(key) || BAD_HEADER_VALUE.test(v)) {
        // The value is never named: it is often a key.
        warn.push(
          `${variable}: ${
            HEADER_NAME.test(key) ? `the value of '${key}'` : "a header name"
          } is not valid in HTTP: left out`,
        );
        continue;
      }
      headers[key] = v;
    }
  }
  headers["content-type"] = "application/x-protobuf";
  const shared = whole(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10_000, 1, warn);
  const timeoutMs = whole(env, `OTEL_EXPORTER_OTLP_${signal}_TIMEOUT`, shared, 1, warn);
  return { url, headers, timeoutMs };
}

/** The sampler of `OTEL_TRACES_SAMPLER` / `_ARG`. */
function sampler(env: Env, warn: string[]): SamplerSetting {
  const name = (text(env, "OTEL_TRACES_SAMPLER") ?? "parentbased_always_on").toLowerCase();
  const raw = text(env, "OTEL_TRACES_SAMPLER_ARG");
  let arg = raw === undefined ? 1 : Number(raw);
  if (!(arg >= 0 && arg <= 1)) {
    warn.push(`OTEL_TRACES_SAMPLER_ARG=${raw} is not a ratio 0..1: 1 used`);
    arg = 1;
  }
  switch (name) {
    case "always_on":
      return { parentBased: false, ratio: 1 };
    case "always_off":
      return { parentBased: false, ratio: 0 };
    case "traceidratio":
      return { parentBased: false, ratio: arg };
    case "parentbased_always_on":
      return { parentBased: true, ratio: 1 };
    case "parentbased_always_off":
      return { parentBased: true, ratio: 0 };
    case "parentbased_traceidratio":
      return { parentBased: true, ratio: arg };
    default:
      warn.push(`OTEL_TRACES_SAMPLER=${name} is not known here: parentbased_always_on used`);
      return { parentBased: true, ratio: 1 };
  }
}

/** The settings of `env`; `worker` (of `serve --workers N`) goes on the resource as `skeid.worker`. */
export function otelSettings(env: Env, version: string, worker?: number): OtelSettings {
  const warn: string[] = [];
  const protocol = text(env, "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (protocol !== undefined && protocol !== "http/protobuf") {
    warn.push(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: Skeid sends http/protobuf only`);
  }
  const disabled = text(env, "OTEL_SDK_DISABLED");
  if (disabled !== undefined && !["true", "false"].includes(disabled.toLowerCase())) {
    // The spec's booleans are `true` and `false`; `1` or `yes` would otherwise be silence.
    warn.push(
      `OTEL_SDK_DISABLED=${disabled} is neither true nor false: telemetry stays on (set true)`,
    );
  }
  if ((text(env, "OTEL_DENO") ?? "").toLowerCase() === "true") {
    warn.push(
      "OTEL_DENO=true turns on Deno's own exporter beside Skeid's: its server and fetch spans " +
        "duplicate Skeid's and cost about 14 µs each; unset it",
    );
  }
  const resource = new Map<string, string>();
  for (const [k, v] of parseKeyValues(env("OTEL_RESOURCE_ATTRIBUTES"))) resource.set(k, v);
  const service = text(env, "OTEL_SERVICE_NAME");
  if (service !== undefined) resource.set("service.name", service);
  const attrs: [string, string | number][] = [[
    "service.name",
    resource.get("service.name") ?? "skeid",
  ]];
  resource.delete("service.name");
  if (!resource.has("service.version")) attrs.push(["service.version", version]);
  attrs.push(...resource);
  attrs.push(["telemetry.sdk.name", "skeid"], ["telemetry.sdk.language", "js"]);
  if (worker !== undefined) attrs.push(["skeid.worker", worker]);
  const maxQueue = whole(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, warn);
  const capture = (text(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") ?? "")
    .toLowerCase();
  return {
    traces: target(env, "TRACES", warn),
    metrics: target(env, "METRICS", warn),
    resource: attrs,
    maxQueue,
    scheduleDelayMs: whole(env, "OTEL_BSP_SCHEDULE_DELAY", 5000, 0, warn),
    // The spec: a batch larger than the queue is the queue.
    maxBatch: Math.min(maxQueue, whole(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1, warn)),
    metricIntervalMs: whole(env, "OTEL_METRIC_EXPORT_INTERVAL", 60_000, 1, warn),
    sampler: sampler(env, warn),
    captureContent: capture === "true",
    warnings: warn,
  };
}
