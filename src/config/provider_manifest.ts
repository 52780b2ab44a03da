/**
 * The provider manifest (seed "Provider Manifest", schema v1): per customer key, the models that
 * customer key's own `keys:` entry grants, on every published face, with capability claims cut
 * per face to what that face carries upstream (the faces' own table, `FACE_MANIFESTS`). Built
 * and validated once at config load and stored as canonical JSON under the customer key id, so a
 * request costs one lookup and one customer key's manifest cannot be served for another.
 *
 * @module
 */
import type { Alias, Node, Policy } from "../core/types.ts";
import type { FaceName } from "../faces/face.ts";
import { FACE_MANIFESTS, FACE_NAMES, faceEndpointUrl } from "../faces/face_manifest.ts";
import type { PathSegment } from "./errors.ts";
import { canonicalJson } from "./canonical.ts";
import type { ManifestConfig } from "./config_schema.ts";
import { isJsonObject } from "../core/json.ts";

/** Every capability flag a manifest model may claim (Langertha `model_capabilities`). */
export const MODEL_CAPABILITIES: readonly string[] = [
  "chat",
  "streaming",
  "tools_native",
  "tools_hermes",
  "tool_choice_auto",
  "tool_choice_any",
  "tool_choice_none",
  "tool_choice_named",
  "parallel_tool_use",
  "response_format_json_object",
  "response_format_json_schema",
  "reasoning_effort",
  "thinking_budget",
  "temperature",
  "seed",
  "system_prompt",
  "response_size",
  "prompt_cache",
  "prompt_cache_key",
  "server_tools",
  "image_input",
];

const DEFAULT_CLAIMS: Readonly<Record<string, boolean>> = { chat: true, streaming: true };

/** An enabled manifest section, resolved. */
export interface ManifestSettings {
  /** Where clients reach Skeid, without a trailing slash. */
  publicUrl: string;
  /** The origin of publicUrl (the manifest's `issuer`). */
  issuer: string;
  /** The manifest's `provider_id` (default `skeid`). */
  providerId: string;
  /**
   * The faces the manifest publishes endpoints for, in the order given (default all), each once.
   */
  faces: FaceName[];
  /** Declared claims per requested model name. */
  capabilities: Map<string, Record<string, boolean>>;
}

/** A problem, located below `manifest` (or wherever `segments` says for grants). */
export interface ManifestProblem {
  /** Where the problem is: config path segments below `manifest`. */
  segments: PathSegment[];
  /** What is wrong there. */
  message: string;
}

/** Resolves the section: no settings when absent or not enabled. */
export function resolveManifest(
  section: ManifestConfig | null | undefined,
): { settings?: ManifestSettings; problems: ManifestProblem[] } {
  if (!section || section.enabled !== true) return { problems: [] };
  const problems: ManifestProblem[] = [];
  let publicUrl = "";
  let issuer = "";
  const raw = section.public_url ?? "";
  if (raw === "") {
    problems.push({
      segments: ["public_url"],
      message: "required when the manifest is enabled (where clients reach Skeid)",
    });
  } else {
    let url: URL | undefined;
    try {
      url = new URL(raw);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
      problems.push({ segments: ["public_url"], message: "must be an http(s) URL" });
    } else {
      publicUrl = raw.replace(/\/+$/, "");
      issuer = url.origin;
    }
  }
  const faces: FaceName[] = [];
  (section.faces ?? FACE_NAMES).forEach((face, i) => {
    const f = face.trim().toLowerCase();
    if (!(FACE_NAMES as readonly string[]).includes(f)) {
      problems.push({
        segments: ["faces", i],
        message: `unknown face '${face}' (expected one of: ${FACE_NAMES.join(", ")})`,
      });
    } else if (!faces.includes(f as FaceName)) faces.push(f as FaceName);
  });
  if (section.faces && section.faces.length === 0) {
    problems.push({ segments: ["faces"], message: "must name at least one face" });
  }
  const carried = new Set(faces.flatMap((f) => FACE_MANIFESTS[f].capabilities));
  const capabilities = new Map<string, Record<string, boolean>>();
  for (const [model, claims] of Object.entries(section.capabilities ?? {})) {
    const declared: Record<string, boolean> = {};
    for (const [flag, on] of Object.entries(claims ?? {})) {
      if (!MODEL_CAPABILITIES.includes(flag)) {
        problems.push({
          segments: ["capabilities", model, flag],
          message: `unknown capability '${flag}' (expected one of: ${
            MODEL_CAPABILITIES.join(", ")
          })`,
        });
      } else if (on && !carried.has(flag)) {
        problems.push({
          segments: ["capabilities", model, flag],
          message: `capability '${flag}' is carried by no published face (${faces.join(", ")})`,
        });
      } else declared[flag] = on;
    }
    capabilities.set(model, declared);
  }
  if (problems.length > 0) return { problems };
  return {
    settings: {
      publicUrl,
      issuer,
      providerId: section.provider_id ?? "skeid",
      faces: FACE_NAMES.filter((f) => faces.includes(f)),
      capabilities,
    },
    problems,
  };
}

