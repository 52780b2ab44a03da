/**
 * The `api_keys` config section (ADR 0029): where the pepper of issued keys' hashes comes from.
 * `pepper_env` names the variable (default `SKEID_KEY_PEPPER`); the pepper itself is never in
 * the config.
 *
 * @module
 */
import type { PathSegment } from "../core/config_path.ts";
import { isJsonObject } from "../core/json.ts";
import { type ApiKeySettings, DEFAULT_PEPPER_ENV } from "./directory.ts";

/** One thing wrong with the section, its path from the config's root. */
export interface ApiKeysIssue {
  segments: PathSegment[];
  message: string;
}

const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The section's settings (defaults where it says nothing) and every issue in it. */
export function loadApiKeys(raw: unknown): { value: ApiKeySettings; issues: ApiKeysIssue[] } {
  const value: ApiKeySettings = { pepper_env: DEFAULT_PEPPER_ENV };
  const issues: ApiKeysIssue[] = [];
  if (raw === undefined || raw === null) return { value, issues };
  if (!isJsonObject(raw)) {
    issues.push({ segments: ["api_keys"], message: "must be a mapping (pepper_env)" });
    return { value, issues };
  }
  for (const key of Object.keys(raw)) {
    if (key !== "pepper_env") {
      issues.push({ segments: ["api_keys", key], message: "unknown key (known: pepper_env)" });
    }
  }
  const env = raw.pepper_env;
  if (env !== undefined && env !== null) {
    if (typeof env !== "string" || !VARIABLE.test(env)) {
      issues.push({
        segments: ["api_keys", "pepper_env"],
        message: "must be an environment variable name",
      });
    } else value.pepper_env = env;
  }
  return { value, issues };
}
