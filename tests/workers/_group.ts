/**
 * A group of two workers for the workers tests: its config written as YAML into `dir`, events
 * and spill there too, a memory logger.
 *
 * @module
 */
import { stringify } from "yaml";
import { Supervisor, type SupervisorOptions } from "../../src/workers/supervisor.ts";
import { memoryLogger } from "../../src/log.ts";

/** A started group: the supervisor, its config file, its logger and its address. */
export interface Group {
  sup: Supervisor;
  configPath: string;
  logger: ReturnType<typeof memoryLogger>;
  base: string;
}

/** Starts a supervisor of two workers over `cfg` on 127.0.0.1:0. */
export async function group(
  cfg: Record<string, unknown>,
  dir: string,
  more: Partial<SupervisorOptions> = {},
): Promise<Group> {
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, stringify(cfg));
  const logger = memoryLogger("warn");
  const sup = await Supervisor.start({
    hostname: "127.0.0.1",
    port: 0,
    workers: 2,
    configPath,
    env: () => undefined,
    workerEnv: {},
    logger,
    logLevel: "error",
    spillPath: `${dir}/spill.jsonl`,
    ...more,
  });
  return { sup, configPath, logger, base: `http://127.0.0.1:${sup.addr.port}` };
}
