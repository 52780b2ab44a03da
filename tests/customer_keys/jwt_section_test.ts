/**
 * The `jwt:` section's checks and the JWKS fetch bounds (ADR 0029): HS* and none are refused at
 * load naming the field; an unknown `kid` fetches the document again at most once per
 * `jwks_min_interval_s`.
 */
import { assertEquals, assertStringIncludes } from "../_assert.ts";
import { loadJwt } from "../../src/customer_keys/jwt_section.ts";
import { Jwks } from "../../src/customer_keys/jwks.ts";
import { memoryLogger } from "../../src/log.ts";

const BASE = { issuer: "https://idp.test", audience: "skeid", jwks_url: "http://127.0.0.1:1/" };

Deno.test("jwt section: none and HS* are refused, missing fields named", () => {
  const { issues } = loadJwt({
    issuers: {
      a: { ...BASE, algorithms: ["HS256", "none", "RS256"] },
      b: { audience: [], jwks_url: "ftp://x" },
    },
  });
  const said = issues.map((i) => `${i.segments.join(".")}: ${i.message}`);
  assertStringIncludes(said.join("\n"), "jwt.issuers.a.algorithms: 'HS256' is not allowed");
  assertStringIncludes(said.join("\n"), "jwt.issuers.a.algorithms: 'none' is not allowed");
  assertStringIncludes(said.join("\n"), "jwt.issuers.b.issuer: is required");
  assertStringIncludes(said.join("\n"), "jwt.issuers.b.audience");
  assertStringIncludes(said.join("\n"), "jwt.issuers.b.jwks_url: must be an http(s) URL");
  const ok = loadJwt({ issuers: { corp: BASE } });
  assertEquals(ok.issues, []);
  assertEquals(ok.value?.[0].key_id_claim, "sub");
  assertEquals(ok.value?.[0].algorithms, ["RS256", "ES256", "EdDSA"]);
});

Deno.test("jwks: an unknown kid fetches again at most once per jwks_min_interval_s", async () => {
  let now = 1_000_000;
  let fetches = 0;
  const fetcher = (() => {
    fetches++;
    return Promise.resolve(Response.json({ keys: [] }));
  }) as typeof fetch;
  const issuer = loadJwt({ issuers: { corp: { ...BASE, jwks_min_interval_s: 60 } } }).value![0];
  const jwks = new Jwks(issuer, memoryLogger(), fetcher, () => now);
  try {
    assertEquals(await jwks.keysFor("k1", "RS256"), []);
    assertEquals(fetches, 1, "the start's fetch only: within the interval");
    now += 61_000;
    assertEquals(await jwks.keysFor("k1", "RS256"), []);
    assertEquals(await jwks.keysFor("k2", "RS256"), []);
    assertEquals(fetches, 2, "one more fetch, then the interval holds again");
  } finally {
    jwks.close();
  }
});
