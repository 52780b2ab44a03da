/**
 * Test doubles for the config manager: an in-memory file system with settable mtimes, a
 * settable clock, and a manager wired to a fresh Skeid.
 *
 * @module
 */
import { RoutingCore } from "../../src/core/routing_core.ts";
import type { RoutingSettings } from "../../src/core/types.ts";
import { memoryLogger } from "../../src/log.ts";
import {
  type ConfigFileSystem,
  type ConfigHooks,
  ConfigManager,
} from "../../src/config/config_manager.ts";

/** An in-memory config file system; every read is counted. */
export class FakeFs implements ConfigFileSystem {
  readonly files = new Map<string, { text: string; mtimeMs: number; ino?: number }>();
  reads = 0;
  stats = 0;

  /** Writes `text` with the given mtime (and inode: a new one is a file replaced by rename). */
  write(path: string, text: string, mtimeMs: number, ino?: number): void {
    this.files.set(path, { text, mtimeMs, ino });
  }

  /** Deletes the file. */
  remove(path: string): void {
    this.files.delete(path);
  }

  stat(path: string): Promise<{ mtimeMs: number; ino?: number } | null> {
    this.stats++;
    const f = this.files.get(path);
    return Promise.resolve(f ? { mtimeMs: f.mtimeMs, ino: f.ino } : null);
  }

  readTextFile(path: string): Promise<string> {
    this.reads++;
    const f = this.files.get(path);
    return f ? Promise.resolve(f.text) : Promise.reject(new Deno.errors.NotFound(path));
  }
}

/** A clock the test moves by hand. */
export class Clock {
  constructor(public t = 1_700_000_000_000) {}
  readonly now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

/** Everything a manager test needs. */
export interface Harness {
  fs: FakeFs;
  clock: Clock;
  skeid: RoutingCore;
  logger: ReturnType<typeof memoryLogger>;
  manager: ConfigManager;
  applied: number;
  path: string;
}

/** A manager over a fake file at `/etc/skeid.yaml` holding `text` (mtime 1000). */
export function harness(
  text: string | undefined,
  opts: {
    env?: Record<string, string>;
    hooks?: ConfigHooks;
    explicitAdminKey?: string;
    routing?: Partial<RoutingSettings>;
    /** Settle time of in-place writes, ms; default 0 (each write here is complete). */
    settleMs?: number;
  } = {},
): Harness {
  const fs = new FakeFs();
  const clock = new Clock();
  const path = "/etc/skeid.yaml";
  if (text !== undefined) fs.write(path, text, 1000);
  const env = (name: string) => opts.env?.[name];
  const logger = memoryLogger();
  const skeid = new RoutingCore({ now: clock.now, env, logger, routing: opts.routing });
  const h: Harness = {
    fs,
    clock,
    skeid,
    logger,
    path,
    applied: 0,
    manager: undefined as unknown as ConfigManager,
  };
  h.manager = new ConfigManager({
    skeid,
    path,
    env,
    logger,
    fs,
    now: clock.now,
    explicitAdminKey: opts.explicitAdminKey,
    hostname: () => "test-host",
    settleMs: opts.settleMs ?? 0,
    hooks: {
      ...opts.hooks,
      onApplied(cfg) {
        h.applied++;
        opts.hooks?.onApplied?.(cfg);
      },
    },
  });
  return h;
}

/** Log lines with this event name. */
export function events(h: Harness, event: string): Record<string, unknown>[] {
  return h.logger.lines.filter((l) => l.event === event);
}
