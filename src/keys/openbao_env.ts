/**
 * The OpenBao settings a process takes from its environment (OPENBAO_*). No role id or no secret
 * id means no broker at all: nodes then get their keys from `api_key_env` only.
 *
 * @module
 */
import type { EnvReader } from "../core/env.ts";

/** The OpenBao address when OPENBAO_ADDR is unset or empty. */
export const DEFAULT_OPENBAO_ADDR = "http://127.0.0.1:8200";

/** Where and how to reach OpenBao. Holds the AppRole credentials: never log this object. */
export interface OpenBaoSettings {
  /** Base URL without trailing `/` (OPENBAO_ADDR). */
  addr: string;
  /** AppRole role_id (OPENBAO_ROLE_ID). */
  roleId: string;
  /** AppRole secret_id (OPENBAO_SECRET_ID). */
  secretId: string;
  /** TLS certificate verification asked for (OPENBAO_VERIFY_SSL; on unless 0/false/no/off). */
  verifySsl: boolean;
  /** Path of a PEM file with extra CA certificates to trust (OPENBAO_CACERT), if any. */
  caCertFile?: string;
}

/** `0`, `false`, `no` or `off` (any case, surrounding space ignored) turn verification off. */
export function verifySslFromEnv(value: string | undefined): boolean {
  return value === undefined || !/^(0|false|no|off)$/i.test(value.trim());
}

/**
 * The OpenBao settings from the environment, or undefined when OPENBAO_ROLE_ID or
 * OPENBAO_SECRET_ID is unset or empty (no broker is built then).
 */
export function openBaoSettingsFromEnv(env: EnvReader): OpenBaoSettings | undefined {
  const roleId = env("OPENBAO_ROLE_ID")?.trim() ?? "";
  const secretId = env("OPENBAO_SECRET_ID")?.trim() ?? "";
  if (roleId === "" || secretId === "") return undefined;
  let addr = env("OPENBAO_ADDR")?.trim() || DEFAULT_OPENBAO_ADDR;
  while (addr.endsWith("/")) addr = addr.slice(0, -1);
  const caCertFile = env("OPENBAO_CACERT")?.trim();
  return {
    addr,
    roleId,
    secretId,
    verifySsl: verifySslFromEnv(env("OPENBAO_VERIFY_SSL")),
    ...(caCertFile ? { caCertFile } : {}),
  };
}
