/**
 * Parsing config text for a reload: inline for an ordinary config, in a worker (parse_worker.ts)
 * for a large one, so that `/health` and every request keep being answered while a config of
 * megabytes is parsed. What the worker built arrives by structured clone; the policies it
 * built are frozen again here, as the core hands them out.
 *
 * @module
 */
import type { Policy } from "../core/types.ts";
import type { PolicySet } from "../core/policies.ts";
import { type ConfigIssue, ConfigLoadError, formatPath, type PathSegment } from "./errors.ts";
import { configDigest, type Prebuilt, topLevelDigests } from "./load.ts";
import { parseYaml } from "./yaml.ts";
import type { Config } from "./config_schema.ts";

/** Texts at least this long (bytes of UTF-16, about 256 KiB) are parsed in the worker. */
export const WORKER_THRESHOLD = 256 * 1024;

/** A message to the worker. */
export type ParseRequest =
  | { id: number; kind: "parse"; text: string; source?: string }
  | { id: number; kind: "lines"; segments: PathSegment[][] };

/** A message from the worker. */
export type ParseReply =
  | { id: number; kind: "parsed"; value: unknown; prebuilt: Prebuilt; keysJson?: string }
  | { id: number; kind: "failed"; issues: ConfigIssue[] }
  | { id: number; kind: "lines"; lines: (number | null)[] };

/** Parsed config text: the data, what was built with it, and the lines of paths in it. */
export interface ParsedText {
  /** The document as plain data. */
  value: unknown;
  /** The digest and, when it built, the policy set. */
  prebuilt: Prebuilt;
  /** Source lines of the given paths, by printed path. */
  linesOf(paths: readonly (readonly PathSegment[])[]): Promise<Map<string, number>>;
  /**
   * Puts back into a loaded config what the worker sent aside (the `keys` section, as JSON
   * parsed on first read); a no-op when nothing was.
   */
  restore(config: Config): void;
}

/** Parses config texts; one per config manager (its worker, once started, until `close`). */
export class ConfigParser {
  #worker?: Worker;
  #next = 0;
  #waiting = new Map<number, (reply: ParseReply) => void>();
  #broken = false;

  /** Parses `text`; throws ConfigLoadError (with lines) on a YAML error. */
  async parse(text: string, source?: string): Promise<ParsedText> {
    const worker = text.length >= WORKER_THRESHOLD ? this.#start() : undefined;
    if (!worker) {
      const parsed = parseYaml(text, source);
      return {
        value: parsed.value,
        prebuilt: {
          digest: configDigest(parsed.value),
          topLevelDigests: topLevelDigests(parsed.value),
        },
        linesOf: (paths) => Promise.resolve(lineMap(paths, (p) => parsed.lineOf(p))),
        restore: () => {},
      };
    }
    const reply = await this.#ask(worker, { kind: "parse", text, source });
    if (reply.kind === "failed") throw new ConfigLoadError(reply.issues, source);
    if (reply.kind !== "parsed") throw new Error("config parser: unexpected reply");
    if (reply.prebuilt.policy) freezePolicies(reply.prebuilt.policy.set);
    return {
      value: reply.value,
      prebuilt: reply.prebuilt,
      linesOf: async (paths) => {
        if (paths.length === 0) return new Map();
        const answer = await this.#ask(worker, {
          kind: "lines",
          segments: paths.map((p) => [...p]),
        });
        const lines = answer.kind === "lines" ? answer.lines : [];
        return lineMap(paths, (_, i) => lines[i] ?? undefined);
      },
      restore: (config) => {
        const json = reply.keysJson;
        if (json === undefined) return;
        let keys: Config["keys"] | undefined;
        Object.defineProperty(config, "keys", {
          enumerable: true,
          configurable: true,
          get: () => (keys ??= JSON.parse(json) as Config["keys"]),
        });
      },
    };
  }

  /** Ends the worker, if one started. */
  close(): void {
    this.#worker?.terminate();
    this.#worker = undefined;
    for (const resolve of this.#waiting.values()) {
      resolve({ id: -1, kind: "failed", issues: [{ path: "", message: "config parser closed" }] });
    }
    this.#waiting.clear();
  }

  #start(): Worker | undefined {
    if (this.#worker || this.#broken) return this.#worker;
    try {
      const worker = new Worker(new URL("./parse_worker.ts", import.meta.url).href, {
        type: "module",
      });
      worker.onmessage = (e: MessageEvent<ParseReply>) => {
        const resolve = this.#waiting.get(e.data.id);
        this.#waiting.delete(e.data.id);
        resolve?.(e.data);
      };
      worker.onerror = (e) => {
        e.preventDefault();
        this.#fail(`config parser worker failed: ${e.message}`);
      };
      this.#worker = worker;
    } catch {
      // No worker here (permissions, a build without it): parse inline, as small configs are.
      this.#broken = true;
    }
    return this.#worker;
  }

  #fail(message: string): void {
    this.#broken = true;
    this.#worker?.terminate();
    this.#worker = undefined;
    for (const resolve of this.#waiting.values()) {
      resolve({ id: -1, kind: "failed", issues: [{ path: "", message }] });
    }
    this.#waiting.clear();
  }

  #ask(worker: Worker, request: DistributiveOmit<ParseRequest, "id">): Promise<ParseReply> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      worker.postMessage({ ...request, id });
    });
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function lineMap(
  paths: readonly (readonly PathSegment[])[],
  line: (path: readonly PathSegment[], index: number) => number | undefined,
): Map<string, number> {
  const out = new Map<string, number>();
  paths.forEach((p, i) => {
    const n = line(p, i);
    if (n !== undefined) out.set(formatPath(p), n);
  });
  return out;
}

/** Structured clone drops `Object.freeze`: the core's policies are immutable, so freeze again. */
function freezePolicies(set: PolicySet): void {
  const freeze = (p: Policy | null | undefined) => {
    if (!p || Object.isFrozen(p)) return;
    Object.freeze(p.deny_tags);
    if (p.manifest_models) Object.freeze(p.manifest_models);
    Object.freeze(p);
  };
  freeze(set.defaultPolicy);
  for (const p of set.policies.values()) freeze(p);
  for (const p of set.keyPolicies.values()) freeze(p);
  for (const p of set.shortKeyPolicies.values()) freeze(p);
}
