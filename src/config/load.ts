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
import { fenceIssues, type OwnSecrets, ownSecretVariables } from "./own_secrets.ts";
import type { Alias, Node, NodeSpec, PricingRule, RoutingSettings } from "../core/types.ts";
import type { PolicySet } from "../core/policies.ts";
import type { NormalizedUsageStoreConfig, NormalizeOptions } from "../usage/config.ts";
import { digestOf } from "./canonical.ts";
import { loadResponses } from "../responses/responses_section.ts";
import { loadApiKeys } from "../customer_keys/api_keys_section.ts";
import { loadJwt } from "../customer_keys/jwt_section.ts";
import { RESPONSES_DEFAULTS, type ResponsesSettings } from "../responses/response_store.ts";
import { type ConfigIssue, ConfigLoadError, formatPath, type PathSegment } from "./errors.ts";
import { type AdminKeyResolution, resolveAdminKey } from "./admin_key.ts";
import type { RegistrySettings } from "./registry.ts";
import type { ManifestSettings } from "./provider_manifest.ts";
import {
  loadAliases,
  loadManifest,
  loadNodes,
  loadPolicies,
  loadPricing,
  loadRegistry,
  loadUsageStore,
  POLICY_KEYS,
  policyDeclared,
  routingWarnings,
  type Section,
  type SectionInput,
  type SectionIssue,
  type UsageStoreSection,
} from "./sections.ts";
import {
  type Config,
  configSchema,
  issuesFromZod,
  ROUTING_KEYS,
  TOP_LEVEL_KEYS,
} from "./config_schema.ts";
import { errorMessage } from "../error_message.ts";
import { parseYaml } from "./yaml.ts";
import { isJsonObject } from "../core/json.ts";

export type { UsageStoreSection };

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

/** A config that loaded: the validated sections and everything built from them. */
export interface LoadedConfig {
  /** The sections as written (validated); names of variables, never their values. */
  config: Config;
  /** Digest of every section Skeid reads: the change detector of the whole file. */
  digest: string;
  /** Digest of each top-level section as written (what a change or a dry run names). */
  topLevelDigests: Record<string, string>;
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
  /** The variables read as Skeid's own secrets under this config (see own_secrets.ts). */
  ownSecrets: OwnSecrets;
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
  if (isJsonObject(value)) {
    for (const key of TOP_LEVEL_KEYS) {
      if (key in value) read[key] = value[key];
    }
  }
  return digestOf(read);
}

/**
 * Digest of each top-level section Skeid reads, as written. Computed where the document's
 * {@link configDigest} is — in the parse worker for a large config — because a `keys:` section
 * of megabytes costs the serving thread hundreds of milliseconds to serialize.
 */
