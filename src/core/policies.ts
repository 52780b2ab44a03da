/**
 * Policies, default policy, names and keys, resolved once at config load.
 * SKELETON — owner: core-routing.
 * @module
 */
import type { Policy } from "./types.ts";

/** Turns a policy spec (`models`/`aliases`, `deny_tags`) into the immutable form routing uses. */
export function resolvePolicy(_spec: unknown): Policy {
  throw new Error("TODO");
}

/** The config's policy sections, as written. */
export interface PolicySections {
  policies?: Record<string, unknown>;
  default_policy?: string | null;
  names?: Record<string, unknown>;
  keys?: Record<string, unknown>;
}

/** Everything routing needs about policies, resolved (see `buildPolicySet`). */
export interface PolicySet {
  policies: Map<string, Policy>;
  defaultPolicy: Policy | null;
  /** Full customer key id → policy. */
  keyPolicies: Map<string, Policy>;
  /** Short (12-hex, pre-ADR 0016) id → policy; matched by prefix with a one-time warning. */
  shortKeyPolicies: Map<string, Policy>;
  /** Readable name → customer key id. */
  keyNames: Map<string, string>;
  /** Key ids listed under `keys:` (full or short), for `routing.require_known_keys`. */
  knownKeyIds: Set<string>;
  /** Warnings to log once (short ids in use, ...). */
  warnings: string[];
}

/** Thrown by buildPolicySet; `path` is the config path of the offending entry (`keys.alice`). */
export class PolicyError extends Error {
  constructor(message: string, readonly path: string) {
    super(message);
    this.name = "PolicyError";
  }
}

/**
 * Resolves the policy sections. Throws PolicyError on an undefined default_policy or keys
 * policy, a names value that is not a non-empty string, two entries resolving to one key id,
 * a short id beside the full id it prefixes. Identical resolutions share one Policy object.
 */
export function buildPolicySet(_sections: PolicySections): PolicySet {
  throw new Error("TODO");
}
