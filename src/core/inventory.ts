/**
 * Node normalization and the inventory: the node table, kept in insertion order and in id
 * order (round-robin order), with a generation that moves on every change so derived caches
 * know when to drop what they built.
 *
 * @module
 */
import type { CapacitySpec, Node, NodeSpec } from "./types.ts";
import { DEFAULT_ENGINE_ID, normalizeEngineId } from "./engines.ts";
import { normalizeTags, TagsError } from "./tags.ts";
import { NodeCounters } from "./admission.ts";
import { ConfigPathError, formatPath, type PathSegment } from "./config_path.ts";
import { errorMessage } from "../error_message.ts";
import { isJsonObject } from "./json.ts";

/**
 * A node spec that cannot be used. `field` names the field (`engine`, `capacity.probe`); from
 * {@link normalizeNodeList} it is the config path (`nodes[2].engine`) and the message starts with it.
 */
export class NodeSpecError extends ConfigPathError {
  /**
   * `field` names the offending field or config path as printed (`capacity.probe`); `segments`
   * default to its dotted parts (node field names hold no dots).
   */
  constructor(
    message: string,
    readonly field?: string,
    segments: readonly PathSegment[] = field ? field.split(".") : [],
    detail?: string,
  ) {
    super(message, segments, detail);
    this.name = "NodeSpecError";
  }
}

/**
 * Several bad fields of one node spec: thrown as the first of them (so a caller that reports
 * one still can), with every one in `problems`, in field order.
 */
export class NodeSpecErrors extends NodeSpecError {
  constructor(readonly problems: readonly NodeSpecError[]) {
    const first = problems[0];
    super(first.message, first.field, first.segments, first.detail);
    this.name = "NodeSpecErrors";
  }
}

/** The keys a node spec may have (anything else is ignored, with a warning in `skeid check`). */
export const NODE_SPEC_KEYS: readonly string[] = Object.freeze([
  "id",
  "url",
  "model",
  "engine",
  "weight",
  "max_conns",
  "healthy",
  "tags",
  "metadata",
  "api_key_ref",
  "api_key_env",
  "forward_key_id",
  "capacity",
  "responses",
]);

/** Capacity probe kinds a node's `capacity.probe` (or `type`) may name. */
export const CAPACITY_PROBE_KINDS: readonly string[] = Object.freeze([
  "inflight",
  "none",
  "ratelimit",
  "prometheus",
  "registry",
  "custom",
]);

/** Poll period of a capacity probe when the block names none, ms. */
export const DEFAULT_PROBE_INTERVAL_MS = 2000;

/** Freezes plain data all the way down so shallow copies of a node can share it safely. */
function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

/** Deep copy of config data (maps, lists, scalars); anything else (a probe callback) is kept. */
function copyData(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyData);
  if (isJsonObject(value) && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = copyData(v);
    return out;
  }
  return value;
}

/** A finite number from a number or a numeric string; undefined otherwise. */
function toNumber(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (typeof v === "string" && /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(v)) {
    return Number(v);
  }
  return undefined;
}

/** true/false, 1/0 and their spellings (`yes`, `on`, `off`, ...); undefined when none of them. */
function toBoolean(v: unknown): boolean | undefined {
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return v === 1 ? true : v === 0 ? false : undefined;
  if (typeof v === "string") {
    const s = v.trim().toLowerCase();
    if (s === "1" || s === "true" || s === "yes" || s === "on") return true;
    if (s === "0" || s === "false" || s === "no" || s === "off" || s === "") return false;
  }
  return undefined;
}

/** An id/url-like text field: a string (or a number) trimmed; '' when absent. */
function textField(spec: NodeSpec, field: string): string {
  const v = spec[field];
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v.trim();
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  throw new NodeSpecError(`${field} must be a string`, field);
}

function optionalString(spec: NodeSpec, field: string): string | undefined {
  const v = spec[field];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") throw new NodeSpecError(`${field} must be a string`, field);
  return v;
}

