import { assert, assertEquals, assertMatch } from "../_assert.ts";
import {
  CachingKeyBroker,
  type KeyAnswer,
  type KeyBroker,
  type KeyResolver,
} from "../../src/keys/broker.ts";
import { brokerKeyFor, warmKeys } from "../../src/keys/node_key.ts";
import { memoryLogger } from "../../src/log.ts";
import { manualClock } from "./fake_openbao.ts";

/** A resolver that holds every resolution open until the test releases it. */
function countingResolver() {
  const waiting: ((a: KeyAnswer) => void)[] = [];
  const r = {
    calls: 0,
    closed: 0,
    resolveKeyAsync(_ref: string): Promise<KeyAnswer> {
      r.calls++;
      return new Promise<KeyAnswer>((resolve) => waiting.push(resolve));
    },
    close() {
      r.closed++;
    },
    /** Answers every open resolution; returns how many there were. */
    release(answer: KeyAnswer): number {
      const open = waiting.splice(0);
      for (const resolve of open) resolve(answer);
      return open.length;
    },
  };
  return r;
}

/** Lets pending promise callbacks run. */
const settle = () => new Promise<void>((r) => setTimeout(r, 0));

Deno.test("broker: five concurrent misses are one resolution, fanned out to all five", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver);
  const got: KeyAnswer[] = [];
  const waits = Array.from({ length: 5 }, () => broker.keyFor("ref/a").then((a) => got.push(a)));
  await settle();
  assertEquals(resolver.calls, 1, "one resolution for five callers");
  assertEquals(got.length, 0, "nobody answered before the resolution came back");
  assertEquals(resolver.release({ key: "gsk_counted" }), 1);
  await Promise.all(waits);
  assertEquals(got, Array(5).fill({ key: "gsk_counted" }));

  assertEquals(await broker.keyFor("ref/a"), { key: "gsk_counted" }, "served from cache");
  assertEquals(resolver.calls, 1, "without a round-trip");
  assertEquals(broker.cached("ref/a"), { key: "gsk_counted" });

  broker.forget("ref/a");
  assertEquals(broker.cached("ref/a"), undefined, "forget drops the entry");
  const rotated = broker.keyFor("ref/a");
  await settle();
  assertEquals(resolver.calls, 2, "forget sends the next caller back to the resolver");
  resolver.release({ key: "gsk_rotated" });
  assertEquals(await rotated, { key: "gsk_rotated" });
  assertEquals(await broker.keyFor("ref/a"), { key: "gsk_rotated" }, "the new key is cached");
  assertEquals(resolver.calls, 2);
  await broker.close();
});

Deno.test("broker: forget() without a reference drops every cached answer", async () => {
  const broker = new CachingKeyBroker({ resolveKey: (ref) => `key-for-${ref}` });
  await broker.keyFor("a");
  await broker.keyFor("b");
  assert(broker.cached("a"), "'a' is cached before forget()");
  assert(broker.cached("b"), "'b' is cached before forget()");
  broker.forget();
  assertEquals(broker.cached("a"), undefined);
  assertEquals(broker.cached("b"), undefined);
  await broker.close();
});

Deno.test("broker: a failure is cached with its reason; an unknown reference is not", async () => {
  const resolver = countingResolver();
  const clock = manualClock();
  const broker = new CachingKeyBroker(resolver, { negativeCacheTtlMs: 60_000, now: clock.now });
  const first = broker.keyFor("ref/bad");
  await settle();
  resolver.release({ error: "vault said no" });
  assertEquals(await first, { error: "vault said no" });

  assertEquals(await broker.keyFor("ref/bad"), { error: "vault said no" }, "reason kept");
  assertEquals(resolver.calls, 1, "the vault is not asked again at once");
  assertEquals(broker.cached("ref/never-asked"), undefined, "an unknown reference is not cached");
  assertEquals(broker.cached("ref/bad"), { error: "vault said no" }, "distinguishable");

  clock.advance(60_000);
  assertEquals(broker.cached("ref/bad"), undefined, "the failure expires");
  const again = broker.keyFor("ref/bad");
  await settle();
  assertEquals(resolver.calls, 2, "and the next caller asks again");
  resolver.release({ key: "fixed" });
  assertEquals(await again, { key: "fixed" });
  await broker.close();
});

