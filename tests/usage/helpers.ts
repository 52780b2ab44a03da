/**
 * Test helpers of the usage layer: events, temp dirs, an in-memory store, a store that fails on
 * demand, and a PostgreSQL database made fresh for a test run.
 *
 * @module
 */
import postgres from "postgres";
import { buildUsageEvent, type UsageEventFields } from "../../src/usage/event.ts";
import { aggregate } from "../../src/usage/report.ts";
import type { ReportFilters, UsageEvent, UsageReport, UsageStore } from "../../src/usage/types.ts";

/** A usage event with test defaults (served model `m`, key `k_a`, 200). */
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

/** A fresh temp directory, removed by the returned `cleanup`. */
export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-usage-" });
  return { dir, cleanup: () => Deno.remove(dir, { recursive: true }) };
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

/** The admin DSN of the test PostgreSQL (`SKEID_TEST_PG_DSN`, else local trust auth). */
export function pgAdminDsn(): string {
  return Deno.env.get("SKEID_TEST_PG_DSN") ??
    "postgres://postgres@127.0.0.1:5432/postgres";
}

/** Why PostgreSQL cannot be used, or undefined when it answers. */
export async function pgUnavailable(): Promise<string | undefined> {
  const sql = postgres(pgAdminDsn(), { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await sql.end({ timeout: 0 });
  }
}

/**
 * Test registration options for PostgreSQL tests: ignored, with the reason printed, when the
 * server does not answer — unless `SKEID_REQUIRE_PG=1` (CI), where they run and fail.
 */
export async function pgTestGate(): Promise<{ ignore: boolean }> {
  const reason = await pgUnavailable();
  if (reason === undefined) return { ignore: false };
  if (Deno.env.get("SKEID_REQUIRE_PG") === "1") {
    console.error(`PostgreSQL unreachable (${reason}) and SKEID_REQUIRE_PG=1: tests will fail`);
    return { ignore: false };
  }
  console.error(
    `IGNORED PostgreSQL usage-store tests: ${reason} (set SKEID_REQUIRE_PG=1 to make this fail)`,
  );
  return { ignore: true };
}

/** A fresh database `skeid_test_<random>`; `drop` removes it (and its connections). */
export async function freshPgDatabase(): Promise<{ dsn: string; drop: () => Promise<void> }> {
  const name = `skeid_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(pgAdminDsn(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  const url = new URL(pgAdminDsn());
  url.pathname = `/${name}`;
  return {
    dsn: url.toString(),
    drop: async () => {
      const sql = postgres(pgAdminDsn(), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
  };
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
