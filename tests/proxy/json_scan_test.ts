import { assertEquals } from "../_assert.ts";
import { replaceString, scanJson, topLevelModelSpan } from "../../src/json_scan.ts";

const jsonDepth = (bytes: Uint8Array, limit?: number) => scanJson(bytes, limit).depth;
import { OpenAIFace } from "../../src/faces/openai.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

Deno.test("jsonDepth: counts objects and arrays, not brackets inside strings", () => {
  assertEquals(jsonDepth(enc.encode('{"a":[1,{"b":[]}]}')), 4);
  assertEquals(jsonDepth(enc.encode('{"a":"[[[[\\"[[["}')), 1, "strings and escapes skipped");
  assertEquals(jsonDepth(enc.encode("1")), 0);
});

Deno.test("jsonDepth: stops one past the limit", () => {
  assertEquals(jsonDepth(enc.encode("[".repeat(1000)), 10), 11);
});

Deno.test("topLevelModelSpan: the last top-level model string, not nested ones", () => {
  const text = '{"messages":[{"model":"x"}],"model" : "a","tools":{"model":"y"},"model":"b\\"c"}';
  const span = topLevelModelSpan(enc.encode(text));
  assertEquals(span && text.slice(span.start, span.end), '"b\\"c"');
  assertEquals(topLevelModelSpan(enc.encode('{"x":"model","model":3}')), undefined);
});

Deno.test("replaceString: only the span changes", () => {
  const bytes = enc.encode('{"model":"house","n":1}');
  const span = topLevelModelSpan(bytes)!;
  assertEquals(dec.decode(replaceString(bytes, span, 'q"1')), '{"model":"q\\"1","n":1}');
});

Deno.test("openai face: an alias tier's model is set in the client's bytes", () => {
  const face = new OpenAIFace();
  const text = '{"model":"house", "messages":[{"role":"user","content":"hi"}],"x":1.50}';
  const up = face.toUpstream("/v1/chat/completions", JSON.parse(text));
  const out = face.upstreamBody(up, "m1", enc.encode(text));
  assertEquals(
    typeof out === "string" ? out : dec.decode(out),
    '{"model":"m1", "messages":[{"role":"user","content":"hi"}],"x":1.50}',
    "bytes kept as the client wrote them (1.50 not re-serialized)",
  );
});