Deno.test("broker: default lifetimes are 300 s for a key and 5 s for a failure", async () => {
  const clock = manualClock();
  let calls = 0;
  let answer: string | undefined = "k1";
  const broker = new CachingKeyBroker({
    resolveKey() {
      calls++;
      return answer;
    },
  }, { now: clock.now });
  await broker.keyFor("ok");
  clock.advance(299_999);
  assertEquals(broker.cached("ok"), { key: "k1" }, "still cached just before 300 s");
  clock.advance(1);
  assertEquals(broker.cached("ok"), undefined, "gone at 300 s");

  answer = undefined;
  await broker.keyFor("bad");
  assertEquals(calls, 2);
  clock.advance(4_999);
  assertEquals(broker.cached("bad"), { error: "no key resolved" });
  clock.advance(1);
  assertEquals(broker.cached("bad"), undefined, "a failure is gone at 5 s");
  await broker.close();
});

Deno.test("broker: cache_ttl 0 disables the cache, negative 0 disables failure caching", async () => {
  let calls = 0;
  let answer: string | undefined = "gsk_counted";
  const broker = new CachingKeyBroker({
    resolveKey() {
      calls++;
      return answer;
    },
  }, { cacheTtlMs: 0, negativeCacheTtlMs: 0 });
  await broker.keyFor("ref/a");
  await broker.keyFor("ref/a");
  assertEquals(calls, 2, "every call resolves");
  assertEquals(broker.cached("ref/a"), undefined);
  answer = undefined;
  await broker.keyFor("ref/a");
  await broker.keyFor("ref/a");
  assertEquals(calls, 4, "failures too");
  await broker.close();
});

Deno.test("broker: a resolver with only a blocking-style resolveKey works", async () => {
  const keys: Record<string, string> = { "provider/groq": "gsk_test123", "empty": "" };
  const resolver: KeyResolver = {
    resolveKey(ref) {
      if (ref === "nothing") return undefined;
      const key = keys[ref];
      if (key === undefined) throw new Error(`no key for ${ref}`);
      return key;
    },
  };
  const broker = new CachingKeyBroker(resolver);
  assertEquals(await broker.keyFor("provider/groq"), { key: "gsk_test123" });
  assertEquals(
    await broker.keyFor("missing"),
    { error: "no key for missing" },
    "throw → reason",
  );
  assertEquals(await broker.keyFor("nothing"), { error: "no key resolved" });
  assertEquals(await broker.keyFor("empty"), { error: "no key resolved" }, "empty key fails");
  await broker.close();
});

Deno.test("broker: keyFor never rejects and an empty reference asks nobody", async () => {
  let calls = 0;
  const broker = new CachingKeyBroker({
    resolveKeyAsync(): Promise<KeyAnswer> {
      calls++;
      return Promise.reject(new Error("royal down"));
    },
  });
  assertEquals(await broker.keyFor(""), { error: "no key reference" });
  assertEquals(calls, 0);
  assertEquals(await broker.keyFor("ref/x"), { error: "royal down" });
  const neither = new CachingKeyBroker({});
  const answer = await neither.keyFor("ref/x");
  assert("error" in answer, "a broker without a resolver answers an error, not a key");
  assertMatch(answer.error, /neither resolveKey nor resolveKeyAsync/);
  await broker.close();
  await neither.close();
});

Deno.test("broker: a resolution that never answers times out instead of hanging", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver, { resolveTimeoutMs: 20 });
  assertEquals(await broker.keyFor("ref/slow"), {
    error: "key resolution timed out after 20 ms",
  });
  resolver.release({ key: "late" });
  await settle();
  assertEquals(broker.cached("ref/slow"), { error: "key resolution timed out after 20 ms" });
  await broker.close();
});

