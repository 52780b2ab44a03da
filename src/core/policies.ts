/**
 * The `policies:`, `default_policy:`, `names:` and `keys:` sections, resolved once at config
 * load: a request then costs one map lookup, and customer keys on the same profile share one
 * Policy object, so ten thousand identically-configured customers are a config with zero
 * `keys:` entries and no memory.
 *
 * @module
 */
import type { Policy } from "./types.ts";
import { normalizeTags } from "./tags.ts";
import { ConfigPathError, type PathSegment } from "./config_path.ts";
import { checkTenancy, tenancyCanonical, type TenancyFields } from "./key_policy.ts";
import { ANONYMOUS_KEY_ID } from "./customer_key_id.ts";
import { isJsonObject } from "./json.ts";

/**
 * Thrown by buildPolicySet; `segments` locate the offending entry from the config's root
 * (`["keys", "alice"]`), `path` is them dotted (`keys.alice`) as API callers read it.
 */
export class PolicyError extends ConfigPathError {
  /** The segments joined with dots (`keys.alice.policy`). */
  readonly path: string;
  /** See the class comment; `detail` is the message without the path, when it differs. */
  constructor(message: string, segments: readonly PathSegment[], detail?: string) {
    super(message, segments, detail);
    this.path = segments.join(".");
    this.name = "PolicyError";
  }
}

/** The config's policy sections, as written. */
export interface PolicySections {
  /** Policy name → spec (`models`/`aliases`, `deny_tags`). */
  policies?: Record<string, unknown>;
  /** The policy of every customer key not listed under `keys`. */
  default_policy?: string | null;
  /** Readable name → customer key id. */
  names?: Record<string, unknown>;
  /** Customer key id or name → policy name, or a map with a policy and sparse overrides. */
  keys?: Record<string, unknown>;
}

/** Everything routing needs about policies, resolved (see `buildPolicySet`). */
export interface PolicySet {
  /** Named policies. */
  policies: Map<string, Policy>;
  /** The policy of unlisted customer keys; null leaves them unrestricted. */
  defaultPolicy: Policy | null;
  /** Full customer key id → policy. */
  keyPolicies: Map<string, Policy>;
  /** Short (12-hex, pre-ADR 0018) id → policy; matched by prefix with a one-time warning. */
  shortKeyPolicies: Map<string, Policy>;
  /** Readable name → customer key id. */
  keyNames: Map<string, string>;
  /** Customer key ids listed under `keys:` (full or short), for `routing.require_known_keys`. */
  knownKeyIds: Set<string>;
  /** Warnings to log once (short ids in use, ...). */
  warnings: string[];
}

/** A PolicySet with nothing configured: every customer key unrestricted. */
export function emptyPolicySet(): PolicySet {
  return {
    policies: new Map(),
    defaultPolicy: null,
    keyPolicies: new Map(),
    shortKeyPolicies: new Map(),
    keyNames: new Map(),
    knownKeyIds: new Set(),
    warnings: [],
  };
}

const FULL_KEY_ID = /^k_[0-9a-f]{40}$/;
const SHORT_KEY_ID = /^k_[0-9a-f]{12}$/;
/** `k_` + 12 hex: the length of a pre-ADR 0018 customer key id. */
const SHORT_KEY_ID_LENGTH = 14;

/** Whether an id is a full customer key id (`k_` + 40 hex). */
export function isFullKeyId(id: string): boolean {
  return id.length === 42 && FULL_KEY_ID.test(id);
}

/** Whether an id is a short, pre-ADR 0018 customer key id (`k_` + 12 hex). */
export function isShortKeyId(id: string): boolean {
  return id.length === SHORT_KEY_ID_LENGTH && SHORT_KEY_ID.test(id);
}

/** The short id a full id starts with. */
export function shortKeyIdOf(fullId: string): string {
  return fullId.slice(0, SHORT_KEY_ID_LENGTH);
}

/** The deprecation warning of a short id (one text per id, so it can be logged once). */
export function shortKeyIdWarning(shortId: string): string {
  return `customer key id '${shortId}' is a short key id from before ADR 0018; it still ` +
    "matches the customer key whose full id starts with it, but is deprecated: replace it with " +
    "the full id `skeid keyid` prints";
}

/** `models`/`aliases` → the granted names, or null for all (absent, `'*'`, `['*']`). */
function parseModels(v: unknown): ReadonlySet<string> | null {
  if (v === undefined || v === null) return null;
  let list: unknown[];
  if (typeof v === "string") list = v.split(/[,\s]+/);
  else if (Array.isArray(v)) list = v;
  else {throw new PolicyError("must be a list of model names or a comma-separated string", [
      "models",
    ]);}
  const names = new Set<string>();
  for (const entry of list) {
    if (entry === undefined || entry === null || entry === "") continue;
    if (typeof entry !== "string" && typeof entry !== "number") {
      throw new PolicyError("must be a list of model names or a comma-separated string", [
        "models",
      ]);
    }
    names.add(String(entry));
  }
  return names.has("*") ? null : names;
}