function normalizeUrl(raw: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new NodeSpecError("url must be an absolute http(s) URL", "url");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new NodeSpecError("url must be an absolute http(s) URL", "url");
  }
  const url = raw.replace(/\/+$/, "");
  return url.endsWith("/v1") ? url : `${url}/v1`;
}

function normalizeCapacity(v: unknown): CapacitySpec | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isJsonObject(v)) throw new NodeSpecError("capacity must be a map", "capacity");
  const block = copyData(v) as Record<string, unknown>;
  const rawKind = block.probe ?? block.type ?? "inflight";
  if (typeof rawKind !== "string") {
    throw new NodeSpecError("capacity.probe must be a string", "capacity.probe");
  }
  const probe = rawKind.trim().toLowerCase() || "inflight";
  if (!CAPACITY_PROBE_KINDS.includes(probe)) {
    throw new NodeSpecError(`unknown capacity probe '${rawKind}'`, "capacity.probe");
  }
  let interval = DEFAULT_PROBE_INTERVAL_MS;
  if (block.interval_ms !== undefined && block.interval_ms !== null) {
    const n = toNumber(block.interval_ms);
    if (n === undefined || n <= 0) {
      throw new NodeSpecError("capacity.interval_ms must be a number > 0", "capacity.interval_ms");
    }
    interval = n;
  }
  return deepFreeze({ ...block, probe, interval_ms: interval });
}

/**
 * Applies a node's defaults (model '', engine openaibase, weight ≥ 1, max_conns 0, healthy,
 * tags, metadata, /v1 appended). Returns undefined for an entry without id or url (the caller
 * warns and skips it); throws NodeSpecError on an unknown engine or another bad field.
 * Nested fields of the result (tags, metadata, capacity) are frozen.
 */
export function normalizeNode(spec: NodeSpec): Node | undefined {
  if (!isJsonObject(spec)) return undefined;
  const id = textField(spec, "id");
  const rawUrl = textField(spec, "url");
  if (id === "" || rawUrl === "") return undefined;

  // Every field is read even after one failed, so a check lists all of a node's mistakes at
  // once (NodeSpecErrors) instead of one per run.
  const problems: NodeSpecError[] = [];
  const read = <T>(fallback: T, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      if (!(err instanceof NodeSpecError)) throw err;
      problems.push(err);
      return fallback;
    }
  };
  const given = (v: unknown) => v !== undefined && v !== null;
  const url = read("", () => normalizeUrl(rawUrl));

  const model = read("", () => {
    const raw = spec.model;
    if (!given(raw)) return "";
    if (typeof raw !== "string" && typeof raw !== "number") {
      throw new NodeSpecError("model must be a string", "model");
    }
    return String(raw);
  });

  const engine = read(DEFAULT_ENGINE_ID, () => {
    if (!given(spec.engine)) return DEFAULT_ENGINE_ID;
    try {
      return normalizeEngineId(spec.engine) || DEFAULT_ENGINE_ID;
    } catch (err) {
      throw new NodeSpecError((err as Error).message, "engine");
    }
  });

  const weight = read(1, () => {
    if (!given(spec.weight)) return 1;
    const w = toNumber(spec.weight);
    if (w === undefined) throw new NodeSpecError("weight must be a number", "weight");
    return Math.max(1, Math.trunc(w));
  });

  const maxConns = read(0, () => {
    if (!given(spec.max_conns)) return 0;
    const m = toNumber(spec.max_conns);
    if (m === undefined || m < 0) {
      throw new NodeSpecError("max_conns must be a number >= 0 (0 = unlimited)", "max_conns");
    }
    return Math.floor(m);
  });

  const healthy = read(true, () => {
    if (!given(spec.healthy)) return true;
    const h = toBoolean(spec.healthy);
    if (h === undefined) throw new NodeSpecError("healthy must be true or false", "healthy");
    return h;
  });

  const tags = read<string[]>([], () => {
    try {
      return normalizeTags(spec.tags);
    } catch (err) {
      if (err instanceof TagsError) throw new NodeSpecError(err.message, "tags");
      throw err;
    }
  });

  const metadata = read<Record<string, unknown>>({}, () => {
    if (!given(spec.metadata)) return {};
    if (!isJsonObject(spec.metadata)) {
      throw new NodeSpecError("metadata must be a map", "metadata");
    }
    return copyData(spec.metadata) as Record<string, unknown>;
  });

  const forward = read(false, () => {
    if (!given(spec.forward_key_id)) return false;
    const f = toBoolean(spec.forward_key_id);
    if (f === undefined) {
      throw new NodeSpecError("forward_key_id must be true or false", "forward_key_id");
    }
    return f;
  });
  const capacity = read(undefined, () => normalizeCapacity(spec.capacity));
  const apiKeyRef = read(undefined, () => optionalString(spec, "api_key_ref"));
  const apiKeyEnv = read(undefined, () => optionalString(spec, "api_key_env"));
  const responses = read(false, () => {
    if (!given(spec.responses)) return false;
    if (spec.responses !== "native") {
      throw new NodeSpecError("responses must be 'native' (or absent: the chat wire)", "responses");
    }
    return true;
  });
  if (problems.length === 1) throw problems[0];
  if (problems.length > 1) throw new NodeSpecErrors(problems);

  const node: Node = {
    id,
    url,
    model,
    engine,
    weight,
    max_conns: maxConns,
    healthy,
    tags: Object.freeze(tags) as string[],
    metadata: deepFreeze(metadata),
  };
  if (apiKeyRef !== undefined) node.api_key_ref = apiKeyRef;
  if (apiKeyEnv !== undefined) node.api_key_env = apiKeyEnv;
  if (forward) node.forward_key_id = true;
  if (capacity !== undefined) node.capacity = capacity;
  if (responses) node.responses = "native";
  return node;
}

