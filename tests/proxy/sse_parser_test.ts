import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { type SseFrame, SseParser } from "../../src/proxy/sse_parser.ts";

const enc = new TextEncoder();

function parseAll(parts: (string | Uint8Array)[], keepRaw = false): SseFrame[] {
  const frames: SseFrame[] = [];
  const p = new SseParser((f) => frames.push(f), keepRaw);
  for (const part of parts) p.push(typeof part === "string" ? enc.encode(part) : part);
  p.end();
  return frames;
}

Deno.test("sse: one frame per blank line, data lines joined with LF", () => {
  const frames = parseAll(['data: a\ndata: b\n\nevent: x\ndata: {"k":1}\n\n']);
  deepStrictEqual(frames.map((f) => [f.event, f.data]), [["", "a\nb"], ["x", '{"k":1}']]);
});

Deno.test("sse: a frame split anywhere across reads is reassembled", () => {
  const text = 'data: {"choices":[{"delta":{"content":"héllo"}}]}\n\ndata: [DONE]\n\n';
  const bytes = enc.encode(text);
  // Every split point, including inside the two-byte UTF-8 sequence of "é".
  for (let i = 0; i <= bytes.length; i++) {
    const frames = parseAll([bytes.slice(0, i), bytes.slice(i)]);
    deepStrictEqual(
      frames.map((f) => f.data),
      ['{"choices":[{"delta":{"content":"héllo"}}]}', "[DONE]"],
      `split at ${i}`,
    );
  }
});

Deno.test("sse: byte-by-byte reads and empty reads", () => {
  const bytes = enc.encode("data: one\n\ndata: two\n\n");
  const parts: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i++) parts.push(bytes.slice(i, i + 1), new Uint8Array(0));
  deepStrictEqual(parseAll(parts).map((f) => f.data), ["one", "two"]);
});

Deno.test("sse: CRLF, CR and LF line endings, mixed, CRLF split between reads", () => {
  deepStrictEqual(parseAll(["data: a\r\n\r\ndata: b\r\rdata: c\n\n"]).map((f) => f.data), [
    "a",
    "b",
    "c",
  ]);
  deepStrictEqual(parseAll(["data: a\r", "\n\r", "\ndata: b\r\n", "\r\n"]).map((f) => f.data), [
    "a",
    "b",
  ]);
});

Deno.test("sse: comments and unknown fields ignored; no space after colon; field without colon", () => {
  const frames = parseAll([": keepalive\n\nid: 7\nretry: 10\ndata:x\ndata\n\n"]);
  deepStrictEqual(frames.map((f) => f.data), ["x\n"]);
});

Deno.test("sse: an unterminated last frame is dropped", () => {
  deepStrictEqual(parseAll(["data: a\n\ndata: b\n"]).map((f) => f.data), ["a"]);
});

Deno.test("sse: raw text of frames concatenates back to the input", () => {
  const text = ": c\n\ndata: a\r\n\r\nevent: e\ndata: b\n\ndata: c\r\r";
  const bytes = enc.encode(text);
  for (let i = 0; i <= bytes.length; i++) {
    const frames = parseAll([bytes.slice(0, i), bytes.slice(i)], true);
    strictEqual(frames.map((f) => f.raw).join(""), text, `split at ${i}`);
    strictEqual(frames.length, 3);
  }
});

Deno.test("sse: frames counter", () => {
  const p = new SseParser(() => {});
  p.push(enc.encode("data: 1\n\ndata: 2\n\n"));
  strictEqual(p.frames, 2);
});

Deno.test("sse: UTF-8 split anywhere decodes as one streaming decode would (BOM, invalid bytes)", () => {
  const samples: number[][] = [
    // BOM, then "é€𝄞" (2-, 3- and 4-byte sequences)
    [0xef, 0xbb, 0xbf, ...enc.encode("data: é€𝄞\n\n")],
    // a BOM in the middle stays U+FEFF
    [...enc.encode("data: a"), 0xef, 0xbb, 0xbf, ...enc.encode("b\n\n")],
    // invalid: a stray continuation, a cut 3-byte sequence, an F0 with a bad second byte
    [...enc.encode("data: "), 0x80, 0xe2, 0x82, 0x41, 0xf0, 0x80, 0x42, ...enc.encode("\n\n")],
    // an incomplete sequence at the very end of the stream
    [...enc.encode("data: x\n\ndata: y"), 0xe2, 0x82],
  ];
  for (const sample of samples) {
    const bytes = new Uint8Array(sample);
    const reference = new TextDecoder().decode(bytes);
    const expected: string[] = [];
    new SseParser((f) => expected.push(f.data)).pushText(reference);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j += 3) {
        const got = parseAll([bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)]);
        deepStrictEqual(got.map((f) => f.data), expected, `splits ${i}/${j} of ${sample}`);
      }
    }
  }
});

Deno.test("sse: whole `data:` frames (the fast path) read like any other", () => {
  const text = 'data: {"a":1}\n\ndata:x\n\ndata:\n\ndata: \n\n: c\ndata: y\n\ndata: z\r\n\r\n';
  const frames = parseAll([text], true);
  deepStrictEqual(frames.map((f) => f.data), ['{"a":1}', "x", "", "", "y", "z"]);
  strictEqual(frames.map((f) => f.raw).join(""), text);
  deepStrictEqual(frames.map((f) => f.event), ["", "", "", "", "", ""]);
});
