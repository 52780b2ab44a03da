/**
 * The config manager: first load, explicit reload, "maybe reload" on a file change, the watcher,
 * the reload status, the admin key in force, the registry settings and the per-key manifests.
 *
 * A reload is all or nothing: the new config is loaded and built completely (load.ts), a changed
 * usage store is prepared, and only then is the core changed (apply.ts) and the store swapped.
 * A config that fails keeps the previous one in force, manifests and admin key included, and is
 * reported by `status()`.
 *
 * Change detection is by digest: a new mtime with the same content applies nothing. A failed
 * version is retried with a back-off (1 s doubling to 60 s) while a new mtime is read at once.
 * A deleted file keeps the config in force, warned once until it is back. A file changed in place
 * is read only once it settled (see `#settled`); watching is watch.ts, parsing a large file
 * off the serving path parser.ts. Nothing here is module state: every gateway in a process has
 * its own manager.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { Node, ReloadStatus } from "../core/types.ts";
import type { Logger } from "../log.ts";
import { type NormalizedUsageStoreConfig, normalizeUsageStoreConfig } from "../usage/config.ts";
import { adminKeyProblem, type AdminKeyResolution, resolveAdminKey } from "./admin_key.ts";
import { applyLoadedConfig, type ApplyState, initialApplyState } from "./apply.ts";
import { digestOf } from "./canonical.ts";
import { type ConfigIssue, ConfigLoadError, formatIssue, formatPath } from "./errors.ts";
import {
  buildConfig,
  ConfigFileMissingError,
  loadConfigValue,
  type LoadedConfig,
  type LoadOptions,
  locateIssues,
} from "./load.ts";
import { ConfigParser, type ParsedText } from "./parser.ts";
import type { RegistrySettings } from "./registry.ts";
import { type OwnSecrets, ownSecretVariables } from "./own_secrets.ts";
import type { Config } from "./config_schema.ts";
import { errorMessage } from "../error_message.ts";
import { ConfigWatcher } from "./watch.ts";
import { createHash } from "node:crypto";

/** The own secrets before any config is in force: the fixed variables. */
const NO_CONFIG_SECRETS = ownSecretVariables(undefined);

/** Hex SHA-256 of a file's text, as `sha256sum` prints it (also what tells versions apart). */
function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A usage store prepared but not yet installed. */
export interface PreparedUsageStore {
  /** Installs it (the old store is flushed and let go). Runs after the core commit. */
  install(): Promise<void>;
  /** Lets it go unused (the reload failed after it was prepared). */
  discard?(): Promise<void>;
}

/** What lives outside the config module. */
export interface ConfigHooks {
  /**
   * Called when the usage store changed (or is first set): prepares the new store without
   * installing it. Throw to fail the whole reload. Answers the install function (run after the
   * core commit), or a PreparedUsageStore that can also be discarded.
   */
  prepareUsageStore?(
    cfg: NormalizedUsageStoreConfig,
  ): Promise<(() => Promise<void>) | PreparedUsageStore>;
  /** Called after every applied config (e.g. the gateway refreshes what it derived). */
  onApplied?(cfg: Config): void;
}

/** What identifies a version of the file without reading it. */
export interface FileStamp {
  /** Last modification time, epoch ms (0 when the file system gives none). */
  mtimeMs: number;
  /** File size, bytes; a change with the same mtime still counts as a new version. */
  size?: number;
  /** Inode, when known; a file replaced by rename (atomic write) gets a new one. */
  ino?: number | null;
}

/** What the manager needs of a file system (tests inject one to control mtimes). */
export interface ConfigFileSystem {
  /** The file's mtime in ms (with size and inode when known), or null when it does not exist. */
  stat(path: string): Promise<FileStamp | null>;
  /** Reads the whole file as UTF-8 text. */
  readTextFile(path: string): Promise<string>;
}

/** The real file system. */
export const denoFileSystem: ConfigFileSystem = {
  async stat(path) {
    try {
      const info = await Deno.stat(path);
      return { mtimeMs: info.mtime?.getTime() ?? 0, size: info.size, ino: info.ino };
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return null;
      throw e;
    }
  },
  readTextFile: (path) => Deno.readTextFile(path),
};

