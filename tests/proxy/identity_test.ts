import { strictEqual } from "node:assert/strict";
import { headerKeyId, KeyIdCache, presentedKey } from "../../src/proxy/identity.ts";

Deno.test("identity: Bearer in any case, else x-api-key, else none", () => {
  strictEqual(presentedKey(new Headers({ authorization: "Bearer sk-1" })), "sk-1");
  strictEqual(presentedKey(new Headers({ authorization: "bearer sk-2" })), "sk-2");
  strictEqual(presentedKey(new Headers({ authorization: "BEARER   sk-3 " })), "sk-3");
  strictEqual(presentedKey(new Headers({ "x-api-key": "sk-4" })), "sk-4");
  strictEqual(presentedKey(new Headers({ authorization: "Bearer ", "x-api-key": "sk-5" })), "sk-5");
  strictEqual(presentedKey(new Headers()), undefined);
});

Deno.test("identity: trusted key id header, x-skeid-key-id first", () => {
  strictEqual(headerKeyId(new Headers({ "x-skeid-key-id": "k_a", "x-api-key-id": "k_b" })), "k_a");
  strictEqual(headerKeyId(new Headers({ "x-api-key-id": "k_b" })), "k_b");
  strictEqual(headerKeyId(new Headers()), undefined);
});

Deno.test("identity cache: one digest per key, concurrent misses share it, LRU eviction", async () => {
  let digests = 0;
  const cache = new KeyIdCache({
    capacity: 2,
    derive: (k) => {
      digests++;
      return Promise.resolve(`k_${k}`);
    },
  });
  const [a1, a2] = await Promise.all([cache.idFor("a"), cache.idFor("a")]);
  strictEqual(a1, "k_a");
  strictEqual(a2, "k_a");
  strictEqual(digests, 1);
  strictEqual(cache.idFor("a"), "k_a", "a hit answers synchronously");
  await cache.idFor("b");
  cache.peek("a"); // a is now the most recent
  await cache.idFor("c"); // evicts b
  strictEqual(cache.size, 2);
  strictEqual(cache.peek("b"), undefined);
  strictEqual(cache.peek("a"), "k_a");
  strictEqual(digests, 3);
});
