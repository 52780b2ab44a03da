/**
 * `deno task bench --live`: what an open Live page costs the gateway. One gateway measured at
 * c=32 with no console client, with one and with three `GET /skeid/live` event-stream clients
 * connected (real streaming fetches that read every event, the admin key as Bearer), the order
 * alternating over rounds; reduced per round to the gateway CPU per request with clients over
 * it without. This file holds the clients and the report; scripts/bench.ts runs the gateway.
 *
 * @module
 */

/** What one state of one round measured. */
export interface LiveSide {
  /** Live clients connected while the load ran. */
  clients: number;
  /** c=32 JSON requests per second. */
  rps: number;
  /** Gateway CPU per request over the c=32 run, µs. */
  cpuUs: number;
  /** Live events the clients read while the load ran (all clients together). */
  events: number;
}

/** The idle gateway's CPU over one window with `clients` live clients and no load. */
export interface LiveIdle {
  clients: number;
  /** Length of the window, ms. */
  ms: number;
  /** Gateway CPU over it (every thread's time on CPU), ms. */
  cpuMs: number;
  /** Live events the clients read in it. */
  events: number;
}

/**
 * The live feed's CPU per second with `clients` streams open: the idle windows with them less
 * those without (each window's CPU per second, medians), ms of CPU per second.
 */
export function producerCostMsPerS(idle: readonly LiveIdle[], clients: number): number {
  const rate = (n: number) =>
    median(idle.filter((w) => w.clients === n).map((w) => (w.cpuMs * 1000) / w.ms));
  return rate(clients) - rate(0);
}

/** One round: every state measured back to back on the same gateway. */
export type LiveRound = LiveSide[];

/** Streams open on `GET /skeid/live`, each read to the end by the bench process. */
export interface LiveClients {
  /** Live events (`event: live`) read so far, all clients together. */
  events(): number;
  /** Cancels every stream and waits for its reader to finish. */
  close(): Promise<void>;
}

/** How long a client may wait for its first live event before the run fails. */
const FIRST_EVENT_MS = 10_000;

/**
 * Opens `n` event-stream clients on `${adminUrl}/skeid/live` with `adminKey` as Bearer, and
 * resolves once every one has read its first `event: live` (so the live feed runs before the
 * load starts). Fails with the status or the timeout when one does not.
 */
export async function openLiveClients(
  adminUrl: string,
  adminKey: string,
  n: number,
): Promise<LiveClients> {
  const ac = new AbortController();
  let events = 0;
  const firsts: Promise<void>[] = [];
  const readers: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    let first!: () => void;
    let failed!: (err: Error) => void;
    firsts.push(
      new Promise<void>((resolve, reject) => {
        first = resolve;
        failed = reject;
      }),
    );
    readers.push((async () => {
      let seen = 0;
      try {
        const res = await fetch(`${adminUrl}/skeid/live`, {
          headers: { authorization: `Bearer ${adminKey}`, accept: "text/event-stream" },
          signal: ac.signal,
        });
        if (res.status !== 200 || !res.body) {
          await res.body?.cancel();
          throw new Error(`GET /skeid/live answered ${res.status}`);
        }
        const decoder = new TextDecoder();
        let carry = "";
        for await (const chunk of res.body) {
          carry += decoder.decode(chunk, { stream: true });
          // Count whole events only: an event ends at a blank line.
          let end = carry.indexOf("\n\n");
          while (end !== -1) {
            if (carry.startsWith("event: live\n")) {
              events++;
              if (seen++ === 0) first();
            }
            carry = carry.slice(end + 2);
            end = carry.indexOf("\n\n");
          }
        }
        throw new Error("GET /skeid/live: the stream ended");
      } catch (err) {
        if (!ac.signal.aborted) failed(err instanceof Error ? err : new Error(String(err)));
      }
    })());
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`GET /skeid/live: no event within ${FIRST_EVENT_MS} ms`)),
      FIRST_EVENT_MS,
    );
  });
  const close = async () => {
    ac.abort();
    await Promise.all(readers);
  };
  try {
    await Promise.race([Promise.all(firsts), timeout]);
  } catch (err) {
    await close();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return { events: () => events, close };
}

