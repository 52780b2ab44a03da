/**
 * What the upstream sees is what Skeid decided: no client identity headers, no client
 * credentials for a node with its own key, the resolved customer key id only to a node that opts
 * in (`forward_key_id`).
 */
import { assertEquals, assertStringIncludes } from "../_assert.ts";
import { chat, chatAnswer as answer, post, scriptedUpstream, startGateway } from "./helpers.ts";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { loadConfigText } from "../../src/config/load.ts";

Deno.test("upstream headers: identity, credentials and forward_key_id as decided", async () => {
  const plain = scriptedUpstream(answer);
  const keyed = scriptedUpstream(answer);
  const chained = scriptedUpstream(answer);
  const t = await startGateway({
    nodes: [
      { id: "plain", url: plain.url, model: "a" },
      { id: "keyed", url: keyed.url, model: "b", api_key_env: "NODE_KEY" },
      { id: "chained", url: chained.url, model: "c", forward_key_id: true },
    ],
  }, { env: { NODE_KEY: "node-secret" } });
  const headers = {
    "authorization": "Bearer sk-customer",
    "x-skeid-key-id": "k_someone_else",
    "x-api-key-id": "k_someone_else",
    "api-key": "azure-client",
    "x-goog-api-key": "goog-client",
    "openai-organization": "org-client",
    "openai-project": "proj-client",
  };
  try {
    for (const model of ["a", "b", "c"]) {
      assertEquals((await post(`${t.base}/v1/chat/completions`, chat(model), headers)).status, 200);
    }
    const p = plain.requests[0].headers;
    assertEquals(p.has("x-skeid-key-id"), false, "the client's identity header is not forwarded");
    assertEquals(p.has("x-api-key-id"), false);
    assertEquals(p.get("authorization"), "Bearer sk-customer", "no node key: the client's goes");
    const k = keyed.requests[0].headers;
    assertEquals(k.get("authorization"), "Bearer node-secret");
    for (const name of ["api-key", "x-goog-api-key", "openai-organization", "openai-project"]) {
      assertEquals(k.has(name), false, `${name} never reaches a node with its own key`);
    }
    const c = chained.requests[0].headers;
    const [, , event] = await t.sink.waitFor(3);
    assertEquals(
      c.get("x-skeid-key-id"),
      event.api_key_id,
      "Skeid's resolved key id, not the client's",
    );
  } finally {
    await t.stop();
    await Promise.all([plain.close(), keyed.close(), chained.close()]);
  }
});

Deno.test("upstream headers: forward_key_id must be a boolean (config error with its path)", () => {
  const text = "nodes:\n  - {id: n, url: 'http://n:1', forward_key_id: maybe}\n";
  let issues: string[] = [];
  try {
    loadConfigText(text, { env: () => undefined });
  } catch (e) {
    if (e instanceof ConfigLoadError) issues = e.issues.map(formatIssue);
  }
  assertEquals(issues.length, 1, "refused");
  assertStringIncludes(issues[0], "nodes[0].forward_key_id");
  const ok = loadConfigText(text.replace("maybe", "true"), { env: () => undefined });
  assertEquals(ok.nodes?.[0]?.forward_key_id, true);
});
