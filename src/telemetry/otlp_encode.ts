/**
 * OTLP/HTTP protobuf of Skeid's spans and histograms (ADR 0050), written by hand into a reused
 * `ProtoWriter`: `ExportTraceServiceRequest` and `ExportMetricsServiceRequest` as the
 * opentelemetry-proto definitions number their fields. The resource and the scope are encoded
 * once per exporter; a span's fixed attributes once per node and model.
 *
 * @module
 */
import { ProtoWriter, tag, varintSize } from "./proto_writer.ts";
import {
  type AttrKey,
  attrKey,
  type AttrList,
  AttrType,
  type AttrValue,
  type SpanRecord,
} from "./span_record.ts";

const TWO_32 = 4294967296;

/** `performance.now()` ms → Unix ns, as the two 32-bit halves fixed64 is written from. */
export class UnixClock {
  readonly #baseHi: number;
  readonly #baseLo: number;

  /** `originMs`: `performance.timeOrigin` of this isolate. */
  constructor(originMs: number = performance.timeOrigin) {
    const base = BigInt(Math.round(originMs * 1000)) * 1000n;
    this.#baseHi = Number(base >> 32n);
    this.#baseLo = Number(base & 0xffffffffn);
  }

  /** Writes the fixed64 field `field` of the Unix ns of `ms`. */
  write(w: ProtoWriter, field: number, ms: number): void {
    const rel = Math.max(0, Math.round(ms * 1e6));
    const relHi = Math.floor(rel / TWO_32);
    let lo = this.#baseLo + (rel - relHi * TWO_32);
    let hi = this.#baseHi + relHi;
    if (lo >= TWO_32) {
      lo -= TWO_32;
      hi++;
    }
    w.byte(tag(field, 1));
    w.fixed64(hi, lo);
  }
}

/** Writes one attribute as a `KeyValue` in message field `field`. */
export function writeAttr(w: ProtoWriter, field: number, key: AttrKey, value: AttrValue): void {
  // The usual attributes in one pass: a short ASCII string or list of them, a bool, a whole
  // number >= 0, a double.
  const type = key.type;
  if (type === AttrType.String) {
    if (typeof value === "string" && w.asciiKeyValue(field, key.bytes, value)) return;
  } else if (type === AttrType.Bool) {
    return w.varintKeyValue(field, key.bytes, 2, value === true ? 1 : 0);
  } else if (type === AttrType.Int) {
    if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) {
      return w.varintKeyValue(field, key.bytes, 3, value);
    }
  } else if (type === AttrType.Double) {
    if (typeof value === "number" && w.doubleKeyValue(field, key.bytes, value)) return;
  } else if (type === AttrType.Strings) {
    if (Array.isArray(value) && w.stringsKeyValue(field, key.bytes, value)) return;
  }
  const kv = w.begin(field);
  w.raw(key.bytes);
  const any = w.begin(2);
  switch (key.type) {
    case AttrType.String:
      w.stringField(1, String(value));
      break;
    case AttrType.Bool:
      w.varintField(2, value === true ? 1 : 0);
      break;
    case AttrType.Int: {
      // A number a client chose (`max_tokens: 1e30`) may be no int64 at all: written as an
      // int_value it would be a varint of over ten bytes, which a collector refuses, and the
      // whole batch with it. Beyond 2^53 (or not finite) it goes as a double_value.
      const n = typeof value === "number" ? Math.round(value) : 0;
      if (Number.isSafeInteger(n)) {
        w.byte(tag(3, 0));
        w.int64(n);
      } else w.doubleField(4, typeof value === "number" ? value : Number.NaN);
      break;
    }
    case AttrType.Double:
      w.doubleField(4, typeof value === "number" ? value : Number.NaN);
      break;
    case AttrType.Strings: {
      const arr = w.begin(5);
      for (const s of Array.isArray(value) ? value : [String(value)]) {
        const v = w.begin(1);
        w.stringField(1, s);
        w.end(v);
      }
      w.end(arr);
      break;
    }
  }
  w.end(any);
  w.end(kv);
}

/** Writes a flat attribute list in message field `field`. */
export function writeAttrs(w: ProtoWriter, field: number, list: AttrList): void {
  for (let i = 0; i < list.length; i += 2) {
    writeAttr(w, field, list[i] as AttrKey, list[i + 1] as AttrValue);
  }
}

/** Attributes encoded once as `KeyValue` fields `field` (a span's fixed ones, field 9). */
export function encodeAttrs(list: AttrList, field = 9): Uint8Array {
  const w = new ProtoWriter(256);
  writeAttrs(w, field, list);
  return w.take();
}

/** A resource's attributes as `Resource` content (field 1 of a Resource*), encoded once. */
export function resourceBlock(
  attrs: ReadonlyArray<readonly [string, string | number]>,
  field: number,
): Uint8Array {
  const w = new ProtoWriter(512);
  const r = w.begin(field);
  for (const [k, v] of attrs) {
    writeAttr(w, 1, attrKey(k, typeof v === "number" ? AttrType.Int : AttrType.String), v);
  }
  w.end(r);
  return w.take();
}

