/**
 * The `registry:` block (seed "registry_enabled", ADR 0017): publishing this Skeid's capacity
 * snapshot to a fronting tier. The signing secret and the read key come from environment
 * variables at apply time and live in memory only; a snapshot is never published unsigned or
 * weakly signed, nor without a credential to read it.
 *
 * @module
 */
import type { PathSegment } from "./errors.ts";
import type { RegistryConfig } from "./config_schema.ts";

/** The shortest signing secret accepted: the HMAC-SHA256 output size. */
export const MIN_SECRET_BYTES = 32;

/** An enabled registry, resolved. Printing it (JSON, logs) never shows the secret or read key. */
export class RegistrySettings {
  /** HMAC-SHA256 signing secret, from `secret_env`. */
  declare readonly secret: string;
  /** Bearer accepted on the snapshot route besides the admin key, from `read_key_env`. */
  declare readonly readKey?: string;

  /**
   * `secret` and `readKey` are stored non-enumerable, so no spread, JSON dump or log line carries
   * them.
   */
  constructor(
    secret: string,
    readKey: string | undefined,
    /** The variable the secret came from. */
    readonly secretEnv: string,
    /** The variable the read key came from. */
    readonly readKeyEnv: string | undefined,
    /** How long a snapshot may be believed, seconds (default 10). */
    readonly ttlS: number,
    /** The snapshot's `instance` (default the hostname). */
    readonly instanceId: string,
    /** How far back `errors_in_window` counts, seconds (default 60). */
    readonly errorWindowS: number,
  ) {
    // Non-enumerable, so a spread or a JSON dump of the settings cannot carry them.
    Object.defineProperty(this, "secret", { value: secret, enumerable: false });
    Object.defineProperty(this, "readKey", { value: readKey, enumerable: false });
  }

  /** The printable form: variable names and values, no secrets. */
  toJSON(): Record<string, unknown> {
    return {
      secret_env: this.secretEnv,
      read_key_env: this.readKeyEnv ?? null,
      ttl_s: this.ttlS,
      instance_id: this.instanceId,
      error_window_s: this.errorWindowS,
    };
  }
}

/** A problem of the registry block, located below `registry`. */
export interface RegistryProblem {
  /** Where the problem is: config path segments below `registry`. */
  segments: PathSegment[];
  /** What is wrong there. */
  message: string;
}

/** Inputs that are not in the block itself. */
export interface RegistryContext {
  /** Environment lookup for `secret_env` and `read_key_env`, read at apply time. */
  env: (name: string) => string | undefined;
  /** Whether an admin API key is in force (it may read the snapshot). */
  hasAdminKey: boolean;
  /** Default instance id. */
  hostname: () => string;
}

/**
 * Resolves the block: undefined settings when absent or not enabled. Problems (each fails the
 * load): enabled without secret_env; its variable empty or shorter than 32 bytes; a named
 * read_key_env whose variable is empty; neither an admin key nor a read key to read it with.
 */
export function resolveRegistry(
  block: RegistryConfig | null | undefined,
  ctx: RegistryContext,
): { settings?: RegistrySettings; problems: RegistryProblem[] } {
  if (!block || block.enabled !== true) return { problems: [] };
  const problems: RegistryProblem[] = [];
  const secretEnv = block.secret_env ?? undefined;
  const secret = secretEnv ? ctx.env(secretEnv) ?? "" : "";
  if (!secretEnv) {
    problems.push({
      segments: ["secret_env"],
      message: "required when the registry is enabled (the variable holding the signing secret)",
    });
  } else if (new TextEncoder().encode(secret).length < MIN_SECRET_BYTES) {
    problems.push({
      segments: ["secret_env"],
      message: `variable ${secretEnv} is ${
        secret === "" ? "empty or unset" : "shorter than 32 bytes"
      }; a snapshot is never published unsigned or weakly signed`,
    });
  }
  const readKeyEnv = block.read_key_env ?? undefined;
  const readKey = readKeyEnv ? ctx.env(readKeyEnv) ?? "" : undefined;
  if (readKeyEnv && readKey === "") {
    problems.push({
      segments: ["read_key_env"],
      message: `variable ${readKeyEnv} is empty or unset`,
    });
  }
  if (!ctx.hasAdminKey && !readKeyEnv) {
    problems.push({
      segments: ["enabled"],
      message:
        "an enabled registry needs a credential to read it: an admin API key or registry.read_key_env",
    });
  }
  if (problems.length > 0) return { problems };
  const settings = new RegistrySettings(
    secret,
    readKey,
    secretEnv!,
    readKeyEnv,
    block.ttl_s ?? 10,
    block.instance_id ?? ctx.hostname(),
    block.error_window_s ?? 60,
  );
  return { settings, problems };
}
