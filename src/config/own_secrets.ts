/**
 * The secret fence: every field that names a variable (every key ending in `_env`, wherever it
 * sits in the config or in a spec given to the admin API or the function table) reads that
 * variable for one purpose, and a variable Skeid reads as one of its own credentials may serve
 * no other. A node's key is sent upstream, a registry probe's bearer to the node, a usage store's
 * password to the store's host: a field naming the admin key's variable (or the registry's HMAC
 * secret, the OpenBao credentials, the key pepper) would hand it to whoever runs that host.
 *
 * The purposes are found from the field's place, so a new `_env` field is fenced from the day it
 * is added: a field this file does not know reads its variable for a purpose of its own, which
 * no own secret shares. Checked at config load and reload, by `POST /skeid/nodes`, by the
 * function table (`nodes.add`, `usage.configure`), and again when a node's key is read.
 *
 * @module
 */
import type { PathSegment } from "./errors.ts";
import { formatPath } from "./errors.ts";
import { isJsonObject } from "../core/json.ts";

/** Why a field reads its variable; equal purposes may share a variable. */
export interface Purpose {
  /** What the variable is read as (`the admin key`). */
  readonly what: string;
  /** Where its value goes, when it leaves Skeid (`sent upstream`). */
  readonly sent?: string;
  /** A variable read for this purpose is one of Skeid's own secrets. */
  readonly own: boolean;
}

const ADMIN_KEY: Purpose = { what: "the admin key", own: true };
const REGISTRY_SECRET: Purpose = { what: "the registry HMAC secret", own: true };
const USAGE_PASSWORD: Purpose = {
  what: "the usage store's password",
  sent: "sent to the store's host",
  own: true,
};
/** The pepper issued keys are hashed with (ADR 0029). */
const KEY_PEPPER: Purpose = { what: "the key pepper", own: true };
/** A node's upstream key: nodes may share one, and it is not one of Skeid's own secrets. */
export const NODE_KEY: Purpose = { what: "a node's key", sent: "sent upstream", own: false };

/**
 * Each field Skeid reads a variable from, by its place (`[]` stands for any list index), with its
 * purpose. A registry probe verifies with the mesh's HMAC secret, which may be this Skeid's own.
 */
export const VARIABLE_FIELDS: ReadonlyMap<string, Purpose> = new Map([
  ["admin_api_key_env", ADMIN_KEY],
  ["admin.api_key_env", ADMIN_KEY],
  ["registry.secret_env", REGISTRY_SECRET],
  ["registry.read_key_env", { what: "the registry read key", own: true }],
  ["usage_store.password_env", USAGE_PASSWORD],
  ["api_keys.pepper_env", KEY_PEPPER],
  ["nodes[].api_key_env", NODE_KEY],
  ["nodes[].capacity.secret_env", REGISTRY_SECRET],
  ...["read_key_env", "admin_key_env"].map((key): [string, Purpose] => [
    `nodes[].capacity.${key}`,
    { what: "a registry probe's bearer", sent: "sent to the node", own: true },
  ]),
]);

/** Variables read as secrets whatever the config says. */
const ALWAYS: readonly [string, Purpose, string][] = [
  ["SKEID_ADMIN_API_KEY", ADMIN_KEY, "the admin key's default variable"],
  ["PGPASSWORD", USAGE_PASSWORD, "the PostgreSQL usage store's default password variable"],
  ["SKEID_KEY_PEPPER", KEY_PEPPER, "the issued keys' default pepper variable"],
];

/** The OpenBao login and settings (`OPENBAO_ROLE_ID`, `OPENBAO_SECRET_ID`, …). */
const OPENBAO_PREFIX = "OPENBAO_";
const OPENBAO: Purpose = { what: "the OpenBao credentials", own: true };

/** One use of a variable as an own secret: its purpose and where it is named. */
export interface OwnUse {
  /** Why it is read. */
  readonly purpose: Purpose;
  /** The config path naming it, or a description of a fixed variable. */
  readonly where: string;
}

/** Variable name → its uses as one of Skeid's own secrets. */
export type OwnSecrets = ReadonlyMap<string, readonly OwnUse[]>;

/** A field naming a variable: where it is, the variable, and why it is read. */
export interface VariableField {
  /** Its path segments from the value walked. */
  readonly segments: PathSegment[];
  /** The variable named (trimmed). */
  readonly name: string;
  /** Why it is read (a purpose of its own for a field not in {@link VARIABLE_FIELDS}). */
  readonly purpose: Purpose;
}