export function topLevelDigests(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (isJsonObject(value)) {
    for (const key of TOP_LEVEL_KEYS) {
      if (key in value) out[key] = digestOf(value[key] ?? null);
    }
  }
  return out;
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

/**
 * Loads an already parsed config (a YAML document's data, or a mapping built in code).
 * `lineOf` maps a config path to its source line, when there is a source.
 */
export function loadConfigValue(
  value: unknown,
  opts: LoadOptions,
  lineOf: (path: readonly PathSegment[]) => number | undefined = () => undefined,
): LoadedConfig {
  return locateIssues(buildConfig(value, opts), opts.source, lineOf);
}

/** What a parse off the serving path already computed (see parse_worker.ts). */
export interface Prebuilt {
  /** {@link configDigest} of the document. */
  digest: string;
  /** {@link topLevelDigests} of the document. */
  topLevelDigests: Record<string, string>;
  /** The policy set and its section digest, when the policy keys built without an error. */
  policy?: { set: PolicySet; digest: string };
}

/** A config built, its issues not yet located by line. */
export interface BuiltConfig {
  /** The loaded config without its warnings; absent when an error was found. */
  loaded?: Omit<LoadedConfig, "warnings">;
  /** Every error and warning, by path segments. */
  issues: SectionIssue[];
}

/** Runs each section's schema: the sections that pass, and the issues of those that do not. */
export function sectionInput(
  root: Record<string, unknown>,
  env: (name: string) => string | undefined,
): { input: SectionInput; issues: SectionIssue[] } {
  // Each section is checked on its own, so one bad section does not hide errors in the others.
  const issues: SectionIssue[] = [];
  const config: Record<string, unknown> = {};
  const shape = configSchema.shape as Record<string, (typeof configSchema.shape)[keyof Config]>;
  for (const key of Object.keys(shape)) {
    if (!(key in root)) continue;
    const result = shape[key].safeParse(root[key]);
    if (result.success) config[key] = result.data;
    else {
      for (const e of issuesFromZod(result.error, root[key], [key])) {
        issues.push({ segments: e.segments, message: e.issue.message });
      }
    }
  }
  return { input: { root, cfg: config as Config, valid: (key) => key in config, env }, issues };
}

/** The policy section's change detector. */
export function policyDigest(root: Record<string, unknown>): string {
  return digestOf(POLICY_KEYS.map((k) => root[k] ?? null));
}

/** Builds every section; what `prebuilt` holds is taken instead of computed again. */
export function buildConfig(value: unknown, opts: LoadOptions, prebuilt?: Prebuilt): BuiltConfig {
  const root = value === null || value === undefined ? {} : value;
  if (!isJsonObject(root)) {
    return { issues: [{ segments: [], message: "the config must be a mapping of sections" }] };
  }
  const { input, issues } = sectionInput(root, opts.env);
  const { cfg } = input;
  const take = <T>(section: Section<T>): T | undefined => {
    issues.push(...section.issues);
    return section.value;
  };

  issues.push(...routingWarnings(input));
  // The secret fence over every field naming a variable, wherever it sits.
  // Walked here, once: the manager's copy of `keys` is parsed only when something reads it.
  const ownSecrets = ownSecretVariables(root);
  issues.push(...fenceIssues(root, "", ownSecrets));
  const nodes = take(loadNodes(input));
  const aliases = take(loadAliases(input));
  const pricing = take(loadPricing(input));
  const policySet = take(loadPolicies(input, prebuilt?.policy?.set));
  const adminKey = resolveAdminKey(cfg, opts.env, opts.explicitAdminKey);
  const registry = take(loadRegistry(input, adminKey, opts.hostname ?? defaultHostname));
  const manifest = take(loadManifest(input, {
    nodes: nodes?.nodes ?? opts.currentNodes?.() ?? [],
    aliases: aliases ?? opts.currentAliases?.() ?? new Map<string, Alias>(),
    policySet,
    policyDeclared: policyDeclared(cfg),
  }));
  const usageStore = take(loadUsageStore(input, opts.normalizeUsageStore));
  const responses = take(loadResponses(
    root.responses,
    usageStore?.normalized.backend ?? (opts.env("SKEID_USAGE_DB") ? "sqlite" : undefined),
  ));
  issues.push(...loadApiKeys(root.api_keys).issues, ...loadJwt(root.jwt).issues);
  if (issues.some((i) => !i.warning)) return { issues };

  const routing: Partial<RoutingSettings> = {};
  for (const key of ROUTING_KEYS) {
    const v = cfg.routing?.[key];
    if (v !== undefined && v !== null) (routing as Record<string, unknown>)[key] = v;
  }
  const sections: LoadedConfig["sections"] = {};
  if (cfg.nodes !== undefined) sections.nodes = digestOf(root.nodes ?? []);
  if (cfg.pricing !== undefined) sections.pricing = digestOf(root.pricing ?? {});
  if (cfg.aliases !== undefined) sections.aliases = digestOf(root.aliases ?? {});
  if (policyDeclared(cfg)) sections.policy = prebuilt?.policy?.digest ?? policyDigest(root);
  return {
    loaded: {
      config: cfg,
      digest: prebuilt?.digest ?? configDigest(root),
      topLevelDigests: prebuilt?.topLevelDigests ?? topLevelDigests(root),
      sections,
      nodeSpecs: nodes?.specs,
      nodes: nodes?.nodes,
      aliases,
      pricing,
      policySet,
      routing,
      adminKey,
      registry,
      manifest: manifest?.settings,
      manifests: manifest?.manifests ?? new Map(),
      usageStore,
      responses: responses ?? { ...RESPONSES_DEFAULTS },
      ownSecrets,
    },
    issues,
  };
}

/**
 * Prints every issue's path, once, with its line: the loaded config with its warnings, or a
 * ConfigLoadError listing every error in source order.
 */
export function locateIssues(
  built: BuiltConfig,
  source: string | undefined,
  lineOf: (path: readonly PathSegment[]) => number | undefined,
): LoadedConfig {
  const located = (warning: boolean): ConfigIssue[] =>
    built.issues.filter((i) => (i.warning ?? false) === warning)
      .map((i) => ({ path: formatPath(i.segments), line: lineOf(i.segments), message: i.message }))
      .sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  if (!built.loaded) throw new ConfigLoadError(located(false), source);
  return { ...built.loaded, warnings: located(true) };
}

function defaultHostname(): string {
  try {
    return Deno.hostname();
  } catch {
    return "skeid";
  }
}
