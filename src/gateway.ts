/**
 * The Gateway: one routing core (`RoutingCore`) with everything a running gateway hangs off it — the config
 * manager (load, watch, reload), the usage ledger, the metrics, the logger, the customer key id
 * cache, the waiter queue, the upstream HTTP client and the in-flight bookkeeping for a graceful
 * drain. Nothing is module state: N gateways can run in one process (tests do).
 *
 * @module
 */
import { errorMessage } from "./error_message.ts";
import { RoutingCore } from "./core/routing_core.ts";
import { keyIdForKey } from "./core/customer_key_id.ts";
import { FunctionTable } from "./core/functions.ts";
import { Tenancy } from "./core/tenancy.ts";
import type { Node } from "./core/types.ts";
import { type ConfigFileSystem, ConfigManager } from "./config/config_manager.ts";
import type { InflightTable } from "./core/inflight_table.ts";
import { assertRegistryProbeBlock } from "./config/registry_probe_block.ts";
import { UsageLedger } from "./usage/ledger.ts";
import { buildUsageEvent } from "./usage/event.ts";
import { normalizeUsageStoreConfig } from "./usage/config.ts";
import { BudgetSync } from "./usage/budget_sync.ts";
import type { ReportFilters, UsageRecorder, UsageReport } from "./usage/types.ts";
import { GatewayMetrics, knownModels } from "./admin/metrics.ts";
import { BufferBudget, maxBufferedBytes } from "./proxy/buffer_budget.ts";
import type { AdminDeps } from "./admin/routes.ts";
import { listedKeyBudgets } from "./admin/keys.ts";
import { LocalSessionStore, type SessionStore } from "./admin/sessions.ts";
import { LiveFeed, type LiveSnapshot, localLiveSnapshot } from "./admin/live.ts";
import { DEFAULT_SESSION_TTL_S } from "./admin/session_auth.ts";
import { createLogger, type Logger, type LogLevel, parseLogLevel } from "./log.ts";
import type { ProxyContext } from "./proxy/context.ts";
import type { Telemetry } from "./telemetry/telemetry.ts";
import { telemetryFor } from "./telemetry/otel.ts";
import type { Exchange } from "./proxy/handler.ts";
import { DEFAULT_CONNECT_TIMEOUT_MS, Http1Client } from "./proxy/http1.ts";
import { abortDrainMs } from "./proxy/abort_billing.ts";
import { maxEventBytes } from "./proxy/relay.ts";
import { ConnectCheck, connectCheckedFetch, proxyConfigured } from "./proxy/connect.ts";
import { KeyIdCache } from "./proxy/identity.ts";
import { IdleWatch } from "./proxy/idle_watch.ts";
import { bodyTimeoutMs } from "./edge/listener.ts";
import { SecondStamp } from "./proxy/usage_facts.ts";
import { type QueueGate, type QueueGroup, WaiterQueue } from "./proxy/wait.ts";
import { type KeyLimiter, LocalKeyLimiter } from "./proxy/key_step.ts";
import { shareKeyLabel } from "./proxy/share_stats.ts";
import { LinkedList } from "./core/linked_list.ts";
import { ResponseKeeper } from "./responses/response_keeper.ts";
import { loadResponses } from "./responses/responses_section.ts";
import { type CapacityProbes, startCapacityProbes } from "./capacity/probe_manager.ts";
import type { KeyBroker } from "./keys/broker.ts";
import { createKeyBroker } from "./keys/create.ts";
import { nodeKey, nodeKeyFromEnv, warmKeys } from "./keys/node_key.ts";
import {
  fenceMessage,
  NODE_KEY,
  type OwnSecrets,
  ownSecretVariables,
  readVariable,
} from "./config/own_secrets.ts";
import { type IssuedKeyAuthority, IssuedKeyDirectory } from "./customer_keys/directory.ts";
import { GrantPolicies } from "./customer_keys/grants.ts";
import { Identities } from "./customer_keys/identity_judge.ts";
import { loadApiKeys } from "./customer_keys/api_keys_section.ts";
import { loadJwt } from "./customer_keys/jwt_section.ts";
import { JwtVerifier } from "./customer_keys/jwt_verify.ts";
import type { Grant } from "./customer_keys/grants.ts";

