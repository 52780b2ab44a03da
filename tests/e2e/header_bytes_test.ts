/**
 * A proxy passes header bytes through unchanged, both ways. Deno hands header values over as
 * byte strings (one character per byte, U+0000–U+00FF), so a value with a byte ≥ 0x80 (here
 * `ü`, byte 0xFC) must leave the gateway as the same single byte: the fake model reads it back
 * exactly as a direct call does.
 */
import { strictEqual } from "node:assert/strict";
import { withFakeModel } from "../_helpers/fake.ts";
import { CHAT_MODEL, withGateway } from "./helpers.ts";

const NOTE = "Z\u00fcrich";

function charCodes(s: string | null): number[] {
  return s === null ? [] : [...s].map((c) => c.charCodeAt(0));
}

Deno.test("header bytes: the fake model itself round-trips a byte >= 0x80 (the baseline)", async () => {
  await withFakeModel(async (fake) => {
    const res = await fetch(`${fake.url}/chat/completions`, {
      method: "POST",
      headers: { "x-fake-options": JSON.stringify({ fake_text: NOTE }) },
      body: JSON.stringify({
        model: CHAT_MODEL,
        messages: [],
        fake_headers: { "x-note": NOTE },
      }),
    });
    strictEqual((await res.json()).choices[0].message.content, NOTE);
    strictEqual(res.headers.get("x-note"), NOTE);
  });
});

Deno.test("header bytes: a client header with a byte >= 0x80 reaches the node unchanged", async () => {
  await withGateway(async (e) => {
    const res = await fetch(`${e.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "x-fake-options": JSON.stringify({ fake_text: NOTE }) },
      body: JSON.stringify({ model: CHAT_MODEL, messages: [] }),
    });
    const body = await res.json();
    strictEqual(res.status, 200);
    const seen = e.fake.requests.at(-1)?.headers["x-fake-options"] ?? null;
    strictEqual(
      JSON.stringify(charCodes(seen)),
      JSON.stringify(charCodes(JSON.stringify({ fake_text: NOTE }))),
      "the node got the client's header bytes",
    );
    strictEqual(body.choices[0].message.content, NOTE);
    await e.t.sink.waitFor(1);
  });
});

Deno.test("header bytes: an upstream response header with a byte >= 0x80 is relayed, not a 502", async () => {
  await withGateway(async (e) => {
    const res = await fetch(`${e.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: CHAT_MODEL,
        messages: [],
        fake_headers: { "x-note": NOTE },
      }),
    });
    const text = await res.text();
    strictEqual(res.status, 200, text);
    strictEqual(res.headers.get("x-note"), NOTE);
    await e.t.sink.waitFor(1);
  });
});
