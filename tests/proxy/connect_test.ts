import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import {
  ConnectCheck,
  connectCheckedFetch,
  FRESH_MS,
  proxyConfigured,
} from "../../src/proxy/connect.ts";
import { fetchUpstream, UpstreamTransportError } from "../../src/proxy/call.ts";
import { fullListener } from "./http1_helpers.ts";
import { until } from "../_helpers/poll.ts";

Deno.test({
  name: "connect check: fetch to a listener that never answers fails in the connect timeout",
  // A connect the kernel never answers stays pending in the runtime after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dead = await fullListener();
    const check = new ConnectCheck({ timeoutMs: 300 });
    try {
      const started = Date.now();
      const err = await assertRejects(() =>
        fetchUpstream({
          url: `${dead.url}/v1/chat/completions`,
          headers: {},
          body: "{}",
          timeoutMs: 60_000,
          fetch: connectCheckedFetch(check),
        }), UpstreamTransportError);
      const took = Date.now() - started;
      assertEquals(err.kind, "connect");
      assertMatch(err.message, /connect timed out after 300 ms/);
      assert(took >= 250 && took < 3000, `failed after the connect timeout (${took} ms)`);
    } finally {
      dead.close();
    }
  },
});

Deno.test("connect check: an origin reached is not checked again in the window, nor after", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  let accepted = 0;
  const loop = (async () => {
    for await (const conn of listener) {
      accepted++;
      conn.close();
    }
  })();
  let clock = 1_000_000;
  const check = new ConnectCheck({ timeoutMs: 1000, now: () => clock });
  const url = `http://127.0.0.1:${port}/v1/x`;
  try {
    await check.reach(url);
    await check.reach(url);
    clock += FRESH_MS - 1;
    await check.reach(url);
    assertEquals(accepted <= 1, true, `one connect in the window (${accepted})`);
    clock += 2;
    await check.reach(url);
    check.forget(url);
    await check.reach(url);
    await until(() => accepted === 3, () => `3 connects (${accepted})`);
  } finally {
    listener.close();
    await loop.catch(() => {});
  }
  assertEquals(proxyConfigured((n) => (n === "https_proxy" ? "http://p:3128" : undefined)), true);
  assertEquals(proxyConfigured(() => undefined), false);
  const off = new ConnectCheck({ timeoutMs: 1, enabled: false });
  await off.reach(`http://127.0.0.1:1/x`); // nothing listens there; off, it is not asked
});