/** Construction options of a Gateway. */
export interface GatewayOptions {
  /** The YAML config file; without one the gateway starts with an empty config. */
  configPath?: string;
  /** Environment (SKEID_*, node key variables); default `Deno.env.get`. */
  env?: (name: string) => string | undefined;
  /** Default: JSON lines on stderr at SKEID_LOG_LEVEL. */
  logger?: Logger;
  /** Level of the default logger; default SKEID_LOG_LEVEL, else `info`. */
  logLevel?: LogLevel;
  /** `--admin-api-key`: outranks the config. */
  explicitAdminKey?: string;
  /** `--workers N`: processes sharing the nodes' max_conns (ADR 0010). */
  workerCount?: number;
  /** Epoch-ms clock. */
  now?: () => number;
  /** Usage spill file (default: the ledger's). */
  spillPath?: string;
  /** Upstream attempt bound, ms; default SKEID_UPSTREAM_TIMEOUT seconds (300). */
  upstreamTimeoutMs?: number;
  /** Idle upstream connections kept per host; default SKEID_UPSTREAM_POOL (100). */
  upstreamPool?: number;
  /** Fetch used upstream (tests may wrap it). */
  fetch?: typeof fetch;
  /** Config reload poll interval, ms (tests shorten it). */
  reloadIntervalMs?: number;
  /**
   * The key broker resolving `api_key_ref`; default: OpenBao from the OPENBAO_* variables when
   * they are set (`Gateway.open` logs in), else none. `null` turns it off.
   */
  keyBroker?: KeyBroker | null;
  /**
   * Keepalive of a translated stream whose upstream is silent (Anthropic `ping`), ms; default
   * 10,000; 0 = none.
   */
  keepaliveMs?: number;
  /** The prefix index words the workers' affinity picks share (ADR 0031); default its own. */
  prefixIndex?: SharedArrayBuffer;
  /** How the config file is read (a worker reads the text its supervisor sent). */
  configFs?: ConfigFileSystem;
  /**
   * The admission table slots are taken from; default one of this gateway's own. The workers and
   * the supervisor of a group each pass their column of one shared table (ADR 0025).
   */
  inflight?: InflightTable;
  /** Called after every applied config (the supervisor hands it on to the workers). */
  onConfigApplied?: () => void;
  /**
   * A worker of `serve --workers N` (ADR 0025): the parts it takes from its group instead of
   * owning them. Absent: one process, which owns all of them.
   */
  group?: GatewayGroup;
  /**
   * Spans and GenAI metrics (ADR 0039, 0050); default: Skeid's OTLP export when an OTLP endpoint
   * is named, else the quiet one. A worker of a group passes its own, naming the worker.
   */
  telemetry?: Telemetry;
}

/**
 * The parts of a gateway that a worker of a group takes from the group (ADR 0025); a gateway of
 * one process builds its own of each. Chosen by the caller before the gateway is built: nothing
 * is swapped into a running one.
 */
export interface GatewayGroup {
  /** Usage events go to the supervisor's ledger (this gateway opens no store, runs no probes). */
  readonly recorder: UsageRecorder;
  /** The customer keys' windows and budgets, held by the supervisor. */
  readonly keyLimiter: KeyLimiter;
  /** Each key's waiters counted against `share.max_queued` for the group. */
  readonly queueGate: QueueGate;
  /** Fair share ordering the group's waiters as one queue. */
  readonly shareGroup: QueueGroup;
  /** Who judges issued keys instead of this gateway's directory (the supervisor, ADR 0029). */
  readonly issuedAuthority: IssuedKeyAuthority;
  /** Called with every new or changed grant (the supervisor's core admits for the group). */
  readonly grantRecorded: (grant: Grant) => void;
  /** The console sessions, held by the supervisor for the group (ADR 0035). */
  readonly sessions: SessionStore;
  /** The group's Live snapshot, every worker's merged by the supervisor (ADR 0036). */
  readonly liveSnapshot: () => Promise<LiveSnapshot>;
}