/** Construction options of a ConfigManager. */
export interface ConfigManagerOptions {
  /** The core the config is applied to. */
  skeid: RoutingCore;
  /** The YAML config file; without one the manager applies an empty config. */
  path?: string;
  /** Environment; default `Deno.env.get`. */
  env?: (name: string) => string | undefined;
  /** Where reloads, failures and warnings are logged. */
  logger: Logger;
  /** `--admin-api-key`: outranks the config. */
  explicitAdminKey?: string;
  /** Callbacks into parts outside the core (usage store, gateway). */
  hooks?: ConfigHooks;
  /** Epoch-ms clock (back-off); default the core's clock. */
  now?: () => number;
  /** Fallback mtime poll of `watch()`, ms; default SKEID_CONFIG_RELOAD_INTERVAL (s), else 1000. */
  reloadIntervalMs?: number;
  /** File access; default the real file system. */
  fs?: ConfigFileSystem;
  /** Default registry instance id; default the hostname. */
  hostname?: () => string;
  /** Whether `watch()` listens to file events besides polling the mtime; default true. */
  watchEvents?: boolean;
  /**
   * How long a file changed in place must stay unchanged (size, mtime, content digest) before
   * it is applied, ms; default SKEID_CONFIG_SETTLE_MS, else {@link DEFAULT_SETTLE_MS}. A file
   * replaced by rename is read at once. 0 applies every change at once.
   */
  settleMs?: number;
}

/** First retry of a failed config version, ms. */
export const RETRY_BASE_MS = 1000;
/** Longest retry interval, ms. */
export const RETRY_MAX_MS = 60_000;
/**
 * Default settle time, ms: longer than the pauses seen between the parts of one in-place write
 * (60–300 ms), short enough that an edit still lands within about a second.
 */
export const DEFAULT_SETTLE_MS = 500;

/** The back-off before retry number `attempt` (1-based) of a failed version: 1, 2, 4 … 60 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, attempt - 1));
}

/** SKEID_CONFIG_RELOAD_INTERVAL (seconds, fractions allowed) in ms; default 1000. */
export function reloadIntervalFromEnv(env: (name: string) => string | undefined): number {
  const raw = env("SKEID_CONFIG_RELOAD_INTERVAL");
  const s = raw === undefined || raw.trim() === "" ? NaN : Number(raw);
  return Number.isFinite(s) && s >= 0 ? s * 1000 : 1000;
}

/** SKEID_CONFIG_SETTLE_MS (ms, ≥ 0) or {@link DEFAULT_SETTLE_MS}. */
export function settleMsFromEnv(env: (name: string) => string | undefined): number {
  const raw = env("SKEID_CONFIG_SETTLE_MS");
  const ms = raw === undefined || raw.trim() === "" ? NaN : Number(raw);
  return Number.isFinite(ms) && ms >= 0 ? ms : DEFAULT_SETTLE_MS;
}

/** Loads, applies, watches and reloads one config file for one Skeid. */
export class ConfigManager {
  readonly #skeid: RoutingCore;
  readonly #path?: string;
  readonly #env: (name: string) => string | undefined;
  readonly #logger: Logger;
  readonly #hooks: ConfigHooks;
  readonly #now: () => number;
  readonly #intervalMs: number;
  readonly #fs: ConfigFileSystem;
  readonly #hostname?: () => string;
  readonly #watchEvents: boolean;
  readonly #settleMs: number;
  #explicitAdminKey?: string;