Deno.test("broker: an answer that predates a forget() is not cached", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver);
  const before = broker.keyFor("ref/a");
  await settle();
  broker.forget("ref/a");
  resolver.release({ key: "old-key" });
  assertEquals(await before, { key: "old-key" }, "the waiting caller still gets an answer");
  assertEquals(broker.cached("ref/a"), undefined, "but the rotated-away key is not cached");
  await broker.close();
});

Deno.test("broker: a cold reference does not hold up a warm one", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver);
  const warm = broker.keyFor("ref/warm");
  await settle();
  resolver.release({ key: "warm-key" });
  await warm;
  const cold = broker.keyFor("ref/cold");
  await settle();
  assertEquals(resolver.calls, 2, "the cold resolution is in flight");
  assertEquals(await broker.keyFor("ref/warm"), { key: "warm-key" }, "the warm one answers");
  resolver.release({ key: "cold-key" });
  assertEquals(await cold, { key: "cold-key" });
  await broker.close();
});

Deno.test("broker: close drops the cache, closes the resolver and refuses later calls", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver);
  const p = broker.keyFor("ref/a");
  await settle();
  resolver.release({ key: "k" });
  await p;
  await broker.close();
  await broker.close();
  assertEquals(resolver.closed, 1, "resolver closed once");
  assertEquals(broker.cached("ref/a"), undefined, "nothing left in memory");
  assertEquals(await broker.keyFor("ref/a"), { error: "key broker closed" });
  assertEquals(resolver.calls, 1);
});

Deno.test("broker: a failed resolution is warned once with its reference, never the key", async () => {
  const logger = memoryLogger();
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver, { logger });
  const waits = [broker.keyFor("ref/x"), broker.keyFor("ref/x"), broker.keyFor("ref/x")];
  await settle();
  resolver.release({ error: "royal down" });
  await Promise.all(waits);
  await broker.keyFor("ref/x"); // cached failure: not warned again
  const warned = logger.lines.filter((l) => l.event === "key_resolve_failed");
  assertEquals(warned.length, 1);
  assertEquals(warned[0].api_key_ref, "ref/x");
  assertEquals(warned[0].message, "KeyBroker resolve failed for 'ref/x': royal down");

  const ok2 = broker.keyFor("ref/good");
  await settle();
  resolver.release({ key: "sk-upstream-secret-1" });
  await ok2;
  assert(!JSON.stringify(logger.lines).includes("sk-upstream-secret-1"), "no key in any log line");
  await broker.close();
});

Deno.test("brokerKeyFor: synchronous on a hit, a promise on a miss, nothing without a ref", async () => {
  let calls = 0;
  const broker: KeyBroker = new CachingKeyBroker({
    resolveKey(ref) {
      calls++;
      return ref === "ref/good" ? "gsk-good" : undefined;
    },
  });
  assertEquals(brokerKeyFor({}, broker), undefined, "a node without api_key_ref");
  assertEquals(brokerKeyFor({ api_key_ref: "ref/good" }, undefined), undefined, "no broker");

  const miss = brokerKeyFor({ api_key_ref: "ref/good" }, broker);
  assert(miss instanceof Promise, "a miss is a promise");
  assertEquals(await miss, "gsk-good");
  assertEquals(brokerKeyFor({ api_key_ref: "ref/good" }, broker), "gsk-good", "a hit is not");

  assertEquals(await brokerKeyFor({ api_key_ref: "ref/bad" }, broker), undefined, "failure");
  assertEquals(brokerKeyFor({ api_key_ref: "ref/bad" }, broker), undefined, "cached failure");
  assertEquals(calls, 2);
  await broker.close();
});

Deno.test("warmKeys: resolves each distinct reference once, ahead of the first request", async () => {
  const resolver = countingResolver();
  const broker = new CachingKeyBroker(resolver);
  warmKeys([{ api_key_ref: "r/a" }, { api_key_ref: "r/a" }, { api_key_ref: "r/b" }, {}], broker);
  await settle();
  assertEquals(resolver.calls, 2);
  resolver.release({ key: "k" });
  await settle();
  assertEquals(broker.cached("r/a"), { key: "k" });
  assertEquals(broker.cached("r/b"), { key: "k" });
  warmKeys([{ api_key_ref: "r/a" }], undefined);
  await broker.close();
});
