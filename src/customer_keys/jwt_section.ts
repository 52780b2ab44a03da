/**
 * The `jwt:` config section (ADR 0029): the identity providers whose tokens are customer
 * identities. Each issuer, named by its key under `issuers:`, has `issuer` (the `iss` its tokens
 * carry), `audience` (one or a list; the token's `aud` must hold one), `jwks_url`, `algorithms`
 * (RS256, ES256, EdDSA; never `none`, never HS*), `clock_skew_s`, and how claims map to a Skeid
 * identity: `key_id_claim` (default `sub`), `policy_claim`, `share_claim` (a share weight) and
 * `budget_group_claim` (identities with one value are one customer key).
 *
 * @module
 */
import type { PathSegment } from "../core/config_path.ts";
import { isJsonObject } from "../core/json.ts";

/** The algorithms a token may be signed with. */
export const JWT_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const;
/** One of them. */
export type JwtAlgorithm = typeof JWT_ALGORITHMS[number];

/** One issuer, resolved. */
export interface JwtIssuer {
  /** Its key under `issuers:`; part of every identity's key id (`jwt:<name>:<claim>`). */
  name: string;
  issuer: string;
  audience: string[];
  jwks_url: string;
  algorithms: JwtAlgorithm[];
  clock_skew_s: number;
  key_id_claim: string;
  policy_claim: string | null;
  share_claim: string | null;
  budget_group_claim: string | null;
  /** Least seconds between two JWKS fetches an unknown `kid` asks for. */
  jwks_min_interval_s: number;
}

/** The section, resolved: undefined when the config has none. */
export type JwtSettings = JwtIssuer[] | undefined;

/** One thing wrong with the section, its path from the config's root. */
export interface JwtIssue {
  segments: PathSegment[];
  message: string;
}

const FIELDS = [
  "issuer",
  "audience",
  "jwks_url",
  "algorithms",
  "clock_skew_s",
  "key_id_claim",
  "policy_claim",
  "share_claim",
  "budget_group_claim",
  "jwks_min_interval_s",
];
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The section's issuers and every issue in it. */
export function loadJwt(raw: unknown): { value: JwtSettings; issues: JwtIssue[] } {
  const issues: JwtIssue[] = [];
  if (raw === undefined || raw === null) return { value: undefined, issues };
  const fail = (segments: PathSegment[], message: string) => issues.push({ segments, message });
  if (!isJsonObject(raw) || !isJsonObject(raw.issuers)) {
    fail(["jwt"], "must be a mapping with issuers: (a map of issuer name to issuer)");
    return { value: undefined, issues };
  }
  for (const key of Object.keys(raw)) if (key !== "issuers") fail(["jwt", key], "unknown key");
  const out: JwtIssuer[] = [];
  for (const [name, spec] of Object.entries(raw.issuers)) {
    const at = (...rest: PathSegment[]) => ["jwt", "issuers", name, ...rest];
    if (!NAME.test(name)) fail(at(), "an issuer name is 1–64 letters, digits, '_', '.', '-'");
    if (!isJsonObject(spec)) {
      fail(at(), "must be a mapping (issuer, audience, jwks_url, ...)");
      continue;
    }
    for (const key of Object.keys(spec)) {
      if (!FIELDS.includes(key)) fail(at(key), `unknown key (known: ${FIELDS.join(", ")})`);
    }
    const text = (key: string, required: boolean): string | null => {
      const v = spec[key];
      if (v === undefined || v === null) {
        if (required) fail(at(key), "is required");
        return null;
      }
      if (typeof v !== "string" || v.trim() === "") {
        fail(at(key), "must be a non-empty string");
        return null;
      }
      return v;
    };
    const issuer = text("issuer", true) ?? "";
    const jwksUrl = text("jwks_url", true) ?? "";
    if (jwksUrl !== "" && !/^https?:\/\//.test(jwksUrl)) {
      fail(at("jwks_url"), "must be an http(s) URL");
    }
    const aud = spec.audience;
    const audience = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : [];
    if (audience.length === 0 || audience.some((a) => typeof a !== "string" || a === "")) {
      fail(at("audience"), "must be an audience or a list of them");
    }
    const algs = spec.algorithms ?? [...JWT_ALGORITHMS];
    const algorithms: JwtAlgorithm[] = [];
    if (!Array.isArray(algs) || algs.length === 0) {
      fail(at("algorithms"), `must be a list of ${JWT_ALGORITHMS.join(", ")}`);
    } else {
      for (const a of algs) {
        if ((JWT_ALGORITHMS as readonly unknown[]).includes(a)) algorithms.push(a as JwtAlgorithm);
        else {
          fail(
            at("algorithms"),
            `'${a}' is not allowed (only ${JWT_ALGORITHMS.join(", ")}: never none, never HS*)`,
          );
        }
      }
    }
    const seconds = (key: string, dflt: number): number => {
      const v = spec[key];
      if (v === undefined || v === null) return dflt;
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
        fail(at(key), "must be a number of seconds >= 0");
        return dflt;
      }
      return v;
    };
    out.push({
      name,
      issuer,
      audience: audience as string[],
      jwks_url: jwksUrl,
      algorithms,
      clock_skew_s: seconds("clock_skew_s", 60),
      key_id_claim: text("key_id_claim", false) ?? "sub",
      policy_claim: text("policy_claim", false),
      share_claim: text("share_claim", false),
      budget_group_claim: text("budget_group_claim", false),
      jwks_min_interval_s: seconds("jwks_min_interval_s", 10),
    });
  }
  return { value: out, issues };
}