  #loaded?: LoadedConfig;
  #applyState: ApplyState = initialApplyState();
  #adminKey: AdminKeyResolution;
  #status = {
    ok: true,
    error: null as string | null,
    failedAt: null as number | null,
    failures: 0,
  };
  /** The stamp (mtime, size, inode) of the version last read, applied or not. */
  #stamp?: string;
  /** The inode last read: another one means the file was replaced by rename. */
  #ino?: number | null;
  /** A version changed in place, waiting to stay unchanged for the settle time. */
  #settling?: { version: string; since: number };
  /** The version that last passed the settle check. */
  #settledVersion?: string;
  #settleTimer?: ReturnType<typeof setTimeout>;
  /** The failing version and when to try it again. */
  #failed?: { textDigest: string; attempt: number; retryAt: number };
  /** The file trouble last warned about (once until it clears): missing, or empty mid-rewrite. */
  #fileWarned: "missing" | "empty" | undefined;
  /** The usage store running (from a config, or SKEID_USAGE_DB): digest, origin, settings. */
  #store?: {
    digest: string;
    origin: "config" | "env";
    normalized: NormalizedUsageStoreConfig;
  };
  #storeRemovedWarned = false;
  /** When the config in force was applied, and the SHA-256 of the file text it came from. */
  #applied: { at: number; fileSha256: string | null } | undefined;
  /** Digest of each top-level section of the config in force (what a change or a dry run names). */
  #sectionDigests = new Map<string, string>();
  /** The last reload that changed something, and the sections it changed. */
  #lastChange: { at: number; sections: string[] } | undefined;
  /** The last failed load or reload, with every error and its line. */
  #lastFailure: { at: number; errors: ConfigIssue[] } | undefined;

  #queue: Promise<unknown> = Promise.resolve();
  #pendingCheck?: Promise<boolean>;
  #closed = false;
  #watcher?: ConfigWatcher;
  readonly #parser = new ConfigParser();

  /** Takes the options; reads nothing yet (see `load` and `watch`). */
  constructor(opts: ConfigManagerOptions) {
    this.#skeid = opts.skeid;
    this.#path = opts.path;
    this.#env = opts.env ?? ((name) => Deno.env.get(name));
    this.#logger = opts.logger;
    this.#hooks = opts.hooks ?? {};
    this.#now = opts.now ?? opts.skeid.now;
    this.#intervalMs = opts.reloadIntervalMs ?? reloadIntervalFromEnv(this.#env);
    this.#fs = opts.fs ?? denoFileSystem;
    this.#hostname = opts.hostname;
    this.#watchEvents = opts.watchEvents ?? true;
    this.#settleMs = opts.settleMs ?? settleMsFromEnv(this.#env);
    this.#explicitAdminKey = opts.explicitAdminKey || undefined;
    this.#adminKey = resolveAdminKey(undefined, this.#env, this.#explicitAdminKey);
  }

  /** The config file path, if any. */
  get path(): string | undefined {
    return this.#path;
  }

  /**
   * The first load: reads and applies the config. Throws ConfigFileMissingError when the file
   * is not there, ConfigLoadError listing every error when it does not load.
   */
  load(): Promise<Config> {
    return this.#exclusive(async () => {
      if (this.#path === undefined) {
        try {
          await this.#applyChanged(loadConfigValue({}, this.#loadOptions()));
          this.#applied = { at: this.#now(), fileSha256: null };
        } catch (e) {
          throw this.#fail(e);
        }
        return this.#loaded!.config;
      }
      await this.#readAndApply("force");
      return this.#loaded!.config;
    });
  }

  /**
   * Reads the file now and applies it when it differs from the config in force (a failed
   * version is tried again). Throws on failure; the previous config stays in force.
   */
  reload(): Promise<Config> {
    return this.#exclusive(async () => {
      if (this.#path !== undefined) await this.#readAndApply("force");
      return this.#loaded?.config ?? {};
    });
  }

  /**
   * Reloads if the file may have changed: its mtime moved, or a failed version is due for a
   * retry. Never throws; true when a changed config was applied.
   */
  maybeReload(): Promise<boolean> {
    if (this.#path === undefined || this.#closed) return Promise.resolve(false);
    // Callers arriving while a check is under way share it: a busy gateway asking on every
    // dispatch costs one stat at a time, not a queue of them.
    if (this.#pendingCheck) return this.#pendingCheck;
    const check: Promise<boolean> = this.#exclusive(async () => {
      try {
        return await this.#readAndApply("poll");
      } catch {
        return false; // recorded in status() and logged where it failed
      }
    }).finally(() => {
      if (this.#pendingCheck === check) this.#pendingCheck = undefined;
    });
    this.#pendingCheck = check;
    return check;
  }

  /**
   * Watches the file (file events, and its mtime polled every reload interval as a fallback),
   * reloading within about a second of an edit (see watch.ts).
   */
  watch(): void {
    if (this.#path === undefined || this.#closed || this.#watcher !== undefined) return;
    this.#watcher = new ConfigWatcher({
      path: this.#path,
      intervalMs: this.#intervalMs,
      events: this.#watchEvents,
      onEvent: () => void this.fileChanged(),
      onPoll: () => void this.maybeReload(),
      logger: this.#logger,
    });
  }

  /** Stops watching and waits for a reload in progress to finish. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#settleTimer !== undefined) clearTimeout(this.#settleTimer);
    this.#settleTimer = undefined;
    await this.#watcher?.close();
    await this.#queue;
    this.#parser.close();
  }

  /** Whether the last reload succeeded, and if not why, when and how many times in a row. */
  status(): ReloadStatus {
    const s = this.#status;
    return {
      ok: s.ok,
      error: s.error,
      failed_at: s.failedAt === null ? null : isoSeconds(s.failedAt),
      failures: s.failures,
    };
  }

  /**
   * When the config in force was applied (ISO-8601 UTC) and the SHA-256 of the file text it came
   * from (null without a file): compare with `sha256sum` of the file to see an edit applied.
   */
  applied(): { applied_at: string | null; file_sha256: string | null } {
    const a = this.#applied;
    return { applied_at: a ? isoSeconds(a.at) : null, file_sha256: a?.fileSha256 ?? null };
  }

  /**
   * The Config page's view: the file, the last reload that changed something (its sections) and
   * the last failed one (each error with its path and line). Never a value of the config.
   */
  history(): ConfigHistory {
    const c = this.#lastChange;
    const f = this.#lastFailure;
    return {
      path: this.#path ?? null,
      last_change: c ? { at: isoSeconds(c.at), sections: c.sections } : null,
      last_failure: f ? { at: isoSeconds(f.at), errors: f.errors.map(issueToWire) } : null,
    };
  }

  /**
   * A dry run of the file on disk now: what a reload would change (the top-level sections that
   * differ from the config in force) or every error with its path and line. Applies nothing,
   * records no failure, opens no store.
   */
  check(): Promise<ConfigCheck> {
    return this.#exclusive(async () => {
      const path = this.#path;
      if (path === undefined) {
        return {
          ok: false,
          path: null,
          file_sha256: null,
          changes: { sections: [] },
          errors: [{ path: "", line: null, message: "no config file (serve --config FILE)" }],
        };
      }
      let text: string;
      try {
        text = await this.#fs.readTextFile(path);
      } catch (e) {
        const message = e instanceof Deno.errors.NotFound
          ? `config file not found: ${path}`
          : errorMessage(e);
        return {
          ok: false,
          path,
          file_sha256: null,
          changes: { sections: [] },
          errors: [{ path: "", line: null, message }],
        };
      }
      const fileSha256 = sha256(text);
      try {
        const loaded = await this.#build(await this.#parser.parse(text, path), path);
        const sections = changedSections(this.#sectionDigests, digestMap(loaded.topLevelDigests));
        return { ok: true, path, file_sha256: fileSha256, changes: { sections }, errors: [] };
      } catch (e) {
        return {
          ok: false,
          path,
          file_sha256: fileSha256,
          changes: { sections: [] },
          errors: issuesOf(e).map(issueToWire),
        };
      }
    });
  }

  /**
   * Builds parsed config text into a loaded config (a reload and a dry run alike): every issue
   * located by line, throws ConfigLoadError on an error.
   */
  async #build(parsed: ParsedText, path: string): Promise<LoadedConfig> {
    const built = buildConfig(parsed.value, this.#loadOptions(), parsed.prebuilt);
    const lines = await parsed.linesOf(built.issues.map((i) => i.segments));
    const loaded = locateIssues(built, path, (segments) => lines.get(formatPath(segments)));
    parsed.restore(loaded.config);
    return loaded;
  }

  /** The admin API key in force; `''` = the admin API is off. */
  adminApiKey(): string {
    return this.#adminKey.key;
  }

  /** Why the admin API is off though the config names a key variable, else null. */
  adminKeyProblem(): string | null {
    return adminKeyProblem(this.#adminKey);
  }

  /** Sets the explicit admin key (`''` clears it: the config's key takes over at once). */
  setAdminApiKey(key: string): string {
    this.#explicitAdminKey = key || undefined;
    this.#adminKey = resolveAdminKey(this.#loaded?.config, this.#env, this.#explicitAdminKey);
    this.#logger.info("admin_key_changed", { source: this.#adminKey.source });
    return this.#adminKey.key;
  }

  /**
   * The usage store the config in force names (or SKEID_USAGE_DB), whether this manager's gateway
   * opened it or, as a worker of a group, hands its events to the supervisor's (ADR 0025): the
   * Responses store keeps its rows in the same database.
   */
  usageStore(): NormalizedUsageStoreConfig | undefined {
    return this.#store?.normalized;
  }

  /** The config in force, as written (validated). */
  current(): Config | undefined {
    return this.#loaded?.config;
  }

  /** The warnings of the config in force (skipped entries, duplicate ids, ignored keys). */
  warnings(): ConfigIssue[] {
    return this.#loaded?.warnings ?? [];
  }

  /** The canonical JSON manifest of a customer key id (a short id in the config matches too). */
  manifestFor(apiKeyId: string): string | undefined {
    const manifests = this.#loaded?.manifests;
    if (!manifests) return undefined;
    return manifests.get(apiKeyId) ??
      (/^k_[0-9a-f]{40}$/.test(apiKeyId) ? manifests.get(apiKeyId.slice(0, 14)) : undefined);
  }

  /** Whether the manifest is enabled by the config in force. */
  manifestEnabled(): boolean {
    return this.#loaded?.manifest !== undefined;
  }

  /** The variables Skeid reads as its own secrets under the config in force (see own_secrets). */
  ownSecretVariables(): OwnSecrets {
    return this.#loaded?.ownSecrets ?? NO_CONFIG_SECRETS;
  }

  /** The registry settings in force, or undefined when the registry is off. */
  registry(): RegistrySettings | undefined {
    return this.#loaded?.registry;
  }

  // ---- internals -----------------------------------------------------------------------------

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * What the file watcher calls when it saw the file change: reads it even if its stamp looks
   * the same (an edit within one mtime tick). Never throws; answers whether a changed config was
   * applied. The same failed version read again within its back-off counts no new failure.
   */
  fileChanged(): Promise<boolean> {
    return this.#exclusive(() => this.#readAndApply("event").catch(() => false));
  }

  #loadOptions(): LoadOptions {
    return {
      env: this.#env,
      source: this.#path,
      explicitAdminKey: this.#explicitAdminKey,
      currentNodes: () => this.#currentNodes(),
      currentAliases: () => this.#skeid.aliases,
      hostname: this.#hostname,
    };
  }

  #currentNodes(): readonly Node[] {
    try {
      return this.#skeid.listNodes();
    } catch {
      return [];
    }
  }

  /**
   * Reads the file and applies it if it changed. `poll` reads only when the stamp moved or a
   * retry is due; `event` (the watcher saw the file change) and `force` (load, explicit reload)
   * always read. Answers whether a changed config was applied.
   */
  async #readAndApply(mode: "poll" | "event" | "force"): Promise<boolean> {
    const force = mode === "force";
    const path = this.#path!;
    const st = await this.#fs.stat(path).catch((e) => {
      throw this.#fail(e, undefined);
    });
    if (st === null) {
      if (force) throw this.#fail(new ConfigFileMissingError(path), undefined);
      this.#warnFile(
        "missing",
        "config file disappeared; the config in force stays until it is back",
      );
      return false;
    }
    if (this.#fileWarned === "missing") {
      this.#fileWarned = undefined;
      this.#logger.info("config_file_back", { path });
    }
    const stamp = `${st.mtimeMs}:${st.size ?? ""}:${st.ino ?? ""}`;
    if (mode === "poll" && stamp === this.#stamp && this.#settling === undefined) {
      if (!this.#failed || this.#now() < this.#failed.retryAt) return false;
    }
    this.#stamp = stamp;
    let text: string;
    try {
      text = await this.#fs.readTextFile(path);
    } catch (e) {
      throw this.#fail(e instanceof Deno.errors.NotFound ? new ConfigFileMissingError(path) : e);
    }
    const textDigest = sha256(text);
    // A new inode is a file replaced by rename: complete by construction, read at once.
    const ino = st.ino ?? null;
    const replaced = this.#ino != null && ino !== null && ino !== this.#ino;
    this.#ino = ino;
    if (!this.#settled(`${stamp}:${textDigest}`, force || replaced)) return false;
    if (!force && this.#failed?.textDigest === textDigest && this.#now() < this.#failed.retryAt) {
      // The version that just failed, read again (the watcher and the mtime poll both saw the
      // same edit): one failure, not two, and its back-off stands.
      return false;
    }
    if (this.#loaded && text.trim() === "") {
      // An empty file after a config was applied is a file being rewritten in place (truncated,
      // not yet written): applying it would drop every node. The next write moves the stamp.
      if (force) {
        throw this.#fail(
          new ConfigLoadError([{
            path: "",
            message: "the config file is empty (write {} to empty the config on purpose)",
          }], path),
          textDigest,
        );
      }
      this.#warnFile(
        "empty",
        "config file is empty; the config in force stays until it has content",
      );
      return false;
    }
    if (this.#fileWarned === "empty") this.#fileWarned = undefined;
    let loaded: LoadedConfig;
    try {
      // A large config is parsed in a worker: requests keep being answered meanwhile.
      const parsed = await this.#parser.parse(text, path);
      if (this.#loaded && parsed.prebuilt.digest === this.#loaded.digest) {
        // Same content as the config in force (a touch, or a revert after a failed edit): the
        // file now holds it in these words.
        if (this.#applied) this.#applied.fileSha256 = textDigest;
        this.#succeeded();
        return false;
      }
      loaded = await this.#build(parsed, path);
      await this.#applyChanged(loaded);
      this.#applied = { at: this.#now(), fileSha256: textDigest };
    } catch (e) {
      throw this.#fail(e, textDigest);
    }
    return true;
  }

  /**
   * Whether a version (stamp and content digest) may be read as complete: it was replaced by
   * rename, or it stayed the same for the settle time. A file written in place in parts (a
   * truncate, then writes with pauses between them) is otherwise read half-written. Schedules
   * the next look while a version settles.
   */
  #settled(version: string, atOnce: boolean): boolean {
    if (atOnce || this.#settleMs <= 0 || version === this.#settledVersion) {
      this.#settledVersion = version;
      this.#settling = undefined;
      return true;
    }
    const now = this.#now();
    if (this.#settling?.version !== version) this.#settling = { version, since: now };
    const left = this.#settling.since + this.#settleMs - now;
    if (left <= 0) {
      this.#settledVersion = version;
      this.#settling = undefined;
      return true;
    }
    if (this.#settleTimer !== undefined) clearTimeout(this.#settleTimer);
    this.#settleTimer = setTimeout(() => {
      this.#settleTimer = undefined;
      if (!this.#closed) void this.fileChanged();
    }, left);
    return false;
  }

  /** Prepares the store, commits to the core, installs the store; throws before any change. */
  async #applyChanged(loaded: LoadedConfig): Promise<void> {
    // The usage store a config names, or SKEID_USAGE_DB as the default when none ever has.
    let store:
      | { digest: string; normalized: NormalizedUsageStoreConfig; origin: "config" | "env" }
      | undefined = loaded.usageStore ? { ...loaded.usageStore, origin: "config" } : undefined;
    if (!store && !this.#store) {
      const dbPath = this.#env("SKEID_USAGE_DB");
      if (dbPath) {
        const raw = { backend: "sqlite", sqlite_path: dbPath };
        store = {
          digest: digestOf({ env: raw }),
          normalized: normalizeUsageStoreConfig(raw, { env: this.#env }),
          origin: "env",
        };
      }
    }
    let prepared: PreparedUsageStore | undefined;
    if (store && store.digest !== this.#store?.digest && this.#hooks.prepareUsageStore) {
      const answer = await this.#hooks.prepareUsageStore(store.normalized);
      prepared = typeof answer === "function" ? { install: answer } : answer;
    }

    let changes: string[];
    try {
      const result = applyLoadedConfig(this.#skeid, loaded, this.#applyState);
      this.#applyState = result.state;
      changes = result.changes;
    } catch (e) {
      await prepared?.discard?.().catch(() => {});
      throw e;
    }

    // Committed: from here on nothing may fail the reload.
    const digests = digestMap(loaded.topLevelDigests);
    if (this.#loaded) {
      const sections = changedSections(this.#sectionDigests, digests);
      if (sections.length > 0) this.#lastChange = { at: this.#now(), sections };
      // The sections the core's apply does not describe (routing, responses, admin, …) are
      // named as changed, so the log line says what `GET /skeid/config` says.
      for (const section of sections) {
        if (APPLY_DESCRIBES.has(section)) continue;
        const state = !this.#sectionDigests.has(section)
          ? "set"
          : !digests.has(section)
          ? "removed"
          : "changed";
        changes.push(`${section} ${state}`);
      }
    }
    this.#sectionDigests = digests;
    this.#loaded = loaded;
    this.#adminKey = loaded.adminKey;
    if (store) {
      if (store.digest !== this.#store?.digest) {
        changes.push(`usage store ${this.#store ? "changed" : "set"}`);
      }
      this.#store = store;
      this.#storeRemovedWarned = false;
    } else if (this.#store?.origin === "config" && !this.#storeRemovedWarned) {
      this.#storeRemovedWarned = true;
      this.#logger.warn("usage_store_removed", {
        path: this.#path,
        message:
          "usage_store was removed from the config; the running store stays in force until restart",
      });
    }
    if (prepared) {
      try {
        await prepared.install();
      } catch (e) {
        this.#logger.error("usage_store_install_failed", { error: errorMessage(e) });
      }
    }
    this.#succeeded();
    this.#logger.info("config_applied", { path: this.#path ?? null, changes });
    for (const w of loaded.warnings) {
      this.#logger.warn("config_warning", { path: this.#path ?? null, warning: formatIssue(w) });
    }
    try {
      this.#hooks.onApplied?.(loaded.config);
    } catch (e) {
      this.#logger.error("config_on_applied_failed", { error: errorMessage(e) });
    }
  }

  /** Warns `config_file_<kind>` once, until that trouble clears; the config in force stays. */
  #warnFile(kind: "missing" | "empty", message: string): void {
    if (this.#fileWarned === kind) return;
    this.#fileWarned = kind;
    this.#logger.warn(`config_file_${kind}`, { path: this.#path ?? null, message });
  }

  #succeeded(): void {
    this.#status = { ok: true, error: null, failedAt: null, failures: 0 };
    this.#failed = undefined;
  }

  /** Records a failed attempt (status, back-off, log); answers the error to throw. */
  #fail(e: unknown, textDigest?: string): unknown {
    const now = this.#now();
    const message = errorMessage(e);
    const attempt = this.#failed && textDigest !== undefined &&
        this.#failed.textDigest === textDigest
      ? this.#failed.attempt + 1
      : 1;
    const retryIn = retryDelayMs(attempt);
    this.#failed = { textDigest: textDigest ?? "", attempt, retryAt: now + retryIn };
    this.#status = {
      ok: false,
      error: message,
      failedAt: now,
      failures: this.#status.failures + 1,
    };
    this.#lastFailure = { at: now, errors: issuesOf(e) };
    if (this.#applied === undefined) {
      // Nothing was ever applied: this is the first load, not a reload, and whoever called it
      // decides what comes next (`skeid serve` exits; no retry is scheduled for it).
      this.#logger.error("config_load_failed", { path: this.#path ?? null, error: message });
      return e;
    }
    this.#logger.error("config_reload_failed", {
      path: this.#path ?? null,
      error: message,
      failures: this.#status.failures,
      retry_in_ms: retryIn,
    });
    return e;
  }
}

