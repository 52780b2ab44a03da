/**
 * An OTLP/HTTP receiver for tests: listens on 127.0.0.1, decodes the protobuf a Deno exporter
 * really sends (`/v1/traces`, `/v1/metrics`; `/v1/logs` is accepted and dropped) with the
 * message types generated from the official OTLP `.proto` definitions
 * (`@opentelemetry/otlp-transformer`'s protobufjs module), and keeps the spans and metric points
 * in plain shapes a test asserts on.
 *
 * @module
 */
import root from "@opentelemetry/otlp-transformer/build/src/generated/root.js";
import { until } from "./poll.ts";

/** One span as it arrived: ids in lowercase hex, times in ns, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP kind: 1 internal, 2 server, 3 client. */
  kind: number;
  /** The instrumentation scope (`skeid`, `deno`). */
  scope: string;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  events: { name: string; timeNs: bigint; attributes: Record<string, unknown> }[];
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  /** The resource's attributes. */
  resource: Record<string, unknown>;
}

/** One histogram data point as it arrived. */
export interface ReceivedPoint {
  metric: string;
  unit: string;
  attributes: Record<string, unknown>;
  count: number;
  sum: number;
  bounds: number[];
}

/** A message type of the generated module (decode, then to plain objects). */
interface MessageType {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
}

/** The two request types this receiver decodes, out of the generated root. */
function messageTypes(): { traces: MessageType; metrics: MessageType } {
  const r = root as unknown as {
    opentelemetry: {
      proto: {
        collector: {
          trace: { v1: { ExportTraceServiceRequest: MessageType } };
          metrics: { v1: { ExportMetricsServiceRequest: MessageType } };
        };
      };
    };
  };
  const c = r.opentelemetry.proto.collector;
  return {
    traces: c.trace.v1.ExportTraceServiceRequest,
    metrics: c.metrics.v1.ExportMetricsServiceRequest,
  };
}

/** Plain-object shapes of the decoded messages (the fields read here). */
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}

function hex(bytes: Uint8Array | undefined): string {
  if (bytes === undefined) return "";
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

function valueOf(v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(kvs: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of kvs ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

const TO_OBJECT = { longs: String, defaults: false, arrays: true };

/** A running receiver. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly points: ReceivedPoint[] = [];
  /** Export requests received, by path. */
  readonly posts: Record<string, number> = {};
  readonly #ac = new AbortController();
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #types = messageTypes();

  constructor(port = 0) {
    this.#server = Deno.serve({
      hostname: "127.0.0.1",
      port,
      signal: this.#ac.signal,
      onListen: () => {},
    }, async (req) => {
      const path = new URL(req.url).pathname;
      this.posts[path] = (this.posts[path] ?? 0) + 1;
      const bytes = new Uint8Array(await req.arrayBuffer());
      if (path === "/v1/traces") this.#traces(bytes);
      else if (path === "/v1/metrics") this.#metrics(bytes);
      // An empty Export*ServiceResponse: full success.
      return new Response(new Uint8Array(0), {
        headers: { "content-type": "application/x-protobuf" },
      });
    });
  }

  /** `http://127.0.0.1:PORT`: the `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  get port(): number {
    return this.#server.addr.port;
  }

  /** Waits until `pick` answers something defined (bounded), and answers it. */
  async waitFor<T>(
    what: string,
    pick: (r: OtlpReceiver) => T | undefined,
    timeoutMs = 10_000,
  ): Promise<T> {
    let found: T | undefined;
    await until(() => (found = pick(this)) !== undefined, what, timeoutMs, 20);
    return found!;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  async close(): Promise<void> {
    this.#ac.abort();
    await this.#server.finished;
  }

  #traces(bytes: Uint8Array): void {
    const t = this.#types.traces;
    const req = t.toObject(t.decode(bytes), TO_OBJECT) as {
      resourceSpans?: {
        resource?: { attributes?: KeyValue[] };
        scopeSpans?: {
          scope?: { name?: string };
          spans?: {
            traceId?: Uint8Array;
            spanId?: Uint8Array;
            parentSpanId?: Uint8Array;
            name?: string;
            kind?: number;
            startTimeUnixNano?: string;
            endTimeUnixNano?: string;
            attributes?: KeyValue[];
            events?: { name?: string; timeUnixNano?: string; attributes?: KeyValue[] }[];
            status?: { code?: number };
          }[];
        }[];
      }[];
    };
    for (const rs of req.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: hex(s.traceId),
            spanId: hex(s.spanId),
            parentSpanId: hex(s.parentSpanId),
            name: s.name ?? "",
            kind: s.kind ?? 0,
            scope: ss.scope?.name ?? "",
            startNs: BigInt(s.startTimeUnixNano ?? "0"),
            endNs: BigInt(s.endTimeUnixNano ?? "0"),
            attributes: attributesOf(s.attributes),
            events: (s.events ?? []).map((e) => ({
              name: e.name ?? "",
              timeNs: BigInt(e.timeUnixNano ?? "0"),
              attributes: attributesOf(e.attributes),
            })),
            statusCode: s.status?.code ?? 0,
            resource,
          });
        }
      }
    }
  }

  #metrics(bytes: Uint8Array): void {
    const t = this.#types.metrics;
    const req = t.toObject(t.decode(bytes), TO_OBJECT) as {
      resourceMetrics?: {
        scopeMetrics?: {
          metrics?: {
            name?: string;
            unit?: string;
            histogram?: {
              dataPoints?: {
                attributes?: KeyValue[];
                count?: string;
                sum?: number;
                explicitBounds?: number[];
              }[];
            };
          }[];
        }[];
      }[];
    };
    for (const rm of req.resourceMetrics ?? []) {
      for (const sm of rm.scopeMetrics ?? []) {
        for (const m of sm.metrics ?? []) {
          for (const p of m.histogram?.dataPoints ?? []) {
            this.points.push({
              metric: m.name ?? "",
              unit: m.unit ?? "",
              attributes: attributesOf(p.attributes),
              count: Number(p.count ?? "0"),
              sum: p.sum ?? 0,
              bounds: p.explicitBounds ?? [],
            });
          }
        }
      }
    }
  }
}

/**
 * A collector that accepts every connection and never answers: exports to it hang until their
 * timeout. `endpoint` is its base URL (the signal paths go after it).
 */
export function silentCollector(): {
  endpoint: string;
  held: Deno.Conn[];
  close(): Promise<void>;
} {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })().catch(() => {});
  return {
    endpoint: `http://127.0.0.1:${listener.addr.port}`,
    held,
    async close() {
      listener.close();
      for (const c of held) c.close();
      await accepting;
    },
  };
}
