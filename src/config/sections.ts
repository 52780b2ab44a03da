/**
 * One loader per section of the config. Each takes the validated sections (and what earlier
 * sections built) and answers what it built plus its issues, located by path segments from the
 * config's root; load.ts prints the paths and adds the lines, once, for all of them.
 *
 * A new top-level key gets its own function here; a new policy or key field is merged in
 * `resolveKeyEntry` (src/core/policies.ts), the one place a key's overrides meet its policy.
 *
 * @module
 */
import type { Alias, Node, NodeSpec, PricingRule } from "../core/types.ts";
import { ConfigPathError, type PathSegment } from "../core/config_path.ts";
import { NODE_SPEC_KEYS, NodeSpecErrors, normalizeNode } from "../core/inventory.ts";
import { normalizeAlias } from "../core/aliases.ts";
import { validatePricingRule } from "../core/pricing.ts";
import { checkPolicySet, type PolicySet } from "../core/policies.ts";
import {
  type NormalizedUsageStoreConfig,
  type NormalizeOptions,
  normalizeUsageStoreConfig,
} from "../usage/config.ts";
import { digestOf } from "./canonical.ts";
import type { AdminKeyResolution } from "./admin_key.ts";
import { type RegistrySettings, resolveRegistry } from "./registry.ts";
import {
  buildManifest,
  canReach,
  manifestGrants,
  type ManifestSettings,
  resolveManifest,
} from "./provider_manifest.ts";
import { validateRegistryProbeBlock } from "./registry_probe_block.ts";
import { type Config, registrySchema, ROUTING_KEYS, routingSchema } from "./config_schema.ts";
import { errorMessage } from "../error_message.ts";
import { isJsonObject } from "../core/json.ts";

/** An error or warning of a section, located from the config's root. */
export interface SectionIssue {
  /** Where, from the config's root (`["nodes", 2, "engine"]`). */
  segments: PathSegment[];
  /** What is wrong, without the path. */
  message: string;
  /** A warning: worth saying, but the config still loads. */
  warning?: boolean;
}

/** What a section loader answers: what it built (absent when the section is) and its issues. */
export interface Section<T> {
  /** What the section built; undefined when the config has no such section or it failed. */
  value?: T;
  /** Its errors and warnings. */
  issues: SectionIssue[];
}

/** What every section loader reads. */
export interface SectionInput {
  /** The document as written. */
  root: Record<string, unknown>;
  /** The sections that passed their schema. */
  cfg: Config;
  /** Whether a top-level key passed its schema. */
  valid(key: keyof Config): boolean;
  /** Environment, read now (apply time). */
  env: (name: string) => string | undefined;
}

const error = (segments: PathSegment[], message: string): SectionIssue => ({ segments, message });
const warning = (segments: PathSegment[], message: string): SectionIssue => ({
  segments,
  message,
  warning: true,
});

/** Where a core error points inside the spec it was given, and what it says without that. */
function located(e: unknown, full = false): { segments: readonly PathSegment[]; message: string } {
  if (e instanceof ConfigPathError) {
    return { segments: e.segments, message: full ? e.message : e.detail };
  }
  return { segments: [], message: errorMessage(e) };
}

/** `routing:` keys Skeid does not know: warned about, ignored. */
export function routingWarnings(input: SectionInput): SectionIssue[] {
  const routing = input.root.routing;
  if (!isJsonObject(routing)) return [];
  return Object.keys(routing).filter((key) => !(key in routingSchema.shape)).map((key) =>
    warning(["routing", key], `unknown routing key, ignored (known: ${ROUTING_KEYS.join(", ")})`)
  );
}