function parseDenyTags(v: unknown): string[] {
  try {
    return normalizeTags(v);
  } catch (err) {
    throw new PolicyError((err as Error).message.replace(/^tags /, ""), ["deny_tags"]);
  }
}

function makePolicy(
  models: ReadonlySet<string> | null,
  denyTags: readonly string[],
  manifestModels?: readonly string[],
  tenancy: TenancyFields = {},
): Policy {
  const policy: {
    -readonly [K in keyof Policy]: Policy[K];
  } = { models, deny_tags: Object.freeze([...denyTags]) };
  if (manifestModels) policy.manifest_models = Object.freeze([...manifestModels]);
  if (tenancy.limits) policy.limits = tenancy.limits;
  if (tenancy.budget) policy.budget = tenancy.budget;
  if (tenancy.share) policy.share = tenancy.share;
  return Object.freeze(policy);
}

/**
 * Every error a resolution found, located from the config's root (or from the spec, for
 * `resolvePolicy`). Each field is checked on its own and a bad one stands in with a neutral
 * value, so one config load lists every error instead of the first; anything built while there
 * are errors is only good for finding the rest and is never installed.
 */
type Errors = PolicyError[];

/** `err` located under `prefix` (as it is when there is no prefix). */
function locatedUnder(prefix: readonly PathSegment[], err: PolicyError): PolicyError {
  return prefix.length === 0 ? err : underPath(prefix, err);
}

/** `parse()`, or `fallback` with its PolicyError recorded under `prefix`. */
function attempt<T>(
  errors: Errors,
  prefix: readonly PathSegment[],
  parse: () => T,
  fallback: T,
): T {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    errors.push(locatedUnder(prefix, err));
    return fallback;
  }
}

/** `limits`/`budget`/`share` of a spec over a base, each bad field an error (`budget.period`). */
function tenancyOf(
  spec: Record<string, unknown>,
  base: TenancyFields | undefined,
  prefix: readonly PathSegment[],
  errors: Errors,
): TenancyFields {
  const { fields, problems } = checkTenancy(spec, base);
  for (const p of problems) {
    errors.push(locatedUnder(prefix, new PolicyError(p.message, p.path.split("."))));
  }
  return fields;
}

/**
 * One string per distinct resolution, so equal policies can share one object (and a reload can
 * tell whether a policy changed).
 */
export function canonicalPolicy(policy: Policy): string {
  return JSON.stringify([
    policy.models ? [...policy.models].sort() : null,
    policy.deny_tags,
    policy.manifest_models ?? null,
    ...tenancyCanonical(policy),
  ]);
}

/** A policy spec resolved, its errors recorded under `prefix`. */
function policyOf(spec: unknown, prefix: readonly PathSegment[], errors: Errors): Policy {
  if (spec === undefined || spec === null) return makePolicy(null, []);
  if (!isJsonObject(spec)) {
    errors.push(locatedUnder(prefix, new PolicyError("a policy must be a map", [])));
    return makePolicy(null, []);
  }
  return makePolicy(
    attempt(errors, prefix, () => parseModels(spec.models ?? spec.aliases), null),
    attempt(errors, prefix, () => parseDenyTags(spec.deny_tags), []),
    undefined,
    tenancyOf(spec, undefined, prefix, errors),
  );
}

/**
 * Turns a policy spec (`models`/`aliases`, `deny_tags`, `limits`, `budget`, `share`) into the
 * immutable form routing and admission use.
 * Absent `models`, `'*'` or `['*']` grant every name; `'a, b'` is split. Throws PolicyError
 * (path relative to the spec: `models`, `deny_tags`, `budget.period`; the first, when several
 * fields are bad) on a field of the wrong type or out of range.
 */
export function resolvePolicy(spec: unknown): Policy {
  const errors: Errors = [];
  const policy = policyOf(spec, [], errors);
  if (errors.length > 0) throw errors[0];
  return policy;
}

/** The same error located under `prefix`: `<path>: <message>`, detail kept. */
export function underPath(prefix: readonly PathSegment[], err: PolicyError): PolicyError {
  const segments = [...prefix, ...err.segments];
  return new PolicyError(`${segments.join(".")}: ${err.message}`, segments, err.detail);
}

