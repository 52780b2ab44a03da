/**
 * The issued keys of a gateway (ADR 0029): the admin operations (create, list, get, patch,
 * rotate, revoke) on the `issued_keys` table, and the judgement of a presented key on the request
 * path against an in-memory copy of the rows it has seen.
 *
 * Exactness: a change made here is in the copy before the admin call answers; a change another
 * frontend made is read back every `routing.budget_refresh_ms` (the rows of every key in the
 * copy, re-read whole). A row is installed only when its `version` is newer than the copy's, and a
 * revocation in the copy is never undone by a read (revocations are final), so no cache outlives
 * a revocation it has seen. Unknown public ids are looked up in the database, and remembered as
 * unknown only until the next refresh. A malformed key or one with a wrong checksum is refused
 * before any of this; a well-formed key of an unknown id is hashed and compared like a known one,
 * so the answer's timing does not say whether the id exists.
 *
 * @module
 */
import type { Logger } from "../log.ts";
import type { NormalizedUsageStoreConfig } from "../usage/config.ts";
import { errorMessage } from "../error_message.ts";
import { isJsonObject, type JsonObject } from "../core/json.ts";
import { type PolicySet, resolveEntryPolicy } from "../core/policies.ts";
import {
  formatIssuedKey,
  isPublicId,
  newPublicId,
  newSecret,
  parseIssuedKey,
} from "./key_format.ts";
import { newSalt, Pepper } from "./secret_hash.ts";
import {
  type IssuedKeyQuery,
  type IssuedKeyRow,
  type IssuedKeyState,
  IssuedKeyStore,
  type IssuedKeyTable,
  JSONLOG_REFUSAL,
  stateOf,
} from "./issued_store.ts";
import { type Grant, grantOf } from "./grants.ts";

/** The `api_keys` section, resolved. */
export interface ApiKeySettings {
  /** The variable holding the pepper. */
  pepper_env: string;
}

/** The default pepper variable. */
export const DEFAULT_PEPPER_ENV = "SKEID_KEY_PEPPER";

/** A refused admin call: its status and the message naming the field. */
export class IssuedKeyError extends Error {
  /** `status`: 400 (bad field), 404 (unknown id), 409 (changed meanwhile), 503 (no store). */
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = "IssuedKeyError";
  }
}

/** Who judges issued keys for a gateway (the directory, or a worker's supervisor). */
export interface IssuedKeyAuthority {
  /** The grant of a presented key in the issued shape, or undefined: 401. */
  authenticate(presented: string): Promise<Grant | undefined>;
}

/** Options of a directory. */
export interface DirectoryOptions {
  now: () => number;
  logger: Logger;
  env: (name: string) => string | undefined;
  /** The policy set in force (a named policy must exist at create and patch). */
  policySet: () => Readonly<PolicySet>;
  /** How often rows seen are re-read (`routing.budget_refresh_ms`), ms. */
  refreshMs: () => number;
  /**
   * Hears the grant of every row installed (made, changed, read), so the key's policy is in
   * force for its public id at once — `GET /skeid/keys/{id}` shows it before any request.
   */
  granted?: (grant: Grant) => void;
  /** Opens the table in the usage store's database (default `IssuedKeyStore.open`). */
  open?: (usage: NormalizedUsageStoreConfig) => Promise<IssuedKeyTable>;
}

/** One page of keys as the admin API shows them. */
export interface IssuedKeyPage {
  keys: JsonObject[];
  /** The `after` of the next page; null on the last. */
  next_after: string | null;
}

/** Rows kept in memory at most (the least recently used go first; they are read again). */
const ROW_CAPACITY = 65536;
/** Presented keys whose secret matched, kept so the HMAC is not redone per request. */
const VERIFIED_CAPACITY = 4096;
/** Fields a create or patch may carry. */
const FIELDS = ["name", "policy", "limits", "budget", "share", "expires_at", "metadata"];
/** Inline policy fields. */
const POLICY_FIELDS = ["models", "aliases", "deny_tags", "limits", "budget", "share"];
/** A page's default and largest size. */
const PAGE_DEFAULT = 100;
const PAGE_MAX = 500;
/** The rotation grace window when the call names none: 24 h. */
export const DEFAULT_GRACE_S = 86400;

/** Salt and hash an unknown id is compared against (never matches: no secret hashes to it). */
const ABSENT_SALT = "00000000000000000000000000000000";
const ABSENT_HASH = "0".repeat(64);