/** The `/health` answer. */
export interface HealthBody {
  /** Always `ok` while the process answers: a failed reload does not make it unhealthy. */
  status: "ok";
  /** Always `skeid`: the answer comes from a Skeid gateway. */
  proxy: "skeid";
  /**
   * The reload status: whether the last load/reload succeeded, when the last one failed (ISO time,
   * UTC) and how many failed; the error message is left out.
   */
  config: { ok: boolean; failed_at: string | null; failures: number };
}

/** Default keepalive of a translated stream whose upstream is silent, ms. */
const DEFAULT_KEEPALIVE_MS = 10_000;

function positiveInt(raw: string | undefined, dflt: number): number {
  if (raw === undefined || raw.trim() === "") return dflt;
  const n = Number(raw.trim());
  return Number.isInteger(n) && n > 0 ? n : dflt;
}

/** SKEID_UPSTREAM_CONNECT_TIMEOUT: seconds (fractions allowed), default 3. */
function connectTimeoutMs(raw: string | undefined): number {
  const n = raw === undefined || raw.trim() === "" ? NaN : Number(raw.trim());
  return Number.isFinite(n) && n > 0 ? Math.round(n * 1000) : DEFAULT_CONNECT_TIMEOUT_MS;
}

/** A running gateway's state (the HTTP app is built over it by `buildApp`). */
export class Gateway implements ProxyContext {
  /** The core: inventory, routing, admission, capacity readings, pricing. */
  readonly skeid: RoutingCore;
  /** Loads and reloads the config file (all or nothing) and keeps the reload status. */
  readonly config: ConfigManager;
  /** The usage store with its write-behind queue, retries and spill file. */
  readonly ledger: UsageLedger;
  /** The ledger again, as the proxy's `UsageRecorder` (a worker's posts to its supervisor). */
  readonly recorder: UsageRecorder;
  /** The Responses face's response store, open while `responses.store` is on (ADR 0028). */
  readonly responses: ResponseKeeper;
  /** Volatile counters for `/skeid/metrics`; never billed. */
  readonly metrics: GatewayMetrics;
  /** The gateway's logger (level from `SKEID_LOG_LEVEL` unless one is given). */
  readonly logger: Logger;
  readonly logRequests: boolean;
  /**
   * The core's function table (`POST /skeid/call/:function`), with hooks into the config and the
   * ledger.
   */
  readonly functions: FunctionTable;
  /** Capacity probes (prometheus, registry, custom) of the nodes that ask for one. */
  readonly probes: CapacityProbes;
  /** Resolves nodes' `api_key_ref` (OpenBao), when one is configured. */
  keyBroker: KeyBroker | undefined;
  /**
   * Rate windows and budgets per customer key; counters outlive reloads (ADR 0023). A worker's
   * are not consulted for admission: its `keyLimiter` is the group's.
   */
  readonly tenancy: Tenancy;
  /** Where admission asks for a customer key's windows and budget (this process or the group). */
  readonly keyLimiter: KeyLimiter;
  /** Keeps the budgets' spent part in step with the ledger (start, reload, refresh timer). */
  readonly budgetSync: BudgetSync;
  /** Epoch ms the gateway opened. */
  readonly #startedAt = Date.now();
  readonly #fatal = Promise.withResolvers<string>();
  /** Requests waiting for a tier's capacity, served by fair share between customer keys. */
  readonly waiters: WaiterQueue;
  /** Console sessions (ADR 0035): this process's, or the group's (its supervisor's). */
  readonly sessions: SessionStore;
  /** The Live page's snapshot: this gateway's own, or its group's (ADR 0036). */
  readonly liveSnapshot: () => Promise<LiveSnapshot>;
  /** The one producer of this gateway's live streams. */
  readonly live: LiveFeed;
  /** Customer key → customer key id cache. */
  readonly keyIds: KeyIdCache;
  /** The issued keys (ADR 0029); a worker's has no table (its supervisor's judges). */
  readonly issuedKeys: IssuedKeyDirectory;
  /** The grants of the issued keys and JWT identities judged lately, and their policies. */
  readonly grants: GrantPolicies;
  /** Issued keys and JWTs, judged at intake before the customer key id path. */
  readonly identities: Identities;
  /** The `jwt:` section in force (its canonical text) and its verifier; undefined without one. */
  #jwt: { text: string; verifier: JwtVerifier } | undefined;
  /** The cap on request-body bytes buffered at once (`SKEID_MAX_BUFFERED_BYTES`). */
  readonly buffered: BufferBudget;
  /** The one deadline watch over upstream header waits, body inactivity and stream keepalives. */
  readonly idle: IdleWatch;
  /** The client bodies being read, under the body timeout (`SKEID_BODY_TIMEOUT_MS`, ADR 0020). */
  readonly bodyWatch: IdleWatch;
  /** The environment as the gateway sees it (injected in tests); upstream keys are read from it. */
  readonly env: (name: string) => string | undefined;
  readonly upstreamTimeoutMs: number;
  readonly keepaliveMs: number;
  /** SKEID_ABORT_DRAIN_MS (ADR 0027). */
  readonly abortDrainMs: number;
  /** SKEID_MAX_EVENT_BYTES: a larger upstream stream event ends its stream as broken. */
  readonly maxEventBytes: number;
  readonly httpClient: Deno.HttpClient | undefined;
  readonly fetch: typeof fetch | undefined;
  readonly http1: Http1Client | undefined;
  /** ProxyContext: spans and GenAI metrics, composed before the gateway serves (ADR 0039). */
  readonly telemetry: Telemetry;
  /** Requests in flight: an intrusive list, not a Set (see core/linked_list.ts for why). */
  readonly #exchanges = new LinkedList<Exchange>();
  readonly #stamp = new SecondStamp();
  #drained: (() => void) | undefined;
  /** Nodes warned about a missing upstream key, by `id|variable`, so each is said once. */
  readonly #keyWarned = new Set<string>();
  #closed = false;
  /** A gateway of one process flushes its own telemetry when it closes (a worker after its events). */
  readonly #ownsRecorder: boolean;

