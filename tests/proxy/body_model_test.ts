import { forwardableBody as forwardable } from "../../src/proxy/body_model.ts";
import { scanJson } from "../../src/json_scan.ts";
import { assertEquals } from "../_assert.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
/** As the exchange calls it: with the one scan made before parsing. */
const forwardableBody = (raw: Uint8Array<ArrayBuffer> | undefined) =>
  forwardable(raw, raw === undefined ? { depth: 0, modelKeys: 0 } : scanJson(raw));

Deno.test("forwardableBody: one model key goes as sent; two are re-serialized", () => {
  const one = bytes('{"model":"m","messages":[{"role":"user","content":"the \\"model\\" is"}]}');
  assertEquals(forwardableBody(one), one, "an escaped quote in content is no key");
  assertEquals(forwardableBody(bytes('{"model":"a","model":"b"}')), undefined);
  assertEquals(forwardableBody(bytes('{ "x": 1, "model" : "a", "y": {"model": "b"}}')), undefined);
  const models = bytes('{"models":["a"],"model":"m"}');
  assertEquals(forwardableBody(models), models, '"models" is another key');
  assertEquals(forwardableBody(undefined), undefined);
});
