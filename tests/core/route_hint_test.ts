import { assert, assertEquals } from "../_assert.ts";
import { routeHint } from "../../src/core/route_hint.ts";
import { keyHash } from "../../src/core/rendezvous.ts";

const system = "You are a careful assistant. ".repeat(60);
const chat = (extra: Record<string, unknown> = {}, turns = ["hello"]) => ({
  model: "m",
  messages: [
    { role: "system", content: system },
    ...turns.map((t, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: t })),
  ],
  ...extra,
});

Deno.test("session key kinds, first present wins, in the documented order", () => {
  const h = new Headers({ "x-session-id": "hdr", session_id: "codex" });
  const all = {
    prompt_cache_key: "pck",
    conversation: { id: "conv" },
    metadata: { user_id: "anthropic-user" },
    user: "u",
  };
  const kind = (body: Record<string, unknown>, headers?: Headers) =>
    routeHint(chat(body), headers).key_kind;
  assertEquals(kind(all, h), "prompt_cache_key");
  assertEquals(routeHint(chat(all), h).key, keyHash("pck"));
  const { prompt_cache_key: _, ...noPck } = all;
  assertEquals(kind(noPck, h), "conversation");
  const { conversation: __, ...noConv } = noPck;
  assertEquals(kind(noConv, h), "session_header");
  assertEquals(routeHint(chat(noConv), h).key, keyHash("hdr"));
  assertEquals(kind(noConv, new Headers({ "x-claude-code-session-id": "cc" })), "session_header");
  assertEquals(kind(noConv), "metadata_user_id");
  assertEquals(kind({ user: "u" }), "user");
  assertEquals(kind({}), "prompt");
  assertEquals(routeHint({ model: "m" }).key_kind, "none");
});

Deno.test("prompt blocks are chained: a growing conversation keeps its earlier blocks", () => {
  const one = routeHint(chat({}, ["first question"]));
  const three = routeHint(chat({}, ["first question", "an answer", "a second question"]));
  assert(one.blocks.length >= 6);
  assertEquals([...three.blocks.slice(0, one.blocks.length - 1)], [...one.blocks.slice(0, -1)]);
  // The prompt key (tools, system, first user message) is the same across the turns.
  assertEquals(one.key, three.key);
  // A system prompt longer than the key's leading blocks: every user of it shares the key (and
  // the prefix); a short one: the first question tells conversations apart.
  assertEquals(routeHint(chat({}, ["another question"])).key, one.key);
  const short = (q: string) =>
    routeHint({
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: q }],
    });
  assert(short("one").key !== short("two").key);
  assertEquals(
    short("one").key,
    routeHint({
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "one" }, {
        role: "assistant",
        content: "an answer",
      }],
    }).key,
  );
  // Another system prompt: no block in common.
  const b = routeHint({ messages: [{ role: "system", content: "Other. " + system }] });
  assertEquals(b.blocks[0] === one.blocks[0], false);
});

Deno.test("hashing is bounded: a huge prompt hashes at most maxBlocks blocks", () => {
  const huge = { messages: [{ role: "user", content: "word ".repeat(400_000) }] };
  const hint = routeHint(huge, undefined, undefined, { blockChars: 256, maxBlocks: 512 });
  assertEquals(hint.blocks.length, 512);
  assertEquals(hint.prompt_tokens, Math.ceil((2_000_000 + "\u0001user\u0002".length) / 4));
});

Deno.test("a body the hint cannot render gives no blocks and never throws", () => {
  const odd = { model: "m", messages: "not a list", input: 42, tools: [null, { a: [1, true] }] };
  const hint = routeHint(odd as unknown as Record<string, unknown>);
  assertEquals(hint.key_kind, "prompt");
  assertEquals(routeHint({ model: "m", user: "u" }).key_kind, "user");
});

Deno.test("blocks are cut from the prompt's UTF-8 bytes; any text hashes, the same alike", () => {
  const settings = { blockChars: 256, maxBlocks: 512 };
  const text = "Grüße, 世界! 🙂 ".repeat(300);
  const one = routeHint(
    { messages: [{ role: "user", content: text }] },
    undefined,
    undefined,
    settings,
  );
  const bytes = new TextEncoder().encode("\u0001user\u0002" + text).length;
  assertEquals(one.blocks.length, Math.floor(bytes / 256));
  const again = routeHint({ messages: [{ role: "user", content: text }] });
  assertEquals([...again.blocks], [...one.blocks]);
  assertEquals(new Set(one.blocks).size, one.blocks.length, "chained: every block differs");
  assertEquals(one.blocks.includes(0), false, "0 marks a free index place: never a block hash");
  // A character that would cross the bound is not cut: the bound holds.
  const tight = routeHint(
    { messages: [{ role: "user", content: "🙂".repeat(1000) }] },
    undefined,
    undefined,
    {
      blockChars: 256,
      maxBlocks: 2,
    },
  );
  assertEquals(tight.blocks.length <= 2, true);
});