/** An error of a config as the admin API shows it. */
export interface ConfigErrorWire {
  path: string;
  line: number | null;
  message: string;
}

/** `GET /skeid/config`'s history part. */
export interface ConfigHistory {
  path: string | null;
  last_change: { at: string; sections: string[] } | null;
  last_failure: { at: string; errors: ConfigErrorWire[] } | null;
}

/** `POST /skeid/config/check`: a dry run of the file on disk. */
export interface ConfigCheck {
  ok: boolean;
  path: string | null;
  file_sha256: string | null;
  changes: { sections: string[] };
  errors: ConfigErrorWire[];
}

function issueToWire(i: ConfigIssue): ConfigErrorWire {
  return { path: i.path, line: i.line ?? null, message: i.message };
}

/** The issues of a failed load: a ConfigLoadError's own, else the error as one issue. */
function issuesOf(e: unknown): ConfigIssue[] {
  if (e instanceof ConfigLoadError) return e.issues;
  return [{ path: "", message: errorMessage(e) }];
}

/** The top-level digests a load brought (computed off the serving thread for a large file). */
function digestMap(digests: Readonly<Record<string, string>>): Map<string, string> {
  return new Map(Object.entries(digests));
}

/**
 * Top-level keys whose change the apply step already puts in words (`nodes replaced (3)`,
 * `policies replaced`, …), or the usage store's own line does.
 */
const APPLY_DESCRIBES: ReadonlySet<string> = new Set([
  "nodes",
  "pricing",
  "aliases",
  "policies",
  "default_policy",
  "names",
  "keys",
  "usage_store",
  "usage_db_path",
]);

/** The top-level sections that differ between two configs' digests (added, changed, removed). */
function changedSections(
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): string[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys].filter((k) => before.get(k) !== after.get(k)).sort();
}

/** ISO-8601 UTC to the second (`2026-09-25T16:08:30Z`). */
function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}
