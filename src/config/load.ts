/**
 * Config text → a validated, fully built config, or a ConfigLoadError listing EVERY error with
 * its path and line (`nodes[2].engine (line 14): unknown engine 'foo' (expected one of: ...)`).
 *
 * Everything a reload will commit is built here, through the same core functions the admin API
 * uses (normalizeNode, normalizeAlias, validatePricingRule, buildPolicySet), so that applying it
 * afterwards (apply.ts) cannot fail halfway. Environment values (registry secret, admin key
 * variable, a store's password_env) are read here through the injected `env`, which is why a
 * config is loaded at apply time; the returned `config` itself holds names, never values.
 *
 * @module
 */
import type { Alias, Node, NodeSpec, PricingRule, RoutingSettings } from "../core/types.ts";
import { NodeSpecError, normalizeNode } from "../core/inventory.ts";
import { AliasError, normalizeAlias } from "../core/aliases.ts";
import { validatePricingRule } from "../core/pricing.ts";
import { buildPolicySet, PolicyError, type PolicySet } from "../core/policies.ts";
import {
  type NormalizedUsageStoreConfig,
  type NormalizeOptions,
  normalizeUsageStoreConfig,
} from "../usage/config.ts";
import { digestOf } from "./canonical.ts";
import { type ConfigIssue, ConfigLoadError, formatPath, type PathSegment } from "./errors.ts";
import { type AdminKeyResolution, resolveAdminKey } from "./admin_key.ts";
import { type RegistrySettings, resolveRegistry } from "./registry.ts";
import {
  buildManifest,
  canReach,
  manifestGrants,
  type ManifestSettings,
  resolveManifest,
} from "./manifest.ts";
import { validateRegistryProbeBlock } from "./registry_probe.ts";
import { loadResponses } from "./responses.ts";
import type { ResponsesSettings } from "../responses/store.ts";
import {
  type Config,
  configSchema,
  issuesFromZod,
  registrySchema,
  ROUTING_KEYS,
  routingSchema,
  TOP_LEVEL_KEYS,
} from "./schema.ts";
import { errorMessage } from "../error_message.ts";
import { isRecord, parseYaml, pathSegments } from "./yaml.ts";