  /**
   * Builds the gateway and starts its capacity probes; the config is not loaded (use
   * `Gateway.open`).
   */
  constructor(opts: GatewayOptions = {}) {
    const env = opts.env ?? ((name: string) => Deno.env.get(name));
    this.env = env;
    const group = opts.group;
    // First: a bad value is refused before anything is opened.
    this.bodyWatch = new IdleWatch(bodyTimeoutMs(env));
    const level = opts.logLevel ?? parseLogLevel(env("SKEID_LOG_LEVEL"));
    this.logger = opts.logger ?? createLogger(level);
    this.telemetry = opts.telemetry ?? telemetryFor({ env, logger: this.logger });
    this.#ownsRecorder = group === undefined;
    this.logRequests = opts.logger ? true : level === "debug";
    const grants = new GrantPolicies(
      () => this.skeid.policySet,
      this.logger,
      group?.grantRecorded,
    );
    this.grants = grants;
    this.skeid = new RoutingCore({
      identityPolicy: (id) => grants.policyFor(id),
      now: opts.now,
      workerCount: opts.workerCount,
      inflight: opts.inflight,
      prefixIndex: opts.prefixIndex,
      env,
      logger: this.logger,
      // addNode (admin API, functions) refuses a registry probe block a config load refuses.
      validateNode: assertRegistryProbeBlock,
    });
    this.ledger = new UsageLedger({ logger: this.logger, spillPath: opts.spillPath });
    this.recorder = group?.recorder ?? this.ledger;
    this.responses = new ResponseKeeper(this.logger, this.skeid.now);
    this.metrics = new GatewayMetrics(
      knownModels(this.skeid),
      (id) => shareKeyLabel(id, this.skeid.keyNameForId(id)),
    );
    this.upstreamTimeoutMs = opts.upstreamTimeoutMs ??
      positiveInt(env("SKEID_UPSTREAM_TIMEOUT"), 300) * 1000;
    this.keepaliveMs = Math.max(0, opts.keepaliveMs ?? DEFAULT_KEEPALIVE_MS);
    this.abortDrainMs = abortDrainMs(env("SKEID_ABORT_DRAIN_MS"));
    this.maxEventBytes = maxEventBytes(env("SKEID_MAX_EVENT_BYTES"));
    this.idle = new IdleWatch(this.upstreamTimeoutMs, this.skeid.now, {
      keepaliveMs: this.keepaliveMs,
    });
    const pool = opts.upstreamPool ?? positiveInt(env("SKEID_UPSTREAM_POOL"), 100);
    this.httpClient = typeof Deno.createHttpClient === "function"
      ? Deno.createHttpClient({ poolMaxIdlePerHost: pool })
      : undefined;
    // Plain-HTTP upstreams go through the lean HTTP/1.1 client, HTTPS ones through fetch (TLS,
    // HTTP/2, proxies); SKEID_UPSTREAM_CLIENT=fetch sends everything through fetch. Both bound
    // the connect by SKEID_UPSTREAM_CONNECT_TIMEOUT (fetch through a connect check).
    const connectMs = connectTimeoutMs(env("SKEID_UPSTREAM_CONNECT_TIMEOUT"));
    if ((env("SKEID_UPSTREAM_CLIENT") ?? "").trim().toLowerCase() !== "fetch" && !opts.fetch) {
      this.http1 = new Http1Client({
        maxIdlePerHost: pool,
        now: this.skeid.now,
        connectTimeoutMs: connectMs,
      });
    }
    this.fetch = opts.fetch ?? connectCheckedFetch(
      new ConnectCheck({
        timeoutMs: connectMs,
        now: this.skeid.now,
        enabled: !proxyConfigured(env),
      }),
    );
    this.keyIds = new KeyIdCache({ derive: keyIdForKey });
    this.sessions = group?.sessions ?? new LocalSessionStore(this.skeid.now);
    this.liveSnapshot = group?.liveSnapshot ?? (() => Promise.resolve(this.localLive()));
    this.live = new LiveFeed(this.liveSnapshot);
    this.issuedKeys = new IssuedKeyDirectory({
      now: this.skeid.now,
      logger: this.logger,
      env,
      policySet: () => this.skeid.policySet,
      refreshMs: () => this.skeid.routing.budget_refresh_ms,
      granted: (grant) => grants.record(grant),
    });
    this.identities = new Identities(
      group?.issuedAuthority ?? this.issuedKeys,
      grants,
      () => this.#jwt?.verifier,
    );
    this.buffered = new BufferBudget(maxBufferedBytes(env("SKEID_MAX_BUFFERED_BYTES")));
    const skeid = this.skeid;
    this.waiters = new WaiterQueue({
      now: skeid.now,
      subscribe: (listener) => skeid.onCapacityChange(listener),
      nextChangeAt: () => skeid.nextCapacityChangeAt(),
      pollMs: () => skeid.routing.wait_poll_ms,
      stats: this.metrics.share,
      gate: group?.queueGate,
      group: group?.shareGroup,
      onError: (err) => this.logger.error("waiter_queue_error", { error: errorMessage(err) }),
    });
    this.metrics.shareBacklog = () => this.waiters.backlog();
    const ledger = this.ledger;
    this.tenancy = new Tenancy((id) => skeid.keyPolicy(id));
    this.budgetSync = new BudgetSync({ tenancy: this.tenancy, skeid, ledger, logger: this.logger });
    const tenancy = this.tenancy;
    this.keyLimiter = group?.keyLimiter ?? new LocalKeyLimiter(tenancy, skeid.now, this.logger);
    // A worker's key budgets are the supervisor's: its /skeid/metrics series are the group's.
    this.metrics.keyBudgets = group ? () => [] : () => listedKeyBudgets(skeid, tenancy);
    this.metrics.budgetWarnings = () => tenancy.budgets.warningCount;
    this.metrics.telemetry = () => this.telemetry.counts();
    this.config = new ConfigManager({
      skeid,
      path: opts.configPath,
      env,
      logger: this.logger,
      explicitAdminKey: opts.explicitAdminKey,
      reloadIntervalMs: opts.reloadIntervalMs,
      fs: opts.configFs,
      hooks: {
        prepareUsageStore: group ? undefined : async (cfg) => {
          const store = await ledger.prepareStore(cfg);
          return {
            install: () => ledger.installStore(store, cfg),
            discard: () => store.close(),
          };
        },
        onApplied: (config) => {
          this.#onApplied();
          // A worker of a group has no store of its own (its events go to the supervisor's), but
          // keeps responses in the same database: the store the config names.
          const usage = ledger.config ?? this.config.usageStore();
          this.responses.apply(loadResponses(config.responses, usage?.backend).value, usage);
          // A worker judges issued keys through its supervisor: no table of its own.
          if (!group?.issuedAuthority) {
            this.issuedKeys.apply(loadApiKeys(config.api_keys).value, usage);
          }
          this.#applyJwt(config.jwt);
          opts.onConfigApplied?.();
        },
      },
    });
    const config = this.config;
    this.keyBroker = opts.keyBroker ?? undefined;
    // Follows the inventory by itself (config load/reload, admin API, functions).
    this.probes = group ? noProbes() : startCapacityProbes({
      skeid,
      logger: this.logger,
      env,
    });
    this.functions = new FunctionTable(skeid, {
      reload: () => config.reload(),
      reloadStatus: () => config.status(),
      usageRecord: (args) => {
        // A worker's recorder hands the event to its supervisor's ledger (ADR 0025).
        this.recorder.record(buildUsageEvent(args, skeid.now));
        return Promise.resolve({ ok: true, queued: true });
      },
      usageReport: (filters) => ledger.report(filters as ReportFilters),
      usageConfigure: async (cfg) => {
        const normalized = normalizeUsageStoreConfig(cfg, { env });
        await ledger.configure(normalized);
        return { usage_store: normalized };
      },
      fence: (spec, at) => fenceMessage(spec, at, this.ownSecrets()),
      beforeCall: async () => {
        await config.maybeReload();
      },
    });
  }