function parseManifest(label: string, v: unknown): string[] {
  const path = ["keys", label, "manifest"];
  if (!isJsonObject(v) || !Array.isArray(v.models)) {
    throw new PolicyError(`key '${label}': manifest must be a map with a models list`, path);
  }
  const models: string[] = [];
  for (const m of v.models) {
    if (typeof m !== "string" || m === "") {
      throw new PolicyError(
        `key '${label}': manifest models must be non-empty model names`,
        [...path, "models"],
      );
    }
    if (!models.includes(m)) models.push(m);
  }
  return models;
}

/** Whether a `keys:` label that is no name can be a customer key id a request presents. */
function isKeyId(label: string): boolean {
  return isFullKeyId(label) || isShortKeyId(label) || label === ANONYMOUS_KEY_ID;
}

/** The policy set, or the first of its errors thrown (see {@link checkPolicySet}). */
export function buildPolicySet(sections: PolicySections): PolicySet {
  const { set, errors } = checkPolicySet(sections);
  if (errors.length > 0) throw errors[0];
  return set;
}

/**
 * Resolves the policy sections, with every error found: an undefined default_policy or keys
 * policy, a bad policy or override field, a names value that is not a non-empty string, a keys
 * entry that is neither a name nor a customer key id, two entries resolving to one customer key
 * id, a short id beside the full id it prefixes. The set is usable only when there is no error.
 * Identical resolutions share one Policy object; customer keys that resolve to exactly the
 * default policy are listed in `knownKeyIds` only.
 */
export function checkPolicySet(
  sections: PolicySections,
): { set: PolicySet; errors: PolicyError[] } {
  const set = emptyPolicySet();
  const errors: Errors = [];
  const interned = new Map<string, Policy>();
  const intern = (policy: Policy): Policy => {
    const key = canonicalPolicy(policy);
    const have = interned.get(key);
    if (have) return have;
    interned.set(key, policy);
    return policy;
  };

  const policies: unknown = sections.policies;
  if (policies !== undefined && policies !== null) {
    if (!isJsonObject(policies)) {
      errors.push(new PolicyError("policies must be a map of policy name to policy", ["policies"]));
    } else {
      for (const [name, spec] of Object.entries(policies)) {
        // A bad policy is still defined, so the entries naming it are not also reported.
        set.policies.set(name, intern(policyOf(spec, ["policies", name], errors)));
      }
    }
  }

  const defaultName: unknown = sections.default_policy;
  if (defaultName !== undefined && defaultName !== null && defaultName !== "") {
    if (typeof defaultName !== "string") {
      errors.push(new PolicyError("default_policy must be a policy name", ["default_policy"]));
    } else {
      const policy = set.policies.get(defaultName);
      if (policy) set.defaultPolicy = policy;
      else {
        errors.push(
          new PolicyError(
            `default_policy '${defaultName}' is not defined in policies`,
            ["default_policy"],
          ),
        );
      }
    }
  }

  const names: unknown = sections.names;
  /** Names whose value is bad: already an error, so a keys entry using one is not another. */
  const badNames = new Set<string>();
  if (names !== undefined && names !== null) {
    if (!isJsonObject(names)) {
      errors.push(new PolicyError("names must be a map of name to customer key id", ["names"]));
    } else {
      for (const [name, id] of Object.entries(names)) {
        // The value is never echoed: it should be an id, but a mistake could make it a customer
        // key.
        if (typeof id !== "string" || id === "") {
          errors.push(
            new PolicyError(
              `name '${name}' must map to a non-empty key id string`,
              ["names", name],
            ),
          );
          badNames.add(name);
        } else if (!isKeyId(id)) {
          // A mistyped id (or a customer key pasted in) would match no presented key: the keys
          // entries under this name would never apply, without a word.
          errors.push(
            new PolicyError(
              `name '${name}' must map to a customer key id (k_ followed by 40 hex digits, as ` +
                "`skeid keyid` prints it), not a key or another string",
              ["names", name],
            ),
          );
          badNames.add(name);
        } else set.keyNames.set(name, id);
      }
    }
  }

  const keys: unknown = sections.keys;
  const labelOf = new Map<string, string>();
  if (keys !== undefined && keys !== null) {
    if (!isJsonObject(keys)) {
      errors.push(new PolicyError("keys must be a map of customer key id or name", ["keys"]));
    } else {
      for (const [label, entry] of Object.entries(keys)) {
        const named = set.keyNames.get(label);
        // Anything else would be taken as a literal id no presented customer key hashes to: a
        // misspelled name would leave its customer on the default policy without a word.
        if (named === undefined && !badNames.has(label) && !isKeyId(label)) {
          errors.push(
            new PolicyError(
              `key '${label}' is neither a name in names: nor a customer key id (k_ followed ` +
                "by 40 hex digits, as `skeid keyid` prints it)",
              ["keys", label],
            ),
          );
        }
        const id = named ?? label;
        const policy = resolveKeyEntry(label, entry, set, intern, errors);
        const other = labelOf.get(id);
        if (other !== undefined) {
          errors.push(
            new PolicyError(
              `keys entry '${label}' resolves to key id '${id}', which another entry ` +
                `('${other}') already claims`,
              ["keys", label],
            ),
          );
          continue;
        }
        labelOf.set(id, label);
        set.knownKeyIds.add(id);
        if (policy === set.defaultPolicy) continue;
        if (isShortKeyId(id)) set.shortKeyPolicies.set(id, policy);
        else set.keyPolicies.set(id, policy);
      }
    }
  }

  // One customer key would match both entries; which one governs is not for Skeid to guess.
  for (const id of labelOf.keys()) {
    if (!isFullKeyId(id)) continue;
    const short = shortKeyIdOf(id);
    const shortLabel = labelOf.get(short);
    if (shortLabel !== undefined) {
      errors.push(
        new PolicyError(
          `customer key id '${short}' is the short form of '${id}', and both have a keys ` +
            "entry: one customer key would match both; keep only the full id",
          ["keys", shortLabel],
        ),
      );
    }
  }

  const shortIds = new Set<string>();
  for (const id of labelOf.keys()) if (isShortKeyId(id)) shortIds.add(id);
  for (const id of set.keyNames.values()) if (isShortKeyId(id)) shortIds.add(id);
  for (const id of [...shortIds].sort()) set.warnings.push(shortKeyIdWarning(id));
  return { set, errors };
}