/** What a load needs besides the text. */
export interface LoadOptions {
  /** Environment, read now (apply time). */
  env: (name: string) => string | undefined;
  /** Where the text came from (a file path), for messages. */
  source?: string;
  /** An explicit admin key in force (it counts as the registry's read credential). */
  explicitAdminKey?: string;
  /** The nodes in force when the config declares none (manifest reachability). */
  currentNodes?: () => readonly Node[];
  /** The aliases in force when the config declares none (manifest reachability). */
  currentAliases?: () => ReadonlyMap<string, Alias>;
  /** Default registry instance id; default `Deno.hostname()`. */
  hostname?: () => string;
  /** Usage store normalizer; default the usage module's `normalizeUsageStoreConfig`. */
  normalizeUsageStore?: (raw: unknown, opts: NormalizeOptions) => NormalizedUsageStoreConfig;
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

/** A config that loaded: the validated sections and everything built from them. */
export interface LoadedConfig {
  /** The sections as written (validated); names of variables, never their values. */
  config: Config;
  /** Digest of every section Skeid reads: the change detector of the whole file. */
  digest: string;
  /** Digests of the sections that replace as a whole; a key is absent when the section is. */
  sections: {
    nodes?: string;
    pricing?: string;
    aliases?: string;
    policy?: string;
  };
  /** Node specs to install (skipped entries removed, duplicate ids resolved: last wins). */
  nodeSpecs?: NodeSpec[];
  /** The same nodes, normalized. */
  nodes?: Node[];
  /** The aliases to install, by alias name; absent when the config has no `aliases` section. */
  aliases?: Map<string, Alias>;
  /**
   * The pricing rules to install, by served model (`'*'` = fallback); absent when the config has no
   * `pricing` section.
   */
  pricing?: Map<string, PricingRule>;
  /** Present when any of policies, default_policy, names, keys is. */
  policySet?: PolicySet;
  /** The routing keys this config sets. */
  routing: Partial<RoutingSettings>;
  /** The admin key this config resolves to (with the explicit key and SKEID_ADMIN_API_KEY). */
  adminKey: AdminKeyResolution;
  /** Set when the registry is enabled. */
  registry?: RegistrySettings;
  /** Set when the manifest is enabled. */
  manifest?: ManifestSettings;
  /** Customer key id → canonical JSON of its manifest. */
  manifests: Map<string, string>;
  /** The usage store section (`usage_store`, or the older `usage_db_path`), when present. */
  usageStore?: UsageStoreSection;
  /** The `responses` section (the Responses face's store), defaults when absent. */
  responses: ResponsesSettings;
  /** Not errors, but worth saying (skipped entries, duplicate ids, ignored keys). */
  warnings: ConfigIssue[];
}

/** The config file is not there (a distinct case: `skeid check` exits 2, a reload keeps going). */
export class ConfigFileMissingError extends Error {
  /** `path` is the config file that was not found. */
  constructor(readonly path: string) {
    super(`config file not found: ${path}`);
    this.name = "ConfigFileMissingError";
  }
}

/** Parsed YAML config text, not yet validated: enough to tell whether it changed. */
export interface ParsedConfig {
  /** The document as plain data (`undefined` for an empty document). */
  value: unknown;
  /** The source line of the deepest part of a config path that exists, for error messages. */
  lineOf: (path: readonly PathSegment[]) => number | undefined;
  /** See {@link configDigest}. */
  digest: string;
}

/** Parses YAML text (syntax errors throw ConfigLoadError with line and column). */
export function parseConfigText(text: string, source?: string): ParsedConfig {
  const parsed = parseYaml(text, source);
  return { value: parsed.value, lineOf: parsed.lineOf, digest: configDigest(parsed.value) };
}

/**
 * Digest of the sections Skeid reads (canonical JSON, so key order, comments and keys Skeid
 * ignores change nothing): the change detector of a config.
 */
export function configDigest(value: unknown): string {
  const read: Record<string, unknown> = {};
  if (isRecord(value)) {
    for (const key of TOP_LEVEL_KEYS) {
      if (key in value) read[key] = value[key];
    }
  }
  return digestOf(read);
}

/** Parses and loads YAML text. Throws ConfigLoadError. */
export function loadConfigText(text: string, opts: LoadOptions): LoadedConfig {
  const parsed = parseConfigText(text, opts.source);
  return loadConfigValue(parsed.value, opts, parsed.lineOf);
}

/** Reads and loads a YAML file. Throws ConfigFileMissingError or ConfigLoadError. */
export async function loadConfigFile(path: string, opts: LoadOptions): Promise<LoadedConfig> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new ConfigFileMissingError(path);
    throw new ConfigLoadError([{ path: "", message: `cannot read: ${errorMessage(e)}` }], path);
  }
  return loadConfigText(text, { ...opts, source: opts.source ?? path });
}

interface Located {
  segments: PathSegment[];
  issue: ConfigIssue;
}

/**
 * Loads an already parsed config (a YAML document's data, or a mapping built in code).
 * `lineOf` maps a config path to its source line, when there is a source.
 */