  /** Creates a gateway and loads its config (throws when the config does not load). */
  static async open(opts: GatewayOptions = {}): Promise<Gateway> {
    const gw = new Gateway(opts);
    try {
      if (opts.keyBroker === undefined) {
        // OpenBao when OPENBAO_ROLE_ID and OPENBAO_SECRET_ID are set; a failed login warns and
        // runs without a broker. A token that expired and cannot be renewed is fatal: the
        // supervisor restarts the process, which logs in again (no stale-token fallback).
        gw.keyBroker = await createKeyBroker(gw.env, gw.logger, {
          onFatal: (error: Error) => gw.#fatal.resolve(error.message),
        });
      }
      await gw.config.load();
      // The budgets' spent part comes from the ledger before the first request is served.
      await gw.budgetSync.load();
    } catch (err) {
      await gw.close();
      throw err;
    }
    return gw;
  }

  /** What the admin plane needs. */
  adminDeps(): AdminDeps {
    const config = this.config;
    const trustedProxies = proxySet();
    return {
      skeid: this.skeid,
      functions: this.functions,
      adminKey: () => config.adminApiKey(),
      reloadStatus: () => config.status(),
      configApplied: () => config.applied(),
      configHistory: () => config.history(),
      checkConfig: () => config.check(),
      reload: () => config.reload(),
      usageReport: (filters: ReportFilters): Promise<UsageReport> => this.ledger.report(filters),
      usageSeries: (q) => this.ledger.series(q),
      usageEvents: (q) => this.ledger.events(q),
      usageEvent: (id) => this.ledger.event(id),
      metrics: this.metrics,
      tenancy: this.tenancy,
      issuedKeys: this.issuedKeys,
      probes: () => this.probes.status(),
      ownSecretVariables: () => this.ownSecrets(),
      logger: this.logger,
      startedAt: this.#startedAt,
      sessions: this.sessions,
      lastSeen: (id) => this.ledger.lastSeen.of(id),
      liveSnapshot: this.liveSnapshot,
      live: this.live,
      sessionTtlS: () => config.current()?.admin?.session_ttl_s ?? DEFAULT_SESSION_TTL_S,
      trustedProxies: () => trustedProxies(config.current()?.admin?.trusted_proxies),
    };
  }

