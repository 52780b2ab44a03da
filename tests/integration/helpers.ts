/**
 * Integration test helpers: a real gateway (`startServer`) on 127.0.0.1:0 in front of real fake
 * models, its config written to a temp file, usage events caught by the ledger's callback sink.
 *
 * @module
 */
import { stringify } from "yaml";
import { strictEqual } from "node:assert/strict";
import { type RunningServer, startServer } from "../../src/server.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import type { Gateway } from "../../src/gateway.ts";
import { memoryLogger } from "../../src/log.ts";
import type { UsageEvent } from "../../src/usage/types.ts";
import { until as pollUntil } from "../_helpers/poll.ts";
import { mergeEjections, sumNodeMetrics } from "../../src/workers/metrics_merge.ts";
import type { CoreOp } from "../../src/workers/protocol.ts";
import type { EjectionSnapshot } from "../../src/core/ejection.ts";
import type { CapacityReading, NodeMetrics } from "../../src/core/types.ts";

/** Usage events as the ledger hands them to its sink, with a way to wait for N of them. */
export class EventSink {
  readonly events: UsageEvent[] = [];
  #waiters: { n: number; resolve: () => void }[] = [];

  /** The ledger's store callback. */
  store = (event: UsageEvent): { ok: true } => {
    this.events.push(event);
    this.#waiters = this.#waiters.filter((w) => {
      if (this.events.length < w.n) return true;
      w.resolve();
      return false;
    });
    return { ok: true };
  };

  /** Waits until at least `n` events arrived (bounded by `timeoutMs`); answers all events. */
  async waitFor(n: number, timeoutMs = 5000): Promise<UsageEvent[]> {
    if (this.events.length >= n) return this.events;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.#waiters.push({ n, resolve });
        timer = setTimeout(
          () =>
            reject(new Error(`waited ${timeoutMs} ms for ${n} events, got ${this.events.length}`)),
          timeoutMs,
        );
      });
    } finally {
      clearTimeout(timer);
    }
    return this.events;
  }
}

/** A gateway under test. */
export interface TestGateway {
  base: string;
  gw: Gateway;
  server: Pick<RunningServer, "gateway" | "addr" | "stop" | "finished">;
  sink: EventSink;
  logger: ReturnType<typeof memoryLogger>;
  configPath: string;
  /** Rewrites the config file. */
  writeConfig(config: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
  /**
   * What serves requests, read for the whole gateway: with `SKEID_TEST_WORKERS=2` the workers'
   * gateways (their counters summed, ejections and readings as each worker holds them, waiters
   * and inflight of all), else the one gateway's own.
   */
  group: GroupView;
}

/** The serving gateway(s) of a test gateway, one worker or several (see `TestGateway.group`). */
export interface GroupView {
  /** Node counters (summed over workers); one node's, or undefined when unknown. */
  nodeMetrics(id: string): Promise<NodeMetrics | undefined>;
  /** Where a node stands in ejection (the worker furthest from closed). */
  ejection(id: string): Promise<EjectionSnapshot>;
  /** A node's capacity reading in force (the first worker that holds one). */
  capacityReading(id: string): Promise<CapacityReading | undefined>;
  /** Requests in flight (exchanges) in every worker. */
  inflight(): Promise<number>;
  /** Requests waiting for capacity in every worker. */
  waiters(): Promise<number>;
  /** Drops a node's readings in every core. */
  forgetCapacity(id: string): Promise<void>;
  /** Adds a node to every core. */
  addNode(spec: Record<string, unknown>): Promise<void>;
  /** Resolves once every worker runs the config the gateway applied last. */
  configApplied(): Promise<void>;
  /** Writes every usage event recorded so far to the ledger (the workers' first). */
  flushUsage(): Promise<void>;
}

/** The one gateway's own state, or the group's through its supervisor. */
function groupView(server: RunningServer | Supervisor): GroupView {
  if (!(server instanceof Supervisor)) {
    const gw = server.gateway;
    const skeid = gw.skeid;
    return {
      nodeMetrics: (id) => Promise.resolve(skeid.nodeMetrics(id)),
      ejection: (id) => Promise.resolve(skeid.nodeEjections(id)),
      capacityReading: (id) => Promise.resolve(skeid.capacityReading(id)),
      inflight: () => Promise.resolve(gw.inflight),
      waiters: () => Promise.resolve(gw.waiters.size),
      forgetCapacity: (id) => Promise.resolve(skeid.forgetCapacity(id)),
      addNode: (spec) => Promise.resolve(void skeid.addNode(spec)),
      configApplied: () => Promise.resolve(),
      flushUsage: async () => {
        await gw.ledger.flush();
      },
    };
  }
  const sup = server;
  const views = () => sup.views();
  const core = (op: CoreOp) => sup.core(op);
  return {
    nodeMetrics: async (id) =>
      sumNodeMetrics((await views()).map((v) => v.nodes)).find((m) => m.node_id === id),
    ejection: async (id) =>
      mergeEjections((await views()).map((v) => v.ejections)).find((e) => e.node_id === id) ??
        sup.gateway.skeid.nodeEjections(id),
    capacityReading: async (id) => {
      for (const v of await views()) {
        const found = v.readings.find(([node]) => node === id);
        if (found) return found[1];
      }
      return undefined;
    },
    inflight: async () => (await views()).reduce((n, v) => n + v.inflight, 0),
    waiters: async () => (await views()).reduce((n, v) => n + v.waiters, 0),
    forgetCapacity: (id) => core({ name: "forgetCapacity", id }),
    addNode: (spec) => core({ name: "addNode", spec }),
    configApplied: () => sup.configApplied(),
    // A worker answers a view after posting the events it recorded before it.
    flushUsage: async () => {
      await views();
      await sup.gateway.ledger.flush();
    },
  };
}

/** Options of `startGateway`. */
export interface StartOptions {
  /** Environment the gateway sees (nothing from the real one). */
  env?: Record<string, string>;
  reloadIntervalMs?: number;
  upstreamTimeoutMs?: number;
  /** Keepalive of translated streams, ms (default: the gateway's). */
  keepaliveMs?: number;
  /** The gateway's clock (default `Date.now`). */
  now?: () => number;
  /** false: events go to the configured usage store instead of the test's sink. */
  sink?: boolean;
  /** The level `logger` keeps (default `warn`; `debug` keeps the per-request lines). */
  logLevel?: "debug" | "warn";
}

/** Starts a gateway on 127.0.0.1:0 with `config` (written as YAML to a temp file). */
export async function startGateway(
  config: Record<string, unknown>,
  opts: StartOptions = {},
): Promise<TestGateway> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-it-" });
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, stringify(config));
  const env: Record<string, string> = { ...opts.env };
  // SKEID_TEST_UPSTREAM_CLIENT=fetch runs the suite over fetch instead of the HTTP/1.1 client.
  const client = Deno.env.get("SKEID_TEST_UPSTREAM_CLIENT");
  if (client) env.SKEID_UPSTREAM_CLIENT = client;
  const logger = memoryLogger(opts.logLevel ?? "warn");
  const options = {
    hostname: "127.0.0.1",
    port: 0,
    configPath,
    env: (name: string) => env[name],
    logger,
    spillPath: `${dir}/spill.jsonl`,
    reloadIntervalMs: opts.reloadIntervalMs ?? 100,
    upstreamTimeoutMs: opts.upstreamTimeoutMs,
    keepaliveMs: opts.keepaliveMs,
    now: opts.now,
  };
  // SKEID_TEST_WORKERS=2 runs the suite through `serve --workers 2` (a supervisor, two workers).
  const workers = Number(Deno.env.get("SKEID_TEST_WORKERS") ?? "1");
  const server = workers > 1
    ? await Supervisor.start({
      ...options,
      workers,
      workerEnv: env,
      logLevel: opts.logLevel ?? "warn",
    })
    : await startServer(options);
  const sink = new EventSink();
  if (opts.sink !== false) server.gateway.ledger.setCallbacks({ store: sink.store });
  return {
    base: `http://127.0.0.1:${server.addr.port}`,
    gw: server.gateway,
    server,
    sink,
    logger,
    configPath,
    writeConfig: (c) => Deno.writeTextFile(configPath, stringify(c)),
    group: groupView(server),
    stop: async () => {
      await server.stop(2000);
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** POSTs JSON; answers status, headers and the parsed (or raw) body. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown>; text: string }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON (streams)
  }
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * Nothing was forwarded: the node saw no request, no usage event was written (refusals write
 * none), and every slot is free again.
 */