/** The issued keys of one gateway (see the module comment). */
export class IssuedKeyDirectory implements IssuedKeyAuthority {
  readonly #opts: DirectoryOptions;
  #store: Promise<IssuedKeyTable | undefined> | undefined;
  /** Why there is no store (jsonlog, none configured, failed to open). */
  #storeProblem = "issued keys need a sqlite or postgresql usage_store, and none is configured";
  #identity = "";
  #pepper: { env: string; value: string; pepper: Pepper } | undefined;
  #pepperEnv = DEFAULT_PEPPER_ENV;
  readonly #rows = new Map<string, IssuedKeyRow>();
  /** Public ids the database did not have at the last look (until the next refresh). */
  readonly #absent = new Set<string>();
  readonly #loading = new Map<string, Promise<IssuedKeyRow | undefined>>();
  /** Presented key → the salt its secret matched. */
  readonly #verified = new Map<string, string>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #refreshing: Promise<void> | undefined;
  #closed = false;
  #warnedPepper = false;

  /** A directory with no store until `apply`. */
  constructor(opts: DirectoryOptions) {
    this.#opts = opts;
  }

  /** Follows the config: opens, reopens or closes the table; reads the pepper variable. */
  apply(settings: ApiKeySettings, usage: NormalizedUsageStoreConfig | undefined): void {
    this.#pepperEnv = settings.pepper_env;
    const on = usage !== undefined && usage.backend !== "jsonlog";
    if (usage?.backend === "jsonlog") this.#storeProblem = JSONLOG_REFUSAL;
    const identity = on ? JSON.stringify(usage) : "";
    if (identity === this.#identity) return;
    this.#identity = identity;
    const old = this.#store;
    this.#store = on ? this.#open(usage) : undefined;
    this.#rows.clear();
    this.#absent.clear();
    this.#verified.clear();
    old?.then((s) => s?.close()).catch(() => {});
    this.#schedule();
  }

  async #open(usage: NormalizedUsageStoreConfig): Promise<IssuedKeyTable | undefined> {
    try {
      return await (this.#opts.open ?? IssuedKeyStore.open)(usage);
    } catch (err) {
      this.#storeProblem = `issued keys: the usage store's database did not open: ${
        errorMessage(err)
      }`;
      this.#opts.logger.error("issued_keys_open_failed", { error: errorMessage(err) });
      return undefined;
    }
  }

  /** The store, or the refusal saying which store to use. */
  async #need(): Promise<IssuedKeyTable> {
    const store = await this.#store;
    if (store === undefined) throw new IssuedKeyError(503, this.#storeProblem);
    return store;
  }

  /** The pepper, read from its variable (again when the variable changed). */
  #pepperNow(): Pepper | undefined {
    const env = this.#pepperEnv;
    const value = this.#opts.env(env) ?? "";
    if (value === "") return undefined;
    if (this.#pepper?.env !== env || this.#pepper.value !== value) {
      this.#pepper = { env, value, pepper: new Pepper(value) };
    }
    return this.#pepper.pepper;
  }

  #needPepper(): Pepper {
    const pepper = this.#pepperNow();
    if (pepper === undefined) {
      throw new IssuedKeyError(
        503,
        `issued keys need a pepper: set the variable ${this.#pepperEnv} (api_keys.pepper_env)`,
      );
    }
    return pepper;
  }

  // ---- the request path --------------------------------------------------------------------

