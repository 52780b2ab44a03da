/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) through the gateway: the client's
 * `traceparent` and `tracestate` read once per request, the request span's id, and the
 * `traceparent` each upstream attempt sends (same trace, a span id of its own).
 *
 * On the hot path: the ids come from a pool of random bytes refilled by one
 * `crypto.getRandomValues` call per few hundred requests, turned to hex through a table; the
 * headers are checked by a bounded loop over their characters, no regex.
 *
 * @module
 */

/** The trace a request belongs to, and its own span (the request span). */
export interface TraceContext {
  /** 32 lowercase hex digits, not all zeros: the client's trace, or a new one. */
  readonly traceId: string;
  /** 16 lowercase hex digits: the request span's id, new for every request. */
  readonly spanId: string;
  /** Whether the trace is sampled (flag `01`): the client's flag, or set on a new trace. */
  readonly sampled: boolean;
  /** The client's `tracestate` when it was well-formed, passed on unchanged; else undefined. */
  readonly tracestate: string | undefined;
}

/** The `tracestate` a node is sent at most, characters; a longer one is dropped whole. */
export const MAX_TRACESTATE = 512;
/** Most list members a `tracestate` may have (the spec's limit). */
const MAX_TRACESTATE_MEMBERS = 32;
/** A `traceparent` of version 00 is exactly this long. */
const TRACEPARENT_LENGTH = 55;
/** A later version's `traceparent` is read as far as version 00's fields go; longer is refused. */
const MAX_TRACEPARENT = 512;

/** The char codes of the two hex digits of each byte (high digit in the upper 8 bits). */
const HEX_CODES = Uint16Array.from({ length: 256 }, (_, i) => {
  const digits = "0123456789abcdef";
  return (digits.charCodeAt(i >> 4) << 8) | digits.charCodeAt(i & 15);
});

/** Char codes of one id being made, reused: a span id's 16, a trace id's 32. */
const CODES_16: number[] = new Array(16).fill(0);
const CODES_32: number[] = new Array(32).fill(0);

/** Random bytes handed out 8 or 16 at a time; refilled in one call when used up. */
const POOL_SIZE = 4096;
const pool = new Uint8Array(POOL_SIZE);
let poolAt = POOL_SIZE;

/** `n` random bytes as lowercase hex, never all zeros (the spec forbids an all-zero id). */
function randomHex(n: number): string {
  for (;;) {
    if (poolAt + n > POOL_SIZE) {
      crypto.getRandomValues(pool);
      poolAt = 0;
    }
    let any = 0;
    const codes = n === 8 ? CODES_16 : CODES_32;
    for (let i = 0; i < n; i++) {
      const b = pool[poolAt + i];
      any |= b;
      const pair = HEX_CODES[b];
      codes[2 * i] = pair >> 8;
      codes[2 * i + 1] = pair & 255;
    }
    poolAt += n;
    // One flat string (not a rope of pairs): the exporter reads it back digit by digit.
    if (any !== 0) return String.fromCharCode.apply(null, codes);
  }
}

/** A new span id: 16 lowercase hex digits. */
export function newSpanId(): string {
  return randomHex(8);
}

/** A new trace id: 32 lowercase hex digits. */
export function newTraceId(): string {
  return randomHex(16);
}

/** Whether `s[from, to)` is lowercase hex, and (with `nonZero`) not all `0`. */
function lowerHex(s: string, from: number, to: number, nonZero: boolean): boolean {
  let zero = true;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      if (c !== 0x30) zero = false;
    } else if (c >= 0x61 && c <= 0x66) zero = false;
    else return false;
  }
  return !(nonZero && zero);
}

/**
 * The trace id and flags of a `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), or undefined when
 * it is not valid: wrong length or separators, uppercase or non-hex digits, an all-zero trace or
 * parent id, version `ff`. A later version is read as version 00 (its first 55 characters,
 * followed by the end or a `-`), as the spec asks.
 */