/** The nodes to install: entries without id or url skipped, a duplicate id's later entry wins. */
export function loadNodes(input: SectionInput): Section<{ specs: NodeSpec[]; nodes: Node[] }> {
  const { cfg, env } = input;
  if (!input.valid("nodes") || cfg.nodes === undefined) return { issues: [] };
  const issues: SectionIssue[] = [];
  const byId = new Map<string, { index: number; spec: NodeSpec; node: Node }>();
  (cfg.nodes ?? []).forEach((entry, i) => {
    const at = ["nodes", i];
    if (!isJsonObject(entry)) {
      issues.push(error(at, "must be a mapping (a node needs at least id and url)"));
      return;
    }
    if (blank(entry.id) || blank(entry.url)) {
      issues.push(warning(at, "skipped: a node needs both id and url"));
      return;
    }
    for (const p of validateRegistryProbeBlock(entry.capacity)) {
      issues.push(error([...at, "capacity", ...p.segments], p.message));
    }
    for (const key of Object.keys(entry)) {
      if (NODE_SPEC_KEYS.includes(key)) continue;
      issues.push(
        warning([...at, key], `unknown node key, ignored (known: ${NODE_SPEC_KEYS.join(", ")})`),
      );
    }
    let node: Node | undefined;
    try {
      node = normalizeNode(entry);
    } catch (e) {
      // Node messages name their field already (`url must be ...`): they are kept whole. Every
      // bad field of the node is listed, not only the first.
      for (const problem of e instanceof NodeSpecErrors ? e.problems : [e]) {
        const { segments, message } = located(problem, true);
        issues.push(error([...at, ...segments], message));
      }
      return;
    }
    if (!node) {
      issues.push(warning(at, "skipped: a node needs both id and url"));
      return;
    }
    if (node.api_key_env && !node.api_key_ref && !env(node.api_key_env)) {
      // ADR 0013: such a node is never sent the client's credentials instead.
      issues.push(warning(
        [...at, "api_key_env"],
        `variable ${node.api_key_env} is not set: node '${node.id}' has no upstream key and ` +
          "is skipped by requests until it has one",
      ));
    }
    const earlier = byId.get(node.id);
    if (earlier) {
      issues.push(warning(
        [...at, "id"],
        `duplicate node id '${node.id}' (also nodes[${earlier.index}]); the later entry wins`,
      ));
      byId.delete(node.id);
    }
    byId.set(node.id, { index: i, spec: entry, node });
  });
  const entries = [...byId.values()];
  return {
    value: { specs: entries.map((v) => v.spec), nodes: entries.map((v) => v.node) },
    issues,
  };
}

/**
 * A mapping section whose entries are built one by one (`aliases`, `pricing`): every entry that
 * fails is an error at `<section>.<name>…`, and the others still get checked.
 */
function loadEntries<T>(
  input: SectionInput,
  section: "aliases" | "pricing",
  build: (name: string, spec: unknown) => T,
): Section<Map<string, T>> {
  const raw = input.cfg[section];
  if (!input.valid(section) || raw === undefined) return { issues: [] };
  const built = new Map<string, T>();
  const issues: SectionIssue[] = [];
  for (const [name, spec] of Object.entries(raw ?? {})) {
    try {
      built.set(name, build(name, spec));
    } catch (e) {
      const { segments, message } = located(e);
      issues.push(error([section, name, ...segments], message));
    }
  }
  return { value: built, issues };
}

/** The aliases to install, by alias name. */
export function loadAliases(input: SectionInput): Section<Map<string, Alias>> {
  return loadEntries(input, "aliases", normalizeAlias);
}

/** The pricing rules to install, by served model (`'*'` = fallback). */
export function loadPricing(input: SectionInput): Section<Map<string, PricingRule>> {
  return loadEntries(input, "pricing", validatePricingRule);
}

/** The top-level keys the policy set is built from. */
export const POLICY_KEYS = ["policies", "default_policy", "names", "keys"] as const;

/** Whether the config declares any of the policy keys. */
export function policyDeclared(cfg: Config): boolean {
  return POLICY_KEYS.some((k) => cfg[k] !== undefined);
}

/**
 * `policies`, `default_policy`, `names` and `keys`, resolved together into one policy set
 * (`prebuilt`: the same set, already built from the same sections off the serving path).
 */
export function loadPolicies(input: SectionInput, prebuilt?: PolicySet): Section<PolicySet> {
  const { cfg, root } = input;
  const allValid = POLICY_KEYS.every((k) => !(k in root) || input.valid(k));
  if (!policyDeclared(cfg) || !allValid) return { issues: [] };
  // Every error of the four sections, not the first: `skeid check` lists them all at once.
  const { set, errors } = prebuilt ? { set: prebuilt, errors: [] } : checkPolicySet({
    policies: cfg.policies ?? undefined,
    default_policy: cfg.default_policy ?? null,
    names: cfg.names ?? undefined,
    keys: cfg.keys ?? undefined,
  });
  if (errors.length > 0) return { issues: errors.map((e) => error([...e.segments], e.detail)) };
  return { value: set, issues: set.warnings.map((w) => warning(["keys"], w)) };
}

/** `registry:` (a block with an unknown key still gets its other checks, so one run lists all). */
export function loadRegistry(
  input: SectionInput,
  adminKey: AdminKeyResolution,
  hostname: () => string,
): Section<RegistrySettings> {
  const { cfg, root } = input;
  let block = cfg.registry;
  if (!input.valid("registry") && isJsonObject(root.registry)) {
    const lenient = registrySchema.loose().safeParse(root.registry);
    if (lenient.success) block = lenient.data;
  }
  if (block === undefined) return { issues: [] };
  const r = resolveRegistry(block, { env: input.env, hasAdminKey: adminKey.key !== "", hostname });
  return {
    value: r.settings,
    issues: r.problems.map((p) => error(["registry", ...p.segments], p.message)),
  };
}

