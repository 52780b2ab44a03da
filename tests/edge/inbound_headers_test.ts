import { assertEquals, assertThrows } from "../_assert.ts";
import { InboundHeaders } from "../../src/edge/inbound_headers.ts";

/** Heads as clients send them: mixed case, repeats, empty values, out of order. */
const HEADS: [string, string][][] = [
  [],
  [["Host", "127.0.0.1:8080"], ["Content-Type", "application/json"], ["Authorization", "Bearer k"]],
  [["x-b", "2"], ["X-A", "1"], ["x-b", "3"], ["Accept", "*/*"], ["x-a", ""]],
  [["cookie", "a=1"], ["Cookie", "b=2"], ["set-cookie", "s=1"], ["Set-Cookie", "s=2"]],
  [["x-empty", ""], ["x-empty", "v"], ["user-agent", "caf\u00e9/1"]],
];

/** What a reader of the headers sees, every way it can look. */
function seen(h: Headers, names: string[]) {
  const each: [string, string][] = [];
  h.forEach((value, name) => each.push([name, value]));
  return {
    each,
    entries: [...h.entries()],
    iterated: [...h],
    keys: [...h.keys()],
    values: [...h.values()],
    got: names.map((n) => [h.get(n), h.has(n)]),
    cookies: h.getSetCookie(),
  };
}

function namesOf(pairs: [string, string][]): string[] {
  return [...pairs.map(([n]) => n), ...pairs.map(([n]) => n.toUpperCase()), "absent"];
}

Deno.test("inbound headers read as Headers made from the same fields", () => {
  for (const pairs of HEADS) {
    const names = namesOf(pairs);
    assertEquals(seen(new InboundHeaders(pairs), names), seen(new Headers(pairs), names));
  }
});

Deno.test("inbound headers change as Headers do, and refuse what Headers refuses", () => {
  for (const pairs of HEADS) {
    const ours = new InboundHeaders(pairs);
    const theirs = new Headers(pairs);
    for (const h of [ours, theirs]) {
      h.set("X-B", " replaced ");
      h.append("x-new", "1");
      h.append("X-New", "2");
      h.delete("Cookie");
    }
    const names = [...namesOf(pairs), "x-b", "x-new", "cookie"];
    assertEquals(seen(ours, names), seen(theirs, names));
  }
  const h = new InboundHeaders([["a", "1"]]);
  assertThrows(() => h.set("bad name", "v"), TypeError);
  assertThrows(() => h.append("x", "line\nbreak"), TypeError);
  assertEquals(h.get("a"), "1");
});

Deno.test("a Request made from inbound headers carries them", async () => {
  const h = new InboundHeaders([["Content-Type", "text/plain"], ["X-Id", "7"], ["x-id", "8"]]);
  const req = new Request("http://a/", { method: "POST", headers: h, body: "x" });
  assertEquals(req.headers.get("x-id"), "7, 8");
  assertEquals(req.headers.get("content-type"), "text/plain");
  assertEquals(await req.text(), "x");
});
