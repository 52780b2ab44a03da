/**
 * Whether a `skeid serve` child keeps answering while it does something heavy, measured on what
 * its serving thread (the process's main thread) spends between two `/health` probes: its CPU
 * time from /proc, which the load of other processes on the machine cannot inflate, where the
 * probes' wall-clock latency can. A step of the heavy work done on that thread shows as one long
 * interval; the wall-clock latency is reported beside it.
 *
 * @module
 */

/** CPU time (user + system) of a process's main thread, ms (10 ms steps). */
export async function servingThreadCpuMs(pid: number): Promise<number> {
  // Read by `cat`: Deno asks for --allow-all to read /proc entries of a process.
  const out = await new Deno.Command("cat", { args: [`/proc/${pid}/task/${pid}/stat`] }).output();
  const stat = new TextDecoder().decode(out.stdout);
  // Fields after the command name (which may hold spaces): utime is field 14, stime 15.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) * 10; // USER_HZ is 100 on Linux
}

/** What the probes saw. */
export interface ProbeReport {
  /** `/health` probes answered (each 200, or the probing throws). */
  probes: number;
  /** The slowest probe's wall-clock latency, ms. */
  worstMs: number;
  /** The serving thread's CPU between two probes at most, ms. */
  longestStepMs: number;
  /** The serving thread's CPU over the whole probing, ms. */
  cpuMs: number;
}

/** `GET /health` probes of one child, and what its serving thread spent between them. */
export class ServingThreadProber {
  readonly #base: string;
  readonly #pid: number;
  #report: ProbeReport = { probes: 0, worstMs: 0, longestStepMs: 0, cpuMs: 0 };
  #firstCpu = 0;
  #lastCpu = 0;

  private constructor(base: string, pid: number) {
    this.#base = base;
    this.#pid = pid;
  }

  /** A prober whose measure starts now. */
  static async start(base: string, pid: number): Promise<ServingThreadProber> {
    const prober = new ServingThreadProber(base, pid);
    prober.#firstCpu = prober.#lastCpu = await servingThreadCpuMs(pid);
    return prober;
  }

  /** One probe; it must answer 200 (30 s at most). */
  async probe(): Promise<void> {
    const started = performance.now();
    const res = await fetch(`${this.#base}/health`, { signal: AbortSignal.timeout(30_000) });
    await res.body?.cancel();
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    const r = this.#report;
    r.worstMs = Math.max(r.worstMs, performance.now() - started);
    r.probes++;
    this.#step(await servingThreadCpuMs(this.#pid));
  }

  /** What the probes saw, the serving thread's CPU counted up to now. */
  async report(): Promise<ProbeReport> {
    this.#step(await servingThreadCpuMs(this.#pid));
    return { ...this.#report };
  }

  #step(cpu: number): void {
    const r = this.#report;
    r.longestStepMs = Math.max(r.longestStepMs, cpu - this.#lastCpu);
    r.cpuMs = cpu - this.#firstCpu;
    this.#lastCpu = cpu;
  }
}

/**
 * Probes `GET /health` one at a time, 10 ms apart, until `done()` holds (at least once, and for
 * `timeoutMs` at most).
 */
export async function probeServingThread(
  base: string,
  pid: number,
  done: () => boolean,
  timeoutMs = 120_000,
): Promise<ProbeReport> {
  const prober = await ServingThreadProber.start(base, pid);
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; (i === 0 || !done()) && Date.now() < deadline; i++) {
    await prober.probe();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return await prober.report();
}
