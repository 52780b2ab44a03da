/**
 * Parsing config text for a reload: inline for an ordinary config, in a worker (parse_worker.ts)
 * for a large one, so that `/health` and every request keep being answered while a config of
 * megabytes is parsed. What the worker built arrives by structured clone, the policy set in
 * bounded pieces (policy_transfer.ts).
 *
 * @module
 */
import { type PolicyHead, type PolicyPiece, PolicySetAssembly } from "./policy_transfer.ts";
import { type ConfigIssue, ConfigLoadError, formatPath, type PathSegment } from "./errors.ts";
import { configDigest, type Prebuilt, topLevelDigests } from "./load.ts";
import { parseYaml } from "./yaml.ts";
import type { Config } from "./config_schema.ts";

/** Texts at least this long (bytes of UTF-16, about 256 KiB) are parsed in the worker. */
export const WORKER_THRESHOLD = 256 * 1024;

/** A message to the worker. */
export type ParseRequest =
  | { id: number; kind: "parse"; text: string; source?: string }
  | { id: number; kind: "lines"; segments: PathSegment[][] }
  | { id: number; kind: "next" };

/**
 * A message from the worker. A built policy set comes ahead of its `parsed` reply, as a head and
 * bounded pieces (policy_transfer.ts); the reply then names its digest.
 */
export type ParseReply =
  | {
    id: number;
    kind: "parsed";
    value: unknown;
    prebuilt: Omit<Prebuilt, "policy">;
    policyDigest?: string;
    keysJson?: string;
  }
  | { id: number; kind: "policy_head"; head: PolicyHead }
  | { id: number; kind: "policy_piece"; piece: PolicyPiece }
  | { id: number; kind: "failed"; issues: ConfigIssue[] }
  | { id: number; kind: "lines"; lines: (number | null)[] };

/** A reply that ends a request. */
type FinalReply = Exclude<ParseReply, { kind: "policy_head" | "policy_piece" }>;

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
  #waiting = new Map<number, (reply: FinalReply) => void>();
  #assembling = new Map<number, PolicySetAssembly>();
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
    const assembly = this.#assembling.get(reply.id);
    this.#assembling.delete(reply.id);
    const prebuilt: Prebuilt = { ...reply.prebuilt };
    if (assembly && reply.policyDigest !== undefined) {
      prebuilt.policy = { set: assembly.finish(), digest: reply.policyDigest };
    }
    return {
      value: reply.value,
      prebuilt,
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
    this.#assembling.clear();
  }

  #start(): Worker | undefined {
    if (this.#worker || this.#broken) return this.#worker;
    try {
      const worker = new Worker(new URL("./parse_worker.ts", import.meta.url).href, {
        type: "module",
      });
      worker.onmessage = (e: MessageEvent<ParseReply>) => {
        const reply = e.data;
        if (reply.kind === "policy_head" || reply.kind === "policy_piece") {
          if (reply.kind === "policy_head") {
            this.#assembling.set(reply.id, new PolicySetAssembly(reply.head));
          } else this.#assembling.get(reply.id)?.add(reply.piece);
          // The next piece is asked for from a later turn of the event loop: messages already
          // queued are delivered back to back, with no request answered between them.
          setTimeout(() => worker.postMessage({ id: reply.id, kind: "next" }), 0);
        } else {
          const resolve = this.#waiting.get(reply.id);
          this.#waiting.delete(reply.id);
          resolve?.(reply);
        }
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
    this.#assembling.clear();
  }

  #ask(worker: Worker, request: DistributiveOmit<ParseRequest, "id">): Promise<FinalReply> {
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
