/**
 * Test helpers of the usage layer: events, an in-memory store, a store that fails on demand, a
 * TCP proxy that cuts a store's connections, and the fixtures every store's tests record. Temp dirs and the test PostgreSQL are in
 * `tests/_helpers/`.
 *
 * @module
 */
import { buildUsageEvent, type UsageEventFields } from "../../src/usage/event.ts";
import { aggregate } from "../../src/usage/report.ts";
import type {
  ReportFilters,
  UsageEvent,
  UsageRecorder,
  UsageReport,
  UsageStore,
} from "../../src/usage/types.ts";
import type { UsageLedger } from "../../src/usage/ledger.ts";
import { assertEquals } from "../_assert.ts";
import { parseSeriesQuery, type SeriesQuery } from "../../src/usage/rollup.ts";

/** A usage event with test defaults (served model `m`, customer key id `k_a`, status 200). */
export function event(fields: UsageEventFields = {}): UsageEvent {
  return buildUsageEvent({
    request_id: `req_${crypto.randomUUID().slice(0, 8)}`,
    api_format: "openai",
    endpoint: "/v1/chat/completions",
    api_key_id: "k_a",
    provider: "skeid",
    engine: "openaibase",
    model: "m",
    node_id: "n1",
    route_url: "http://127.0.0.1:1/v1",
    status_code: 200,
    ...fields,
  });
}

/** The hourly series query of `from` to `to` split `by` (the model unless told). */
export function hourlySeries(from: string, to: string, by = "model"): SeriesQuery {
  const params: Record<string, string> = { from, to, by, step: "hour" };
  return parseSeriesQuery((name) => params[name]);
}

/**
 * Waits for a condition: re-checked when `notify()` is called and on a short poll tick (the
 * condition may turn true inside code that cannot notify), bounded by a deadline.
 */
export class Signal {
  #waiters: (() => void)[] = [];

  /** Wakes every waiter. */
  notify(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  /** Waits until `check()` holds, failing after `ms`. */
  async until(check: () => boolean, ms = 10_000, what = "condition"): Promise<void> {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        timer = setTimeout(resolve, 2);
      });
      clearTimeout(timer);
    }
  }
}

/** An in-memory store, idempotent on event_id like the real ones. */
export class MemoryStore implements UsageStore {
  readonly backend = "jsonlog" as const;
  readonly description = "memory";
  /** Stored events in write order. */
  readonly rows: UsageEvent[] = [];
  readonly #ids = new Set<string>();
  prepared = false;
  closed = false;

  prepare(): Promise<void> {
    this.prepared = true;
    return Promise.resolve();
  }

