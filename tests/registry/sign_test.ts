import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { sign, SIGNATURE_HEADER, verify } from "../../src/registry/sign.ts";
import { encode } from "../../src/registry/encode.ts";
import { SECRET } from "./helpers.ts";

const decoder = new TextDecoder();

Deno.test("sign: sha256= plus the hex HMAC-SHA256 of the body (RFC 4231 case 2)", async () => {
  // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
  assertEquals(
    await sign("what do ya want for nothing?", "Jefe"),
    "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
  );
  assertEquals(SIGNATURE_HEADER, "X-Skeid-Registry-Signature");
});

Deno.test("verify: the signature of these exact bytes verifies, trimmed header too", async () => {
  const body = encode({ version: 1, nodes: [] });
  const sig = await sign(body, SECRET);
  assertMatch(sig, /^sha256=[0-9a-f]{64}$/);
  assert(await verify(body, sig, SECRET));
  assert(await verify(body, `  ${sig}\t`, SECRET), "surrounding whitespace is trimmed");
  assert(await verify(decoder.decode(body), sig, SECRET), "text and bytes sign the same");
});

Deno.test("verify: a tampered body, another secret, a missing or bare header all fail", async () => {
  const body = encode({ generated_at: 100, ttl: 10, version: 1 });
  const sig = await sign(body, SECRET);
  const tampered = encode({ generated_at: 200, ttl: 10, version: 1 });
  assertEquals(await verify(tampered, sig, SECRET), false, "changed age breaks the signature");
  assertEquals(await verify(body, sig, SECRET.replace("0", "1")), false, "another secret");
  assertEquals(await verify(body, null, SECRET), false, "no header");
  assertEquals(await verify(body, sig.slice("sha256=".length), SECRET), false, "no sha256= prefix");
  assertEquals(await verify(body, sig.toUpperCase(), SECRET), false, "the exact hex only");
  assertEquals(await verify(body, sig, ""), false, "an empty secret never verifies");
});

Deno.test("verify: a one-character difference anywhere fails (full-length compare)", async () => {
  const body = encode({ a: 1 });
  const sig = await sign(body, SECRET);
  for (const at of [7, 30, sig.length - 1]) {
    const flipped = sig.slice(0, at) + (sig[at] === "0" ? "1" : "0") + sig.slice(at + 1);
    assertEquals(await verify(body, flipped, SECRET), false, `difference at ${at}`);
  }
});

Deno.test("encode: canonical JSON, keys sorted at every depth, UTF-8", () => {
  const text = decoder.decode(encode({ b: 1, a: { d: [{ z: 1, y: "ü" }], c: null } }));
  assertEquals(text, '{"a":{"c":null,"d":[{"y":"ü","z":1}]},"b":1}');
});
