/**
 * A small protobuf writer into one reused buffer (ADR 0050): what Skeid's OTLP export needs and
 * nothing more — tags, varints, fixed64, doubles, strings, bytes and nested messages whose length
 * is filled in when they end. A nested message reserves one length byte (most are shorter than
 * 128 bytes) and moves its content when it turns out longer, so no message is encoded twice.
 *
 * @module
 */

/** Wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;

const encoder = new TextEncoder();

/** The value of a lowercase hex digit by its char code; -1 for any other. */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;
const TWO_32 = 4294967296;

/** Bytes of the varint of `n` (a whole number 0..2^53). */
export function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** A field's tag byte(s), pre-encoded: field numbers in OTLP are below 16, so one byte. */
export function tag(field: number, wire: number): number {
  return (field << 3) | wire;
}

/**
 * A string field encoded once (tag, length, UTF-8): attribute keys, span names and the like
 * that every export repeats.
 */
export function encodedString(field: number, value: string): Uint8Array {
  const bytes = encoder.encode(value);
  const w = new ProtoWriter(bytes.length + 8);
  w.bytesField(field, bytes);
  return w.take();
}

/** Writes protobuf into a growing buffer that is kept between uses. */
export class ProtoWriter {
  #buf: Uint8Array<ArrayBuffer>;
  #view: DataView;
  /** The next byte written. */
  pos = 0;

  constructor(initial = 64 * 1024) {
    this.#buf = new Uint8Array(initial);
    this.#view = new DataView(this.#buf.buffer);
  }

  /** Starts over (the buffer is kept). */
  reset(): void {
    this.pos = 0;
  }

  /** A copy of what was written (kept: encoded once, sent many times). */
  take(): Uint8Array<ArrayBuffer> {
    return this.#buf.slice(0, this.pos);
  }

  /**
   * What was written, not copied: valid until this writer is used again (an export's body, sent
   * before the next export is encoded; copying 200 KB a batch cost more than the encoding).
   */
  view(): Uint8Array<ArrayBuffer> {
    return this.#buf.subarray(0, this.pos) as Uint8Array<ArrayBuffer>;
  }

  /** Bytes `[from, to)` of what was written, not copied (valid until this writer is used again). */
  slice(from: number, to: number): Uint8Array {
    return this.#buf.subarray(from, to);
  }

  /** Drops the first `n` bytes written; what follows moves to the front. */
  dropFront(n: number): void {
    this.#buf.copyWithin(0, n, this.pos);
    this.pos -= n;
  }

  /** Room for `n` more bytes. */
  ensure(n: number): void {
    const need = this.pos + n;
    if (need <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.pos));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  /** One byte (a tag). */
  byte(b: number): void {
    this.ensure(1);
    this.#buf[this.pos++] = b;
  }