  write(events: UsageEvent[]): Promise<void> {
    for (const e of events) {
      if (this.#ids.has(e.event_id)) continue;
      this.#ids.add(e.event_id);
      this.rows.push(e);
    }
    return Promise.resolve();
  }

  report(filters: ReportFilters): Promise<UsageReport> {
    return Promise.resolve({
      ok: true,
      enabled: true,
      backend: "memory",
      since: filters.since ?? "",
      ...aggregate(this.rows as unknown as Record<string, unknown>[], filters),
    });
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

/** Wraps a store: fails on demand, counts write calls and batch sizes, signals each write. */
export class FlakyStore implements UsageStore {
  readonly backend: UsageStore["backend"];
  readonly description: string;
  readonly inner: UsageStore;
  /** While true, every write throws. */
  failing = false;
  /** While set, `prepare` throws this. */
  prepareError: Error | undefined;
  /** Sizes of the batches written successfully. */
  readonly batches: number[] = [];
  /** Write calls, failed ones included. */
  attempts = 0;
  closed = false;
  /** Notified after every write attempt. */
  readonly signal = new Signal();

  constructor(inner: UsageStore = new MemoryStore()) {
    this.inner = inner;
    this.backend = inner.backend;
    this.description = `flaky ${inner.description}`;
  }

  async prepare(): Promise<void> {
    if (this.prepareError) throw this.prepareError;
    await this.inner.prepare();
  }

  async write(events: UsageEvent[]): Promise<void> {
    this.attempts++;
    try {
      if (this.failing) throw new Error("store down (test)");
      await this.inner.write(events);
      this.batches.push(events.length);
    } finally {
      this.signal.notify();
    }
  }

  report(filters: ReportFilters): Promise<UsageReport> {
    return this.inner.report(filters);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.inner.close();
  }
}

/**
 * A TCP proxy on 127.0.0.1 (port 0) in front of a server: `down()` cuts every connection and
 * stops listening, so connecting is refused (an outage); `up()` listens on the same port again.
 * `close()` releases everything.
 */
export class TcpProxy {
  readonly #target: { hostname: string; port: number };
  readonly #conns = new Set<Deno.Conn>();
  readonly #tasks = new Set<Promise<void>>();
  #listener: Deno.Listener | undefined;
  readonly port: number;

  constructor(target: { hostname: string; port: number }) {
    this.#target = target;
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (listener.addr as Deno.NetAddr).port;
    this.#serve(listener);
  }

  #track(task: Promise<void>): void {
    this.#tasks.add(task);
    task.finally(() => this.#tasks.delete(task));
  }

  #serve(listener: Deno.Listener): void {
    this.#listener = listener;
    this.#track((async () => {
      try {
        for await (const client of listener) this.#track(this.#relay(client));
      } catch { /* listener closed */ }
    })());
  }

  async #relay(client: Deno.Conn): Promise<void> {
    this.#conns.add(client);
    let server: Deno.Conn | undefined;
    try {
      server = await Deno.connect(this.#target);
      this.#conns.add(server);
      await Promise.all([
        client.readable.pipeTo(server.writable).catch(() => {}),
        server.readable.pipeTo(client.writable).catch(() => {}),
      ]);
    } catch {
      /* the outage cut it */
    } finally {
      for (const c of [client, server]) {
        if (!c) continue;
        this.#conns.delete(c);
        try {
          c.close();
        } catch { /* already closed by pipeTo */ }
      }
    }
  }

  /** Cuts every connection and stops listening: new connections are refused. */
  down(): void {
    this.#listener?.close();
    this.#listener = undefined;
    for (const c of this.#conns) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
    this.#conns.clear();
  }

  /** Listens on the same port again. */
  up(): void {
    if (!this.#listener) this.#serve(Deno.listen({ hostname: "127.0.0.1", port: this.port }));
  }

  /** Stops listening and waits for every relay to end. */
  async close(): Promise<void> {
    this.down();
    for (let i = 0; i < 100 && this.#tasks.size > 0; i++) await Promise.all([...this.#tasks]);
  }
}

/** The fields of the one event the SQL stores' "record + report" tests write. */
export const ONE_EVENT: UsageEventFields = {
  api_key_id: "k_1",
  model: "gpt-x",
  requested_model: "fast",
  usage: { prompt_tokens: 120, completion_tokens: 30 },
  tool_names: ["lookup"],
  cost_total_usd: 0.00027,
};

/** Checks the totals, by_key and by_model of a report over exactly the ONE_EVENT event. */
export function assertOneEventReport(r: UsageReport): void {
  assertEquals(r.totals, {
    requests: 1,
    input_tokens: 120,
    output_tokens: 30,
    total_tokens: 150,
    cached_tokens: 0,
    cache_write_tokens: 0,
    tool_calls: 1,
    total_cost_usd: 0.00027,
    estimated: { requests: 0, total_tokens: 0, total_cost_usd: 0 },
  });
  assertEquals(r.by_key, [
    { api_key_id: "k_1", requests: 1, total_tokens: 150, total_cost_usd: 0.00027 },
  ]);
  assertEquals(r.by_model, [
    { model: "gpt-x", requests: 1, total_tokens: 150, total_cost_usd: 0.00027 },
  ]);
}

/**
 * ADR 0027 on one store: a reported and an estimated event round-trip with their
 * `usage_source`, and the report shows the estimated part apart. With `billEstimated` false the
 * ledger prices the estimated event 0 (its tokens are kept).
 */
export async function assertUsageSourceApart(
  ledger: UsageLedger,
  billEstimated: boolean,
): Promise<void> {
  ledger.record(event({ usage: { prompt_tokens: 10, completion_tokens: 5 }, cost_total_usd: 0.5 }));
  ledger.record(event({
    usage: { prompt_tokens: 4, completion_tokens: 3 },
    cost_total_usd: 0.25,
    usage_source: "estimated",
  }));
  const r = await ledger.report({});
  assertEquals(r.ok, true, r.error);
  assertEquals(r.totals?.requests, 2);
  assertEquals(r.totals?.total_tokens, 22);
  assertEquals(r.totals?.total_cost_usd, billEstimated ? 0.75 : 0.5);
  assertEquals(r.totals?.estimated, {
    requests: 1,
    total_tokens: 7,
    total_cost_usd: billEstimated ? 0.25 : 0,
  });
  assertEquals(r.recent?.map((row) => row.usage_source), ["estimated", "reported"]);
}

/**
 * Records the 600 events of the report-filter tests: every third one by `k_big` (0.01 USD),
 * the rest by `k_small` (0.001 USD); models `m2`/`m1` alternating; the first 300 just before
 * 2026-09-01, the rest at it.
 */
export function recordFilterFixture(ledger: UsageRecorder): void {
  for (let i = 0; i < 600; i++) {
    ledger.record(event({
      api_key_id: i % 3 === 0 ? "k_big" : "k_small",
      model: i % 2 ? "m1" : "m2",
      cost_total_usd: i % 3 === 0 ? 0.01 : 0.001,
      created_at: i < 300 ? "2026-08-31T23:59:59Z" : "2026-09-01T00:00:00Z",
    }));
  }
}

/**
 * `count` "requests" interleaving on the event loop, each recording its event (request id
 * `c<i>`, plus `fields`) at its own moment.
 */
export async function recordConcurrently(
  ledger: UsageRecorder,
  count: number,
  fields: UsageEventFields = {},
): Promise<void> {
  await Promise.all(Array.from({ length: count }, async (_, i) => {
    for (let k = 0; k < i % 7; k++) await Promise.resolve();
    if (i % 5 === 0) await new Promise((r) => setTimeout(r, 0));
    ledger.record(event({ request_id: `c${i}`, ...fields }));
  }));
}
