import { assertEquals, assertThrows } from "../_assert.ts";
import { bodyJson, jsonValue } from "../../src/core/json.ts";

Deno.test("jsonValue: where and why a text is not JSON, never quoting it", () => {
  assertEquals(jsonValue('{"a":[1,2]}'), { a: [1, 2] });
  const cases: Record<string, string> = {
    '{"a":1,}': "at line 1, column 8: expected double-quoted property name",
    '{\n  "model": "m",\n  "messages": [\n    {"role": "user" "content": "hi"}\n  ]\n}':
      "at line 4, column 21: expected ',' or '}' after property value",
    '{"a":"x\ny"}': "at line 1, column 8: bad control character in string literal",
    '{"a":1} x': "at line 1, column 9: unexpected non-whitespace character after JSON",
    '{"secret":"sk-live-1234", oops}': "at line 1, column 27: expected double-quoted property name",
    '{"secret":"sk-live-1234", "b": tru}': 'unexpected "}"',
    '{"a":': "it ends before its JSON value does",
    "": "it ends before its JSON value does",
  };
  for (const [text, problem] of Object.entries(cases)) {
    const err = assertThrows(() => jsonValue(text), SyntaxError);
    assertEquals(err.message, problem, JSON.stringify(text));
    assertEquals(err.message.includes("sk-live"), false, "no excerpt of the text");
  }
  assertEquals(jsonValue("[]"), []);
});

Deno.test("bodyJson: nothing for a blank body, the value, or where a body is not JSON", () => {
  assertEquals([bodyJson(""), bodyJson(" \n\t")], [undefined, undefined]);
  assertEquals(bodyJson('{"healthy":false}'), { healthy: false });
  const err = assertThrows(() => bodyJson('{"healthy":\n  false,}'), SyntaxError);
  assertEquals(
    err.message,
    "body is not valid JSON: at line 2, column 9: expected double-quoted property name",
  );
});