export function parseTraceparent(
  value: string,
): { traceId: string; parentId: string; sampled: boolean } | undefined {
  const n = value.length;
  if (n < TRACEPARENT_LENGTH || n > MAX_TRACEPARENT) return undefined;
  if (!lowerHex(value, 0, 2, false) || value.startsWith("ff")) return undefined;
  if (
    value.startsWith("00") ? n !== TRACEPARENT_LENGTH : n > TRACEPARENT_LENGTH && value[55] !== "-"
  ) {
    return undefined;
  }
  if (value[2] !== "-" || value[35] !== "-" || value[52] !== "-") return undefined;
  if (!lowerHex(value, 3, 35, true) || !lowerHex(value, 36, 52, true)) return undefined;
  if (!lowerHex(value, 53, 55, false)) return undefined;
  const flags = Number.parseInt(value.slice(53, 55), 16);
  return {
    traceId: value.slice(3, 35),
    parentId: value.slice(36, 52),
    sampled: (flags & 1) === 1,
  };
}

/** Whether `c` may be in a `tracestate` key after its first character. */
function keyChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2d ||
    c === 0x2a || c === 0x2f;
}

/** Whether `key` is a `tracestate` key: `simple` or `tenant@system` (spec §3.3.1.3.1). */
function validKey(key: string): boolean {
  const at = key.indexOf("@");
  const first = key.charCodeAt(0);
  const lcalpha = first >= 0x61 && first <= 0x7a;
  if (at === -1) {
    if (key.length === 0 || key.length > 256 || !lcalpha) return false;
  } else {
    const system = key.length - at - 1;
    if (at === 0 || at > 241 || system < 1 || system > 14) return false;
    if (!lcalpha && !(first >= 0x30 && first <= 0x39)) return false;
    const s = key.charCodeAt(at + 1);
    if (!(s >= 0x61 && s <= 0x7a)) return false;
  }
  for (let i = 1; i < key.length; i++) {
    if (i !== at && !keyChar(key.charCodeAt(i))) return false;
  }
  return true;
}

/** Whether `value` is a `tracestate` value: 1–256 printable ASCII, no `,` `=`, not ending in a space. */
function validValue(value: string): boolean {
  const n = value.length;
  if (n === 0 || n > 256 || value.charCodeAt(n - 1) === 0x20) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x2c || c === 0x3d) return false;
  }
  return true;
}

/**
 * Whether a `tracestate` is well-formed and at most `MAX_TRACESTATE` characters: comma-separated
 * `key=value` members (empty ones allowed), at most 32, no key twice.
 */
export function validTracestate(value: string): boolean {
  if (value.length > MAX_TRACESTATE) return false;
  let members = 0;
  let keys: Set<string> | undefined;
  for (const raw of value.split(",")) {
    const member = raw.trim();
    if (member === "") continue;
    if (++members > MAX_TRACESTATE_MEMBERS) return false;
    const eq = member.indexOf("=");
    if (eq <= 0) return false;
    const key = member.slice(0, eq);
    if (!validKey(key) || !validValue(member.slice(eq + 1))) return false;
    keys ??= new Set();
    if (keys.has(key)) return false;
    keys.add(key);
  }
  return members > 0;
}

/**
 * The trace context of a client request: its `traceparent` continued when valid (with its
 * `tracestate` when that is well-formed too), else a new sampled trace; the request span gets a
 * new span id either way.
 */
export function traceContextOf(headers: Headers): TraceContext {
  const raw = headers.get("traceparent");
  const parent = raw === null ? undefined : parseTraceparent(raw);
  if (parent === undefined) {
    // Skeid starts the trace: marked sampled, so a node with a parent-based sampler records it.
    return { traceId: newTraceId(), spanId: newSpanId(), sampled: true, tracestate: undefined };
  }
  const state = headers.get("tracestate");
  return {
    traceId: parent.traceId,
    spanId: newSpanId(),
    sampled: parent.sampled,
    tracestate: state !== null && validTracestate(state) ? state : undefined,
  };
}

/**
 * The `traceparent` of one upstream attempt: the request's trace, the attempt span's id (a new
 * one when no attempt span was made: OpenTelemetry off), its flag.
 */
export function attemptTraceparent(trace: TraceContext, spanId?: string): string {
  return `00-${trace.traceId}-${spanId ?? newSpanId()}-${trace.sampled ? "01" : "00"}`;
}