/** A keys entry's policy: the one it names (else the default) with its overrides. */
function resolveKeyEntry(
  label: string,
  entry: unknown,
  set: PolicySet,
  intern: (p: Policy) => Policy,
  errors: Errors,
): Policy {
  const path = ["keys", label];
  if (typeof entry === "string" && entry !== "") {
    const named = set.policies.get(entry);
    if (named) return named;
    errors.push(new PolicyError(`key '${label}' references undefined policy '${entry}'`, path));
    return set.defaultPolicy ?? makePolicy(null, []);
  }
  if (!isJsonObject(entry)) {
    errors.push(new PolicyError(`key '${label}' must be a policy name or a map`, path));
    return set.defaultPolicy ?? makePolicy(null, []);
  }

  let base: Policy | null = set.defaultPolicy;
  const policyName = entry.policy;
  if (policyName !== undefined && policyName !== null && policyName !== "") {
    if (typeof policyName !== "string") {
      errors.push(
        new PolicyError(`key '${label}': policy must be a policy name`, [...path, "policy"]),
      );
    } else {
      const named = set.policies.get(policyName);
      if (named) base = named;
      else {
        errors.push(
          new PolicyError(
            `key '${label}' references undefined policy '${policyName}'`,
            [...path, "policy"],
          ),
        );
      }
    }
  }

  // Overrides are sparse: an absent field keeps the base policy's value, so "standard, but
  // allowed to use cloud" is one line rather than a restated profile.
  const nested = isJsonObject(entry.overrides);
  const overrides = nested ? entry.overrides as Record<string, unknown> : entry;
  const overridesPath = nested ? [...path, "overrides"] : path;
  const manifest = "manifest" in entry
    ? attempt(errors, [], () => parseManifest(label, entry.manifest), undefined)
    : undefined;
  const models = "models" in overrides || "aliases" in overrides
    ? attempt(errors, overridesPath, () => parseModels(overrides.models ?? overrides.aliases), null)
    : base?.models ?? null;
  const denyTags = "deny_tags" in overrides
    ? attempt(errors, overridesPath, () => parseDenyTags(overrides.deny_tags), [])
    : base?.deny_tags ?? [];
  const tenancy = tenancyOf(overrides, base ?? undefined, overridesPath, errors);
  return intern(makePolicy(models, denyTags, manifest, tenancy));
}

/**
 * An issued key's policy (ADR 0029): the named policy (`name`; null: the default policy) with
 * `spec`'s fields over it, resolved as a `keys:` entry is. The errors are located from the spec
 * (`budget.usd`, `policy`), for an API caller; the policy is usable only without errors.
 */
export function resolveEntryPolicy(
  set: Readonly<PolicySet>,
  name: string | null,
  spec: Record<string, unknown>,
): { policy: Policy; errors: PolicyError[] } {
  const errors: Errors = [];
  const entry = name === null ? { ...spec, policy: null } : { ...spec, policy: name };
  const policy = resolveKeyEntry("", entry, set as PolicySet, (p) => p, errors);
  return {
    policy,
    errors: errors.map((e) => {
      const segments = e.segments.slice(2);
      const where = segments.length === 0 ? "policy" : segments.join(".");
      return new PolicyError(`${where}: ${e.detail}`, segments, e.detail);
    }),
  };
}
