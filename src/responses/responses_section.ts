/**
 * The `responses` config section: the Responses face's store (ADR 0028). `store: true` keeps
 * responses in the usage store's database, so it needs a sqlite or postgresql `usage_store`.
 *
 * @module
 */
import { RESPONSES_DEFAULTS, type ResponsesSettings } from "./response_store.ts";
import type { PathSegment } from "../config/errors.ts";
import { isJsonObject } from "../core/json.ts";

/** One thing wrong with the section, its path from the config's root (`["responses", "ttl_s"]`). */
export interface ResponsesIssue {
  /** Path from the config's root. */
  segments: PathSegment[];
  /** What is wrong, without the path. */
  message: string;
}

const KEYS = ["store", "ttl_s", "max_per_key", "max_response_bytes", "max_bytes_per_key"];

/**
 * The section's settings (the defaults where it says nothing), and every issue in it, shaped as a
 * config section loader answers. `usageBackend` is the usage store's backend (undefined: none
 * configured): keeping responses needs sqlite or postgresql.
 */
export function loadResponses(
  raw: unknown,
  usageBackend: string | undefined,
): { value: ResponsesSettings; issues: ResponsesIssue[] } {
  const settings = { ...RESPONSES_DEFAULTS };
  const issues: ResponsesIssue[] = [];
  const at = (...path: PathSegment[]): PathSegment[] => ["responses", ...path];
  const done = () => ({ value: settings, issues });
  if (raw === undefined || raw === null) return done();
  if (!isJsonObject(raw)) {
    issues.push({ segments: at(), message: `must be a mapping (${KEYS.join(", ")})` });
    return done();
  }
  for (const key of Object.keys(raw)) {
    if (!KEYS.includes(key)) {
      issues.push({ segments: at(key), message: `unknown key (known: ${KEYS.join(", ")})` });
    }
  }
  if (raw.store !== undefined && raw.store !== null) {
    if (typeof raw.store !== "boolean") {
      issues.push({ segments: at("store"), message: "must be true or false" });
    } else settings.store = raw.store;
  }
  for (const key of ["ttl_s", "max_per_key", "max_response_bytes", "max_bytes_per_key"] as const) {
    const v = raw[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
      issues.push({ segments: at(key), message: "must be a whole number of at least 1" });
    } else settings[key] = v;
  }
  if (settings.max_response_bytes > settings.max_bytes_per_key) {
    issues.push({
      segments: at("max_response_bytes"),
      message: `must not be over max_bytes_per_key (${settings.max_bytes_per_key}): a key ` +
        "could never keep such a response",
    });
  }
  if (settings.store && usageBackend !== "sqlite" && usageBackend !== "postgresql") {
    issues.push({
      segments: at("store"),
      message: usageBackend === undefined
        ? "keeping responses needs a sqlite or postgresql usage_store, and none is configured"
        : `keeping responses needs a sqlite or postgresql usage_store (usage_store.backend is ${usageBackend})`,
    });
  }
  return done();
}
