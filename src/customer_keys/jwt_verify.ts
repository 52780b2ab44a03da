/**
 * Bearer JWTs as customer identities (ADR 0029). Once a `jwt:` section exists, a bearer shaped as
 * a JWT is judged only as one: valid, it is a customer key id `jwt:<issuer name>:<claim>` with a
 * grant (policy, share) from its claims; otherwise a 401 that names the check that failed —
 * `alg`, `iss`, `signature`, `exp`, `nbf`, `aud` or the key id claim — and never echoes the
 * token. The checks run in that order: nothing of an unsigned or badly signed token is trusted
 * past its header and issuer.
 *
 * @module
 */
import { Refusal } from "../proxy/errors.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";
import type { Logger } from "../log.ts";
import type { Grant } from "./grants.ts";
import type { JwtJudge } from "./identity_judge.ts";
import { Jwks, verifyParams } from "./jwks.ts";
import { JWT_ALGORITHMS, type JwtAlgorithm, type JwtIssuer } from "./jwt_section.ts";

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
/** The longest bearer looked at as a JWT (a bound on what is decoded per request). */
const MAX_TOKEN = 16 * 1024;

/** A JWT refusal naming the check. */
function refused(check: string, detail: string): Refusal {
  return new Refusal(
    401,
    "authentication_error",
    `invalid token: ${check} (${detail})`,
    "invalid_token",
  );
}

/** base64url → bytes; undefined when it is not. */
function fromBase64Url(part: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    const b64 = part.replaceAll("-", "+").replaceAll("_", "/");
    const bin = atob(b64 + "=".repeat((4 - b64.length % 4) % 4));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}

/** A base64url part as a JSON object; undefined when it is not one. */
function jsonPart(part: string): JsonObject | undefined {
  const bytes = fromBase64Url(part);
  if (bytes === undefined) return undefined;
  const v = parseJson(new TextDecoder().decode(bytes));
  return isJsonObject(v) ? v : undefined;
}

/** A claim as an identity part: a non-empty string or a number. */
function claimText(v: unknown): string | undefined {
  if (typeof v === "string" && v !== "") return v;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return undefined;
}

/** The issuers of a `jwt:` section, with their keys. */
export class JwtVerifier implements JwtJudge {
  readonly #issuers: { issuer: JwtIssuer; jwks: Jwks }[];
  readonly #now: () => number;

  /** Fetches every issuer's JWKS at once. */
  constructor(issuers: JwtIssuer[], logger: Logger, fetcher: typeof fetch, now: () => number) {
    this.#now = now;
    this.#issuers = issuers.map((issuer) => ({
      issuer,
      jwks: new Jwks(issuer, logger, fetcher, now),
    }));
  }

  isJwt(token: string): boolean {
    if (!JWT_SHAPE.test(token)) return false;
    // One too long to decode is still a JWT by its shape: refused by `verify`, never opaque.
    if (token.length > MAX_TOKEN) return true;
    const header = jsonPart(token.slice(0, token.indexOf(".")));
    return header !== undefined && typeof header.alg === "string";
  }

  async verify(token: string): Promise<Grant> {
    if (token.length > MAX_TOKEN) throw refused("size", `longer than ${MAX_TOKEN} characters`);
    const [h, p, s] = token.split(".");
    const header = jsonPart(h)!;
    const alg = String(header.alg);
    if (alg === "none" || alg.toUpperCase().startsWith("HS")) {
      throw refused("alg", `${alg === "none" ? "unsigned" : "HMAC"} tokens are never accepted`);
    }
    if (!(JWT_ALGORITHMS as readonly string[]).includes(alg)) {
      throw refused("alg", `'${alg}' is not one of ${JWT_ALGORITHMS.join(", ")}`);
    }
    const payload = jsonPart(p);
    if (payload === undefined) throw refused("signature", "the payload is not JSON");
    const found = this.#issuers.find((i) => i.issuer.issuer === payload.iss);
    if (found === undefined) throw refused("iss", "not an issuer this gateway trusts");
    const { issuer, jwks } = found;
    if (!issuer.algorithms.includes(alg as JwtAlgorithm)) {
      throw refused("alg", `'${alg}' is not allowed for issuer '${issuer.name}'`);
    }
    const kid = typeof header.kid === "string" ? header.kid : undefined;
    const keys = await jwks.keysFor(kid, alg as JwtAlgorithm);
    if (keys.length === 0) throw refused("signature", "no key of the issuer matches its kid");
    const sig = fromBase64Url(s);
    const data = new TextEncoder().encode(`${h}.${p}`);
    let valid = false;
    for (const key of keys) {
      if (
        sig !== undefined &&
        await crypto.subtle.verify(verifyParams(alg as JwtAlgorithm), key, sig, data)
      ) {
        valid = true;
        break;
      }
    }
    if (!valid) throw refused("signature", "the signature does not verify");
    const nowS = this.#now() / 1000;
    const skew = issuer.clock_skew_s;
    if (typeof payload.exp !== "number") throw refused("exp", "the token has no exp");
    if (nowS > payload.exp + skew) throw refused("exp", "the token has expired");
    if (payload.nbf !== undefined) {
      if (typeof payload.nbf !== "number") throw refused("nbf", "nbf is not a number");
      if (nowS + skew < payload.nbf) throw refused("nbf", "the token is not valid yet");
    }
    const aud = typeof payload.aud === "string" ? [payload.aud] : payload.aud;
    if (!Array.isArray(aud) || !aud.some((a) => issuer.audience.includes(a))) {
      throw refused("aud", "not an audience this gateway accepts");
    }
    return this.#grant(issuer, payload);
  }

  /** The identity of a valid token's claims. */
  #grant(issuer: JwtIssuer, payload: JsonObject): Grant {
    const subject = claimText(payload[issuer.key_id_claim]);
    if (subject === undefined) {
      throw refused(issuer.key_id_claim, `the claim '${issuer.key_id_claim}' is missing`);
    }
    const group = issuer.budget_group_claim === null
      ? undefined
      : claimText(payload[issuer.budget_group_claim]);
    const policy = issuer.policy_claim === null
      ? undefined
      : claimText(payload[issuer.policy_claim]);
    const spec: JsonObject = {};
    const weight = issuer.share_claim === null ? undefined : payload[issuer.share_claim];
    if (typeof weight === "number" && Number.isFinite(weight) && weight > 0) {
      spec.share = { weight };
    }
    return {
      // A budget group is one customer key: its members spend, are limited and billed as one.
      id: group === undefined
        ? `jwt:${issuer.name}:${subject}`
        : `jwt:${issuer.name}:group:${group}`,
      policy: policy ?? null,
      spec,
    };
  }

  /** Stops the JWKS refresh timers. */
  close(): void {
    for (const { jwks } of this.#issuers) jwks.close();
  }
}
