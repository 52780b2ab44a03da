/**
 * The Live page's data (ADR 0036): one snapshot of every node (health, ejection, backoff,
 * draining, inflight, capacity reading, probe, the last minute), every tier's waiters and the
 * workers — `GET /skeid/live/snapshot` once, `GET /skeid/live` as a server-sent event about every
 * second. One {@link LiveFeed} per gateway makes one snapshot per tick for every open stream, and
 * runs its timer only while a stream is open.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type { RoutingCore } from "../core/routing_core.ts";
import type { LastMinute } from "../core/minute_window.ts";
import type { LiveTier } from "../proxy/wait.ts";
import type { ProbeStatus } from "../capacity/probe_manager.ts";
import { withoutCredentials } from "../url_credentials.ts";

/** A node on the Live page. */
export interface LiveNode {
  id: string;
  url: string;
  models: string[];
  healthy: boolean;
  health_reason: string | null;
  ejected_until: string | null;
  backoff_until: string | null;
  draining: boolean;
  inflight: number;
  max_conns: number | null;
  capacity: { used: number | null; limit: number | null; source: string; age_ms: number } | null;
  probe: { state: string | null; probe: string; running: boolean; error?: string } | null;
  last_minute: LastMinute;
}

/** A worker on the Live page (as `GET /skeid/workers` lists it). */
export interface LiveWorker {
  index: number;
  started_at: string;
  restarts: number;
  requests: number;
  inflight: number;
}

/** The Live page's one object. */
export interface LiveSnapshot {
  at: string;
  nodes: LiveNode[];
  tiers: LiveTier[];
  workers: LiveWorker[];
}

/** What a gateway's own snapshot is made of. */
export interface LiveSources {
  skeid: RoutingCore;
  /** Who waits now, per tier. */
  tiers(now: number): LiveTier[];
  /** The capacity probes' states. */
  probes(): readonly ProbeStatus[];
  /** This gateway as its group's one worker (a group's supervisor lists them all). */
  workers(): LiveWorker[];
}

/** The reason shown for an unhealthy node: health is operator state only (config, admin API). */
const UNHEALTHY_REASON = "set unhealthy by the operator (config or admin API)";

function iso(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined || !Number.isFinite(ms)
    ? null
    : new Date(ms).toISOString();
}

/** This gateway's snapshot now. */
export function localLiveSnapshot(src: LiveSources): LiveSnapshot {
  const skeid = src.skeid;
  const now = skeid.now();
  const probes = new Map(src.probes().map((p) => [p.node_id, p]));
  const ejections = new Map(skeid.nodeEjections().map((e) => [e.node_id, e]));
  const metrics = new Map(skeid.nodeMetrics().map((m) => [m.node_id, m]));
  const nodes: LiveNode[] = [];
  for (const node of skeid.listNodes()) {
    const reading = skeid.capacityReading(node.id);
    const probe = probes.get(node.id);
    const ejected = ejections.get(node.id)?.ejected_until ?? null;
    const backoff = reading?.retry_after !== undefined && reading.retry_after > now
      ? reading.retry_after
      : null;
    nodes.push({
      id: node.id,
      url: withoutCredentials(node.url),
      models: [node.model],
      healthy: node.healthy,
      health_reason: node.healthy ? null : UNHEALTHY_REASON,
      ejected_until: ejected !== null && ejected > now ? iso(ejected) : null,
      backoff_until: iso(backoff),
      draining: skeid.nodeDraining(node.id) === true,
      inflight: metrics.get(node.id)?.inflight ?? 0,
      max_conns: node.max_conns > 0 ? node.max_conns : null,
      capacity: reading
        ? {
          used: reading.used,
          limit: reading.limit,
          source: reading.source,
          age_ms: Math.max(0, now - reading.at),
        }
        : null,
      probe: probe
        ? {
          state: probe.state,
          probe: probe.probe,
          running: probe.running,
          ...(probe.error !== undefined ? { error: probe.error } : {}),
        }
        : null,
      last_minute: skeid.lastMinute(node.id)!,
    });
  }
  return { at: new Date(now).toISOString(), nodes, tiers: src.tiers(now), workers: src.workers() };
}

/**
 * The group's snapshot from each worker's own (`--workers N`): a node's inflight the group's (each
 * worker reads it from the shared inflight table), its last-minute counts summed, its rates recomputed, its TTFT percentiles the request-weighted mean of the
 * workers' (an approximation: percentiles do not add); its state the furthest from serving (any
 * worker's ejection or backoff, the latest end); tiers merged per requested model and tier, each
 * key's waiters summed. `workers` and `probes` are the supervisor's.
 */