/** A whole `nodes` list, normalized: the nodes, and why entries were skipped. */
export interface NodeListResult {
  /** The nodes to install, duplicates resolved (the later entry wins). */
  nodes: Node[];
  /** One line per skipped or overridden entry (`nodes[3]: skipped, ...`), for the caller to log. */
  warnings: string[];
}

/**
 * Normalizes a config `nodes` list without touching any inventory, so a config can be checked
 * (and a reload validated) before anything changes. Throws NodeSpecError with the config path
 * (`nodes[2].engine`) on the first bad entry. A duplicate id: the later entry wins, with a
 * warning. `validate` runs on
 * every normalized node (e.g. a registry probe's block check); what it throws is reported at
 * `nodes[i].capacity`.
 */
export function normalizeNodeList(
  specs: unknown,
  validate?: (node: Node) => void,
): NodeListResult {
  if (!Array.isArray(specs)) throw new NodeSpecError("nodes: must be a list", "nodes");
  const byId = new Map<string, Node>();
  const warnings: string[] = [];
  const seen = new Map<string, number>();
  specs.forEach((spec, i) => {
    let node: Node | undefined;
    try {
      node = normalizeNode(spec as NodeSpec);
      if (node && validate) checkNode(node, validate);
    } catch (err) {
      if (!(err instanceof NodeSpecError)) throw err;
      const segments = ["nodes", i, ...err.segments];
      const path = formatPath(segments);
      throw new NodeSpecError(`${path}: ${err.message}`, path, segments, err.detail);
    }
    if (!node) {
      warnings.push(`nodes[${i}]: skipped, a node needs an id and a url`);
      return;
    }
    const first = seen.get(node.id);
    if (first !== undefined) {
      // As add_node does: the later entry replaces the earlier one, said out loud.
      warnings.push(
        `nodes[${i}].id: duplicate node id '${node.id}' (also nodes[${first}]); the later entry wins`,
      );
      byId.delete(node.id);
    }
    seen.set(node.id, i);
    byId.set(node.id, node);
  });
  return { nodes: [...byId.values()], warnings };
}

