/**
 * The supervisor of `skeid serve --workers N` (ADR 0025): the main isolate. It serves no client
 * request. It owns what is one per process — the config (loaded, validated and watched once,
 * each applied version handed to every worker), the usage ledger (the workers' events are
 * written here), the capacity probes (readings posted to every worker), the OpenBao login — and
 * the shared inflight table. It starts the N workers on the one `--listen` address, replaces one
 * that dies (its slots given back), and on stop drains them all, then flushes the ledger once.
 *
 * @module
 */
import { Gateway, type GatewayOptions } from "../gateway.ts";
import { QUIET_TELEMETRY } from "../telemetry/telemetry.ts";
import { flushBoundMs } from "../telemetry/otel_settings.ts";
import {
  InflightTable,
  inflightTableBytes,
  type InflightTableSize,
} from "../core/inflight_table.ts";
import { type ConfigFileSystem, denoFileSystem } from "../config/config_manager.ts";
import type { CapacityReadingInput } from "../core/types.ts";
import { PrefixIndex } from "../core/prefix_index.ts";
import { errorMessage } from "../error_message.ts";
import type { LogLevel } from "../log.ts";
import { buildApp } from "../app.ts";
import { mergeEjections, mergePrometheus, mergeShare, sumNodeMetrics } from "./metrics_merge.ts";
import type { EjectionSnapshot } from "../core/ejection.ts";
import type { ShareWire } from "../proxy/share_stats.ts";
import { KEY_TABLE_CAPACITY, KeyGroupOwner } from "./key_group.ts";
import { ShareBoard, type ShareBoardSize } from "./share_board.ts";
import { answerSession } from "./remote_sessions.ts";
import { type LiveSnapshot, mergeLiveSnapshots } from "../admin/live.ts";
import type { NodeMetrics } from "../core/types.ts";
import {
  type ConfigVersion,
  type CoreOp,
  fromWire,
  type FromWorker,
  isInventoryMutation,
  responseToWire,
  type ToWorker,
  type WireRequest,
  type WireResponse,
  type WorkerStats,
  type WorkerView,
} from "./protocol.ts";

/** Distinct node ids the shared table holds. */
const TABLE_CAPACITY = 4096;

/** Options of `startSupervisor`. */
export interface SupervisorOptions extends GatewayOptions {
  hostname: string;
  port: number;
  /** Workers to run (≥ 2; one worker is the plain single-isolate server). */
  workers: number;
  /** The environment the workers see when not the process's (tests). */
  workerEnv?: Record<string, string>;
}

/** One worker as `GET /skeid/workers` lists it. */
export interface WorkerInfo extends WorkerStats {
  index: number;
  /** ISO time the running isolate of this index started. */
  started_at: string;
  /** How many times this index was replaced after it died. */
  restarts: number;
}

interface Slot {
  index: number;
  worker: Worker;
  startedAt: number;
  restarts: number;
  /** Highest config generation it acknowledged. */
  acked: number;
  stopping: boolean;
  stopped: PromiseWithResolvers<void>;
  stats?: PromiseWithResolvers<WorkerStats>;
  /** `local` requests waiting for this worker's answer, by id. */
  local: Map<number, (response: WireResponse) => void>;
  /** `view` and `core` questions waiting for this worker's answer, by id (undefined: it died). */
  asked: Map<number, (answer: WorkerView | string | null | undefined) => void>;
}

/** The config file read through a recorder: the text the supervisor last read is what it sends. */
class RecordingFs implements ConfigFileSystem {
  last = "";
  stat(path: string) {
    return denoFileSystem.stat(path);
  }
  async readTextFile(path: string): Promise<string> {
    this.last = await denoFileSystem.readTextFile(path);
    return this.last;
  }
}