/** Round `i`'s order of the client counts: forwards in even rounds, backwards in odd ones. */
export function liveOrder(counts: readonly number[], i: number): number[] {
  return i % 2 === 0 ? [...counts] : [...counts].reverse();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Per client count above zero: the median over rounds of CPU/req and req/s against zero. */
export function liveRatios(
  rounds: readonly LiveRound[],
): { clients: number; cpu: number; rps: number; cpuMin: number; cpuMax: number }[] {
  const counts = [...new Set(rounds.flatMap((r) => r.map((s) => s.clients)))].filter((c) => c > 0)
    .sort((a, b) => a - b);
  return counts.map((clients) => {
    const cpu: number[] = [];
    const rps: number[] = [];
    for (const r of rounds) {
      const base = r.find((s) => s.clients === 0);
      const side = r.find((s) => s.clients === clients);
      if (!base || !side) continue;
      cpu.push(side.cpuUs / base.cpuUs);
      rps.push(side.rps / base.rps);
    }
    return {
      clients,
      cpu: median(cpu),
      rps: median(rps),
      cpuMin: Math.min(...cpu),
      cpuMax: Math.max(...cpu),
    };
  });
}

/** The goal: gateway CPU per request with the Live page open within 2 % of it closed. */
export const LIVE_CPU_GOAL = 1.02;

/** docs/bench/live.md: every round's figures, then the ratios against the goal. */
export function renderLive(
  rounds: readonly LiveRound[],
  idle: readonly LiveIdle[],
  meta: { date: string; machine: string; command: string; load: string; tickMs: number },
): string {
  const counts = [...new Set(rounds.flatMap((r) => r.map((s) => s.clients)))].sort((a, b) => a - b);
  const head = counts.flatMap((c) => [`${c} live: req/s`, `CPU/req µs`, "events"]);
  const rows = rounds.map((r, i) => {
    const cells = counts.flatMap((c) => {
      const s = r.find((x) => x.clients === c);
      return s ? [s.rps.toFixed(0), s.cpuUs.toFixed(1), String(s.events)] : ["", "", ""];
    });
    const order = r.map((s) => s.clients).join(" → ");
    return `| ${i + 1} | ${order} | ${cells.join(" | ")} |`;
  });
  const ratios = liveRatios(rounds);
  const ratioRows = ratios.map((x) =>
    `| ${x.clients} | ${x.cpu.toFixed(3)} | ${x.cpuMin.toFixed(3)}–${x.cpuMax.toFixed(3)} | ${
      x.rps.toFixed(3)
    } | ≤ ${LIVE_CPU_GOAL.toFixed(2)} | ${x.cpu <= LIVE_CPU_GOAL ? "met" : "missed"} |`
  );
  const idleRows = idle.map((w, i) =>
    `| ${i + 1} | ${w.clients} | ${(w.ms / 1000).toFixed(1)} | ${w.cpuMs.toFixed(2)} | ${
      ((w.cpuMs * 1000) / w.ms).toFixed(3)
    } | ${w.events} |`
  );
  const base = rounds.flatMap((r) => r.filter((s) => s.clients === 0));
  const gatewayMsPerS = median(base.map((s) => (s.rps * s.cpuUs) / 1000));
  const idleCounts = [...new Set(idle.map((w) => w.clients))].filter((c) => c > 0).sort((a, b) =>
    a - b
  );
  const costRows = idleCounts.map((n) => {
    const producer = producerCostMsPerS(idle, n);
    const share = producer / gatewayMsPerS;
    return `| ${n} | ${producer.toFixed(3)} | ${(share * 100).toFixed(3)} % | ≤ 2 % | ${
      share <= LIVE_CPU_GOAL - 1 ? "met" : "missed"
    } |`;
  });
  const idleText = idle.length === 0 ? [] : [
    "## The live feed on its own (no load)",
    "",
    "Under load the machine's noise swamps a cost this small, so the live feed is also measured " +
    "alone: the idle gateway's CPU over windows with each client count, the order alternating " +
    "(every thread's time on CPU from `/proc/PID/task/*/schedstat`, ns resolution).",
    "",
    "| window | live clients | s | gateway CPU ms | CPU ms per s | events |",
    "|---:|---:|---:|---:|---:|---:|",
    ...idleRows,
    "",
    "What the open streams cost (median window with them less median without), against the " +
    `median ${gatewayMsPerS.toFixed(0)} ms of CPU a second the gateway spent at c=32 with no ` +
    "client (req/s × CPU/req of the rounds above):",
    "",
    "| live clients | live feed CPU ms per s | of the gateway's CPU at c=32 | goal | |",
    "|---:|---:|---:|---:|---|",
    ...costRows,
    "",
  ];
  return [
    "# The Live page open vs closed",
    "",
    `Measured ${meta.date} on ${meta.machine} with \`${meta.command}\` (load average at the ` +
    `start: ${meta.load}).`,
    "One gateway (one node, the fake model), c=32 JSON through it with no console client, then " +
    "with one and with three `GET /skeid/live` event-stream clients connected (streaming fetches " +
    `in the bench process reading every event, the admin key as Bearer; one event every ` +
    `${meta.tickMs} ms), the order alternating over rounds. Gateway CPU per request is user + ` +
    "system time of the gateway process over the c=32 run divided by the requests answered.",
    "",
    `| round | order | ${head.join(" | ")} |`,
    `|---|---|${head.map(() => "---:").join("|")}|`,
    ...rows,
    "",
    "| live clients | CPU/req over none, median | range over rounds | req/s over none, median | goal | |",
    "|---:|---:|---|---:|---:|---|",
    ...ratioRows,
    "",
    ...idleText,
  ].join("\n");
}
