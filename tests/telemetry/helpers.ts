/**
 * Telemetry test helpers: `skeid serve` run as its own process (its telemetry is composed from
 * the process's `OTEL_*` environment at start, as an operator's is), with the environment a test
 * gives, its config written to a temp folder and its usage events in a jsonlog file.
 *
 * @module
 */
import { stringify } from "yaml";
import { endChild } from "../_helpers/cli.ts";
import { until } from "../_helpers/poll.ts";
import type { UsageEvent } from "../../src/usage/types.ts";

const launcher = new URL("../../scripts/skeid", import.meta.url).pathname;

/** A `skeid serve` process under test. */
export interface ServedGateway {
  /** `http://127.0.0.1:PORT`. */
  base: string;
  /** The usage events written so far (the jsonlog file, read now). */
  events(): Promise<UsageEvent[]>;
  /** Waits until the usage event of `requestId` was written, and answers it. */
  event(requestId: string): Promise<UsageEvent>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 10 s) if it has not exited; answers its exit time, ms. */
  stop(graceMs?: number): Promise<number>;
  /** After `stop`: the exit code, or undefined when it had to be killed. */
  exitCode(): number | undefined;
  /** Its stderr so far (read in full once it stopped). */
  stderr(): Promise<string>;
}

/** Options of `serveGateway`. */
export interface ServeOptions {
  /** Variables added to the process's environment (OTEL_*). */
  env?: Record<string, string>;
  /** `--workers N`. */
  workers?: number;
  /** The admin API on, with `TEST_ADMIN_KEY` (for `/skeid/metrics`). */
  admin?: boolean;
}

/**
 * OpenTelemetry on (an OTLP endpoint named turns it on, ADR 0050), exporting to `endpoint`
 * quickly (short batch delay and metric interval).
 */
export function otelEnv(endpoint: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    OTEL_BSP_SCHEDULE_DELAY: "50",
    OTEL_METRIC_EXPORT_INTERVAL: "200",
    OTEL_SERVICE_NAME: "skeid-test",
  };
}

/** The admin key of a gateway `serveGateway` starts with `admin: true` (a test value). */
export const TEST_ADMIN_KEY = "otel-test-admin-key-0123456789abcdefghij";

/** Starts `skeid serve` on 127.0.0.1:0 with `config` (a jsonlog usage store added). */
export async function serveGateway(
  config: Record<string, unknown>,
  opts: ServeOptions = {},
): Promise<ServedGateway> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-otel-" });
  const eventsPath = `${dir}/events.jsonl`;
  await Deno.writeTextFile(
    `${dir}/config.yaml`,
    stringify({
      ...config,
      usage_store: { backend: "jsonlog", path: eventsPath },
      ...(opts.admin ? { admin_api_key_env: "SKEID_TEST_ADMIN_KEY" } : {}),
    }),
  );
  const args = ["serve", "--config", `${dir}/config.yaml`, "--listen", "127.0.0.1:0"];
  if (opts.workers !== undefined) args.push("--workers", String(opts.workers));
  const proc = new Deno.Command(launcher, {
    args,
    env: {
      SKEID_LOG_LEVEL: "warn",
      ...(opts.admin ? { SKEID_TEST_ADMIN_KEY: TEST_ADMIN_KEY } : {}),
      ...opts.env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(proc.stderr).text();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const deadline = Date.now() + 30_000;
  while (!/listening on http:\/\/127\.0\.0\.1:\d+/.test(text) && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  const m = text.match(/http:\/\/127\.0\.0\.1:\d+/);
  if (m === null) {
    await endChild(proc);
    throw new Error(`skeid serve did not start: ${text}\n${await stderr}`);
  }
  // Keep draining stdout so the process never blocks on a full pipe.
  const drained = (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })().catch(() => {});
  const events = async (): Promise<UsageEvent[]> => {
    let body = "";
    try {
      body = await Deno.readTextFile(eventsPath);
    } catch {
      return [];
    }
    return body.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
  };
  let code: number | undefined;
  return {
    base: m[0],
    events,
    event: async (requestId) => {
      let found: UsageEvent | undefined;
      await until(
        async () =>
          (found = (await events()).find((e) => e.request_id === requestId)) !== undefined,
        `the usage event of ${requestId}`,
        10_000,
        20,
      );
      return found!;
    },
    stop: async (graceMs = 10_000) => {
      const t0 = performance.now();
      try {
        proc.kill("SIGTERM");
      } catch {
        // exited
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const ended = await Promise.race([
        proc.status.then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), graceMs)),
      ]);
      clearTimeout(timer);
      const exitMs = performance.now() - t0;
      if (ended) code = (await proc.status).code;
      else await endChild(proc);
      await drained;
      await stderr;
      await Deno.remove(dir, { recursive: true });
      return exitMs;
    },
    exitCode: () => code,
    stderr: () => stderr,
  };
}
