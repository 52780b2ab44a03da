/**
 * Aliases and tiers: a client-facing model name as an ordered plan of tiers ("try here, then
 * there"). A tier waits only when it says so (`wait_ms` defaults to 0): a tier that waited by
 * default would send traffic to a paid cloud only after a delay nobody asked for.
 *
 * @module
 */
import type { Alias, Tier } from "./types.ts";
import { normalizeEngineId } from "./engines.ts";
import { normalizeTags } from "./tags.ts";
import { ConfigPathError, formatPath, type PathSegment } from "./config_path.ts";
import { isJsonObject } from "./json.ts";
import { isPickKind, PICK_KINDS, type PickKind } from "./pick.ts";

/** An alias spec that cannot be used; `path` is relative to the alias (`tiers[1].wait_ms`). */
export class AliasError extends ConfigPathError {
  /**
   * `path` is relative to the alias in its map form (`tiers[1].wait_ms`; `''` for the alias
   * itself); `segments` are relative to the spec as written (a bare list of tiers has no
   * `tiers` key: `[1, "wait_ms"]`).
   */
  constructor(
    message: string,
    readonly path: string,
    segments: readonly PathSegment[] = [],
    detail?: string,
  ) {
    super(message, segments, detail);
    this.name = "AliasError";
  }
}

/**
 * Normalizes an alias spec: `{tiers:[...]}` or a bare list of tiers. Per tier: tags, model
 * (default the alias name), engine (normalized), wait_ms (default 0, must be ≥ 0). Throws
 * AliasError on empty tiers, a scalar spec or a bad tier field.
 */
export function normalizeAlias(name: string, spec: unknown): Alias {
  if (typeof name !== "string" || name === "") throw new AliasError("alias name required", "");
  const bareList = Array.isArray(spec);
  const fail = (what: string, rel: readonly PathSegment[]): never => {
    const path = formatPath(rel);
    const segments = bareList && rel[0] === "tiers" ? rel.slice(1) : rel;
    throw new AliasError(`alias '${name}': ${path ? `${path} ` : ""}${what}`, path, segments, what);
  };
  let tiers: unknown;
  if (Array.isArray(spec)) tiers = spec;
  else if (isJsonObject(spec)) tiers = spec.tiers;
  else fail("must be a map with tiers, or a list of tiers", []);
  if (!Array.isArray(tiers)) return fail("must be a list", ["tiers"]);
  if (tiers.length === 0) fail("needs at least one tier", ["tiers"]);

  const normalized = tiers.map((tier: unknown, i): Omit<Tier, "deny_tags"> => {
    const at = ["tiers", i];
    if (!isJsonObject(tier)) return fail("must be a map", at);
    let tags: string[] = [];
    try {
      tags = normalizeTags(tier.tags);
    } catch (err) {
      fail((err as Error).message.replace(/^tags /, ""), [...at, "tags"]);
    }
    let model = name;
    if (tier.model !== undefined && tier.model !== null && tier.model !== "") {
      if (typeof tier.model !== "string" && typeof tier.model !== "number") {
        fail("must be a string", [...at, "model"]);
      }
      model = String(tier.model);
    }
    let engine = "";
    try {
      engine = normalizeEngineId(tier.engine);
    } catch (err) {
      fail((err as Error).message, [...at, "engine"]);
    }
    let waitMs = 0;
    if (tier.wait_ms !== undefined && tier.wait_ms !== null) {
      const w = typeof tier.wait_ms === "string" && tier.wait_ms.trim() !== ""
        ? Number(tier.wait_ms)
        : tier.wait_ms;
      if (typeof w !== "number" || !Number.isFinite(w) || w < 0) {
        fail("must be a number >= 0", [...at, "wait_ms"]);
      }
      waitMs = w as number;
    }
    const out: Omit<Tier, "deny_tags"> = {
      tags: Object.freeze(tags) as string[],
      model,
      engine,
      wait_ms: waitMs,
    };
    if (tier.pick !== undefined && tier.pick !== null) {
      if (!isPickKind(tier.pick)) fail(`must be one of ${PICK_KINDS.join(", ")}`, [...at, "pick"]);
      out.pick = tier.pick as PickKind;
    }
    return Object.freeze(out);
  });
  return Object.freeze({ tiers: Object.freeze(normalized) as Alias["tiers"] });
}