  /** This gateway's own Live snapshot (a worker's part of its group's). */
  localLive(): LiveSnapshot {
    return localLiveSnapshot({
      skeid: this.skeid,
      tiers: (now) => this.waiters.liveTiers(now),
      probes: () => this.probes.status(),
      workers: () => [this.workerInfo()],
    });
  }

  /** This gateway as the one worker of its group (`GET /skeid/workers` of one process). */
  workerInfo(): {
    index: number;
    started_at: string;
    restarts: number;
    requests: number;
    inflight: number;
  } {
    let requests = 0;
    let inflight = 0;
    for (const m of this.skeid.nodeMetrics()) {
      requests += m.started;
      inflight += m.inflight;
    }
    return {
      index: 0,
      started_at: new Date(this.#startedAt).toISOString(),
      restarts: 0,
      requests,
      inflight,
    };
  }

  /** `/health`: the reload state without its message. */
  health(): HealthBody {
    const s = this.config.status();
    return {
      status: "ok",
      proxy: "skeid",
      config: { ok: s.ok, failed_at: s.failed_at, failures: s.failures },
    };
  }

  /**
   * The node's own key (see ProxyContext.nodeKey): the key broker's answer for `api_key_ref`
   * (a cache hit is synchronous; a miss makes only this request wait), else `api_key_env` read
   * from the in-memory environment.
   */
  nodeKey(node: Node): string | null | undefined | Promise<string | null | undefined> {
    // Through the fence: a node that named an own secret by any path still never sends it.
    const own = this.ownSecrets();
    return nodeKey(node, this.keyBroker, (name) => readVariable(this.env, own, name, NODE_KEY));
  }

  /**
   * The variables read as Skeid's own secrets now: the config's, and the password variable of
   * the usage store in force, which `usage.configure` may have replaced since the config loaded.
   */
  ownSecrets(): OwnSecrets {
    const own = this.config.ownSecretVariables();
    const store = this.ledger.config;
    const live = store && "password_env" in store ? store.password_env : undefined;
    if (live === undefined || live === "" || own.has(live)) return own;
    return ownSecretVariables({ usage_store: { password_env: live } }, "", own);
  }

  /** Resolves with a reason when the gateway cannot go on (an expired OpenBao token). */
  get fatal(): Promise<string> {
    return this.#fatal.promise;
  }

  /** ProxyContext: the `created_at` stamp of an event recorded at `ms`. */
  createdAt(ms: number): string {
    return this.#stamp.at(ms);
  }

  /** Requests in flight (streams included). */
  get inflight(): number {
    return this.#exchanges.size;
  }

  /** ProxyContext: a request started. */
  exchangeStarted(ex: Exchange): void {
    this.#exchanges.add(ex);
  }

  /** ProxyContext: a request ended (its answer fully sent, or its stream ended). */
  exchangeEnded(ex: Exchange): void {
    this.#exchanges.delete(ex);
    if (this.#exchanges.size === 0 && this.#drained) {
      const done = this.#drained;
      this.#drained = undefined;
      done();
    }
  }

  /**
   * Waits until no request is in flight, at most `graceMs`; then stops the upstream of every
   * request still running. True when everything finished within the grace.
   */
  async drain(graceMs: number): Promise<boolean> {
    if (this.#exchanges.size === 0) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drained = new Promise<boolean>((resolve) => {
      this.#drained = () => resolve(true);
      timer = setTimeout(() => resolve(false), Math.max(0, graceMs));
    });
    const ok = await drained;
    clearTimeout(timer);
    this.#drained = undefined;
    if (!ok) {
      this.logger.warn("shutdown_grace_exceeded", { inflight: this.#exchanges.size });
      for (const ex of this.#exchanges) ex.forceClose();
    }
    return ok;
  }

  /** Stops everything the gateway runs; flushes and closes the usage store. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.waiters.close();
    this.live.close();
    await this.budgetSync.close();
    await this.probes.close();
    await this.keyBroker?.close();
    for (const ex of this.#exchanges) ex.forceClose();
    await this.config.close();
    this.idle.close();
    this.bodyWatch.close();
    await this.responses.close().catch(() => {});
    await this.issuedKeys.close().catch(() => {});
    this.#jwt?.verifier.close();
    try {
      await this.ledger.close();
    } catch (err) {
      this.logger.error("usage_close_failed", {
        error: errorMessage(err),
      });
    }
    // After the ledger: the spans and metrics last, each bounded by the export timeout (ADR 0050).
    if (this.#ownsRecorder) await this.telemetry.shutdown();
    this.http1?.close();
    try {
      this.httpClient?.close();
    } catch {
      // already closed
    }
  }

  /** Follows the `jwt:` section: a changed one gets a new verifier (its JWKS fetched anew). */
  #applyJwt(raw: unknown): void {
    const issuers = loadJwt(raw).value;
    const text = JSON.stringify(issuers ?? null);
    if (text === (this.#jwt?.text ?? "null")) return;
    this.#jwt?.verifier.close();
    this.#jwt = issuers === undefined ? undefined : {
      text,
      verifier: new JwtVerifier(issuers, this.logger, fetch, this.skeid.now),
    };
  }

  /** After every applied config: warn once about nodes whose own key resolves nothing. */
  #onApplied(): void {
    // A new store or new budget periods are read from the ledger (a reload keeps the counters).
    this.budgetSync.load().catch(() => {});
    const seen = new Set<string>();
    const nodes = this.skeid.listNodes();
    warmKeys(nodes, this.keyBroker);
    for (const node of nodes) {
      // With a broker, a reference is resolved per request (and its failures warned there).
      if (this.keyBroker && node.api_key_ref) continue;
      if (nodeKeyFromEnv(node, this.env) !== null) continue;
      const source = node.api_key_env ?? node.api_key_ref ?? "";
      const tag = `${node.id}|${source}`;
      seen.add(tag);
      if (this.#keyWarned.has(tag)) continue;
      this.#keyWarned.add(tag);
      this.logger.warn("upstream_key_unavailable", {
        node_id: node.id,
        ...(node.api_key_env ? { api_key_env: node.api_key_env } : {}),
        ...(node.api_key_ref && !node.api_key_env ? { api_key_ref: node.api_key_ref } : {}),
        message: `node '${node.id}' names an upstream key source that resolves no key; ` +
          "it will not be called",
      });
    }
    for (const tag of this.#keyWarned) if (!seen.has(tag)) this.#keyWarned.delete(tag);
  }
}

/** The `admin.trusted_proxies` in force as a set, made again only when the list changes. */
function proxySet(): (list: readonly string[] | null | undefined) => ReadonlySet<string> {
  let last: { list: readonly string[] | null | undefined; set: ReadonlySet<string> } | undefined;
  return (list) => {
    if (last === undefined || last.list !== list) last = { list, set: new Set(list ?? []) };
    return last.set;
  };
}

/** A worker's probes: none (the supervisor probes once for all and posts the readings). */
function noProbes(): CapacityProbes {
  const done = (): Promise<void> => Promise.resolve();
  return { refresh() {}, close: done, status: () => [], pollNow: done, settled: done };
}
