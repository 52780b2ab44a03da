/**
 * A worker of `skeid serve --workers N` (ADR 0025): one Web Worker isolate serving the shared
 * `--listen` address (reusePort) with its own gateway, over the process's shared inflight table.
 * Its config comes from the supervisor (text, numbered), its usage events go to the
 * supervisor's ledger (batched per tick), its capacity readings come from the supervisor's
 * probes. A slot freed in any worker wakes this worker's waiters.
 *
 * @module
 */
/// <reference lib="deno.worker" />
import { InflightTable } from "../core/inflight_table.ts";
import type { ConfigFileSystem } from "../config/config_manager.ts";
import { type RunningServer, startServer } from "../server.ts";
import { errorMessage } from "../error_message.ts";
import type { UsageEvent, UsageRecorder } from "../usage/types.ts";
import type { CapacityReading, CapacityReadingInput } from "../core/types.ts";
import type { ServeHandler } from "../edge/listener.ts";
import { CachingKeyBroker, type KeyAnswer } from "../keys/broker.ts";
import { createLogger, type Logger } from "../log.ts";
import { queueGate, RemoteKeyGroup } from "./key_group.ts";
import { RemoteIssuedKeys } from "./remote_issued.ts";
import { RemoteSessions } from "./remote_sessions.ts";
import type { LiveSnapshot } from "../admin/live.ts";
import { ShareBoard } from "./share_board.ts";
import { telemetryFor } from "../telemetry/otel.ts";
import {
  type ConfigVersion,
  forwardedToSupervisor,
  fromWire,
  type FromWorker,
  responseFromWire,
  responseToWire,
  toWire,
  type ToWorker,
  type WireResponse,
  type WorkerView,
} from "./protocol.ts";

function post(message: FromWorker): void {
  self.postMessage(message);
}