/** A running group of workers. */
export class Supervisor {
  readonly gateway: Gateway;
  readonly table: InflightTable;
  readonly size: InflightTableSize;
  readonly buffer: SharedArrayBuffer;
  /** The customer keys' `max_inflight` table, one column per worker. */
  readonly keyTable: InflightTable;
  /** The fair-share board the workers share (ADR 0025). */
  readonly shareBuffer: SharedArrayBuffer;
  /**
   * The prefix index words every worker's affinity pick shares (ADR 0031), sized by the config
   * at start; a reload to another size gives each worker an index of its own.
   */
  readonly prefixBuffer: SharedArrayBuffer;
  readonly shareSize: ShareBoardSize;
  readonly #share: ShareBoard;
  /** The group's rate windows and budgets (the supervisor's tenancy), asked by the workers. */
  readonly keys: KeyGroupOwner;
  /** The address every worker listens on (the real port when 0 was asked). */
  addr: Deno.NetAddr;
  #slots: Slot[] = [];
  #config: ConfigVersion;
  #fs: RecordingFs;
  #stopping: Promise<void> | undefined;
  readonly #finished = Promise.withResolvers<void>();
  #applied = Promise.withResolvers<void>();
  #readings = new Map<string, string>();
  #readingsQueued = false;
  readonly #opts: SupervisorOptions;
  #app: ReturnType<typeof buildApp> | undefined;
  #nextId = 1;
  /**
   * Every worker listens (the start finished): until then `/health` answers 503, so nothing
   * that waits for it sends traffic the kernel would hand to the first worker alone.
   */
  #ready = false;