/** What the manifest section needs from the sections before it. */
export interface ManifestInput {
  /** The nodes reachability is checked against (the config's, else those in force). */
  nodes: readonly Node[];
  /** The aliases reachability is checked against. */
  aliases: ReadonlyMap<string, Alias>;
  /** The policy set, when it loaded. */
  policySet?: PolicySet;
  /** Whether policies are declared (then a failed policy set skips the reachability check). */
  policyDeclared: boolean;
}

/** `manifest:` and the per-key manifests (customer key id → canonical JSON). */
export function loadManifest(
  input: SectionInput,
  reach: ManifestInput,
): Section<{ settings?: ManifestSettings; manifests: Map<string, string> }> {
  const { cfg } = input;
  const manifests = new Map<string, string>();
  if (!input.valid("manifest")) return { value: { manifests }, issues: [] };
  const m = resolveManifest(cfg.manifest);
  const issues = m.problems.map((p) => error(["manifest", ...p.segments], p.message));
  const settings = m.settings;
  if (settings && input.valid("keys")) {
    const { grants, problems } = manifestGrants(cfg.keys);
    for (const p of problems) issues.push(error(["keys", ...p.segments], p.message));
    const { policySet } = reach;
    const policyOk = !reach.policyDeclared || policySet !== undefined;
    for (const grant of grants) {
      const keyId = policySet?.keyNames.get(grant.entry) ?? grant.entry;
      const policy = policySet
        ? policySet.keyPolicies.get(keyId) ?? policySet.shortKeyPolicies.get(keyId) ??
          policySet.defaultPolicy
        : null;
      if (policyOk) {
        grant.models.forEach((model, i) => {
          if (canReach(model, policy, reach)) return;
          const why = policy?.models && !policy.models.has(model)
            ? "its policy does not grant it"
            : "no node or alias serves it outside the tags its policy denies";
          issues.push(error(
            ["keys", grant.entry, "manifest", "models", i],
            `model '${model}' cannot be reached by this key: ${why}`,
          ));
        });
      }
      manifests.set(keyId, buildManifest(settings, grant.models));
    }
  }
  return { value: { settings, manifests }, issues };
}

/** The usage store a config names (`usage_store`, or the older `usage_db_path`). */
export interface UsageStoreSection {
  /** Which key named it. */
  origin: "usage_store" | "usage_db_path";
  /** As written (for usage_db_path: `{backend: sqlite, sqlite_path}`). */
  raw: Record<string, unknown>;
  /** What the usage module's normalizer made of it (a password in it never prints). */
  normalized: NormalizedUsageStoreConfig;
  /** Change detector. */
  digest: string;
}

/** `usage_store:` (or `usage_db_path:`), normalized by the usage module. */
export function loadUsageStore(
  input: SectionInput,
  normalize: (raw: unknown, opts: NormalizeOptions) => NormalizedUsageStoreConfig =
    normalizeUsageStoreConfig,
): Section<UsageStoreSection> {
  const { cfg, root } = input;
  const raw = cfg.usage_store ??
    (cfg.usage_db_path ? { backend: "sqlite", sqlite_path: cfg.usage_db_path } : undefined);
  const invalid = ("usage_store" in root && !input.valid("usage_store")) ||
    ("usage_db_path" in root && !input.valid("usage_db_path"));
  if (!raw || invalid) return { issues: [] };
  const origin = cfg.usage_store ? "usage_store" : "usage_db_path";
  try {
    const normalized = normalize(raw, {
      usageDbPath: cfg.usage_db_path ?? undefined,
      env: input.env,
    });
    return { value: { origin, raw, normalized, digest: digestOf(raw) }, issues: [] };
  } catch (e) {
    // The usage module reports `usage_store.<field>: <message>` (it has no structured path).
    const message = errorMessage(e);
    const m = /^usage_store\.([\w.]+):\s*(.*)$/s.exec(message);
    const bare = message.replace(/^usage_store:\s*/, "");
    if (origin === "usage_db_path") return { issues: [error(["usage_db_path"], bare)] };
    if (m) return { issues: [error(["usage_store", ...m[1].split(".")], m[2])] };
    return { issues: [error(["usage_store"], bare)] };
  }
}

function blank(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === "string" && v.trim() === "");
}