export function loadConfigValue(
  value: unknown,
  opts: LoadOptions,
  lineOf: (path: readonly PathSegment[]) => number | undefined = () => undefined,
): LoadedConfig {
  const errors: Located[] = [];
  const warnings: Located[] = [];
  const err = (segments: PathSegment[], message: string) =>
    errors.push({ segments, issue: { path: formatPath(segments), message } });
  const warn = (segments: PathSegment[], message: string) =>
    warnings.push({ segments, issue: { path: formatPath(segments), message } });
  const finish = (list: Located[]): ConfigIssue[] =>
    list.map(({ segments, issue }) => ({ ...issue, line: lineOf(segments) }))
      .sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));

  const root = value === null || value === undefined ? {} : value;
  if (!isRecord(root)) {
    throw new ConfigLoadError(
      [{ path: "", line: lineOf([]), message: "the config must be a mapping of sections" }],
      opts.source,
    );
  }

  // Each section is checked on its own, so one bad section does not hide errors in the others.
  const config: Record<string, unknown> = {};
  const shape = configSchema.shape as Record<string, (typeof configSchema.shape)[keyof Config]>;
  for (const key of Object.keys(shape)) {
    if (!(key in root)) continue;
    const result = shape[key].safeParse(root[key]);
    if (result.success) config[key] = result.data;
    else for (const e of issuesFromZod(result.error, root[key], [key])) errors.push(e);
  }
  const cfg = config as Config;
  // A registry block with an unknown key still gets its other checks, so one run lists all.
  let registryBlock = cfg.registry;
  if (!("registry" in config) && isRecord(root.registry)) {
    const lenient = registrySchema.loose().safeParse(root.registry);
    if (lenient.success) registryBlock = lenient.data;
  }
  const valid = (key: keyof Config) => key in config;

  if (isRecord(root.routing)) {
    for (const key of Object.keys(root.routing)) {
      if (!(key in routingSchema.shape)) {
        warn(["routing", key], `unknown routing key, ignored (known: ${ROUTING_KEYS.join(", ")})`);
      }
    }
  }

  // ---- nodes ----
  let nodeSpecs: NodeSpec[] | undefined;
  let nodes: Node[] | undefined;
  if (valid("nodes") && cfg.nodes !== undefined) {
    const byId = new Map<string, { index: number; spec: NodeSpec; node: Node }>();
    (cfg.nodes ?? []).forEach((entry, i) => {
      if (!isRecord(entry)) {
        err(["nodes", i], "must be a mapping (a node needs at least id and url)");
        return;
      }
      if (blank(entry.id) || blank(entry.url)) {
        warn(["nodes", i], "skipped: a node needs both id and url");
        return;
      }
      for (const p of validateRegistryProbeBlock(entry.capacity)) {
        err(["nodes", i, "capacity", ...p.segments], p.message);
      }
      let node: Node | undefined;
      try {
        node = normalizeNode(entry);
      } catch (e) {
        const field = e instanceof NodeSpecError && e.field ? pathSegments(entry, e.field) : [];
        err(["nodes", i, ...field], errorMessage(e));
        return;
      }
      if (!node) {
        warn(["nodes", i], "skipped: a node needs both id and url");
        return;
      }
      if (node.api_key_env && !node.api_key_ref && !opts.env(node.api_key_env)) {
        // DESIGN decision 1: such a node is never sent the client's credentials instead.
        warn(
          ["nodes", i, "api_key_env"],
          `variable ${node.api_key_env} is not set: node '${node.id}' has no upstream key and ` +
            "is skipped by requests until it has one",
        );
      }
      const earlier = byId.get(node.id);
      if (earlier) {
        warn(
          ["nodes", i, "id"],
          `duplicate node id '${node.id}' (also nodes[${earlier.index}]); the later entry wins`,
        );
        byId.delete(node.id);
      }
      byId.set(node.id, { index: i, spec: entry, node });
    });
    nodeSpecs = [...byId.values()].map((v) => v.spec);
    nodes = [...byId.values()].map((v) => v.node);
  }

  // ---- aliases ----
  let aliases: Map<string, Alias> | undefined;
  if (valid("aliases") && cfg.aliases !== undefined) {
    aliases = new Map();
    for (const [name, spec] of Object.entries(cfg.aliases ?? {})) {
      try {
        aliases.set(name, normalizeAlias(name, spec));
      } catch (e) {
        let rel = e instanceof AliasError && e.path ? pathSegments(spec, e.path) : [];
        // A bare list of tiers: the core still names it `tiers[i]`; the file has no `tiers` key.
        if (Array.isArray(spec) && rel[0] === "tiers") rel = rel.slice(1);
        let message = errorMessage(e).replace(`alias '${name}': `, "");
        if (e instanceof AliasError && e.path && message.startsWith(`${e.path} `)) {
          message = message.slice(e.path.length + 1);
        }
        err(["aliases", name, ...rel], message);
      }
    }
  }

  // ---- pricing ----
  let pricing: Map<string, PricingRule> | undefined;
  if (valid("pricing") && cfg.pricing !== undefined) {
    pricing = new Map();
    for (const [model, raw] of Object.entries(cfg.pricing ?? {})) {
      try {
        pricing.set(model, validatePricingRule(model, raw));
      } catch (e) {
        const message = errorMessage(e).replace(`pricing for '${model}': `, "");
        const key = /^(\w+) must be/.exec(message)?.[1];
        const deeper = key !== undefined && isRecord(raw) && key in raw;
        err(deeper ? ["pricing", model, key] : ["pricing", model], message);
      }
    }
  }

  // ---- policies, default_policy, names, keys ----
  let policySet: PolicySet | undefined;
  const policyKeys = ["policies", "default_policy", "names", "keys"] as const;
  const policyDeclared = policyKeys.some((k) => cfg[k] !== undefined);
  const policyValid = policyKeys.every((k) => !(k in root) || valid(k));
  if (policyDeclared && policyValid) {
    try {
      policySet = buildPolicySet({
        policies: cfg.policies ?? undefined,
        default_policy: cfg.default_policy ?? null,
        names: cfg.names ?? undefined,
        keys: cfg.keys ?? undefined,
      });
      for (const w of policySet.warnings) warn(["keys"], w);
    } catch (e) {
      if (e instanceof PolicyError) {
        const segments = pathSegments(root, e.path);
        const message = errorMessage(e).replace(new RegExp(`^${escapeRe(e.path)}: `), "");
        err(segments, message);
      } else err(["policies"], errorMessage(e));
    }
  }

  // ---- admin key, registry ----
  const adminKey = resolveAdminKey(cfg, opts.env, opts.explicitAdminKey);
  let registry: RegistrySettings | undefined;
  if (registryBlock !== undefined) {
    const r = resolveRegistry(registryBlock, {
      env: opts.env,
      hasAdminKey: adminKey.key !== "",
      hostname: opts.hostname ?? defaultHostname,
    });
    for (const p of r.problems) err(["registry", ...p.segments], p.message);
    registry = r.settings;
  }

  // ---- manifest ----
  let manifest: ManifestSettings | undefined;
  const manifests = new Map<string, string>();
  if (valid("manifest")) {
    const m = resolveManifest(cfg.manifest);
    for (const p of m.problems) err(["manifest", ...p.segments], p.message);
    manifest = m.settings;
    if (manifest && valid("keys")) {
      const { grants, problems } = manifestGrants(cfg.keys);
      for (const p of problems) err(["keys", ...p.segments], p.message);
      const reach = {
        nodes: nodes ?? opts.currentNodes?.() ?? [],
        aliases: aliases ?? opts.currentAliases?.() ?? new Map<string, Alias>(),
      };
      const policyOk = !policyDeclared || policySet !== undefined;
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
            err(
              ["keys", grant.entry, "manifest", "models", i],
              `model '${model}' cannot be reached by this key: ${why}`,
            );
          });
        }
        manifests.set(keyId, buildManifest(manifest, grant.models));
      }
    }
  }

  // ---- usage store ----
  let usageStore: UsageStoreSection | undefined;
  const storeRaw = cfg.usage_store ??
    (cfg.usage_db_path ? { backend: "sqlite", sqlite_path: cfg.usage_db_path } : undefined);
  const storeInvalid = ("usage_store" in root && !valid("usage_store")) ||
    ("usage_db_path" in root && !valid("usage_db_path"));
  if (storeRaw && !storeInvalid) {
    const origin = cfg.usage_store ? "usage_store" : "usage_db_path";
    const normalize = opts.normalizeUsageStore ?? normalizeUsageStoreConfig;
    try {
      const normalized = normalize(storeRaw, {
        usageDbPath: cfg.usage_db_path ?? undefined,
        env: opts.env,
      });
      usageStore = { origin, raw: storeRaw, normalized, digest: digestOf(storeRaw) };
    } catch (e) {
      const message = errorMessage(e);
      const m = /^usage_store\.([\w.]+):\s*(.*)$/s.exec(message);
      if (origin === "usage_db_path") {
        err(["usage_db_path"], message.replace(/^usage_store:\s*/, ""));
      } else if (m) err(["usage_store", ...m[1].split(".")], m[2]);
      else err(["usage_store"], message.replace(/^usage_store:\s*/, ""));
    }
  }

  // ---- responses ----
  const usageBackend = usageStore?.normalized.backend ??
    (opts.env("SKEID_USAGE_DB") ? "sqlite" : undefined);
  const responses = loadResponses(root.responses, usageBackend);
  for (const issue of responses.issues) err(issue.segments, issue.message);

  if (errors.length > 0) throw new ConfigLoadError(finish(errors), opts.source);

  const routing: Partial<RoutingSettings> = {};
  for (const key of ROUTING_KEYS) {
    const v = cfg.routing?.[key];
    if (v !== undefined && v !== null) (routing as Record<string, unknown>)[key] = v;
  }
  const sections: LoadedConfig["sections"] = {};
  if (cfg.nodes !== undefined) sections.nodes = digestOf(root.nodes ?? []);
  if (cfg.pricing !== undefined) sections.pricing = digestOf(root.pricing ?? {});
  if (cfg.aliases !== undefined) sections.aliases = digestOf(root.aliases ?? {});
  if (policyDeclared) {
    sections.policy = digestOf(policyKeys.map((k) => root[k] ?? null));
  }
  return {
    config: cfg,
    digest: configDigest(root),
    sections,
    nodeSpecs,
    nodes,
    aliases,
    pricing,
    policySet,
    routing,
    adminKey,
    registry,
    manifest,
    manifests,
    usageStore,
    responses: responses.value,
    warnings: finish(warnings),
  };
}

function blank(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === "string" && v.trim() === "");
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function defaultHostname(): string {
  try {
    return Deno.hostname();
  } catch {
    return "skeid";
  }
}
