/**
 * A span as Skeid records it (ADR 0050): a small plain object written on the request path with
 * next to no work — ids, `performance.now()` stamps, and attributes as a flat list of a key made
 * once (its protobuf bytes and its type) and a value the request already has. Nothing is
 * encoded until the exporter's batch goes out.
 *
 * @module
 */
import { encodedString } from "./proto_writer.ts";

/** The OTLP value type of an attribute key. */
export enum AttrType {
  String,
  Int,
  Double,
  Bool,
  Strings,
}

/** An attribute key, encoded once: `KeyValue.key` as protobuf bytes, and its value's type. */
export interface AttrKey {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly type: AttrType;
}

/** An attribute key (made once per key, at module load). */
export function attrKey(name: string, type: AttrType): AttrKey {
  return Object.freeze({ name, bytes: encodedString(1, name), type });
}

/** A value of the key's type. */
export type AttrValue = string | number | boolean | readonly string[];

/** Attributes as `[key, value, key, value, …]`: one array, no object per attribute. */
export type AttrList = (AttrKey | AttrValue)[];

/** OTLP span kinds. */
export enum SpanKindCode {
  Internal = 1,
  Server = 2,
  Client = 3,
}

/** OTLP status codes. */
export enum StatusCode {
  Unset = 0,
  Ok = 1,
  Error = 2,
}

/** A span event. */
export interface SpanEvent {
  /** `Event.name`, encoded once. */
  readonly name: Uint8Array;
  /** `performance.now()` ms. */
  readonly atMs: number;
  readonly attrs: AttrList | undefined;
}

/** A span name encoded once (`Span.name`, field 5). */
export function spanName(name: string): Uint8Array {
  return encodedString(5, name);
}

/** An event name encoded once (`Event.name`, field 2). */
export function eventName(name: string): Uint8Array {
  return encodedString(2, name);
}

/** One span. */
export class SpanRecord {
  /** 32 lowercase hex. */
  readonly traceId: string;
  /** 16 lowercase hex. */
  readonly spanId: string;
  /** 16 lowercase hex; undefined for a root span. */
  readonly parentId: string | undefined;
  /** `Span.name` encoded (field 5 with its tag). */
  readonly name: Uint8Array;
  readonly kind: SpanKindCode;
  /** `performance.now()` ms. */
  readonly startMs: number;
  endMs = 0;
  status: StatusCode = StatusCode.Unset;
  statusMessage: string | undefined = undefined;
  /** The client's `tracestate` (request span only). */
  traceState: string | undefined = undefined;
  /** Attributes encoded once and shared by many spans (`KeyValue` fields, field 9). */
  fixed: Uint8Array | undefined;
  readonly attrs: AttrList = [];
  events: SpanEvent[] | undefined = undefined;

  constructor(
    traceId: string,
    spanId: string,
    parentId: string | undefined,
    name: Uint8Array,
    kind: SpanKindCode,
    startMs: number,
    fixed?: Uint8Array,
  ) {
    this.traceId = traceId;
    this.spanId = spanId;
    this.parentId = parentId;
    this.name = name;
    this.kind = kind;
    this.startMs = startMs;
    this.fixed = fixed;
  }

  /** An attribute; a key set twice is sent twice (the spec: the last wins). */
  set(key: AttrKey, value: AttrValue): void {
    this.attrs.push(key, value);
  }

  /** An event at `atMs`. */
  event(name: Uint8Array, atMs: number, attrs?: AttrList): void {
    (this.events ??= []).push({ name, atMs, attrs });
  }

  /** Marks the span failed. */
  fail(message: string): void {
    this.status = StatusCode.Error;
    this.statusMessage = message;
  }
}