  /** A varint of a whole number 0..2^53 (larger ones are the callers' to keep out: ten bytes). */
  varint(n: number): void {
    this.ensure(10);
    const buf = this.#buf;
    let p = this.pos;
    while (n >= 128) {
      buf[p++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    buf[p++] = n;
    this.pos = p;
  }

  /** An int64 field's varint: negative numbers as ten bytes of two's complement. */
  int64(n: number): void {
    if (n >= 0) return this.varint(n);
    this.ensure(10);
    let v = BigInt.asUintN(64, BigInt(Math.trunc(n)));
    for (let i = 0; i < 9; i++) {
      this.#buf[this.pos++] = Number(v & 127n) | 128;
      v >>= 7n;
    }
    this.#buf[this.pos++] = Number(v);
  }

  /** A fixed64 of a whole number 0..2^64 given as its two 32-bit halves. */
  fixed64(hi: number, lo: number): void {
    this.ensure(8);
    this.#view.setUint32(this.pos, lo, true);
    this.#view.setUint32(this.pos + 4, hi, true);
    this.pos += 8;
  }

  /** A fixed64 of a whole number 0..2^53. */
  fixed64Of(n: number): void {
    const hi = Math.floor(n / TWO_32);
    this.fixed64(hi, n - hi * TWO_32);
  }

  /** A little-endian double. */
  double(x: number): void {
    this.ensure(8);
    this.#view.setFloat64(this.pos, x, true);
    this.pos += 8;
  }

  /** Bytes as they are (pre-encoded fields). */
  raw(bytes: Uint8Array): void {
    const n = bytes.length;
    this.ensure(n);
    if (n < 96) {
      // Short copies are cheaper by hand than through `set`.
      const buf = this.#buf;
      let p = this.pos;
      for (let i = 0; i < n; i++) buf[p++] = bytes[i];
      this.pos = p;
    } else {
      this.#buf.set(bytes, this.pos);
      this.pos += n;
    }
  }

  /** A length-delimited bytes field. */
  bytesField(field: number, bytes: Uint8Array): void {
    this.byte(tag(field, LEN));
    this.varint(bytes.length);
    this.raw(bytes);
  }

  /** A bytes field of a lowercase hex id (trace and span ids), written from its digits. */
  hexField(field: number, hex: string): void {
    const n = hex.length >> 1;
    this.ensure(n + 2);
    const buf = this.#buf;
    let p = this.pos;
    buf[p++] = tag(field, LEN);
    buf[p++] = n;
    for (let i = 0; i < 2 * n; i += 2) {
      buf[p++] = (HEX_VALUE[hex.charCodeAt(i)] << 4) | HEX_VALUE[hex.charCodeAt(i + 1)];
    }
    this.pos = p;
  }

  /**
   * A whole `KeyValue` (field `field`) of a short ASCII string, in one pass: `key` is the key's
   * encoded field. False, with nothing written, when the string is not short ASCII.
   */
  asciiKeyValue(field: number, key: Uint8Array, s: string): boolean {
    const n = s.length;
    // The key, then the AnyValue field (tag, length) holding string_value (tag, length, chars).
    const kvLen = key.length + 4 + n;
    if (kvLen >= 128) return false;
    const p = this.#asciiValue(this.#keyValueHead(field, key, kvLen, n + 2), s);
    if (p < 0) return false;
    this.pos = p;
    return true;
  }

  /**
   * Writes at `p` an AnyValue's string_value (field 1) of `s`, short (room made): the position
   * after it, or -1 when `s` is not ASCII (`pos` is not moved either way).
   */
  #asciiValue(p: number, s: string): number {
    const buf = this.#buf;
    const n = s.length;
    buf[p++] = tag(1, LEN);
    buf[p++] = n;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 128) return -1;
      buf[p++] = c;
    }
    return p;
  }

  /**
   * A whole `KeyValue` (field `field`) whose AnyValue is the varint field `anyField` (bool 2,
   * int 3) of a whole number 0..2^53, in one pass.
   */
  varintKeyValue(field: number, key: Uint8Array, anyField: number, n: number): void {
    const size = varintSize(n);
    const kvLen = key.length + 3 + size;
    if (kvLen >= 128) {
      const kv = this.begin(field);
      this.raw(key);
      const any = this.begin(2);
      this.varintField(anyField, n);
      this.end(any);
      this.end(kv);
      return;
    }
    const p = this.#keyValueHead(field, key, kvLen, 1 + size);
    this.#buf[p] = tag(anyField, VARINT);
    this.pos = p + 1;
    this.varint(n);
  }

  /** A whole `KeyValue` (field `field`) of a double (AnyValue field 4), in one pass. */
  doubleKeyValue(field: number, key: Uint8Array, x: number): boolean {
    // The key, then the AnyValue field (tag, length) holding double_value (tag, 8 bytes).
    const kvLen = key.length + 11;
    if (kvLen >= 128) return false;
    const p = this.#keyValueHead(field, key, kvLen, 9);
    this.#buf[p] = tag(4, FIXED64);
    this.#view.setFloat64(p + 1, x, true);
    this.pos = p + 9;
    return true;
  }

  /**
   * A whole `KeyValue` (field `field`) of a list of short ASCII strings (an ArrayValue, AnyValue
   * field 5, of string values), in one pass. False, with nothing written, when it is not short.
   */
  stringsKeyValue(field: number, key: Uint8Array, list: readonly string[]): boolean {
    // Each value: ArrayValue.values (tag, length) holding string_value (tag, length, chars).
    let arrLen = 0;
    for (let i = 0; i < list.length; i++) arrLen += 4 + list[i].length;
    const kvLen = key.length + 4 + arrLen;
    if (kvLen >= 128) return false;
    let p = this.#keyValueHead(field, key, kvLen, arrLen + 2);
    const buf = this.#buf;
    buf[p++] = tag(5, LEN);
    buf[p++] = arrLen;
    for (let i = 0; i < list.length; i++) {
      buf[p++] = tag(1, LEN);
      buf[p++] = list[i].length + 2;
      p = this.#asciiValue(p, list[i]);
      if (p < 0) return false;
    }
    this.pos = p;
    return true;
  }

  /**
   * The head of a short `KeyValue` written in one pass: its tag and length (`kvLen` < 128), the
   * key's encoded field, the AnyValue's tag and length (`anyLen`); room for all of it made. The
   * position after it, where the AnyValue's field goes (`pos` is not moved).
   */
  #keyValueHead(field: number, key: Uint8Array, kvLen: number, anyLen: number): number {
    this.ensure(kvLen + 2);
    const buf = this.#buf;
    let p = this.pos;
    buf[p++] = tag(field, LEN);
    buf[p++] = kvLen;
    for (let i = 0; i < key.length; i++) buf[p++] = key[i];
    buf[p++] = tag(2, LEN);
    buf[p++] = anyLen;
    return p;
  }

  /** A string field, UTF-8: ASCII by hand, anything else through `encodeInto`. */
  stringField(field: number, s: string): void {
    const n = s.length;
    this.ensure(n * 3 + 11);
    const buf = this.#buf;
    buf[this.pos++] = tag(field, LEN);
    if (n < 128) {
      const start = this.pos;
      let p = start + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 128) break;
        buf[p++] = c;
      }
      if (i === n) {
        buf[start] = n;
        this.pos = p;
        return;
      }
    }
    // Not ASCII (or long): the length reserved for the most bytes it can take, moved back after.
    const start = this.pos;
    const reserved = varintSize(n * 3);
    const written = encoder.encodeInto(s, buf.subarray(start + reserved)).written;
    this.#close(start, reserved, written);
  }

  /** A varint field. */
  varintField(field: number, n: number): void {
    this.byte(tag(field, VARINT));
    this.varint(n);
  }

  /** A fixed64 field of a whole number 0..2^53. */
  fixed64Field(field: number, n: number): void {
    this.byte(tag(field, FIXED64));
    this.fixed64Of(n);
  }

  /** A double field. */
  doubleField(field: number, x: number): void {
    this.byte(tag(field, FIXED64));
    this.double(x);
  }

  /** Opens a nested message field: answers the mark `end` takes. */
  begin(field: number): number {
    this.ensure(2);
    this.#buf[this.pos++] = tag(field, LEN);
    const mark = this.pos;
    this.pos++; // one length byte reserved
    return mark;
  }

  /** Closes the nested message opened at `mark`: its length written, its content moved if need be. */
  end(mark: number): void {
    const len = this.pos - mark - 1;
    // The usual case: shorter than 128 bytes, the reserved byte is its length.
    if (len < 128) this.#buf[mark] = len;
    else this.#close(mark, 1, len);
  }

  /**
   * Opens a nested message that is usually 128 bytes to 16 KB long (a span, a span's event):
   * two length bytes reserved, so closing it moves nothing in the usual case. `endLong` closes it.
   */
  beginLong(field: number): number {
    this.ensure(3);
    this.#buf[this.pos++] = tag(field, LEN);
    const mark = this.pos;
    this.pos += 2;
    return mark;
  }

  /** Closes the nested message opened at `mark` by `beginLong`. */
  endLong(mark: number): void {
    const len = this.pos - mark - 2;
    if (len >= 128 && len < 16384) {
      this.#buf[mark] = (len & 127) | 128;
      this.#buf[mark + 1] = len >> 7;
    } else this.#close(mark, 2, len);
  }

  /** Writes the varint length `len` of content that starts `reserved` bytes after `at`. */
  #close(at: number, reserved: number, len: number): void {
    const size = varintSize(len);
    if (size !== reserved) {
      this.ensure(size - reserved);
      this.#buf.copyWithin(at + size, at + reserved, at + reserved + len);
    }
    const buf = this.#buf;
    let p = at;
    let n = len;
    while (n >= 128) {
      buf[p++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    buf[p++] = n;
    this.pos = at + size + len;
  }
}