export async function assertNothingForwarded(
  t: TestGateway,
  node: { requests: readonly unknown[] },
): Promise<void> {
  strictEqual(node.requests.length, 0, "nothing reached the upstream");
  await t.group.flushUsage();
  strictEqual(t.sink.events.length, 0, "no usage event");
  assertIdle(t.gw);
}

/** A chat body. */
export function chat(model: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: "user", content: "hello there" }], ...extra };
}

/** Asserts every node's inflight is back to 0. */
export function assertIdle(gw: Gateway): void {
  for (const m of gw.skeid.nodeMetrics()) strictEqual(m.inflight, 0, `inflight of ${m.node_id}`);
  strictEqual(gw.inflight, 0, "requests in flight");
  strictEqual(gw.waiters.size, 0, "waiting requests");
}

/**
 * Polls `cond` every 5 ms until it holds (bounded by `timeoutMs`): the shared `until` with this
 * suite's argument order.
 */
export function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 3000,
  what = "condition",
): Promise<void> {
  return pollUntil(cond, what, timeoutMs, 5);
}

/**
 * A port nothing listens on. Not a just-released ephemeral port: the gateway under test binds
 * port 0 right after and may get that very number, making the "dead" node itself (a request
 * loop). Port 1 is below the ephemeral range and needs root to bind.
 */
export function closedPort(): number {
  return 1;
}

/** A scripted upstream: `handler` answers every request; records what it got. */
export function scriptedUpstream(
  handler: (req: Request, body: Record<string, unknown>) => Response | Promise<Response>,
): {
  url: string;
  requests: { headers: Headers; body: Record<string, unknown> }[];
  close(): Promise<void>;
} {
  const ac = new AbortController();
  const requests: { headers: Headers; body: Record<string, unknown> }[] = [];
  const server = Deno.serve(
    {
      hostname: "127.0.0.1",
      port: 0,
      signal: ac.signal,
      onListen: () => {},
      // A scripted body that breaks on purpose is not worth a stack trace on stderr.
      onError: () => new Response(null, { status: 500 }),
    },
    async (req) => {
      const text = await req.text();
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON
      }
      requests.push({ headers: req.headers, body });
      return await handler(req, body);
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/v1`,
    requests,
    close: async () => {
      ac.abort();
      await server.finished;
    },
  };
}

/** A whole chat completion answer ("hi", 1 + 1 tokens), for a scripted upstream. */
export function chatAnswer(): Response {
  return Response.json({
    id: "c",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

/** A body written in the given pieces (empty pieces included), one write each. */
export function piecewise(pieces: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (i >= pieces.length) {
        c.close();
        return;
      }
      c.enqueue(enc.encode(pieces[i++]));
      // Let each piece go out as its own write.
      await new Promise((r) => setTimeout(r, 1));
    },
  });
}
