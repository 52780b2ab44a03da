/**
 * `skeid serve` as a child process for the edge tests that measure the process itself (its event
 * loop, its peak RSS): the config written as YAML to a temp file, the address read off stdout.
 *
 * @module
 */
import { stringify } from "yaml";
import { fileURLToPath } from "node:url";

const LAUNCHER = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

/** A running `skeid serve` child. */
export interface ServeChild {
  /** `http://127.0.0.1:PORT`. */
  base: string;
  /** The process id (the launcher `exec`s deno, so it is deno's). */
  pid: number;
  /** The child's peak resident set (VmHWM), bytes; 0 when the launcher is not the process. */
  peakRss(): Promise<number>;
  /** SIGTERM, then waits for the exit; answers the captured stderr. */
  stop(): Promise<string>;
}

/** Starts `skeid serve --listen 127.0.0.1:0` with `config` and exactly `env` (plus PATH/HOME). */
export async function spawnServe(
  config: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<ServeChild> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-edge-" });
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, stringify(config));
  const child = new Deno.Command(LAUNCHER, {
    args: ["serve", "--listen", "127.0.0.1:0", "--config", configPath],
    stdout: "piped",
    stderr: "piped",
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      HOME: Deno.env.get("HOME") ?? "",
      SKEID_LOG_LEVEL: "error",
      ...env,
    },
  }).spawn();
  const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  let base: string;
  try {
    base = await readListening(stdout);
  } catch (err) {
    child.kill("SIGKILL");
    await child.status;
    throw new Error(`${(err as Error).message}: ${await stderr}`);
  }
  // Keep stdout drained so the child never blocks on a full pipe.
  const drained = (async () => {
    while (!(await stdout.read()).done) { /* drop */ }
  })().catch(() => {});
  return {
    base,
    pid: child.pid,
    peakRss: () => peakRssOf(child.pid),
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      await child.status;
      await drained;
      await Deno.remove(dir, { recursive: true });
      return await stderr;
    },
  };
}

/**
 * VmHWM of a process (the launcher `exec`s deno, so the pid is deno's), bytes; read by `cat`
 * because Deno reads `/proc` only with every permission.
 */
async function peakRssOf(pid: number): Promise<number> {
  const out = await new Deno.Command("cat", { args: [`/proc/${pid}/status`] }).output();
  const status = new TextDecoder().decode(out.stdout);
  const m = /^VmHWM:\s+(\d+) kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

/** The `listening on http://…` address `skeid serve` prints, read off its stdout (30 s at most). */
export async function readListening(reader: ReadableStreamDefaultReader<string>): Promise<string> {
  let buf = "";
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    const m = /listening on (http:\/\/\S+)/.exec(buf);
    if (m) return m[1];
  }
  throw new Error(`serve did not start: ${buf}`);
}

/** A minimal OpenAI upstream on 127.0.0.1:0 that reads each body whole and answers one chat. */
export function startUpstream(): { url: string; close(): Promise<void> } {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    await req.body?.pipeTo(new WritableStream());
    return Response.json({
      id: "c1",
      object: "chat.completion",
      created: 0,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/v1`,
    close: () => server.shutdown(),
  };
}
