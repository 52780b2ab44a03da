/**
 * Every data route follows the same rules: under `require_known_keys` each one (listings, Ollama's
 * local answers, `count_tokens`, the proxied routes) refuses a request without a known key, and
 * each route that reads a body takes the body limit and the JSON depth check. Only `/health` and
 * Ollama's `GET /` probe stay open.
 */
import { assertEquals, assertStringIncludes } from "../_assert.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { startGateway } from "./helpers.ts";

const ROUTES: [string, string, unknown?][] = [
  ["POST", "/v1/messages/count_tokens", { model: "m1", messages: [] }],
  ["POST", "/v1/chat/completions", { model: "m1", messages: [] }],
  ["POST", "/v1/messages", { model: "m1", max_tokens: 5, messages: [] }],
  ["POST", "/api/chat", { model: "m1" }],
  ["POST", "/api/generate", { model: "m1" }],
  ["POST", "/api/embeddings", { model: "m1", prompt: "x" }],
  ["POST", "/api/show", { model: "m1" }],
  ["GET", "/v1/models"],
  ["GET", "/api/tags"],
  ["GET", "/api/ps"],
  ["GET", "/api/version"],
];

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

Deno.test("data routes: every one takes require_known_keys; /health and GET / stay open", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    policies: { p: {} },
    keys: { [await keyIdForKey("sk-known")]: "p" },
    routing: { require_known_keys: true, max_body_bytes: 4096 },
  });
  try {
    for (const [method, path, body] of ROUTES) {
      const anon = await call(t.base, method, path, body);
      assertEquals(anon.status, 401, `${method} ${path} without a key: ${anon.text}`);
      const unknown = await call(t.base, method, path, body, { authorization: "Bearer sk-nope" });
      assertEquals(unknown.status, 401, `${method} ${path} with an unknown key`);
    }
    assertEquals((await call(t.base, "GET", "/health")).status, 200, "/health open");
    assertEquals((await call(t.base, "GET", "/")).status, 200, "the Ollama probe open");
    const known = { authorization: "Bearer sk-known" };
    const ok = await call(t.base, "POST", "/v1/messages/count_tokens", {
      model: "m1",
      messages: [{ role: "user", content: "hello" }],
    }, known);
    assertEquals(ok.status, 200, `count_tokens with a known key: ${ok.text}`);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("data routes: count_tokens and /api/show take the body limit and the JSON depth", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    routing: { max_body_bytes: 4096 },
  });
  try {
    const big = { model: "m1", messages: [{ role: "user", content: "x".repeat(10_000) }] };
    const deep = `{"model":"m1","messages":${"[".repeat(200)}${"]".repeat(200)}}`;
    for (const path of ["/v1/messages/count_tokens", "/api/show"]) {
      const tooBig = await call(t.base, "POST", path, big);
      assertEquals(tooBig.status, 413, `${path} past max_body_bytes: ${tooBig.text}`);
      const tooDeep = await call(t.base, "POST", path, deep);
      assertEquals(tooDeep.status, 400, `${path} nested too deep`);
      assertStringIncludes(tooDeep.text, "nested deeper than 128");
    }
  } finally {
    await t.stop();
    await fake.close();
  }
});
