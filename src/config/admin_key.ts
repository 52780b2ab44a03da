/**
 * The admin API key in force (seed "admin", skeid k64): an explicit key (`--admin-api-key`,
 * `setAdminApiKey`) outranks the config; in the config the first present of `admin_api_key`,
 * `admin_api_key_env`, `admin.api_key`, `admin.api_key_env` decides (present but empty, or naming
 * an unset variable, turns the admin API off); `SKEID_ADMIN_API_KEY` stands in when the config
 * names none of the four. `''` means off (the admin routes answer 404).
 *
 * @module
 */
import type { Config } from "./config_schema.ts";

/** Where the admin key in force came from (for logs; never the key itself). */
export type AdminKeySource =
  | "explicit"
  | "admin_api_key"
  | "admin_api_key_env"
  | "admin.api_key"
  | "admin.api_key_env"
  | "SKEID_ADMIN_API_KEY"
  | "none";

/** The resolved admin key and where it came from. */
export interface AdminKeyResolution {
  /** The admin key; `''` = admin API off. */
  key: string;
  /** Where the admin key came from (for logs; never the key itself). */
  source: AdminKeySource;
  /** The variable the source names, when it is not set (the admin API is off because of it). */
  unset?: string;
}

/** Why the admin API is off when the config meant it on (a named variable not set), else null. */
export function adminKeyProblem(r: AdminKeyResolution): string | null {
  if (r.key !== "" || r.unset === undefined) return null;
  return `the admin API is off: ${r.source} names ${r.unset}, which is unset or empty`;
}

/** Resolves the admin key in the seed's order. `env` is read now (apply time). */
export function resolveAdminKey(
  config: Pick<Config, "admin_api_key" | "admin_api_key_env" | "admin"> | undefined,
  env: (name: string) => string | undefined,
  explicit?: string,
): AdminKeyResolution {
  if (explicit !== undefined && explicit !== "") return { key: explicit, source: "explicit" };
  const fromEnv = (
    name: string | null | undefined,
    source: AdminKeySource,
  ): AdminKeyResolution => {
    if (name === null || name === undefined || name === "") return { key: "", source };
    const key = env(name) ?? "";
    return key === "" ? { key, source, unset: name } : { key, source };
  };
  if (config) {
    // `undefined` = absent; null (written empty) is present and turns the admin API off.
    if (config.admin_api_key !== undefined) {
      return { key: config.admin_api_key ?? "", source: "admin_api_key" };
    }
    if (config.admin_api_key_env !== undefined) {
      return fromEnv(config.admin_api_key_env, "admin_api_key_env");
    }
    const admin = config.admin;
    if (admin) {
      if (admin.api_key !== undefined) return { key: admin.api_key ?? "", source: "admin.api_key" };
      if (admin.api_key_env !== undefined) {
        return fromEnv(admin.api_key_env, "admin.api_key_env");
      }
    }
  }
  const fallback = env("SKEID_ADMIN_API_KEY") ?? "";
  return fallback === ""
    ? { key: "", source: "none" }
    : { key: fallback, source: "SKEID_ADMIN_API_KEY" };
}