/** Runs a node validator, reporting what it throws as a NodeSpecError on `capacity`. */
export function checkNode(node: Node, validate: (node: Node) => void): void {
  try {
    validate(node);
  } catch (err) {
    if (err instanceof NodeSpecError) throw err;
    throw new NodeSpecError(errorMessage(err), "capacity");
  }
}

/** A node of the inventory with its volatile counters and admission share. */
export interface NodeRecord {
  /** The node as stored; never handed out (callers get copies). */
  node: Node;
  /** Survives an update of the same id; dropped with the node. */
  readonly counters: NodeCounters;
  /** This process's share of max_conns (0 = unlimited); kept current by the core. */
  share: number;
  /** The node's row in a shared inflight table, found on first use (ADR 0025). */
  row?: number;
  /**
   * Draining (admin API): admits nothing new while its in-flight requests finish. Operator state
   * of this process, like health set through the admin API; kept while the id stays.
   */
  draining?: boolean;
}

function byId(a: NodeRecord, b: NodeRecord): number {
  return a.node.id < b.node.id ? -1 : a.node.id > b.node.id ? 1 : 0;
}

/**
 * The node table. Insertion order is what lists show; id order is the round-robin order.
 * Every change bumps {@link Inventory.generation}.
 */
export class Inventory {
  #records = new Map<string, NodeRecord>();
  #sorted: NodeRecord[] = [];
  #generation = 0;

  /** Bumped by every change: a node added, replaced or removed, a health flip. */
  get generation(): number {
    return this.#generation;
  }

  /** Number of nodes. */
  get size(): number {
    return this.#records.size;
  }

  /** The record of one node. */
  get(id: string): NodeRecord | undefined {
    return this.#records.get(id);
  }

  /** Records in insertion order. */
  records(): IterableIterator<NodeRecord> {
    return this.#records.values();
  }

  /** Records in id order (round-robin order); rebuilt only when the inventory changes. */
  get sorted(): readonly NodeRecord[] {
    return this.#sorted;
  }

  /** Adds a node or replaces the one with its id; a replaced node keeps its counters. */
  upsert(node: Node): NodeRecord {
    const existing = this.#records.get(node.id);
    const record: NodeRecord = existing
      ? { node, counters: existing.counters, share: existing.share }
      : { node, counters: new NodeCounters(), share: 0 };
    this.#records.set(node.id, record);
    this.#changed();
    return record;
  }

  /** Removes a node; its record (counters included) goes with it. */
  remove(id: string): NodeRecord | undefined {
    const record = this.#records.get(id);
    if (!record) return undefined;
    this.#records.delete(id);
    this.#changed();
    return record;
  }

  /**
   * Replaces every node at once (one generation bump). Ids present before and after keep their
   * counters; answers the ids that left.
   */
  replaceAll(nodes: readonly Node[]): string[] {
    const next = new Map<string, NodeRecord>();
    for (const node of nodes) {
      const existing = this.#records.get(node.id);
      next.set(node.id, {
        node,
        counters: existing?.counters ?? new NodeCounters(),
        share: existing?.share ?? 0,
        ...(existing?.draining ? { draining: true } : {}),
      });
    }
    const departed = [...this.#records.keys()].filter((id) => !next.has(id));
    this.#records = next;
    this.#changed();
    return departed;
  }

  /** Sets health; undefined for an unknown node, false when it already had that value. */
  setHealth(id: string, healthy: boolean): boolean | undefined {
    const record = this.#records.get(id);
    if (!record) return undefined;
    if (record.node.healthy === healthy) return false;
    record.node = { ...record.node, healthy };
    this.#changed();
    return true;
  }

  #changed(): void {
    this.#sorted = [...this.#records.values()].sort(byId);
    this.#generation++;
  }
}