/** An `InstrumentationScope` in field 1 of a Scope*, encoded once. */
export function scopeBlock(name: string, version: string): Uint8Array {
  const w = new ProtoWriter(128);
  const s = w.begin(1);
  w.stringField(1, name);
  w.stringField(2, version);
  w.end(s);
  return w.take();
}

/** Writes one `Span` as field 2 of a ScopeSpans (spans are written back to back, then sent). */
export function writeSpan(w: ProtoWriter, clock: UnixClock, s: SpanRecord): void {
  const m = w.beginLong(2);
  w.hexField(1, s.traceId);
  w.hexField(2, s.spanId);
  if (s.traceState !== undefined) w.stringField(3, s.traceState);
  if (s.parentId !== undefined) w.hexField(4, s.parentId);
  w.raw(s.name);
  w.varintField(6, s.kind);
  clock.write(w, 7, s.startMs);
  clock.write(w, 8, s.endMs);
  if (s.fixed !== undefined) w.raw(s.fixed);
  writeAttrs(w, 9, s.attrs);
  const events = s.events;
  if (events !== undefined) {
    for (const e of events) {
      const em = w.beginLong(11);
      clock.write(w, 1, e.atMs);
      w.raw(e.name);
      if (e.attrs !== undefined) writeAttrs(w, 3, e.attrs);
      w.endLong(em);
    }
  }
  if (s.status !== 0) {
    const st = w.begin(15);
    if (s.statusMessage !== undefined) w.stringField(2, s.statusMessage);
    w.varintField(3, s.status);
    w.end(st);
  }
  w.endLong(m);
}

/**
 * An `ExportTraceServiceRequest` of spans already written back to back (`writeSpan`), under one
 * resource and scope (both given encoded): the lengths are known, so the spans are copied once.
 * Answers the bytes in `w`, valid until `w` is used again.
 */
export function encodeSpanBatch(
  w: ProtoWriter,
  resource: Uint8Array,
  scope: Uint8Array,
  spans: Uint8Array,
): Uint8Array<ArrayBuffer> {
  const scopeSpans = scope.length + spans.length;
  const resourceSpans = resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
  w.reset();
  w.byte(tag(1, 2));
  w.varint(resourceSpans);
  w.raw(resource);
  w.byte(tag(2, 2));
  w.varint(scopeSpans);
  w.raw(scope);
  w.raw(spans);
  return w.view();
}

/** An `ExportTraceServiceRequest` of `spans[from, to)` (tests; the exporter writes as spans end). */
export function encodeSpans(
  w: ProtoWriter,
  clock: UnixClock,
  resource: Uint8Array,
  scope: Uint8Array,
  spans: readonly SpanRecord[],
  from: number,
  to: number,
): Uint8Array<ArrayBuffer> {
  const body = new ProtoWriter();
  for (let i = from; i < to; i++) writeSpan(body, clock, spans[i]);
  return encodeSpanBatch(w, resource, scope, body.view());
}

/** One cumulative histogram point as the metric export writes it. */
export interface HistogramPoint {
  /** `KeyValue` fields 9, encoded once per label set. */
  readonly attrs: Uint8Array;
  readonly counts: Float64Array;
  readonly count: number;
  readonly sum: number;
  readonly min: number;
  readonly max: number;
}

/** One histogram metric and its points. */
export interface HistogramMetric {
  readonly name: string;
  readonly description: string;
  readonly unit: string;
  readonly bounds: readonly number[];
  readonly points: Iterable<HistogramPoint>;
}

/**
 * An `ExportMetricsServiceRequest` of cumulative histograms (temporality 2), each point from
 * `startMs` to `nowMs`; answers the bytes in `w`, valid until `w` is used again.
 */
export function encodeHistograms(
  w: ProtoWriter,
  clock: UnixClock,
  resource: Uint8Array,
  scope: Uint8Array,
  metrics: readonly HistogramMetric[],
  startMs: number,
  nowMs: number,
): Uint8Array<ArrayBuffer> {
  w.reset();
  const rm = w.begin(1);
  w.raw(resource);
  const sm = w.begin(2);
  w.raw(scope);
  for (const metric of metrics) {
    const m = w.begin(2);
    w.stringField(1, metric.name);
    w.stringField(2, metric.description);
    w.stringField(3, metric.unit);
    const h = w.begin(9);
    for (const p of metric.points) {
      const dp = w.begin(1);
      w.raw(p.attrs);
      clock.write(w, 2, startMs);
      clock.write(w, 3, nowMs);
      w.fixed64Field(4, p.count);
      w.doubleField(5, p.sum);
      const counts = w.begin(6);
      for (let i = 0; i < p.counts.length; i++) w.fixed64Of(p.counts[i]);
      w.end(counts);
      const bounds = w.begin(7);
      for (const b of metric.bounds) w.double(b);
      w.end(bounds);
      if (p.count > 0) {
        w.doubleField(11, p.min);
        w.doubleField(12, p.max);
      }
      w.end(dp);
    }
    w.varintField(2, 2); // AGGREGATION_TEMPORALITY_CUMULATIVE
    w.end(h);
    w.end(m);
  }
  w.end(sm);
  w.end(rm);
  return w.view();
}
