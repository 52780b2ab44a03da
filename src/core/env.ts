/**
 * Defaults the core takes from the environment (SKEID_*), read once at construction through an
 * injected reader so tests and several gateways in one process never share them.
 *
 * @module
 */
import type { RoutingSettings } from "./types.ts";
import { DEFAULT_LOAD_BOUND, isPickKind } from "./pick.ts";

/** Reads one environment variable; undefined when unset. */
export type EnvReader = (name: string) => string | undefined;

/** The process environment; a variable the permissions do not let us read counts as unset. */
export function processEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** Built-in routing settings, used when neither options nor the environment set one. */
export const BUILTIN_ROUTING: Readonly<RoutingSettings> = Object.freeze({
  wait_timeout_ms: 2000,
  wait_poll_ms: 25,
  trust_key_id_header: false,
  frontend_count: 1,
  require_known_keys: false,
  max_body_bytes: 64 * 1024 * 1024,
  max_attempts: 3,
  budget_refresh_ms: 2000,
  max_retry_after_ms: 60_000,
  max_reserve_tokens: 1_000_000,
  pick: "round_robin",
  affinity_bound: DEFAULT_LOAD_BOUND,
  prefix_index_blocks: 1_000_000,
  prefix_index_ttl_s: 600,
});

/** Built-in `capacity_max_age_ms`. */
export const DEFAULT_CAPACITY_MAX_AGE_MS = 5000;

/** `1`, `true`, `yes` or `on` (any case) turn a flag on. */
export function isTruthy(value: unknown): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "number") return value === 1;
  return typeof value === "string" && /^(1|true|yes|on)$/i.test(value.trim());
}

function envNumber(env: EnvReader, name: string): number | undefined {
  const raw = env(name);
  if (raw === undefined || raw.trim() === "") return undefined;
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Brings a routing patch into range: waits ≥ 0, poll ≥ 1, frontend_count an integer ≥ 1,
 * max_body_bytes ≥ 0, max_attempts, budget_refresh_ms and max_reserve_tokens integers ≥ 1,
 * max_retry_after_ms an integer ≥ 0. Non-numbers are dropped (keep the value in force); flags
 * accept the truthy spellings.
 */
export function normalizeRoutingPatch(patch: Partial<RoutingSettings>): Partial<RoutingSettings> {
  const out: Partial<RoutingSettings> = {};
  const num = (v: unknown): number | undefined => {
    const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
    return typeof n === "number" && Number.isFinite(n) ? n : undefined;
  };
  const p = patch as Record<string, unknown>;
  const wait = num(p.wait_timeout_ms);
  if (wait !== undefined) out.wait_timeout_ms = Math.max(0, wait);
  const poll = num(p.wait_poll_ms);
  if (poll !== undefined) out.wait_poll_ms = Math.max(1, poll);
  if (p.trust_key_id_header !== undefined && p.trust_key_id_header !== null) {
    out.trust_key_id_header = isTruthy(p.trust_key_id_header);
  }
  const frontends = num(p.frontend_count);
  if (frontends !== undefined) out.frontend_count = Math.max(1, Math.trunc(frontends));
  if (p.require_known_keys !== undefined && p.require_known_keys !== null) {
    out.require_known_keys = isTruthy(p.require_known_keys);
  }
  const body = num(p.max_body_bytes);
  if (body !== undefined) out.max_body_bytes = Math.max(0, Math.floor(body));
  const attempts = num(p.max_attempts);
  if (attempts !== undefined) out.max_attempts = Math.max(1, Math.trunc(attempts));
  const refresh = num(p.budget_refresh_ms);
  if (refresh !== undefined) out.budget_refresh_ms = Math.max(1, Math.trunc(refresh));
  const retryAfter = num(p.max_retry_after_ms);
  if (retryAfter !== undefined) out.max_retry_after_ms = Math.max(0, Math.trunc(retryAfter));
  const reserve = num(p.max_reserve_tokens);
  if (reserve !== undefined) {
    out.max_reserve_tokens = Math.min(Number.MAX_SAFE_INTEGER, Math.max(1, Math.trunc(reserve)));
  }
  if (isPickKind(p.pick)) out.pick = p.pick;
  // A bound of 1 or less would refuse every node the mean; the config check refuses it, this
  // keeps an admin API patch from doing it.
  const bound = num(p.affinity_bound);
  if (bound !== undefined && bound > 1) out.affinity_bound = bound;
  const blocks = num(p.prefix_index_blocks);
  if (blocks !== undefined) out.prefix_index_blocks = Math.max(1024, Math.trunc(blocks));
  const ttl = num(p.prefix_index_ttl_s);
  if (ttl !== undefined) out.prefix_index_ttl_s = Math.max(1, ttl);
  return out;
}

/**
 * Routing defaults from the environment over the built-in ones: SKEID_ROUTE_WAIT_TIMEOUT_MS,
 * SKEID_ROUTE_WAIT_POLL_MS, SKEID_TRUST_KEY_ID_HEADER, SKEID_FRONTEND_COUNT. A value that is
 * not a number is ignored.
 */
export function routingFromEnv(env: EnvReader): RoutingSettings {
  const patch: Partial<RoutingSettings> = {};
  const wait = envNumber(env, "SKEID_ROUTE_WAIT_TIMEOUT_MS");
  if (wait !== undefined) patch.wait_timeout_ms = wait;
  const poll = envNumber(env, "SKEID_ROUTE_WAIT_POLL_MS");
  if (poll !== undefined) patch.wait_poll_ms = poll;
  const trust = env("SKEID_TRUST_KEY_ID_HEADER");
  if (trust !== undefined) patch.trust_key_id_header = isTruthy(trust);
  const frontends = envNumber(env, "SKEID_FRONTEND_COUNT");
  if (frontends !== undefined) patch.frontend_count = frontends;
  return { ...BUILTIN_ROUTING, ...normalizeRoutingPatch(patch) };
}

/** SKEID_CAPACITY_MAX_AGE_MS (default 5000; 0 disables expiry; negative counts as 0). */
export function capacityMaxAgeFromEnv(env: EnvReader): number {
  const age = envNumber(env, "SKEID_CAPACITY_MAX_AGE_MS");
  return age === undefined ? DEFAULT_CAPACITY_MAX_AGE_MS : Math.max(0, age);
}
