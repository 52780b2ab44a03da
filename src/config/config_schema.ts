/**
 * The config schema (zod): every top-level key Skeid reads, with the types and bounds the seed
 * gives. Unknown top-level keys are ignored; nested sections stay lenient except where an unknown
 * key is a likely mistake with a security cost (the `registry` block). Node entries, alias
 * tiers, pricing rules and policies are only shape-checked here: the core's own normalizers
 * validate them in `load.ts`, so the config and the admin API accept exactly the same things.
 *
 * @module
 */
import { z } from "zod";
import { type ConfigIssue, formatPath, type PathSegment } from "./errors.ts";
import { PICK_KINDS } from "../core/pick.ts";

const TRUE_WORDS = new Set(["true", "yes", "on", "1"]);
const FALSE_WORDS = new Set(["false", "no", "off", "0", ""]);

/** Reads the boolean spellings a hand-written config uses (`true`, `yes`, `on`, `1`, ...). */
function toBool(v: unknown): unknown {
  if (v === 0 || v === 1) return v === 1;
  if (typeof v === "string") {
    const w = v.trim().toLowerCase();
    if (TRUE_WORDS.has(w)) return true;
    if (FALSE_WORDS.has(w)) return false;
  }
  return v;
}

/** Reads a number written as a string (`"2000"`); anything else is left for the check to refuse. */
function toNumber(v: unknown): unknown {
  return typeof v === "string" && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : v;
}

/** A comma/space separated string becomes a list (`faces: openai, ollama`). */
function toList(v: unknown): unknown {
  return typeof v === "string" ? v.split(/[\s,]+/).filter((s) => s !== "") : v;
}

/** A scalar that is written as text but may be typed as a number in YAML (a key). */
function toText(v: unknown): unknown {
  return typeof v === "number" ? String(v) : v;
}

const bool = z.preprocess(toBool, z.boolean());
const text = z.preprocess(toText, z.string());
const envName = z.string().min(1);

/** `routing:` — each key present sets its value; an absent (or null) key is not set. */
export const routingSchema = z.object({
  wait_timeout_ms: z.preprocess(toNumber, z.number().int().min(0)).nullish(),
  wait_poll_ms: z.preprocess(toNumber, z.number().int().min(1)).nullish(),
  trust_key_id_header: bool.nullish(),
  frontend_count: z.preprocess(toNumber, z.number().int().min(1)).nullish(),
  require_known_keys: bool.nullish(),
  max_body_bytes: z.preprocess(toNumber, z.number().int().gt(0)).nullish(),
  max_attempts: z.preprocess(toNumber, z.number().int().min(1)).nullish(),
  budget_refresh_ms: z.preprocess(toNumber, z.number().int().min(1)).nullish(),
  max_retry_after_ms: z.preprocess(toNumber, z.number().int().min(0)).nullish(),
  max_reserve_tokens: z.preprocess(toNumber, z.number().int().min(1)).nullish(),
  pick: z.enum(PICK_KINDS).nullish(),
  affinity_bound: z.preprocess(toNumber, z.number().gt(1)).nullish(),
  prefix_index_blocks: z.preprocess(toNumber, z.number().int().min(1024).max(1 << 26)).nullish(),
  prefix_index_ttl_s: z.preprocess(toNumber, z.number().gt(0)).nullish(),
});

/** The routing keys the config may set. */
export const ROUTING_KEYS = Object.keys(routingSchema.shape) as (keyof z.output<
  typeof routingSchema
>)[];

/** Longest console session, s (`admin.session_ttl_s`): 30 days. */
export const MAX_SESSION_TTL_S = 30 * 86_400;

/**
 * `admin:` — the admin API key, or the variable holding it; how long a console session lasts;
 * the hops whose `X-Forwarded-*` headers the sign-in believes (ADR 0035).
 */
export const adminSchema = z.object({
  api_key: text.nullish(),
  api_key_env: z.string().nullish(),
  session_ttl_s: z.preprocess(toNumber, z.number().int().min(60).max(MAX_SESSION_TTL_S))
    .nullish(),
  trusted_proxies: z.preprocess(toList, z.array(z.union([z.ipv4(), z.ipv6()]))).nullish(),
});

/** `registry:` — publishing this Skeid's capacity snapshot. Unknown keys are refused. */
export const registrySchema = z.strictObject({
  enabled: bool.nullish(),
  secret_env: envName.nullish(),
  read_key_env: envName.nullish(),
  ttl_s: z.preprocess(toNumber, z.number().gt(0)).nullish(),
  instance_id: text.pipe(z.string().min(1)).nullish(),
  error_window_s: z.preprocess(toNumber, z.number().int().gt(0)).nullish(),
});

