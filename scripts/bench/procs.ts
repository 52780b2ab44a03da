/**
 * Child processes of the benchmark: started (optionally pinned to one CPU with `taskset`),
 * their output kept in a log file, their memory read from `/proc`, and stopped by PID.
 *
 * @module
 */

/** A started child process. */
export interface Child {
  /** What it is, for messages. */
  name: string;
  /** Its PID (the program's own: `taskset` execs it). */
  pid: number;
  /** Resolves with the exit code when it exits. */
  exited: Promise<number>;
  /** Whether it has exited. */
  readonly done: boolean;
  /** The first stdout line (within `timeoutMs`), or an error naming what happened. */
  firstLine(timeoutMs: number): Promise<string>;
  /** The last `lines` lines of its stderr, then stdout (kept in memory, bounded). */
  tail(lines?: number): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
  stop(graceMs?: number): Promise<void>;
}

/** The machine a run is on, for a report's header: CPUs, model, memory, OS and Deno. */
export async function machine(): Promise<string> {
  const cpuinfo = await readProc("/proc/cpuinfo") ?? "";
  const cpu = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? "unknown CPU";
  const kb = Number(/^MemTotal:\s+(\d+)/m.exec(await readProc("/proc/meminfo") ?? "")?.[1]);
  const mem = kb ? `, ${(kb / 1024 / 1024).toFixed(1)} GB RAM` : "";
  // From /proc as the rest, not `Deno.osRelease()`: a benchmark run without --allow-sys (the
  // soak) then still writes its report.
  const release = (await readProc("/proc/sys/kernel/osrelease"))?.trim() || "unknown release";
  return `nproc ${navigator.hardwareConcurrency}, ${cpu}${mem}, ${Deno.build.os} ` +
    `${release}, Deno ${Deno.version.deno}`;
}

/** The load average now (`1 5 15` minutes), or `?`. */
export async function loadAverage(): Promise<string> {
  const load = (await readProc("/proc/loadavg") ?? "").split(" ").slice(0, 3).join(" ");
  return load || "?";
}