/**
 * Every field under `value` that names a variable: each key ending in `_env` holding text.
 * `at` is the place of `value` itself (`nodes[]` for a node spec, `usage_store`, or the root).
 */
export function variableFields(value: unknown, at = ""): VariableField[] {
  const out: VariableField[] = [];
  const walk = (v: unknown, place: string, segments: PathSegment[]): void => {
    if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, `${place}[]`, [...segments, i]));
      return;
    }
    if (!isJsonObject(v)) return;
    for (const [key, item] of Object.entries(v)) {
      const next = place === "" ? key : `${place}.${key}`;
      if (key.endsWith("_env") && typeof item === "string" && item.trim() !== "") {
        const purpose = VARIABLE_FIELDS.get(next) ??
          { what: `the value of ${next}`, own: false };
        out.push({ segments: [...segments, key], name: item.trim(), purpose });
      } else {
        walk(item, next, [...segments, key]);
      }
    }
  };
  walk(value, at, []);
  return out;
}

/** The fixed own secrets, before any config names one. */
const FIXED: OwnSecrets = new Map(
  ALWAYS.map(([name, purpose, where]) => [name, [{ purpose, where }]]),
);

/**
 * The own secrets in force (`base`: the fixed ones when absent) plus those named under `value`
 * (placed at `at`, see {@link variableFields}).
 */
export function ownSecretVariables(value: unknown, at = "", base: OwnSecrets = FIXED): OwnSecrets {
  const own = new Map<string, readonly OwnUse[]>(base);
  for (const field of variableFields(value, at)) {
    if (!field.purpose.own) continue;
    const path = formatPath(field.segments);
    const use = { purpose: field.purpose, where: at === "" ? path : `${at}.${path}` };
    own.set(field.name, [...(own.get(field.name) ?? []), use]);
  }
  return own;
}

/**
 * Why a variable may not be read for `purpose`, or undefined when it may: it is one of Skeid's
 * own secrets read for another purpose.
 */
export function fenceProblem(name: string, purpose: Purpose, own: OwnSecrets): string | undefined {
  const trimmed = name.trim();
  const uses = own.get(trimmed) ?? [];
  const other = uses.find((u) => u.purpose.what !== purpose.what) ??
    (trimmed.startsWith(OPENBAO_PREFIX) && purpose !== OPENBAO
      ? { purpose: OPENBAO, where: "OPENBAO_*" }
      : undefined);
  if (other === undefined) return undefined;
  const reads = `this field reads it as ${purpose.what}${purpose.sent ? `, ${purpose.sent}` : ""}`;
  return `variable ${trimmed} is one of Skeid's own secrets (${other.purpose.what}, ` +
    `${other.where}); ${reads}, so it may not name it`;
}

/** A field the fence refuses: where, and why. */
export interface FenceIssue {
  /** Path segments from the value checked. */
  segments: PathSegment[];
  /** Why the variable may not be named there. */
  message: string;
}

/**
 * Every field under `value` (placed at `at`) naming a variable the fence refuses, against `own`
 * (which holds those `value` names itself, see {@link ownSecretVariables}).
 */
export function fenceIssues(value: unknown, at: string, own: OwnSecrets): FenceIssue[] {
  const issues: FenceIssue[] = [];
  for (const field of variableFields(value, at)) {
    const message = fenceProblem(field.name, field.purpose, own);
    if (message !== undefined) issues.push({ segments: field.segments, message });
  }
  return issues;
}

/** {@link fenceIssues} as one line (`api_key_env: variable …`), or undefined when none. */
export function fenceMessage(value: unknown, at: string, inForce: OwnSecrets): string | undefined {
  const issues = fenceIssues(value, at, ownSecretVariables(value, at, inForce));
  if (issues.length === 0) return undefined;
  return issues.map((i) => `${formatPath(i.segments)}: ${i.message}`).join("; ");
}

/**
 * Reads a variable for a purpose through the fence: undefined (as if unset) when it is one of
 * Skeid's own secrets read for another purpose, so no path that skipped a check can send it.
 */
export function readVariable(
  env: (name: string) => string | undefined,
  own: OwnSecrets,
  name: string,
  purpose: Purpose,
): string | undefined {
  return fenceProblem(name, purpose, own) === undefined ? env(name) : undefined;
}