/** One customer key's manifest grant as written under `keys:`. */
export interface ManifestGrant {
  /** The `keys:` entry (a name under `names:` or a customer key id). */
  entry: string;
  /** The models granted, as written (order kept). */
  models: string[];
}

/** Reads the `manifest: {models}` grants out of the `keys:` section. */
export function manifestGrants(
  keys: Record<string, unknown> | null | undefined,
): { grants: ManifestGrant[]; problems: ManifestProblem[] } {
  const grants: ManifestGrant[] = [];
  const problems: ManifestProblem[] = [];
  for (const [entry, spec] of Object.entries(keys ?? {})) {
    if (!isJsonObject(spec) || spec.manifest === undefined || spec.manifest === null) continue;
    const m = spec.manifest;
    if (!isJsonObject(m)) {
      problems.push({
        segments: [entry, "manifest"],
        message: "must be a mapping {models: [...]}",
      });
      continue;
    }
    const list = typeof m.models === "string"
      ? m.models.split(/[\s,]+/).filter((s) => s !== "")
      : m.models ?? [];
    if (!Array.isArray(list) || list.some((x) => typeof x !== "string" || x === "")) {
      problems.push({
        segments: [entry, "manifest", "models"],
        message: "must be a list of model names",
      });
      continue;
    }
    grants.push({ entry, models: list as string[] });
  }
  return { grants, problems };
}

/** What a customer key could reach: the inventory and aliases that will be in force. */
export interface Reach {
  /** Nodes that will be in force (only their model and tags matter here). */
  nodes: readonly Pick<Node, "model" | "tags">[];
  /** Aliases that will be in force, by alias name. */
  aliases: ReadonlyMap<string, Alias>;
}

/**
 * Whether a customer key under `policy` (null = unrestricted) can be served `model`: its policy
 * grants the name, and it is an alias with a tier the policy does not deny, or a node model
 * served by a node carrying no denied tag (the same narrowing as `listModels`).
 */
export function canReach(model: string, policy: Policy | null, reach: Reach): boolean {
  if (policy?.models && !policy.models.has(model)) return false;
  const deny = policy?.deny_tags ?? [];
  const denied = (tags: readonly string[]) => tags.some((t) => deny.includes(t));
  const alias = reach.aliases.get(model);
  if (alias) return alias.tiers.some((tier) => !denied(tier.tags));
  return reach.nodes.some((n) => n.model === model && !denied(n.tags));
}

/** The canonical JSON (sorted object keys) of one customer key's manifest v1. */
export function buildManifest(settings: ManifestSettings, models: readonly string[]): string {
  const endpoints = settings.faces.map((face) => ({
    id: face,
    dialect: FACE_MANIFESTS[face].format,
    base_url: faceEndpointUrl(face, settings.publicUrl),
    auth_ref: "api_key",
  }));
  const entries = [];
  for (const model of [...new Set(models)].sort()) {
    const claims = { ...DEFAULT_CLAIMS, ...settings.capabilities.get(model) };
    for (const face of settings.faces) {
      const carries = FACE_MANIFESTS[face].capabilities;
      const capabilities: Record<string, boolean> = {};
      for (const [flag, on] of Object.entries(claims)) {
        if (on && carries.includes(flag)) capabilities[flag] = true;
      }
      entries.push({ id: model, endpoint_ref: face, capabilities });
    }
  }
  return canonicalJson({
    schema_version: 1,
    kind: "langertha-provider",
    provider_id: settings.providerId,
    issuer: settings.issuer,
    endpoints,
    auth: [{ id: "api_key", type: "api_key" }],
    models: entries,
    extensions: {},
  });
}