  /**
   * The grant of a presented key in the issued shape, or undefined (unknown id, wrong secret,
   * revoked, rotated out after its grace window, expired, malformed, no store or pepper).
   */
  async authenticate(presented: string): Promise<Grant | undefined> {
    const parsed = parseIssuedKey(presented);
    if (parsed === undefined) return undefined;
    const pepper = this.#pepperNow();
    if (pepper === undefined) {
      if (!this.#warnedPepper) {
        this.#warnedPepper = true;
        this.#opts.logger.error("issued_key_pepper_missing", {
          message: `an issued key was presented but ${this.#pepperEnv} is not set: refused`,
        });
      }
      return undefined;
    }
    const row = this.#rows.get(parsed.id) ?? await this.#load(parsed.id);
    const now = this.#opts.now();
    const salt = await this.#matchingSalt(pepper, presented, parsed.secret, row, now);
    if (row === undefined || salt === undefined || stateOf(row, now) !== "active") {
      return undefined;
    }
    this.#touch(row);
    return grantOf(row);
  }

  /** The salt of the row's secret (current, or previous within its grace) the key matches. */
  async #matchingSalt(
    pepper: Pepper,
    presented: string,
    secret: string,
    row: IssuedKeyRow | undefined,
    now: number,
  ): Promise<string | undefined> {
    const prevValid = row?.prev_salt != null && row.prev_until_ms !== null &&
      row.prev_until_ms > now;
    const known = this.#verified.get(presented);
    if (known !== undefined && row !== undefined) {
      if (known === row.salt || (prevValid && known === row.prev_salt)) return known;
    }
    // Both compares always run (an unknown id against a salt no secret matches), so neither the
    // id's existence nor which secret matched shows in the time taken.
    const [current, previous] = await Promise.all([
      pepper.matches(row?.salt ?? ABSENT_SALT, secret, row?.hash ?? ABSENT_HASH),
      pepper.matches(row?.prev_salt ?? ABSENT_SALT, secret, row?.prev_hash ?? ABSENT_HASH),
    ]);
    const salt = row === undefined
      ? undefined
      : current
      ? row.salt
      : previous && prevValid
      ? row.prev_salt ?? undefined
      : undefined;
    if (salt !== undefined) {
      this.#verified.set(presented, salt);
      if (this.#verified.size > VERIFIED_CAPACITY) {
        this.#verified.delete(this.#verified.keys().next().value!);
      }
    }
    return salt;
  }

  /** The row of an id not in memory, read once however many requests ask at once. */
  #load(id: string): Promise<IssuedKeyRow | undefined> {
    if (this.#absent.has(id)) return Promise.resolve(undefined);
    let pending = this.#loading.get(id);
    if (pending === undefined) {
      pending = (async () => {
        try {
          const store = await this.#store;
          const row = await store?.get(id);
          if (row === undefined) {
            // Bounded: a flood of made-up ids between two refreshes forgets the older ones.
            if (this.#absent.size >= ROW_CAPACITY) this.#absent.clear();
            this.#absent.add(id);
          } else this.#install(row);
          return this.#rows.get(id);
        } catch (err) {
          this.#opts.logger.warn("issued_key_read_failed", { id, error: errorMessage(err) });
          return undefined;
        } finally {
          this.#loading.delete(id);
        }
      })();
      this.#loading.set(id, pending);
    }
    return pending;
  }

  /** Installs a row read or written, unless the copy holds a newer one or a revocation. */
  #install(row: IssuedKeyRow): IssuedKeyRow {
    const have = this.#rows.get(row.id);
    if (have !== undefined) {
      if (have.version >= row.version) return have;
      if (have.revoked_ms !== null && row.revoked_ms === null) {
        row = { ...row, revoked_ms: have.revoked_ms };
      }
    }
    this.#absent.delete(row.id);
    this.#rows.delete(row.id);
    this.#rows.set(row.id, row);
    if (this.#rows.size > ROW_CAPACITY) this.#rows.delete(this.#rows.keys().next().value!);
    this.#opts.granted?.(grantOf(row));
    return row;
  }

  /** Marks a row recently used. */
  #touch(row: IssuedKeyRow): void {
    if (this.#rows.get(row.id) !== row) return;
    this.#rows.delete(row.id);
    this.#rows.set(row.id, row);
  }

  /** Re-reads every row in memory; forgets the ids remembered as unknown. */
  refresh(): Promise<void> {
    this.#refreshing ??= (async () => {
      try {
        const store = await this.#store;
        if (store === undefined) return;
        this.#absent.clear();
        const rows = await store.getMany([...this.#rows.keys()]);
        for (const row of rows) this.#install(row);
      } catch (err) {
        this.#opts.logger.warn("issued_keys_refresh_failed", { error: errorMessage(err) });
      } finally {
        this.#refreshing = undefined;
      }
    })();
    return this.#refreshing;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#closed || this.#store === undefined) return;
    const timer = setTimeout(async () => {
      await this.refresh();
      this.#timer = undefined;
      this.#schedule();
    }, Math.max(1, this.#opts.refreshMs()));
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  // ---- the admin API -----------------------------------------------------------------------

  /** Creates a key; the answer carries the key itself, the only time it is shown. */
  async create(body: unknown): Promise<JsonObject> {
    const fields = this.#fields(body);
    const store = await this.#need();
    const pepper = this.#needPepper();
    const now = this.#opts.now();
    const change = this.#checked(fields, now, undefined);
    const secret = newSecret();
    const salt = newSalt();
    const hash = await pepper.hash(salt, secret);
    for (let attempt = 0; attempt < 3; attempt++) {
      const row: IssuedKeyRow = {
        id: newPublicId(),
        name: change.name ?? "",
        policy: change.policy ?? null,
        spec: change.spec ?? {},
        metadata: change.metadata ?? {},
        created_ms: now,
        updated_ms: now,
        expires_ms: change.expires_ms ?? null,
        revoked_ms: null,
        salt,
        hash,
        prev_salt: null,
        prev_hash: null,
        prev_until_ms: null,
        version: 1,
      };
      if (!await store.insert(row)) continue;
      this.#install(row);
      this.#opts.logger.info("issued_key_created", { id: row.id, name: row.name });
      return { ...viewOf(row, now), key: formatIssuedKey(row.id, secret) };
    }
    throw new IssuedKeyError(503, "could not find a free public id; try again");
  }

  /** One key as the admin API shows it (read from the database). */
  async get(id: string): Promise<JsonObject> {
    return viewOf(await this.#fresh(id), this.#opts.now());
  }

  /** The row of an id from the database, installed; 404 when there is none. */
  async #fresh(id: string): Promise<IssuedKeyRow> {
    const store = await this.#need();
    const row = isPublicId(id) ? await store.get(id) : undefined;
    if (row === undefined) throw new IssuedKeyError(404, `unknown issued key '${id}'`);
    return this.#install(row);
  }

  /** A page of keys in public-id order. */
  async list(q: Omit<IssuedKeyQuery, "now">): Promise<IssuedKeyRow[]> {
    const store = await this.#need();
    return await store.list({ ...q, now: this.#opts.now() });
  }

  /** Changes name, policy, limits, budget, share, expiry or metadata; in force at once. */
  async patch(id: string, body: unknown): Promise<JsonObject> {
    const fields = this.#fields(body);
    return await this.#change(id, (row, now) => {
      const change = this.#checked(fields, now, row);
      return { ...row, ...change };
    });
  }

  /**
   * A new secret; the old one stays valid for `grace_s` seconds (0: not at all). The answer
   * carries the new key, the only time it is shown.
   */
  async rotate(id: string, body: unknown): Promise<JsonObject> {
    const graceS = graceOf(body);
    const pepper = this.#needPepper();
    const secret = newSecret();
    const salt = newSalt();
    const hash = await pepper.hash(salt, secret);
    const view = await this.#change(id, (row, now) => {
      if (row.revoked_ms !== null) throw new IssuedKeyError(400, `issued key '${id}' is revoked`);
      return {
        ...row,
        salt,
        hash,
        prev_salt: graceS > 0 ? row.salt : null,
        prev_hash: graceS > 0 ? row.hash : null,
        prev_until_ms: graceS > 0 ? now + graceS * 1000 : null,
      };
    });
    return { ...view, key: formatIssuedKey(id, secret) };
  }

  /** Revokes a key: refused from the next request on. */
  async revoke(id: string): Promise<JsonObject> {
    return await this.#change(id, (row, now) => ({ ...row, revoked_ms: row.revoked_ms ?? now }));
  }

  /** Reads, changes and writes a row (again once when another writer came in between). */
  async #change(
    id: string,
    edit: (row: IssuedKeyRow, now: number) => IssuedKeyRow,
  ): Promise<JsonObject> {
    const store = await this.#need();
    for (let attempt = 0; attempt < 2; attempt++) {
      const row = await this.#fresh(id);
      const now = this.#opts.now();
      const next = { ...edit(row, now), updated_ms: now, version: row.version + 1 };
      if (await store.update(next)) {
        this.#install(next);
        this.#opts.logger.info("issued_key_changed", {
          id,
          state: stateOf(next, now),
        });
        return viewOf(next, now);
      }
    }
    throw new IssuedKeyError(409, `issued key '${id}' was changed meanwhile; try again`);
  }

  /** The body's fields; 400 naming an unknown one. */
  #fields(body: unknown): JsonObject {
    if (body === undefined) return {};
    if (!isJsonObject(body)) throw new IssuedKeyError(400, "body must be a JSON object");
    for (const key of Object.keys(body)) {
      if (!FIELDS.includes(key)) {
        throw new IssuedKeyError(400, `${key}: unknown field (known: ${FIELDS.join(", ")})`);
      }
    }
    return body;
  }

  /** The fields checked and turned into row columns (only those the body sets). */
  #checked(
    f: JsonObject,
    now: number,
    row: IssuedKeyRow | undefined,
  ): Partial<IssuedKeyRow> {
    const out: Partial<IssuedKeyRow> = {};
    if ("name" in f) {
      if (typeof f.name !== "string") throw new IssuedKeyError(400, "name: must be a string");
      out.name = f.name;
    }
    if ("metadata" in f) {
      if (!isJsonObject(f.metadata)) {
        throw new IssuedKeyError(400, "metadata: must be a JSON object");
      }
      out.metadata = f.metadata;
    }
    if ("expires_at" in f) out.expires_ms = expiryOf(f.expires_at, now);
    let policy = row?.policy ?? null;
    let spec: JsonObject = { ...(row?.spec ?? {}) };
    if ("policy" in f) {
      const p = f.policy;
      if (p === null || typeof p === "string") {
        policy = p === "" ? null : p;
        // A named policy given anew replaces the inline fields that came with the old one.
        spec = {};
      } else if (isJsonObject(p)) {
        for (const key of Object.keys(p)) {
          if (!POLICY_FIELDS.includes(key)) {
            throw new IssuedKeyError(
              400,
              `policy.${key}: unknown field (known: ${POLICY_FIELDS.join(", ")})`,
            );
          }
        }
        policy = null;
        spec = { ...p };
      } else {
        throw new IssuedKeyError(400, "policy: must be a policy name or a map of policy fields");
      }
    }
    for (const key of ["limits", "budget", "share"]) if (key in f) spec[key] = f[key];
    const set = this.#opts.policySet();
    if (policy !== null && !set.policies.has(policy)) {
      throw new IssuedKeyError(400, `policy: unknown policy '${policy}'`);
    }
    const { errors } = resolveEntryPolicy(set, policy, spec);
    if (errors.length > 0) throw new IssuedKeyError(400, errors[0].message);
    if ("policy" in f || "limits" in f || "budget" in f || "share" in f || row === undefined) {
      out.policy = policy;
      out.spec = spec;
    }
    return out;
  }

  /** Stops the refresh and closes the table. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    const old = this.#store;
    this.#store = undefined;
    this.#identity = "";
    await (await old?.catch(() => undefined))?.close();
  }
}

/** `expires_at` as epoch ms (null: never); 400 for a bad or past moment. */
function expiryOf(v: unknown, now: number): number | null {
  if (v === null) return null;
  const ms = typeof v === "string" ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms)) {
    throw new IssuedKeyError(400, "expires_at: must be an ISO-8601 time (or null: never)");
  }
  if (ms <= now) throw new IssuedKeyError(400, "expires_at: must be in the future");
  return ms;
}

