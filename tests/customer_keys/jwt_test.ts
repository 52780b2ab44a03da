/**
 * Bearer JWTs as customer identities (ADR 0029), against a real JWKS served on 127.0.0.1 with
 * keys generated here (Web Crypto): RS256, ES256 and EdDSA tokens accepted as `jwt:<issuer>:<sub>`,
 * every failed check a 401 naming it, the policy claim applied, a rotated key found by its new
 * `kid`, and a JWKS endpoint that went down (held keys keep working, an unknown `kid` is refused).
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { chat, post, startGateway, type TestGateway } from "../integration/helpers.ts";

type Alg = "RS256" | "ES256" | "EdDSA";

/** A signing key pair and its public JWK. */
interface SigningKey {
  alg: Alg;
  kid: string;
  privateKey: CryptoKey;
  jwk: JsonWebKey & { kid: string };
}

const GEN: Record<Alg, RsaHashedKeyGenParams | EcKeyGenParams | Algorithm> = {
  RS256: {
    name: "RSASSA-PKCS1-v1_5",
    modulusLength: 2048,
    publicExponent: new Uint8Array([1, 0, 1]),
    hash: "SHA-256",
  },
  ES256: { name: "ECDSA", namedCurve: "P-256" },
  EdDSA: { name: "Ed25519" },
};
const SIGN: Record<Alg, AlgorithmIdentifier | EcdsaParams> = {
  RS256: "RSASSA-PKCS1-v1_5",
  ES256: { name: "ECDSA", hash: "SHA-256" },
  EdDSA: "Ed25519",
};

async function signingKey(alg: Alg, kid: string): Promise<SigningKey> {
  const pair = await crypto.subtle.generateKey(GEN[alg], true, ["sign", "verify"]) as CryptoKeyPair;
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey);
  return { alg, kid, privateKey: pair.privateKey, jwk: { ...jwk, kid } };
}

function b64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

const text = (v: unknown) => b64url(new TextEncoder().encode(JSON.stringify(v)));

const NOW_S = Math.floor(Date.now() / 1000);
const ISSUER = "https://idp.test/realms/skeid";

/** A token signed by `key`, with `claims` over valid defaults and `header` over its own. */
async function token(
  key: SigningKey,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const head = text({ alg: key.alg, typ: "JWT", kid: key.kid, ...header });
  const body = text({
    iss: ISSUER,
    aud: "skeid",
    sub: "user-1",
    exp: NOW_S + 600,
    iat: NOW_S,
    ...claims,
  });
  const sig = await crypto.subtle.sign(
    SIGN[key.alg],
    key.privateKey,
    new TextEncoder().encode(`${head}.${body}`),
  );
  return `${head}.${body}.${b64url(new Uint8Array(sig))}`;
}

/** A JWKS endpoint on 127.0.0.1 whose keys and availability the test sets. */
function jwksServer(keys: SigningKey[]) {
  const state = { keys, up: true, fetches: 0 };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    state.fetches++;
    if (!state.up) return new Response("down", { status: 503 });
    return Response.json({ keys: state.keys.map((k) => ({ ...k.jwk, use: "sig" })) }, {
      headers: { "cache-control": "max-age=3600" },
    });
  });
  return {
    state,
    url: `http://127.0.0.1:${server.addr.port}/certs`,
    close: () => server.shutdown(),
  };
}

async function withJwt(
  keys: SigningKey[],
  fn: (t: TestGateway, jwks: ReturnType<typeof jwksServer>) => Promise<void>,
): Promise<void> {
  const jwks = jwksServer(keys);
  const fake = startFakeModel({});
  const t = await startGateway({
    admin_api_key: "adm",
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    policies: { std: {}, closed: { models: ["other"] } },
    jwt: {
      issuers: {
        corp: {
          issuer: ISSUER,
          audience: ["skeid"],
          jwks_url: jwks.url,
          policy_claim: "skeid_policy",
          budget_group_claim: "team",
          jwks_min_interval_s: 0,
        },
      },
    },
  });
  try {
    await fn(t, jwks);
  } finally {
    await t.stop();
    await fake.close();
    await jwks.close();
  }
}

function ask(t: TestGateway, bearer: string) {
  return post(`${t.base}/v1/chat/completions`, chat("m1"), { authorization: `Bearer ${bearer}` });
}

Deno.test("jwt: RS256, ES256 and EdDSA tokens are customer identities jwt:<issuer>:<sub>", async () => {
  const keys = await Promise.all([
    signingKey("RS256", "r1"),
    signingKey("ES256", "e1"),
    signingKey("EdDSA", "d1"),
  ]);
  await withJwt(keys, async (t) => {
    for (const [i, key] of keys.entries()) {
      const res = await ask(t, await token(key, { sub: `user-${i}` }));
      assertEquals(res.status, 200, `${key.alg}: ${res.text}`);
    }
    await t.group.flushUsage();
    assertEquals(
      t.sink.events.map((e) => e.api_key_id).sort(),
      ["jwt:corp:user-0", "jwt:corp:user-1", "jwt:corp:user-2"],
    );
  });
});

