/**
 * The key broker wired into the gateway: a node's `api_key_ref` is resolved through OpenBao and
 * sent upstream in place of the client's credentials, without blocking other requests.
 */
import { assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { assertIdle, chat, post, startGateway } from "../integration/helpers.ts";
import { kv2, ROLE_ID, SECRET_ID, startFakeOpenBao } from "./fake_openbao.ts";

Deno.test("gateway: api_key_ref resolved through OpenBao; a pending resolution blocks nothing else", async () => {
  const vault = startFakeOpenBao();
  vault.secrets.set("secret/data/skeid/remote/groq", kv2("vault-upstream-key"));
  const release = vault.holdReads();
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "cloud-1", url: fake.url, model: "m", api_key_ref: "secret/skeid/remote/groq" }],
  }, { env: { OPENBAO_ADDR: vault.addr, OPENBAO_ROLE_ID: ROLE_ID, OPENBAO_SECRET_ID: SECRET_ID } });
  try {
    assertEquals(vault.calls.login, 1, "logged in at start");
    const pending = post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer sk-customer-secret",
    });
    await vault.readsArrived(1);
    // The read is held: the gateway still answers everything that does not need that key.
    const health = await fetch(`${t.base}/health`);
    assertEquals(health.status, 200);
    await health.body?.cancel();
    assertEquals(fake.requests.length, 0, "the node is not called before its key is known");
    release();
    const res = await pending;
    assertEquals(res.status, 200);
    const seen = fake.requests.at(-1)!;
    assertEquals(seen.headers["authorization"], "Bearer vault-upstream-key");
    // A second request takes the cached key: no new read.
    const again = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer sk-customer-secret",
    });
    assertEquals(again.status, 200);
    assertEquals(vault.calls.read, 1, "the warm-up read and the first request shared one read");
    // No log line carries the upstream key or the customer key.
    const logged = JSON.stringify(t.logger.lines);
    assertEquals(logged.includes("vault-upstream-key"), false);
    assertEquals(logged.includes("sk-customer-secret"), false);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
    await vault.close();
  }
});

Deno.test("gateway: a reference OpenBao cannot resolve is never called with the client's key", async () => {
  const vault = startFakeOpenBao();
  vault.readStatus = 404;
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "cloud-1", url: fake.url, model: "m", api_key_ref: "secret/skeid/remote/none" }],
  }, { env: { OPENBAO_ADDR: vault.addr, OPENBAO_ROLE_ID: ROLE_ID, OPENBAO_SECRET_ID: SECRET_ID } });
  try {
    const res = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer sk-customer-secret",
    });
    assertEquals(res.status, 503);
    assertEquals((res.json.error as { type: string }).type, "upstream_key_unavailable");
    assertEquals(fake.requests.length, 0, "the node was never contacted");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
    await vault.close();
  }
});