/** `grace_s` of a rotate body: whole seconds ≥ 0, default 24 h. */
function graceOf(body: unknown): number {
  if (body === undefined) return DEFAULT_GRACE_S;
  if (!isJsonObject(body)) throw new IssuedKeyError(400, "body must be a JSON object");
  for (const key of Object.keys(body)) {
    if (key !== "grace_s") throw new IssuedKeyError(400, `${key}: unknown field (known: grace_s)`);
  }
  const g = body.grace_s;
  if (g === undefined || g === null) return DEFAULT_GRACE_S;
  if (typeof g !== "number" || !Number.isInteger(g) || g < 0) {
    throw new IssuedKeyError(400, "grace_s: must be a whole number of seconds >= 0");
  }
  return g;
}

/** An ISO time of epoch ms, or null. */
function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** A row as the admin API shows it: never its salt or hash. */
export function viewOf(row: IssuedKeyRow, now: number): JsonObject {
  const state: IssuedKeyState = stateOf(row, now);
  return {
    id: row.id,
    kind: "issued",
    name: row.name,
    policy: row.policy,
    // The inline policy fields and the limits, budget and share over the named policy.
    overrides: row.spec,
    metadata: row.metadata,
    state,
    created_at: iso(row.created_ms),
    updated_at: iso(row.updated_ms),
    expires_at: iso(row.expires_ms),
    revoked_at: iso(row.revoked_ms),
    previous_secret_valid_until: row.prev_until_ms !== null && row.prev_until_ms > now
      ? iso(row.prev_until_ms)
      : null,
  };
}

export { PAGE_DEFAULT, PAGE_MAX };