/** Usage events handed to the supervisor, one message per tick. */
export class PostingRecorder implements UsageRecorder {
  #batch: UsageEvent[] = [];
  constructor(readonly send: (events: UsageEvent[]) => void) {}
  record(event: UsageEvent): void {
    if (this.#batch.length === 0) setTimeout(() => this.flush(), 0);
    this.#batch.push(event);
  }
  /** Sends what is batched now. */
  flush(): void {
    if (this.#batch.length === 0) return;
    const events = this.#batch;
    this.#batch = [];
    this.send(events);
  }
}

/** The config file as the supervisor last sent it: its generation is the file's stamp. */
class PostedConfig implements ConfigFileSystem {
  constructor(public version: ConfigVersion) {}
  stat() {
    return Promise.resolve({ mtimeMs: this.version.generation, size: this.version.text.length });
  }
  readTextFile() {
    return Promise.resolve(this.version.text);
  }
}

let running: RunningServer | undefined;
/** A config is being applied (the start's, or one posted): its log lines are the supervisor's. */
let applying = true;
/** The group's customer-key limits, asked of the supervisor. */
let keyGroup: RemoteKeyGroup | undefined;
/** The gateway's own handler (what a `local` request from the supervisor runs on). */
let inner: ServeHandler | undefined;
/** Forwarded requests waiting for the supervisor's answer, by id. */
const forwarded = new Map<number, (response: WireResponse) => void>();
let nextId = 1;
/** Issued keys, judged by the supervisor's directory (ADR 0029). */
const issued = new RemoteIssuedKeys((msg) => post(msg), () => nextId++);
/** Live snapshots asked of the supervisor, by id. */
const lives = new Map<number, (snapshot: LiveSnapshot) => void>();
/** Console sessions, held by the supervisor for the group (ADR 0035). */
const sessions = new RemoteSessions((msg) => post(msg), () => nextId++);

/** The group's admin requests go to the supervisor; everything else is served here. */
function wrap(handler: ServeHandler): ServeHandler {
  inner = handler;
  return async (req, info) => {
    const url = new URL(req.url);
    if (!forwardedToSupervisor(req.method, url.pathname)) return await handler(req, info);
    const id = nextId++;
    const answered = new Promise<WireResponse>((resolve) => forwarded.set(id, resolve));
    post({ type: "forward", id, request: await toWire(req) });
    return responseFromWire(await answered);
  };
}

/** Node keys asked of the supervisor, by id. */
const keys = new Map<number, (answer: KeyAnswer) => void>();

/** The supervisor's one OpenBao login, behind this worker's own cache (ADR 0025). */
function remoteKeyBroker(logger: Logger): CachingKeyBroker {
  return new CachingKeyBroker({
    resolveKeyAsync(ref: string): Promise<KeyAnswer> {
      const id = nextId++;
      const answered = new Promise<KeyAnswer>((resolve) => keys.set(id, resolve));
      post({ type: "key", id, ref });
      return answered;
    },
  }, { logger });
}

const LOCAL_INFO = {
  remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 0 },
  completed: Promise.resolve(),
} as Deno.ServeHandlerInfo<Deno.NetAddr>;
let recorder: PostingRecorder | undefined;
let posted: PostedConfig | undefined;
/** Probe readings last applied, by node id, so one that ended can be forgotten. */
const readingSources = new Map<string, string>();
/** Messages that came before the gateway was up (config, readings), handled in order after. */
const early: ToWorker[] = [];
let work: Promise<void> = Promise.resolve();

async function start(msg: Extract<ToWorker, { type: "start" }>): Promise<void> {
  // The group's parts, built before the gateway that uses them (ADR 0025): node and key slots in
  // shared tables, windows and budgets asked of the supervisor, usage events posted to its
  // ledger, fair share over the shared board.
  const inflight = new InflightTable(msg.buffer, msg.size, msg.index);
  const keyTable = new InflightTable(msg.keyBuffer, msg.keySize, msg.index);
  recorder = new PostingRecorder((events) => post({ type: "usage", events }));
  keyGroup = new RemoteKeyGroup(post, keyTable, () => nextId++);
  const board = new ShareBoard(
    msg.shareBuffer,
    msg.shareSize,
    msg.index,
    keyTable,
    () => inflight.generation(),
  );
  posted = new PostedConfig(msg.config);
  try {
    // One writer for the process: the supervisor's logger writes every worker's lines.
    const logger = createLogger(msg.gateway.logLevel, (line) => {
      // What applying a config says, the supervisor said once for the group (same text).
      if (!applying) post({ type: "log", line });
    });
    running = await startServer({
      hostname: msg.hostname,
      port: msg.port,
      reusePort: true,
      watch: false,
      configPath: msg.configPath,
      explicitAdminKey: msg.explicitAdminKey,
      workerCount: msg.workers,
      inflight,
      group: {
        recorder,
        keyLimiter: keyGroup,
        queueGate: queueGate(keyTable),
        shareGroup: board,
        issuedAuthority: issued,
        // Posted before the request's key_admit (messages keep their order).
        grantRecorded: (grant) => post({ type: "grant", grant }),
        sessions,
        liveSnapshot: () => {
          const id = nextId++;
          const answered = new Promise<LiveSnapshot>((resolve) => lives.set(id, resolve));
          post({ type: "live", id });
          return answered;
        },
      },
      prefixIndex: msg.prefixBuffer,
      configFs: posted,
      wrap,
      keyBroker: msg.keyBroker ? remoteKeyBroker(createLogger(msg.gateway.logLevel)) : null,
      upstreamTimeoutMs: msg.gateway.upstreamTimeoutMs,
      keepaliveMs: msg.gateway.keepaliveMs,
      logLevel: msg.gateway.logLevel,
      logger,
      ...(msg.gateway.env ? { env: (name: string) => msg.gateway.env![name] } : {}),
      // Every worker exports its own spans; `skeid.worker` says which (ADR 0039, 0050).
      telemetry: telemetryFor({
        env: (name) => msg.gateway.env ? msg.gateway.env[name] : Deno.env.get(name),
        worker: msg.index,
        logger,
      }),
    });
  } catch (err) {
    post({ type: "failed", error: errorMessage(err) });
    return;
  } finally {
    applying = false;
  }
  // A change another worker publishes (one of its waiters declined what this worker left it)
  // wakes this worker's waiters.
  const waiters = running.gateway.waiters;
  follow(() => board.pokes(), (seen) => board.poked(seen), () => waiters.wake());
  const skeid = running.gateway.skeid;
  // A release in any worker bumps the table's generation: wake this worker's waiters.
  follow(
    () => inflight.generation(),
    (seen) => inflight.released(seen),
    () => skeid.capacityChanged(),
  );
  post({ type: "listening", hostname: running.addr.hostname, port: running.addr.port });
}

/**
 * Calls `fn` whenever a shared counter moves: `read` reads it, `moved(seen)` resolves once it is
 * past `seen` (`Atomics.waitAsync`). For as long as the worker lives.
 */
function follow(read: () => number, moved: (seen: number) => Promise<void>, fn: () => void): void {
  (async () => {
    let seen = read();
    for (;;) {
      await moved(seen);
      seen = read();
      fn();
    }
  })();
}

async function handle(msg: ToWorker): Promise<void> {
  if (msg.type === "start") return await start(msg);

  const gw = running?.gateway;
  if (!gw || !posted) {
    early.push(msg);
    return;
  }
  switch (msg.type) {
    case "config": {
      posted.version = { generation: msg.generation, text: msg.text };
      applying = true;
      try {
        await gw.config.reload();
        post({ type: "config_ack", generation: msg.generation });
      } catch (err) {
        post({ type: "config_ack", generation: msg.generation, error: errorMessage(err) });
      } finally {
        applying = false;
      }
      return;
    }
    case "local": {
      const res = await inner!(fromWire(msg.request), LOCAL_INFO);
      post({ type: "local_reply", id: msg.id, response: await responseToWire(res) });
      return;
    }
    case "readings":
      for (const [id, reading] of msg.readings) applyReading(id, reading);
      return;
    case "view": {
      // The events recorded so far go first: a view answered means they reached the ledger.
      recorder?.flush();
      const skeid = gw.skeid;
      const readings: [string, CapacityReading][] = [];
      for (const node of skeid.listNodes()) {
        const reading = skeid.capacityReading(node.id);
        if (reading) readings.push([node.id, reading]);
      }
      const view: WorkerView = {
        nodes: skeid.nodeMetrics(),
        ejections: skeid.nodeEjections(),
        readings,
        waiters: gw.waiters.size,
        inflight: gw.inflight,
        share: gw.metrics.shareSnapshot(),
        live: gw.localLive(),
      };
      post({ type: "view_reply", id: msg.id, view });
      return;
    }
    case "core": {
      try {
        const op = msg.op;
        if (op.name === "forgetCapacity") gw.skeid.forgetCapacity(op.id);
        else gw.skeid.addNode(op.spec);
        post({ type: "core_reply", id: msg.id });
      } catch (err) {
        post({ type: "core_reply", id: msg.id, error: errorMessage(err) });
      }
      return;
    }
    case "stats": {
      let requests = 0;
      for (const m of gw.skeid.nodeMetrics()) requests += m.started;
      post({ type: "stats", requests, inflight: gw.inflight });
      return;
    }
    case "stop": {
      await running!.stop(msg.graceMs);
      recorder?.flush();
      // After its usage events went to the supervisor: spans and metrics, bounded (ADR 0050).
      await running!.gateway.telemetry.shutdown();
      post({ type: "stopped" });
      self.close();
      return;
    }
  }
}

function applyReading(id: string, reading: CapacityReadingInput | null): void {
  const skeid = running!.gateway.skeid;
  const before = readingSources.get(id);
  if (reading === null) {
    if (before !== undefined) skeid.forgetCapacity(id, before);
    readingSources.delete(id);
    return;
  }
  if (skeid.setCapacityReading(id, reading) && reading.source) {
    readingSources.set(id, reading.source);
  }
}

self.onmessage = (e: MessageEvent<ToWorker>) => {
  const msg = e.data;
  if (msg.type === "key_reply") {
    keys.get(msg.id)?.(msg.answer);
    keys.delete(msg.id);
    return;
  }
  if (msg.type === "key_admit_reply") {
    keyGroup?.answered(msg.id, msg.decision);
    return;
  }
  if (msg.type === "issued_auth_reply") {
    issued.answered(msg.id, msg.grant);
    return;
  }
  if (msg.type === "live_reply") {
    lives.get(msg.id)?.(msg.snapshot);
    lives.delete(msg.id);
    return;
  }
  if (msg.type === "session_reply") {
    sessions.answered(msg.id, msg.answer);
    return;
  }
  if (msg.type === "forward_reply") {
    // Not queued: a stop waiting for a drain must not hold back the answers the drain awaits.
    forwarded.get(msg.id)?.(msg.response);
    forwarded.delete(msg.id);
    return;
  }
  // One message at a time, in order (a config must be applied before the next is looked at).
  work = work.then(async () => {
    await handle(e.data);
    if (running && early.length > 0) {
      for (const m of early.splice(0)) await handle(m);
    }
  }).catch((err) => post({ type: "failed", error: errorMessage(err) }));
};