/** `provider_id` of a manifest: `[a-z0-9][a-z0-9._-]*`, at most 128 characters. */
export const PROVIDER_ID = /^[a-z0-9][a-z0-9._-]{0,127}$/;

/** `manifest:` — the provider manifest published per customer key. */
export const manifestSchema = z.object({
  enabled: bool.nullish(),
  public_url: z.string().nullish(),
  provider_id: z.string().regex(PROVIDER_ID, {
    error: "must match [a-z0-9][a-z0-9._-]* (at most 128 characters)",
  }).nullish(),
  faces: z.preprocess(toList, z.array(z.string())).nullish(),
  capabilities: z.record(z.string(), z.record(z.string(), bool).nullish()).nullish(),
});

const mapping = z.record(z.string(), z.unknown());

/** Every top-level key Skeid reads. Anything else in the file is ignored. */
export const configSchema = z.object({
  nodes: z.array(z.unknown()).nullish(),
  pricing: mapping.nullish(),
  aliases: mapping.nullish(),
  policies: mapping.nullish(),
  default_policy: text.nullish(),
  names: mapping.nullish(),
  keys: mapping.nullish(),
  routing: routingSchema.nullish(),
  admin: adminSchema.nullish(),
  admin_api_key: text.nullish(),
  admin_api_key_env: z.string().nullish(),
  registry: registrySchema.nullish(),
  manifest: manifestSchema.nullish(),
  usage_store: mapping.nullish(),
  usage_db_path: z.string().min(1).nullish(),
  responses: z.unknown().optional(),
  api_keys: z.unknown().optional(),
  jwt: z.unknown().optional(),
});

/** A validated config: the sections as written (null where written empty), secrets only by name. */
export type Config = z.output<typeof configSchema>;

/** The routing section as validated. */
export type RoutingConfig = z.output<typeof routingSchema>;
/** The registry section as validated. */
export type RegistryConfig = z.output<typeof registrySchema>;
/** The manifest section as validated. */
export type ManifestConfig = z.output<typeof manifestSchema>;

/** The top-level keys Skeid reads, in the order the example config documents them. */
export const TOP_LEVEL_KEYS: readonly string[] = Object.keys(configSchema.shape);

const EXPECTED: Record<string, string> = {
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  string: "a string",
  object: "a mapping",
  record: "a mapping",
  map: "a mapping",
  array: "a list",
};

/** Turns zod issues of `input` (found under `prefix`) into located config issues (line added later). */
export function issuesFromZod(
  error: z.ZodError,
  input: unknown,
  prefix: readonly PathSegment[] = [],
): { segments: PathSegment[]; issue: ConfigIssue }[] {
  const out: { segments: PathSegment[]; issue: ConfigIssue }[] = [];
  for (const issue of error.issues) {
    const base = [...prefix, ...(issue.path as PathSegment[])];
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const segments = [...base, key];
        out.push({ segments, issue: { path: formatPath(segments), message: "unknown key" } });
      }
      continue;
    }
    const got = valueAt(input, issue.path as PathSegment[]);
    const message = zodMessage(issue) + gotSuffix(got);
    out.push({ segments: base, issue: { path: formatPath(base), message } });
  }
  return out;
}

function zodMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type":
      return `must be ${EXPECTED[issue.expected] ?? issue.expected}`;
    case "too_small":
      if (issue.origin === "string") return "must not be empty";
      if (issue.origin === "array") return `must have at least ${issue.minimum} entries`;
      return `must be ${issue.inclusive ? ">=" : ">"} ${issue.minimum}`;
    case "too_big":
      if (issue.origin === "string") return `must be at most ${issue.maximum} characters`;
      return `must be ${issue.inclusive ? "<=" : "<"} ${issue.maximum}`;
    case "invalid_value":
      return `must be one of: ${issue.values.map((v) => String(v)).join(", ")}`;
    default:
      return issue.message;
  }
}

/** Numbers, booleans and null are echoed back; text never is (it could be a secret). */
function gotSuffix(v: unknown): string {
  if (v === null || typeof v === "number" || typeof v === "boolean") return ` (got ${v})`;
  if (Array.isArray(v)) return " (got a list)";
  if (typeof v === "object") return " (got a mapping)";
  if (typeof v === "string") return " (got text)";
  return "";
}

function valueAt(input: unknown, path: readonly PathSegment[]): unknown {
  let node = input;
  for (const seg of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string | number, unknown>)[seg];
  }
  return node;
}
