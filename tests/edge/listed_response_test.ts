import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { ListedResponse } from "../../src/edge/listed_response.ts";
import { writeAnswer } from "../../src/edge/answer_write.ts";
import { relayedResponse } from "../../src/proxy/upstream.ts";

type Pairs = [string, string][];

/** The pairs a plain `Response` made with `pairs` iterates. */
function plain(pairs: Pairs): Pairs {
  return [...new Response(null, { headers: pairs }).headers];
}

/** What `writeAnswer` sends for `res`, as text, without its `date` line. */
async function written(res: Response): Promise<string> {
  const chunks: Uint8Array[] = [];
  const conn = {
    write(p: Uint8Array): Promise<number> {
      chunks.push(p.slice());
      return Promise.resolve(p.byteLength);
    },
  } as unknown as Deno.Conn;
  const w = writeAnswer(res, { conn, head: false, close: false, keepAlive10: false });
  strictEqual(await w.done, true);
  const text = chunks.map((c) => new TextDecoder().decode(c)).join("");
  return text.replace(/^date: .*\r\n/m, "");
}

Deno.test("listed response: a list in iteration order is kept, and read as Headers has it", () => {
  const pairs: Pairs = [["a", "1"], ["set-cookie", "x=1"], ["set-cookie", "y=2"], ["z-b", "q r"]];
  const res = new ListedResponse(null, 200, pairs);
  deepStrictEqual(res.listed(), pairs);
  deepStrictEqual([...res.headers], plain(pairs));
  strictEqual(res.listed(), undefined, "read once, the Headers holds them");
});

Deno.test("listed response: any other list goes into its Headers at once", () => {
  for (
    const pairs of [
      [["b", "1"], ["a", "2"]],
      [["a", "1"], ["a", "2"]],
      [["Content-Type", "text/plain"]],
      [["a", " padded\t"]],
    ] as Pairs[]
  ) {
    const res = new ListedResponse(null, 200, pairs);
    strictEqual(res.listed(), undefined, JSON.stringify(pairs));
    deepStrictEqual([...res.headers], plain(pairs));
  }
});

Deno.test("listed response: what Headers refuses throws as it does", () => {
  throws(() => new ListedResponse(null, 200, [["bad name", "1"]]), TypeError);
  throws(() => new ListedResponse(null, 200, [["a", "x\0y"]]), TypeError);
  throws(() => new ListedResponse(null, 200, [["a", "x\ry"]]), TypeError);
});

Deno.test("listed response: the edge writes the same answer as for a plain Response", async () => {
  const body = new TextEncoder().encode('{"ok":true}');
  const pairs: Pairs = [["content-type", "application/json"], ["x-request-id", "r1"]];
  const plainText = await written(new Response(body.slice(), { status: 201, headers: pairs }));
  const listed = new ListedResponse(body.slice(), 201, pairs);
  strictEqual(await written(listed), plainText);
  deepStrictEqual(listed.listed(), pairs, "written from the list, no Headers made");
  strictEqual(plainText.split("\r\n\r\n")[1], '{"ok":true}');
});

Deno.test("listed response: a header set after reading is written", async () => {
  const res = new ListedResponse(null, 200, [["content-type", "text/plain"]]);
  res.headers.set("x-ratelimit-remaining-requests", "7");
  const text = await written(res);
  strictEqual(text.includes("x-ratelimit-remaining-requests: 7\r\n"), true, text);
  strictEqual(text.includes("content-type: text/plain\r\n"), true, text);
});

Deno.test("listed response: a clone carries the headers", () => {
  const res = new ListedResponse(null, 200, [["a", "1"]]);
  deepStrictEqual([...res.clone().headers], [["a", "1"]]);
});

Deno.test("relayed response: Skeid's headers replace the upstream's, in sorted places", () => {
  const upstream: Pairs = [
    ["content-length", "5"],
    ["content-type", "application/json"],
    ["x-a", "1"],
    ["x-request-id", "theirs"],
    ["x-skeid-node", "theirs"],
    ["x-z", "2"],
  ];
  const res = relayedResponse(200, null, upstream, "n1", "r1");
  const expected: Pairs = [
    ["content-type", "application/json"],
    ["x-a", "1"],
    ["x-request-id", "r1"],
    ["x-skeid-node", "n1"],
    ["x-z", "2"],
  ];
  deepStrictEqual((res as ListedResponse).listed(), expected);
  deepStrictEqual([...res.headers], expected);
  const bare = relayedResponse(200, null, [["a", "1"]], "n1", "r1") as ListedResponse;
  deepStrictEqual(bare.listed(), [["a", "1"], ["x-request-id", "r1"], ["x-skeid-node", "n1"]]);
});