Deno.test("jwt: each failed check is a 401 naming it, never echoing the token", async () => {
  const key = await signingKey("ES256", "e1");
  const other = await signingKey("ES256", "e1");
  await withJwt([key], async (t) => {
    const none = `${text({ alg: "none", typ: "JWT" })}.${
      text({ iss: ISSUER, aud: "skeid", sub: "x", exp: NOW_S + 60 })
    }.`;
    const hs = `${text({ alg: "HS256", typ: "JWT" })}.${text({ iss: ISSUER, sub: "x" })}.${
      b64url(new Uint8Array(32))
    }`;
    const cases: [string, string][] = [
      [await token(key, { exp: NOW_S - 3600 }), "exp"],
      [await token(key, { exp: undefined }), "exp"],
      [await token(key, { nbf: NOW_S + 3600 }), "nbf"],
      [await token(key, { aud: "someone-else" }), "aud"],
      [await token(key, { iss: "https://evil.test" }), "iss"],
      [await token(other), "signature"],
      [none, "alg"],
      [hs, "alg"],
      [await token(key, { pad: "x".repeat(20_000) }), "size"],
    ];
    for (const [bearer, check] of cases) {
      const res = await ask(t, bearer);
      assertEquals(res.status, 401, `${check}: ${res.text}`);
      assertStringIncludes(res.text, `invalid token: ${check}`);
      assert(!res.text.includes(bearer.split(".")[1]), "the token is not echoed");
    }
    await t.group.flushUsage();
    assertEquals(t.sink.events.length, 0, "none of them was routed");
  });
});

Deno.test("jwt: the policy claim names the policy the identity is held to", async () => {
  const key = await signingKey("EdDSA", "d1");
  await withJwt([key], async (t) => {
    assertEquals((await ask(t, await token(key, { skeid_policy: "std" }))).status, 200);
    const closed = await ask(t, await token(key, { sub: "user-2", skeid_policy: "closed" }));
    assertEquals(closed.status, 403, closed.text);
  });
});

Deno.test("jwt: a rotated signing key is fetched when a token names its new kid", async () => {
  const old = await signingKey("RS256", "2026-11");
  const next = await signingKey("RS256", "2026-12");
  await withJwt([old], async (t, jwks) => {
    assertEquals((await ask(t, await token(old))).status, 200);
    const fetched = jwks.state.fetches;
    jwks.state.keys = [old, next];
    const res = await ask(t, await token(next));
    assertEquals(res.status, 200, res.text);
    assertEquals(jwks.state.fetches, fetched + 1, "one fetch for the unknown kid");
    assertEquals((await ask(t, await token(next))).status, 200);
    assertEquals(jwks.state.fetches, fetched + 1, "a known kid fetches nothing");
  });
});

Deno.test("jwt: with the JWKS endpoint down, held keys keep working and an unknown kid is refused", async () => {
  const held = await signingKey("ES256", "held");
  const unknown = await signingKey("ES256", "unknown");
  await withJwt([held], async (t, jwks) => {
    assertEquals((await ask(t, await token(held))).status, 200);
    jwks.state.up = false;
    jwks.state.keys = [held, unknown];
    const refused = await ask(t, await token(unknown));
    assertEquals(refused.status, 401, refused.text);
    assertStringIncludes(refused.text, "invalid token: signature");
    assertEquals((await ask(t, await token(held))).status, 200, "the held key still verifies");
  });
});

Deno.test("jwt: identities with one budget group claim are one customer key", async () => {
  const key = await signingKey("ES256", "e1");
  await withJwt([key], async (t) => {
    for (const sub of ["ann", "bo"]) {
      assertEquals((await ask(t, await token(key, { sub, team: "search" }))).status, 200);
    }
    assertEquals((await ask(t, await token(key, { sub: "cy" }))).status, 200);
    await t.group.flushUsage();
    assertEquals(
      t.sink.events.map((e) => e.api_key_id).sort(),
      ["jwt:corp:cy", "jwt:corp:group:search", "jwt:corp:group:search"],
    );
  });
});

Deno.test("jwt: an identity seen is shown by GET /skeid/keys/<id>; one never seen is 404", async () => {
  const key = await signingKey("ES256", "e1");
  await withJwt([key], async (t) => {
    assertEquals((await ask(t, await token(key, { sub: "ann", skeid_policy: "std" }))).status, 200);
    const id = "jwt:corp:ann";
    const got = await fetch(`${t.base}/skeid/keys/${encodeURIComponent(id)}`, {
      headers: { authorization: "Bearer adm" },
    });
    const body = await got.json();
    assertEquals(got.status, 200, JSON.stringify(body));
    assertEquals(body.api_key_id, id);
    assertEquals(body.policy, "std", "the policy its token named");
    assertEquals(body.listed, false, "no keys: entry names it");
    const unseen = await fetch(`${t.base}/skeid/keys/jwt:corp:nobody`, {
      headers: { authorization: "Bearer adm" },
    });
    assertEquals(unseen.status, 404, await unseen.text());
  });
});
