/**
 * The GenAI histograms aggregated in JavaScript (ADR 0050): `gen_ai.client.operation.duration`,
 * `gen_ai.client.token.usage` and `gen_ai.server.time_to_first_token`, with the spec's bucket
 * boundaries, one cumulative point per label set. A label set's attributes are encoded once,
 * when it is first seen; a record is a bucket search and four additions.
 *
 * @module
 */
import { DURATION_BUCKETS_S, TOKEN_BUCKETS, TTFT_BUCKETS_S } from "./genai.ts";
import { encodeAttrs, type HistogramMetric, type HistogramPoint } from "./otlp_encode.ts";
import { attrKey, type AttrList, AttrType } from "./span_record.ts";

/** One histogram point being aggregated. */
class Point implements HistogramPoint {
  readonly attrs: Uint8Array;
  readonly counts: Float64Array;
  readonly #bounds: readonly number[];
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;

  constructor(attrs: Uint8Array, bounds: readonly number[]) {
    this.attrs = attrs;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  record(x: number): void {
    const bounds = this.#bounds;
    // Bucket i holds (bounds[i-1], bounds[i]]; the last one what is above every bound.
    let i = 0;
    while (i < bounds.length && x > bounds[i]) i++;
    this.counts[i]++;
    this.count++;
    this.sum += x;
    if (x < this.min) this.min = x;
    if (x > this.max) this.max = x;
  }
}

const TOKEN_TYPE = attrKey("gen_ai.token.type", AttrType.String);

/** The points of one label set: an attempt's node, model, response model and error type. */
export class GenAiSeries {
  readonly duration: Point;
  readonly ttft: Point;
  readonly inputTokens: Point;
  readonly outputTokens: Point;

  /** `labels`: the label set's attributes. */
  constructor(labels: AttrList) {
    const attrs = encodeAttrs(labels);
    this.duration = new Point(attrs, DURATION_BUCKETS_S);
    this.ttft = new Point(attrs, TTFT_BUCKETS_S);
    this.inputTokens = new Point(encodeAttrs([...labels, TOKEN_TYPE, "input"]), TOKEN_BUCKETS);
    this.outputTokens = new Point(encodeAttrs([...labels, TOKEN_TYPE, "output"]), TOKEN_BUCKETS);
  }
}

/** Label sets kept at most; later ones go to one overflow set (the spec's overflow attribute). */
export const MAX_SERIES = 2000;

const OVERFLOW = attrKey("otel.metric.overflow", AttrType.Bool);

/** Every label set's points of one gateway. */
export class GenAiHistograms {
  readonly #series: GenAiSeries[] = [];
  #overflow: GenAiSeries | undefined;

  /** A new label set's points, or the overflow set once `MAX_SERIES` are kept. */
  add(labels: AttrList): GenAiSeries {
    if (this.#series.length >= MAX_SERIES) return this.overflow();
    const s = new GenAiSeries(labels);
    this.#series.push(s);
    return s;
  }

  /** The overflow set (`otel.metric.overflow`): the points of label sets past a bound. */
  overflow(): GenAiSeries {
    return this.#overflow ??= new GenAiSeries([OVERFLOW, true]);
  }

  /** The histograms with at least one point recorded, as they stand (cumulative). */
  read(): HistogramMetric[] {
    const all = this.#overflow === undefined ? this.#series : [...this.#series, this.#overflow];
    const pick = (f: (s: GenAiSeries) => Point) => all.map(f).filter((p) => p.count > 0);
    const out: HistogramMetric[] = [];
    const add = (metric: Omit<HistogramMetric, "points">, points: Point[]) => {
      if (points.length > 0) out.push({ ...metric, points });
    };
    add({
      name: "gen_ai.client.operation.duration",
      description: "Duration of GenAI operations (one upstream attempt)",
      unit: "s",
      bounds: DURATION_BUCKETS_S,
    }, pick((s) => s.duration));
    add({
      name: "gen_ai.client.token.usage",
      description: "Input and output tokens of GenAI operations",
      unit: "{token}",
      bounds: TOKEN_BUCKETS,
    }, [...pick((s) => s.inputTokens), ...pick((s) => s.outputTokens)]);
    add({
      name: "gen_ai.server.time_to_first_token",
      description: "Time to the first content chunk of a streamed answer",
      unit: "s",
      bounds: TTFT_BUCKETS_S,
    }, pick((s) => s.ttft));
    return out;
  }
}