export function mergeLiveSnapshots(
  parts: readonly LiveSnapshot[],
  at: number,
  workers: LiveWorker[],
  probes: readonly ProbeStatus[],
): LiveSnapshot {
  const nodes = new Map<string, LiveNode>();
  const weights = new Map<string, { p50: number; p90: number; n: number }>();
  for (const part of parts) {
    for (const n of part.nodes) {
      const m = n.last_minute;
      const w = weights.get(n.id) ?? { p50: 0, p90: 0, n: 0 };
      if (m.ttft_p50_ms !== null && m.ttft_p90_ms !== null && m.requests > 0) {
        w.p50 += m.ttft_p50_ms * m.requests;
        w.p90 += m.ttft_p90_ms * m.requests;
        w.n += m.requests;
      }
      weights.set(n.id, w);
      const seen = nodes.get(n.id);
      if (!seen) {
        nodes.set(n.id, { ...n, last_minute: { ...m } });
        continue;
      }
      // Each worker reads the group's inflight from the shared table: the same number, not a part.
      seen.inflight = Math.max(seen.inflight, n.inflight);
      seen.ejected_until = later(seen.ejected_until, n.ejected_until);
      seen.backoff_until = later(seen.backoff_until, n.backoff_until);
      seen.capacity ??= n.capacity;
      seen.last_minute.requests += m.requests;
      seen.last_minute.errors += m.errors;
    }
  }
  const probeOf = new Map(probes.map((p) => [p.node_id, p]));
  for (const n of nodes.values()) {
    const m = n.last_minute;
    m.rps = Math.round((m.requests / 60) * 1000) / 1000;
    m.error_rate = m.requests === 0 ? 0 : Math.round((m.errors / m.requests) * 10_000) / 10_000;
    const w = weights.get(n.id)!;
    m.ttft_p50_ms = w.n === 0 ? null : Math.round(w.p50 / w.n);
    m.ttft_p90_ms = w.n === 0 ? null : Math.round(w.p90 / w.n);
    const p = probeOf.get(n.id);
    n.probe = p
      ? {
        state: p.state,
        probe: p.probe,
        running: p.running,
        ...(p.error !== undefined ? { error: p.error } : {}),
      }
      : null;
  }
  const tiers = new Map<string, LiveTier>();
  for (const part of parts) {
    for (const t of part.tiers) {
      const at = `${t.alias}\u0000${t.tier}`;
      const seen = tiers.get(at);
      if (!seen) {
        tiers.set(at, { ...t, waiting: t.waiting.map((w) => ({ ...w })) });
        continue;
      }
      seen.queue_length += t.queue_length;
      seen.oldest_wait_ms = Math.max(seen.oldest_wait_ms ?? 0, t.oldest_wait_ms ?? 0);
      for (const w of t.waiting) {
        const key = seen.waiting.find((k) => k.key_id === w.key_id);
        if (!key) seen.waiting.push({ ...w });
        else {
          key.queued += w.queued;
          key.oldest_wait_ms = Math.max(key.oldest_wait_ms, w.oldest_wait_ms);
        }
      }
    }
  }
  return {
    at: new Date(at).toISOString(),
    nodes: [...nodes.values()],
    tiers: [...tiers.values()],
    workers,
  };
}

function later(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return a > b ? a : b;
}

/** Default tick of the live stream, ms. */
export const LIVE_TICK_MS = 1000;

const encoder = new TextEncoder();

/**
 * The one producer of a gateway's live stream: while at least one client listens, every tick
 * makes one snapshot and writes it to every open stream as `event: live`. A client that leaves
 * (its stream cancelled) is dropped at once; the last one leaving stops the timer.
 */
export class LiveFeed {
  readonly #source: () => Promise<LiveSnapshot>;
  readonly #tickMs: number;
  readonly #clients = new Set<ReadableStreamDefaultController<Uint8Array>>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ticking = false;
  #closed = false;

  constructor(source: () => Promise<LiveSnapshot>, tickMs = LIVE_TICK_MS) {
    this.#source = source;
    this.#tickMs = tickMs;
  }

  /** Open streams now. */
  get clients(): number {
    return this.#clients.size;
  }

  /** Whether the producer's timer runs (tests: it must not once every client left). */
  get running(): boolean {
    return this.#timer !== undefined || this.#ticking;
  }

  /** A new client's stream (`text/event-stream` body): a snapshot at once, then one per tick. */
  open(): ReadableStream<Uint8Array> {
    let mine: ReadableStreamDefaultController<Uint8Array> | undefined;
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        if (this.#closed) {
          controller.close();
          return;
        }
        mine = controller;
        this.#clients.add(controller);
        // The retry hint: a page that lost the stream comes back after 2 s.
        controller.enqueue(encoder.encode("retry: 2000\n\n"));
        if (this.#timer === undefined && !this.#ticking) void this.#tick();
      },
      cancel: () => {
        if (mine) this.#drop(mine);
      },
    });
  }

  /** Ends every stream and stops the timer (the gateway closes). */
  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const c of this.#clients) {
      try {
        c.close();
      } catch {
        // already closed by its client
      }
    }
    this.#clients.clear();
  }

  #drop(c: ReadableStreamDefaultController<Uint8Array>): void {
    this.#clients.delete(c);
    if (this.#clients.size === 0 && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  async #tick(): Promise<void> {
    this.#timer = undefined;
    if (this.#clients.size === 0 || this.#closed) return;
    this.#ticking = true;
    let frame: Uint8Array;
    try {
      frame = encoder.encode(`event: live\ndata: ${JSON.stringify(await this.#source())}\n\n`);
    } catch (err) {
      const message = errorMessage(err);
      frame = encoder.encode(`event: error\ndata: ${JSON.stringify({ error: message })}\n\n`);
    } finally {
      this.#ticking = false;
    }
    for (const c of this.#clients) {
      try {
        // A client that reads nothing for long has a full queue: it is dropped, not buffered.
        if ((c.desiredSize ?? 1) < -64) throw new Error("slow client");
        c.enqueue(frame);
      } catch {
        this.#drop(c);
        try {
          c.close();
        } catch {
          // closed
        }
      }
    }
    if (this.#clients.size > 0 && !this.#closed) {
      this.#timer = setTimeout(() => void this.#tick(), this.#tickMs);
    }
  }
}
