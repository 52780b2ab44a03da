/**
 * The `responses` config section: the Responses face's store (ADR 0028). `store: true` keeps
 * responses in the usage store's database, so it needs a sqlite or postgresql `usage_store`.
 *
 * @module
 */
import { RESPONSES_DEFAULTS, type ResponsesSettings } from "../responses/store.ts";
import type { PathSegment } from "./errors.ts";
import { isRecord } from "./yaml.ts";

/** One thing wrong with the section, its path below `responses`. */
export interface ResponsesProblem {
  /** Path below `responses` (`["ttl_s"]`). */
  segments: PathSegment[];
  /** What is wrong. */
  message: string;
}

const KEYS = ["store", "ttl_s", "max_per_key"];

/**
 * The section as settings, and every problem in it. `usageBackend` is the usage store's backend
 * (undefined: none configured): keeping responses needs sqlite or postgresql.
 */
export function resolveResponses(
  raw: unknown,
  usageBackend: string | undefined,
): { settings: ResponsesSettings; problems: ResponsesProblem[] } {
  const settings = { ...RESPONSES_DEFAULTS };
  const problems: ResponsesProblem[] = [];
  if (raw === undefined || raw === null) return { settings, problems };
  if (!isRecord(raw)) {
    problems.push({ segments: [], message: "must be a mapping (store, ttl_s, max_per_key)" });
    return { settings, problems };
  }
  for (const key of Object.keys(raw)) {
    if (!KEYS.includes(key)) {
      problems.push({ segments: [key], message: `unknown key (known: ${KEYS.join(", ")})` });
    }
  }
  if (raw.store !== undefined && raw.store !== null) {
    if (typeof raw.store !== "boolean") {
      problems.push({ segments: ["store"], message: "must be true or false" });
    } else settings.store = raw.store;
  }
  for (const key of ["ttl_s", "max_per_key"] as const) {
    const v = raw[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
      problems.push({ segments: [key], message: "must be a whole number of at least 1" });
    } else settings[key] = v;
  }
  if (settings.store && usageBackend !== "sqlite" && usageBackend !== "postgresql") {
    problems.push({
      segments: ["store"],
      message: usageBackend === undefined
        ? "keeping responses needs a sqlite or postgresql usage_store, and none is configured"
        : `keeping responses needs a sqlite or postgresql usage_store (usage_store.backend is ${usageBackend})`,
    });
  }
  return { settings, problems };
}
