/**
 * The variables Skeid reads as its own secrets, which a node's `api_key_env` may never name: a
 * node's key is sent upstream as a bearer, so a node naming the admin key's variable would hand
 * that key (or the registry's HMAC secret, a store's password, the OpenBao credentials) to
 * whoever runs the upstream. Checked at config load and by the admin API (`POST /skeid/nodes`).
 *
 * @module
 */
import type { Config } from "./schema.ts";
import { isJsonObject } from "../core/json.ts";

/** Variable name → where Skeid reads it as its own secret (a config path or "the environment"). */
export type OwnSecrets = ReadonlyMap<string, string>;

/** Variables read as secrets whatever the config says. */
const ALWAYS: readonly [string, string][] = [
  ["SKEID_ADMIN_API_KEY", "the admin key's default variable"],
  ["PGPASSWORD", "the PostgreSQL usage store's default password variable"],
  ["SKEID_KEY_PEPPER", "the issued keys' default pepper variable"],
];

/** The OpenBao login and settings (`OPENBAO_ROLE_ID`, `OPENBAO_SECRET_ID`, …). */
const OPENBAO_PREFIX = "OPENBAO_";

/** The secret variables the config names, with the path naming each, plus the fixed ones. */
export function ownSecretVariables(config: Config | undefined): OwnSecrets {
  const own = new Map<string, string>(ALWAYS);
  const add = (name: unknown, path: string) => {
    if (typeof name === "string" && name.trim() !== "" && !own.has(name.trim())) {
      own.set(name.trim(), path);
    }
  };
  if (config) {
    add(config.admin_api_key_env, "admin_api_key_env");
    add(config.admin?.api_key_env, "admin.api_key_env");
    add(config.registry?.secret_env, "registry.secret_env");
    add(config.registry?.read_key_env, "registry.read_key_env");
    if (isJsonObject(config.api_keys)) add(config.api_keys.pepper_env, "api_keys.pepper_env");
    if (isJsonObject(config.usage_store)) {
      add(config.usage_store.password_env, "usage_store.password_env");
    }
    (config.nodes ?? []).forEach((node, i) => {
      // A registry probe's credentials read another Skeid's snapshot: secrets too.
      const capacity = isJsonObject(node) ? node.capacity : undefined;
      if (!isJsonObject(capacity)) return;
      for (const key of ["secret_env", "read_key_env", "admin_key_env"]) {
        add(capacity[key], `nodes[${i}].capacity.${key}`);
      }
    });
  }
  return own;
}

/**
 * Why a node's `api_key_env` may not be used, or undefined when it may: it names one of Skeid's
 * own secret variables.
 */
export function ownSecretProblem(apiKeyEnv: unknown, own: OwnSecrets): string | undefined {
  if (typeof apiKeyEnv !== "string") return undefined;
  const name = apiKeyEnv.trim();
  const where = own.get(name) ??
    (name.startsWith(OPENBAO_PREFIX) ? "the OpenBao credentials" : undefined);
  if (where === undefined) return undefined;
  return `variable ${name} is one of Skeid's own secrets (${where}); a node's key is sent ` +
    "upstream, so it may not name it";
}
