import { forwardableBody } from "../../src/proxy/body_model.ts";
import { assertEquals } from "../_assert.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("forwardableBody: one model key goes as sent; two are re-serialized", () => {
  const one = bytes('{"model":"m","messages":[{"role":"user","content":"the \\"model\\" is"}]}');
  assertEquals(forwardableBody(one), one, "an escaped quote in content is no key");
  assertEquals(forwardableBody(bytes('{"model":"a","model":"b"}')), undefined);
  assertEquals(forwardableBody(bytes('{ "x": 1, "model" : "a", "y": {"model": "b"}}')), undefined);
  const models = bytes('{"models":["a"],"model":"m"}');
  assertEquals(forwardableBody(models), models, '"models" is another key');
  assertEquals(forwardableBody(undefined), undefined);
});
