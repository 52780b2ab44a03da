import { assert, assertEquals } from "../_assert.ts";
import {
  argumentPieces,
  chatPromptTokens,
  embeddingVector,
  generatedText,
  inputTokens,
  textPieces,
} from "../../src/fake/content.ts";
import { splitPoint } from "../../src/fake/stream.ts";
import { parseListen } from "../../src/cli/fake_model.ts";

Deno.test("generated text: tokens words, each with a two-byte ö", () => {
  assertEquals(generatedText(3), "tök0 tök1 tök2");
  assertEquals(generatedText(0), "");
  const t = generatedText(64);
  assertEquals(new TextEncoder().encode(t).length - t.length, 64);
});

Deno.test("text pieces join back to the text exactly", () => {
  for (const text of ["", "one", "  lead", "a  b\nc ", "trail   ", " 🎉 x", "\n\n"]) {
    assertEquals(textPieces(text).join(""), text, JSON.stringify(text));
  }
  assertEquals(textPieces("a b c"), ["a", " b", " c"]);
});

Deno.test("prompt tokens count words of message contents and inputs", () => {
  assertEquals(
    chatPromptTokens([
      { role: "system", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "two words" }, { type: "image_url" }] },
      { role: "assistant", content: null },
    ]),
    4,
  );
  assertEquals(inputTokens(["a b", "c"]), 3);
  assertEquals(inputTokens([1, 2, 3]), 3);
  assertEquals(inputTokens([[1, 2], [3]]), 3);
});

Deno.test("tool-call arguments split on code points and reassemble", () => {
  const args = '{"x":"😀😀😀"}';
  const pieces = argumentPieces(args);
  assertEquals(pieces.length, 3);
  assertEquals(pieces.join(""), args);
  for (const p of pieces) assert(!/[\ud800-\udbff]$/.test(p), "no lone high surrogate");
  assertEquals(argumentPieces(""), []);
  assertEquals(argumentPieces("{}"), ["{", "}"]);
});

Deno.test("frames split inside their first multi-byte character, else in the middle", () => {
  const bytes = new TextEncoder().encode('data: {"content":"tök"}\n\n');
  const at = splitPoint(bytes);
  assertEquals(bytes[at - 1], 0xc3);
  assertEquals(splitPoint(new TextEncoder().encode("abcd")), 2);
});

Deno.test("embedding vectors are deterministic and bounded", () => {
  const v = embeddingVector("hello");
  assertEquals(v, embeddingVector("hello"));
  assertEquals(v.length, 8);
  assert(v.every((x) => x >= -1), `every component is at least -1: ${v}`);
  assert(v.every((x) => x <= 1), `every component is at most 1: ${v}`);
  assert(JSON.stringify(v) !== JSON.stringify(embeddingVector("hellp")));
});

Deno.test("--listen parses HOST:PORT and names a bad value", () => {
  assertEquals(parseListen("127.0.0.1:0"), { hostname: "127.0.0.1", port: 0 });
  assertEquals(parseListen("[::1]:8000"), { hostname: "::1", port: 8000 });
  assertEquals(parseListen(":9000"), { hostname: "127.0.0.1", port: 9000 });
  for (const bad of ["8000", "host:", "h:99999", "h:x"]) {
    let msg = "";
    try {
      parseListen(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    assert(msg.includes(bad), `error for ${bad}: ${msg}`);
  }
});
