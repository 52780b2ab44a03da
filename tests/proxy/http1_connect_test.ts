import { assert, assertMatch, assertRejects } from "../_assert.ts";
import { Http1Client } from "../../src/proxy/http1.ts";
import { fullListener } from "./http1_helpers.ts";

Deno.test({
  name: "http1 connect: a listener that never answers costs the connect timeout, not minutes",
  // A connect the kernel never answers stays pending in the runtime after the test (it fails
  // once the listener is gone and the SYN is retried); its result is closed or ignored.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dead = await fullListener();
    const client = new Http1Client({ connectTimeoutMs: 300 });
    try {
      const started = Date.now();
      const err = await assertRejects(() =>
        client.send(`${dead.url}/v1/chat/completions`, "POST", [], new Uint8Array(0))
      );
      const took = Date.now() - started;
      assertMatch(err.message, /connect timed out after 300 ms/);
      assert(took >= 250 && took < 3000, `failed after the connect timeout (${took} ms)`);
    } finally {
      client.close();
      dead.close();
    }
  },
});