  private constructor(
    opts: SupervisorOptions,
    gateway: Gateway,
    fs: RecordingFs,
    table: InflightTable,
  ) {
    this.#opts = opts;
    this.gateway = gateway;
    this.#fs = fs;
    this.table = table;
    this.size = { capacity: table.capacity, workers: table.workers };
    this.buffer = table.words.buffer as SharedArrayBuffer;
    this.#config = { generation: 1, text: fs.last };
    this.keyTable = InflightTable.shared(KEY_TABLE_CAPACITY, opts.workers);
    this.shareSize = { workers: opts.workers, keys: KEY_TABLE_CAPACITY };
    this.shareBuffer = ShareBoard.buffer(this.shareSize);
    this.prefixBuffer = PrefixIndex.buffer(gateway.skeid.routing.prefix_index_blocks);
    this.#share = new ShareBoard(
      this.shareBuffer,
      this.shareSize,
      -1,
      this.keyTable,
      () => table.generation(),
    );
    this.keys = new KeyGroupOwner(gateway.tenancy, () => gateway.skeid.now(), gateway.logger);
    this.addr = { transport: "tcp", hostname: opts.hostname, port: opts.port };
  }

  /** Loads the config (throws when it does not load), starts the workers. */
  static async start(opts: SupervisorOptions): Promise<Supervisor> {
    const fs = new RecordingFs();
    // The config manager calls back before the supervisor exists (the first load): nothing to
    // hand on yet, the workers get that version with their start.
    const late: { supervisor?: Supervisor } = {};
    // One column per worker, and the last one the supervisor's own: a slot its core takes (the
    // function table, tests) counts for the group like any worker's.
    const size = { capacity: TABLE_CAPACITY, workers: opts.workers + 1 };
    const buffer = new SharedArrayBuffer(inflightTableBytes(size));
    const table = new InflightTable(buffer, size, opts.workers);
    const gateway = await Gateway.open({
      ...opts,
      // The workers serve the requests and export their spans; the supervisor's gateway none.
      telemetry: opts.telemetry ?? QUIET_TELEMETRY,
      // One set of probes, polling at the configured interval (not spread over the workers).
      workerCount: 1,
      inflight: table,
      configFs: fs,
      onConfigApplied: () => {
        if (late.supervisor) late.supervisor.#configApplied();
      },
    });
    const supervisor = new Supervisor(opts, gateway, fs, table);
    late.supervisor = supervisor;
    try {
      // Worker 0 first: with port 0 it learns the real port the others then share.
      const first = await supervisor.#spawn(0, 0);
      supervisor.addr = { transport: "tcp", hostname: first.hostname, port: first.port };
      await Promise.all(
        Array.from({ length: opts.workers - 1 }, (_, i) => supervisor.#spawn(i + 1, 0)),
      );
    } catch (err) {
      await supervisor.stop(0);
      throw err;
    }
    gateway.skeid.onCapacityChange(() => supervisor.#queueReadings());
    supervisor.#queueReadings();
    gateway.config.watch();
    supervisor.#ready = true;
    return supervisor;
  }

  /** Resolves once every worker stopped and the ledger was flushed. */
  get finished(): Promise<void> {
    return this.#finished.promise;
  }

  /** The config generation every worker runs (the last one each acknowledged, all agreeing). */
  get appliedGeneration(): number {
    return Math.min(...this.#slots.map((s) => s.acked));
  }

  /** Resolves once every worker acknowledged the config generation current now. */
  configApplied(): Promise<void> {
    return this.appliedGeneration >= this.#config.generation
      ? Promise.resolve()
      : this.#applied.promise;
  }

  /** Each worker: index, start time, requests served, inflight, restarts. */
  async workers(): Promise<WorkerInfo[]> {
    return await Promise.all(this.#slots.map(async (slot) => {
      slot.stats ??= Promise.withResolvers<WorkerStats>();
      const pending = slot.stats.promise;
      this.#send(slot, { type: "stats" });
      const stats = await pending;
      return {
        index: slot.index,
        started_at: new Date(slot.startedAt).toISOString(),
        restarts: slot.restarts,
        ...stats,
      };
    }));
  }

  /** What every worker's gateway holds now (a worker that died meanwhile is left out). */
  async views(): Promise<WorkerView[]> {
    const answers = await Promise.all(this.#slots.map((slot) => this.#ask(slot, { type: "view" })));
    return answers.filter((a): a is WorkerView => typeof a === "object" && a !== null);
  }

  /** The group's Live snapshot: every worker's own merged (ADR 0036). */
  async liveSnapshot(): Promise<LiveSnapshot> {
    const [views, workers] = await Promise.all([this.views(), this.workers()]);
    return mergeLiveSnapshots(
      views.map((v) => v.live),
      this.gateway.skeid.now(),
      workers,
      this.gateway.probes.status(),
    );
  }

  /**
   * Applies a change to the supervisor's core and every worker's; resolves once each applied it
   * (throws the first error). For what no admin route changes: tests, drills.
   */
  async core(op: CoreOp): Promise<void> {
    if (op.name === "forgetCapacity") this.gateway.skeid.forgetCapacity(op.id);
    else this.gateway.skeid.addNode(op.spec);
    const answers = await Promise.all(
      this.#slots.map((slot) => this.#ask(slot, { type: "core", op })),
    );
    const error = answers.find((a) => typeof a === "string");
    if (typeof error === "string") throw new Error(error);
  }

  #ask(
    slot: Slot,
    msg: { type: "view" } | { type: "core"; op: CoreOp },
  ): Promise<WorkerView | string | null | undefined> {
    const id = this.#nextId++;
    const answered = new Promise<WorkerView | string | null | undefined>((resolve) =>
      slot.asked.set(id, resolve)
    );
    this.#send(slot, { ...msg, id });
    return answered;
  }

  /** A worker's log line, written by the supervisor's logger with the worker's index. */
  #log(line: string, worker: number): void {
    try {
      const { level, event, ts: _ts, ...fields } = JSON.parse(line) as Record<string, unknown>;
      const lvl: LogLevel = level === "error" || level === "warn" || level === "info"
        ? level
        : "debug";
      this.gateway.logger[lvl](String(event), { ...fields, worker });
    } catch {
      // A worker writes JSON lines only; anything else is not worth a crash.
    }
  }

  /** Ends a worker as a crash would (tests, operators' drills); it is replaced. */
  kill(index: number): void {
    const slot = this.#slots[index];
    if (slot) this.#died(slot, "killed");
  }

  /** Drains every worker (bounded by `graceMs`), then flushes and closes the ledger once. */
  stop(graceMs = 10_000): Promise<void> {
    this.#stopping ??= (async () => {
      // A worker drains for the grace, then flushes its telemetry, bounded by its export
      // timeout (ADR 0050): it is ended only past both, plus a margin.
      const env = this.#opts.workerEnv;
      const flushMs = flushBoundMs((name) => env ? env[name] : Deno.env.get(name));
      await Promise.all(this.#slots.map((slot) => {
        slot.stopping = true;
        this.#send(slot, { type: "stop", graceMs });
        const timer = setTimeout(() => slot.stopped.resolve(), graceMs + flushMs + 5_000);
        return slot.stopped.promise.finally(() => {
          clearTimeout(timer);
          slot.worker.terminate();
        });
      }));
      await this.gateway.close();
      this.#finished.resolve();
    })();
    return this.#stopping;
  }

  #spawn(index: number, restarts: number): Promise<{ hostname: string; port: number }> {
    const worker = new Worker(new URL("./worker_main.ts", import.meta.url).href, {
      type: "module",
    });
    const slot: Slot = {
      index,
      worker,
      startedAt: Date.now(),
      restarts,
      acked: this.#config.generation,
      stopping: false,
      stopped: Promise.withResolvers<void>(),
      local: new Map(),
      asked: new Map(),
    };
    this.#slots[index] = slot;
    const listening = Promise.withResolvers<{ hostname: string; port: number }>();
    worker.onmessage = (e: MessageEvent<FromWorker>) => {
      const msg = e.data;
      switch (msg.type) {
        case "listening":
          listening.resolve({ hostname: msg.hostname, port: msg.port });
          return;
        case "failed":
          listening.reject(new Error(msg.error));
          if (this.#slots[index] === slot) this.#died(slot, msg.error);
          return;
        case "usage":
          for (const event of msg.events) this.gateway.ledger.record(event);
          return;
        case "key_admit": {
          const decision = this.keys.admit(index, msg.keyId, msg.request, msg.inflight);
          this.#send(slot, { type: "key_admit_reply", id: msg.id, decision });
          return;
        }
        case "log":
          this.#log(msg.line, index);
          return;
        case "view_reply":
        case "core_reply": {
          const answer = msg.type === "view_reply" ? msg.view : msg.error ?? null;
          slot.asked.get(msg.id)?.(answer);
          slot.asked.delete(msg.id);
          return;
        }
        case "issued_auth": {
          const gateway = this.gateway;
          gateway.identities.issuedGrant(msg.key).then(
            (grant) => {
              // The supervisor's own core answers the group's key_admit: it needs the policy.
              gateway.grants.record(grant);
              this.#send(slot, { type: "issued_auth_reply", id: msg.id, grant });
            },
            () => this.#send(slot, { type: "issued_auth_reply", id: msg.id, grant: null }),
          );
          return;
        }
        case "live":
          this.liveSnapshot().then((snapshot) =>
            this.#send(slot, { type: "live_reply", id: msg.id, snapshot })
          );
          return;
        case "session":
          answerSession(this.gateway.sessions, msg.op).then((answer) =>
            this.#send(slot, { type: "session_reply", id: msg.id, answer })
          );
          return;
        case "grant":
          this.gateway.grants.record(msg.grant);
          return;
        case "key_settle":
          this.keys.settle(msg.hold, msg.actual);
          return;
        case "key_cancel":
          this.keys.cancel(msg.hold);
          return;
        case "config_ack":
          if (msg.error !== undefined) {
            // Every worker applies the text the supervisor validated: one that cannot is broken.
            this.gateway.logger.error("worker_config_failed", { worker: index, error: msg.error });
            this.#died(slot, `config ${msg.generation}: ${msg.error}`);
            return;
          }
          slot.acked = Math.max(slot.acked, msg.generation);
          this.#checkApplied();
          return;
        case "stats":
          slot.stats?.resolve({ requests: msg.requests, inflight: msg.inflight });
          slot.stats = undefined;
          return;
        case "stopped":
          slot.stopped.resolve();
          return;
        case "forward":
          this.#answer(msg.request).then(
            (response) => this.#send(slot, { type: "forward_reply", id: msg.id, response }),
          );
          return;
        case "key": {
          const broker = this.gateway.keyBroker;
          const answer = broker
            ? broker.keyFor(msg.ref)
            : Promise.resolve({ error: "no key broker" });
          answer.then((a) => this.#send(slot, { type: "key_reply", id: msg.id, answer: a }));
          return;
        }
        case "local_reply":
          slot.local.get(msg.id)?.(msg.response);
          slot.local.delete(msg.id);
          return;
      }
    };
    worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      listening.reject(new Error(e.message));
      if (this.#slots[index] === slot) this.#died(slot, e.message);
    };
    const o = this.#opts;
    this.#send(slot, {
      type: "start",
      index,
      workers: o.workers,
      buffer: this.buffer,
      size: this.size,
      hostname: o.hostname,
      port: index === 0 && restarts === 0 ? o.port : this.addr.port,
      configPath: o.configPath,
      explicitAdminKey: o.explicitAdminKey,
      config: this.#config,
      keyBroker: this.gateway.keyBroker !== undefined,
      keyBuffer: this.keyTable.words.buffer as SharedArrayBuffer,
      keySize: { capacity: this.keyTable.capacity, workers: this.keyTable.workers },
      shareBuffer: this.shareBuffer,
      shareSize: this.shareSize,
      prefixBuffer: this.prefixBuffer,
      gateway: {
        env: o.workerEnv,
        upstreamTimeoutMs: o.upstreamTimeoutMs,
        keepaliveMs: o.keepaliveMs,
        logLevel: o.logLevel,
      },
    });
    return listening.promise;
  }

  /** A worker ended unasked: its slots go back, it is logged and replaced. */
  #died(slot: Slot, reason: string): void {
    if (slot.stopping || this.#slots[slot.index] !== slot) return;
    slot.worker.terminate();
    const freed = this.table.releaseWorker(slot.index);
    this.keyTable.releaseWorker(slot.index);
    this.#share.workerDied(slot.index);
    this.keys.workerDied(slot.index);
    this.gateway.logger.error("worker_died", {
      worker: slot.index,
      reason,
      // Requests it held at nodes: counted as failed (their clients lost the connection).
      failed_requests: freed,
    });
    slot.stats?.resolve({ requests: 0, inflight: 0 });
    for (const answer of slot.local.values()) {
      answer({ status: 503, headers: [], body: `worker ${slot.index} died` });
    }
    slot.local.clear();
    for (const answer of slot.asked.values()) answer(undefined);
    slot.asked.clear();
    if (this.#stopping) return;
    this.#spawn(slot.index, slot.restarts + 1).catch((err) =>
      this.gateway.logger.error("worker_start_failed", {
        worker: slot.index,
        error: errorMessage(err),
      })
    );
  }

  /**
   * An admin request a worker handed over, answered for the group: on the supervisor's own
   * gateway (its admin key, its config, its ledger); an inventory change that succeeded there is
   * then applied by every worker before the answer goes back.
   */
  async #answer(request: WireRequest): Promise<WireResponse> {
    const app = this.#app ??= buildApp(this.gateway);
    const path = request.path.split("?")[0];
    if (path === "/health" && !this.#ready) return STARTING;
    const grouped = path === "/skeid/workers" || path === "/skeid/metrics" ||
      path === "/skeid/metrics/nodes" || path === "/skeid/live/snapshot";
    // The group routes are checked by the supervisor's own admin plane first (key, 401/404).
    const asked = grouped
      ? { ...request, method: "GET", path: "/skeid/config", body: "" }
      : request;
    if (path === "/skeid/config" || path === "/skeid/config/reload") {
      // The config status is the group's: said only once every worker runs it.
      const res = await responseToWire(await app(fromWire(request)));
      await this.configApplied();
      return path === "/skeid/config" ? await responseToWire(await app(fromWire(request))) : res;
    }
    const res = await responseToWire(await app(fromWire(asked)));
    if (res.status !== 200) return res;
    if (path === "/skeid/workers") return jsonWire({ workers: await this.workers() });
    if (path === "/skeid/live/snapshot") return jsonWire(await this.liveSnapshot());
    if (path === "/skeid/metrics/nodes") return await this.#nodeMetrics(request);
    if (path === "/skeid/metrics") {
      const answers = await Promise.all(this.#slots.map((slot) => this.#local(slot, request)));
      // The supervisor's own series too: the key budgets and their warnings are its (the
      // workers report none), its request counters are zeros.
      answers.push(await responseToWire(await app(fromWire(request))));
      return {
        status: 200,
        headers: [["content-type", "text/plain; version=0.0.4; charset=utf-8"]],
        body: mergePrometheus(answers.filter((a) => a.status === 200).map((a) => a.body)),
      };
    }
    if (isInventoryMutation(request.method, path)) {
      await Promise.all(this.#slots.map((slot) => this.#local(slot, request)));
    }
    return res;
  }

  /** Runs an admin request on one worker's gateway. */
  #local(slot: Slot, request: WireRequest): Promise<WireResponse> {
    const id = this.#nextId++;
    const answered = new Promise<WireResponse>((resolve) => slot.local.set(id, resolve));
    this.#send(slot, { type: "local", id, request });
    return answered;
  }

  /** `/skeid/metrics/nodes` of the group: each worker's counters summed, inflight the group's. */
  async #nodeMetrics(request: WireRequest): Promise<WireResponse> {
    const answers = await Promise.all(this.#slots.map((slot) => this.#local(slot, request)));
    const bodies = answers.filter((a) => a.status === 200).map((a) => JSON.parse(a.body));
    const probes = this.gateway.probes.status();
    return jsonWire({
      metrics: sumNodeMetrics(bodies.map((b) => (b.metrics ?? []) as NodeMetrics[])),
      probes,
      fair_share: mergeShare(bodies.map((b) => b.fair_share as ShareWire)),
      ejections: mergeEjections(bodies.map((b) => b.ejections as EjectionSnapshot[])),
    });
  }

  #send(slot: Slot, msg: ToWorker): void {
    slot.worker.postMessage(msg);
  }

  /** The supervisor applied a config: every worker gets the same text, numbered. */
  #configApplied(): void {
    if (this.#slots.length === 0) return;
    this.#config = { generation: this.#config.generation + 1, text: this.#fs.last };
    for (const slot of this.#slots) this.#send(slot, { type: "config", ...this.#config });
  }

  #checkApplied(): void {
    if (this.appliedGeneration < this.#config.generation) return;
    const done = this.#applied;
    this.#applied = Promise.withResolvers<void>();
    done.resolve();
  }

  /** Probe readings changed in the supervisor's core: post them once per tick. */
  #queueReadings(): void {
    if (this.#readingsQueued) return;
    this.#readingsQueued = true;
    setTimeout(() => {
      this.#readingsQueued = false;
      const skeid = this.gateway.skeid;
      const readings: [string, CapacityReadingInput | null][] = [];
      const seen = new Set<string>();
      for (const node of skeid.listNodes()) {
        const reading = skeid.capacityReading(node.id);
        if (!reading) continue;
        seen.add(node.id);
        const key = JSON.stringify(reading);
        if (this.#readings.get(node.id) === key) continue;
        this.#readings.set(node.id, key);
        readings.push([node.id, reading]);
      }
      for (const id of this.#readings.keys()) {
        if (seen.has(id)) continue;
        this.#readings.delete(id);
        readings.push([id, null]);
      }
      if (readings.length === 0) return;
      for (const slot of this.#slots) this.#send(slot, { type: "readings", readings });
    }, 0);
  }
}

/** `/health` while workers are still starting (the first one listens, another does not yet). */
const STARTING: WireResponse = {
  status: 503,
  headers: [["content-type", "application/json"], ["retry-after", "1"]],
  body: JSON.stringify({ status: "starting", proxy: "skeid" }),
};

/** A JSON answer as plain data. */
function jsonWire(body: unknown): WireResponse {
  return {
    status: 200,
    headers: [["content-type", "application/json; charset=utf-8"]],
    body: JSON.stringify(body),
  };
}