/** Whether `taskset` works here (and there are two CPUs to pin to). */
export async function canPin(): Promise<boolean> {
  if (navigator.hardwareConcurrency < 2) return false;
  try {
    const out = await new Deno.Command("taskset", {
      args: ["-c", "0", "true"],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success;
  } catch {
    return false;
  }
}

/** Keeps the last `max` characters of a stream of text. */
class Tail {
  text = "";
  constructor(readonly max = 8000) {}
  add(s: string): void {
    this.text += s;
    if (this.text.length > 2 * this.max) this.text = this.text.slice(-this.max);
  }
}

/**
 * Starts `cmd args` (on CPU `cpu` when given). Stdout and stderr are read continuously (a full
 * pipe would stall the child); the first stdout line is available through `firstLine`.
 */
export function spawnChild(
  name: string,
  cmd: string,
  args: string[],
  opts: {
    cpu?: number | string;
    env?: Record<string, string>;
    /** Called with every complete line of stdout and stderr (e.g. to count log events). */
    onLine?: (line: string) => void;
  } = {},
): Child {
  const pinned = opts.cpu !== undefined;
  const proc = new Deno.Command(pinned ? "taskset" : cmd, {
    args: pinned ? ["-c", String(opts.cpu), cmd, ...args] : args,
    env: opts.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = new Tail();
  const err = new Tail();
  const firstLine = Promise.withResolvers<string>();
  let sawLine = false;
  const pump = async (stream: ReadableStream<Uint8Array>, tail: Tail, lines: boolean) => {
    const decoder = new TextDecoder();
    let partial = "";
    try {
      for await (const chunk of stream) {
        const text = decoder.decode(chunk, { stream: true });
        tail.add(text);
        if (opts.onLine) {
          const parts = (partial + text).split("\n");
          partial = parts.pop() ?? "";
          for (const line of parts) opts.onLine(line);
        }
        if (lines && !sawLine && tail.text.includes("\n")) {
          sawLine = true;
          firstLine.resolve(tail.text.split("\n")[0]);
        }
      }
    } catch {
      // the child went away
    }
  };
  const pumps = Promise.all([pump(proc.stdout, out, true), pump(proc.stderr, err, false)]);
  let done = false;
  const exited = proc.status.then(async (s) => {
    done = true;
    await pumps;
    if (!sawLine) firstLine.reject(new Error(`${name} exited (code ${s.code}) before any output`));
    return s.code;
  });
  const tail = (lines = 15) =>
    [err.text.trim(), out.text.trim()].filter((s) => s !== "").join("\n").split("\n")
      .slice(-lines).join("\n");
  return {
    name,
    pid: proc.pid,
    exited,
    get done() {
      return done;
    },
    async firstLine(timeoutMs) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${name} printed nothing within ${timeoutMs} ms`)),
          timeoutMs,
        );
      });
      try {
        return await Promise.race([firstLine.promise, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    tail,
    async stop(graceMs = 5000) {
      if (done) return;
      try {
        Deno.kill(proc.pid, "SIGTERM");
      } catch {
        // already gone
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const killed = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          try {
            Deno.kill(proc.pid, "SIGKILL");
          } catch {
            // already gone
          }
          resolve();
        }, graceMs);
      });
      await Promise.race([exited, killed]);
      clearTimeout(timer);
      await exited;
    },
  };
}

/**
 * The text of a `/proc` file, or null. Read through `cat`: Deno lets only `--allow-all` read
 * `/proc` entries, and the bench runs with a permission list.
 */
export async function readProc(path: string): Promise<string | null> {
  try {
    const out = await new Deno.Command("cat", { args: [path], stdout: "piped", stderr: "null" })
      .output();
    return out.success ? new TextDecoder().decode(out.stdout) : null;
  } catch {
    return null;
  }
}

/** Resident memory of `pid` from `/proc/<pid>/status`, MB: current (VmRSS) and peak (VmHWM). */
export async function readRss(pid: number): Promise<{ rssMb: number; hwmMb: number } | null> {
  try {
    const text = await readProc(`/proc/${pid}/status`);
    if (text === null) return null;
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1]);
    const rss = kb("VmRSS");
    const hwm = kb("VmHWM");
    if (!Number.isFinite(rss) || !Number.isFinite(hwm)) return null;
    return { rssMb: rss / 1024, hwmMb: hwm / 1024 };
  } catch {
    return null;
  }
}

/** Calls `read` every `everyMs` until `stop` is called; answers the peak it read (0 for none). */
export function samplePeak(
  read: () => Promise<number | null>,
  everyMs = 250,
): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    // bounded: at most an hour of samples
    for (let i = 0; running && i < 3_600_000 / everyMs; i++) {
      peak = Math.max(peak, await read() ?? 0);
      if (!running) break;
      await new Promise((res) => setTimeout(res, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return peak;
    },
  };
}

/** Samples the RSS of `pid` every `everyMs` until `stop` is called; answers the peak MB. */
export function sampleRss(pid: number, everyMs = 250): { stop(): Promise<number> } {
  return samplePeak(async () => (await readRss(pid))?.rssMb ?? null, everyMs);
}

/** Open file descriptors of `pid` (entries of `/proc/<pid>/fd`, listed by `ls`), or null. */
export async function countFds(pid: number): Promise<number | null> {
  try {
    const out = await new Deno.Command("ls", {
      args: ["-1U", `/proc/${pid}/fd`],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!out.success) return null;
    return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "").length;
  } catch {
    return null;
  }
}

/** A free TCP port on 127.0.0.1 (closed again; a small race, acceptable for a benchmark). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The child processes of a run and its temp folder, let go together. */
export interface ChildScope {
  /** Push every started child here: `close` stops them by PID. */
  children: Child[];
  /** A temp folder of the run, removed by `close`. */
  dir: string;
  /** Stops the children, removes the folder and the signal listeners. */
  close(): Promise<void>;
}

/**
 * Opens a scope for a run: a temp folder (`prefix…`), and SIGINT/SIGTERM listeners that stop
 * the children, remove the folder and exit 130.
 */
export async function childScope(prefix: string, log: (msg: string) => void): Promise<ChildScope> {
  const children: Child[] = [];
  const dir = await Deno.makeTempDir({ prefix });
  const cleanup = async () => {
    await Promise.all(children.map((c) => c.stop()));
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  const onSignal = () => {
    log("interrupted; stopping children");
    cleanup().finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  return {
    children,
    dir,
    async close() {
      Deno.removeSignalListener("SIGINT", onSignal);
      Deno.removeSignalListener("SIGTERM", onSignal);
      await cleanup();
    },
  };
}

/** The environment of the bench's children: this Deno first on PATH, warn logs, the admin key. */
export function childEnv(adminKey: string): Record<string, string> {
  return {
    // scripts/skeid uses the Deno on PATH: this one.
    PATH: `${Deno.execPath().replace(/\/[^/]*$/, "")}:${Deno.env.get("PATH") ?? ""}`,
    SKEID_LOG_LEVEL: "warn",
    SKEID_ADMIN_API_KEY: adminKey,
  };
}

/** Polls `url` until it answers 2xx (bounded by `ms`); throws when `child` exits or time runs out. */
export async function waitHealthy(url: string, child: Child, ms: number): Promise<void> {
  const end = Date.now() + ms;
  let last = "not polled";
  while (Date.now() < end) {
    if (child.done) throw new Error(`${child.name} exited: ${child.tail()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.body?.cancel();
      if (res.ok) return;
      last = `status ${res.status}`;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${child.name} not healthy at ${url}: ${last}`);
}

/**
 * Starts `skeid serve --config config` (with `serveArgs`, e.g. `--workers 2`) on a free 127.0.0.1
 * port; answers once its `/health` answers (stopping it when it never does).
 */
export async function startGatewayChild(
  skeid: string,
  config: string,
  opts: Parameters<typeof spawnChild>[3] = {},
  serveArgs: string[] = [],
): Promise<{ child: Child; base: string }> {
  const port = freePort();
  const base = `http://127.0.0.1:${port}`;
  const args = ["serve", "--config", config, "--listen", `127.0.0.1:${port}`, ...serveArgs];
  const child = spawnChild("gateway", skeid, args, opts);
  try {
    await waitHealthy(`${base}/health`, child, 60_000);
  } catch (err) {
    await child.stop();
    throw err;
  }
  return { child, base };
}

/**
 * Starts `skeid fake-model` on 127.0.0.1:0 with `args` (timings), pushed to `children`; answers
 * once its printed base URL answers `/health`.
 */
export async function startFakeChild(
  skeid: string,
  args: string[],
  env: Record<string, string>,
  children: Child[],
): Promise<{ child: Child; url: string }> {
  const child = spawnChild("fake model", skeid, [
    "fake-model",
    "--listen",
    "127.0.0.1:0",
    "--record",
    "0",
    ...args,
  ], { env });
  children.push(child);
  const url = (await child.firstLine(60_000)).trim();
  if (!/^http:\/\/127\.0\.0\.1:\d+\/v1$/.test(url)) throw new Error(`fake model printed '${url}'`);
  await waitHealthy(`${url.replace(/\/v1$/, "")}/health`, child, 30_000);
  return { child, url };
}

/**
 * The config lines of a bench gateway: the routing wait of `waitMs` and a jsonlog usage store in
 * `dir` (YAML, top level).
 */
export function benchRoutingAndUsage(dir: string, waitMs: number): string[] {
  return [
    "routing:",
    `  wait_timeout_ms: ${waitMs}`,
    "usage_store:",
    "  backend: jsonlog",
    `  path: ${dir}/usage/usage.jsonl`,
    "  mode: file",
  ];
}
