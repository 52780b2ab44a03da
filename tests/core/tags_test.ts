import assert from "node:assert/strict";
import { normalizeTags, TagsError } from "../../src/core/tags.ts";
import { core, spec } from "./routing_helpers.ts";

Deno.test("tags: lowercased, trimmed, de-duplicated, first-seen order kept", () => {
  assert.deepEqual(normalizeTags(["Local", " gb10 ", "LOCAL", "cloud", ""]), [
    "local",
    "gb10",
    "cloud",
  ]);
});

Deno.test("tags: a string splits on commas and whitespace", () => {
  assert.deepEqual(normalizeTags("local, gb10"), ["local", "gb10"]);
  assert.deepEqual(normalizeTags(" Cloud  groq,,GROQ "), ["cloud", "groq"]);
});

Deno.test("tags: none is []", () => {
  assert.deepEqual(normalizeTags(undefined), []);
  assert.deepEqual(normalizeTags(null), []);
  assert.deepEqual(normalizeTags([]), []);
  assert.deepEqual(normalizeTags(""), []);
});

Deno.test("tags: a map or a nested structure is refused", () => {
  assert.throws(() => normalizeTags({ local: true }), TagsError);
  assert.throws(() => normalizeTags([["local"]]), TagsError);
  assert.throws(() => normalizeTags(true), TagsError);
});

Deno.test("YAML [Local, GB10] and 'cloud, groq' both normalize and route", () => {
  const { skeid } = core();
  skeid.addNode(spec("local-1", { tags: ["Local", "GB10"] }));
  skeid.addNode(spec("groq-1", { tags: "cloud, groq" }));
  assert.deepEqual(skeid.getNode("local-1")?.tags, ["local", "gb10"]);
  assert.deepEqual(skeid.getNode("groq-1")?.tags, ["cloud", "groq"]);
  assert.equal(skeid.pickNode({ model: "m", tags: ["gb10"] })?.id, "local-1");
  assert.equal(skeid.pickNode({ model: "m", tags: [" Cloud "] })?.id, "groq-1");
});
