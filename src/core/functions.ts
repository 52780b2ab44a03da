/**
 * The function table: the core's typed command surface (the seed's `call_function`), JSON in and
 * JSON out, reachable over `POST /skeid/call/:function`. A thin adapter over {@link Skeid}'s
 * methods plus hooks for what lives outside the core (config reload, the usage ledger). Add a
 * function here rather than reaching into the object from the app.
 *
 * Moments on this surface are the seed's wire form: **epoch seconds** (fractional) for `at`,
 * `expires_at` and `retry_after`; `retry_after_ms` stays relative milliseconds. The core keeps
 * milliseconds; the conversion happens here and nowhere else.
 *
 * @module
 */
import type { RoutingCore } from "./routing_core.ts";
import type { CapacityReading, CapacityReadingInput, NodeMetrics, Policy } from "./types.ts";
import { SUPPORTED_ENGINE_IDS } from "./engines.ts";
import { normalizeTags } from "./tags.ts";
import { validatePricingRule } from "./pricing.ts";
import { errorMessage } from "../error_message.ts";
import { isJsonObject } from "./json.ts";

/** A function call that cannot be carried out; `status` is the HTTP status the admin API uses. */
export class FunctionError extends Error {
  /** `status` defaults to 400 (bad arguments). */
  constructor(message: string, readonly status = 400) {
    super(message);
    this.name = "FunctionError";
  }
}

/** What lives outside the core. A function whose hook is absent answers 501. */
export interface FunctionHooks {
  /** `config.reload`: re-reads the config; throws with the reason on failure. */
  reload?: () => Promise<unknown>;
  /** `config.status`: the reload status. */
  reloadStatus?: () => unknown;
  /** `usage.record`: builds and stores one usage event. */
  usageRecord?: (args: Record<string, unknown>) => Promise<unknown>;
  /** `usage.report`: a usage report for the filters. */
  usageReport?: (filters: Record<string, unknown>) => Promise<unknown>;
  /** `usage.configure`: replaces the usage store; returns the normalized config. */
  usageConfigure?: (cfg: unknown) => Promise<unknown>;
  /**
   * The secret fence (see config/own_secrets.ts) over a spec placed at `at` (`nodes[]`,
   * `usage_store`): why one of its variables may not be named, or undefined.
   */
  fence?: (spec: unknown, at: string) => string | undefined;
  /** "Maybe reload" before each dispatch; must not throw. */
  beforeCall?: () => Promise<void>;
}

type Args = Record<string, unknown>;

/** Built-in error classes that mean a bug here, not a bad argument: those stay 500s. */
const INTERNAL_ERRORS = new Set(["TypeError", "ReferenceError", "SyntaxError", "RangeError"]);

/** Epoch seconds (wire) → epoch ms (core). */
const secondsToMs = (s: number): number => s * 1000;
/** Epoch ms (core) → epoch seconds (wire). */
const msToSeconds = (ms: number): number => ms / 1000;

/** A capacity reading in the wire form: moments in epoch seconds. */
export function readingToWire(r: CapacityReading): Record<string, unknown> {
  const wire: Record<string, unknown> = { ...r, at: msToSeconds(r.at) };
  if (r.expires_at !== undefined) wire.expires_at = msToSeconds(r.expires_at);
  if (r.retry_after !== undefined) wire.retry_after = msToSeconds(r.retry_after);
  return wire;
}

/** Node metrics in the wire form (the reading's moments in epoch seconds). */
export function nodeMetricsToWire(m: NodeMetrics): Record<string, unknown> {
  const { capacity, ...rest } = m;
  return capacity ? { ...rest, capacity: readingToWire(capacity) } : { ...rest };
}

/** A policy as JSON: the model set as a sorted list, `null` meaning every model. */
export function policyToJson(p: Policy): Record<string, unknown> {
  const json: Record<string, unknown> = {
    models: p.models === null ? null : [...p.models].sort(),
    deny_tags: [...p.deny_tags],
  };
  if (p.manifest_models !== undefined) json.manifest_models = [...p.manifest_models];
  if (p.limits) json.limits = { ...p.limits };
  if (p.budget) json.budget = { ...p.budget };
  if (p.share) json.share = { ...p.share };
  return json;
}

/** Typed readers of one function's arguments; errors name the function and the argument. */
class ArgReader {
  constructor(readonly fn: string, readonly args: Args) {}

  fail(message: string, status = 400): never {
    throw new FunctionError(`${this.fn}: ${message}`, status);
  }

  has(key: string): boolean {
    return this.args[key] !== undefined && this.args[key] !== null;
  }

  required(key: string): unknown {
    if (!this.has(key)) this.fail(`missing required argument '${key}'`);
    return this.args[key];
  }

  string(key: string, required: true): string;
  string(key: string, required?: false): string | undefined;
  string(key: string, required = false): string | undefined {
    if (!required && !this.has(key)) return undefined;
    const v = required ? this.required(key) : this.args[key];
    if (typeof v === "string") return v;
    if (typeof v === "number") return String(v);
    return this.fail(`argument '${key}' must be a string`);
  }

  boolean(key: string, required: true): boolean;
  boolean(key: string, required?: false): boolean | undefined;
  boolean(key: string, required = false): boolean | undefined {
    if (!required && !this.has(key)) return undefined;
    const v = required ? this.required(key) : this.args[key];
    if (typeof v === "boolean") return v;
    // The seed's wire form is Perl's 1/0.
    if (v === 1 || v === 0) return v === 1;
    return this.fail(`argument '${key}' must be true or false`);
  }

  number(key: string): number | undefined {
    if (!this.has(key)) return undefined;
    const v = this.args[key];
    if (typeof v === "number" && Number.isFinite(v)) return v;
    return this.fail(`argument '${key}' must be a number`);
  }

  /** A number, or `null` when given as null; undefined when absent. */
  nullableNumber(key: string): number | null | undefined {
    if (this.args[key] === null) return null;
    return this.number(key);
  }

  tags(key: string): string[] | undefined {
    if (!this.has(key)) return undefined;
    try {
      return normalizeTags(this.args[key]);
    } catch (e) {
      return this.fail(`argument '${key}': ${errorMessage(e)}`);
    }
  }

  hash(key: string): Args | undefined {
    if (!this.has(key)) return undefined;
    const v = this.args[key];
    return isJsonObject(v) ? v : this.fail(`argument '${key}' must be an object`);
  }

  /** The value under `key`, else the args themselves without `omit` (the "inline" form). */
  nestedOrInline(key: string, ...omit: string[]): unknown {
    if (this.has(key)) return this.args[key];
    const rest: Args = { ...this.args };
    for (const k of [key, ...omit]) delete rest[k];
    return rest;
  }
}

/** The core's function table. */
export class FunctionTable {
  readonly #skeid: RoutingCore;
  readonly #hooks: FunctionHooks;
  readonly #handlers: Map<string, (a: ArgReader) => unknown>;

  /** Binds the table to one core; functions whose hook is absent answer 501. */
  constructor(skeid: RoutingCore, hooks: FunctionHooks = {}) {
    this.#skeid = skeid;
    this.#hooks = hooks;
    this.#handlers = new Map(Object.entries(this.#table()));
  }

  /** Every function name, sorted. */
  names(): string[] {
    return [...this.#handlers.keys()].sort();
  }

  /**
   * Calls one function. Throws FunctionError on an unknown name (404), args that are not an
   * object or a missing/bad argument (400), a hook that is not wired (501), and a call the core
   * refuses (400, with the core's reason).
   */
  async call(name: string, args: unknown): Promise<unknown> {
    const handler = this.#handlers.get(name);
    if (!handler) throw new FunctionError(`unknown function '${name}'`, 404);
    if (args === undefined) args = {};
    if (!isJsonObject(args)) throw new FunctionError(`${name}: args must be a JSON object`);
    if (this.#hooks.beforeCall) await this.#hooks.beforeCall();
    try {
      return await handler(new ArgReader(name, args));
    } catch (e) {
      if (e instanceof FunctionError || !(e instanceof Error) || INTERNAL_ERRORS.has(e.name)) {
        throw e;
      }
      // The core's own refusals (bad node spec, bad alias, bad rate) are the caller's to fix.
      throw new FunctionError(`${name}: ${e.message}`);
    }
  }

  /** Throws a 400 when the fence refuses a variable `spec` names. */
  #fenced(fn: string, spec: unknown, at: string): void {
    const problem = this.#hooks.fence?.(spec, at);
    if (problem !== undefined) throw new FunctionError(`${fn}: ${problem}`);
  }

  #hook<K extends keyof FunctionHooks>(fn: string, key: K, what: string): NonNullable<
    FunctionHooks[K]
  > {
    const hook = this.#hooks[key];
    if (!hook) throw new FunctionError(`${fn}: ${what}`, 501);
    return hook as NonNullable<FunctionHooks[K]>;
  }

  #selection(a: ArgReader) {
    const sel: { model: string; engine?: string; tags?: string[]; deny_tags?: string[] } = {
      model: a.string("model", true),
    };
    const engine = a.string("engine");
    if (engine !== undefined) sel.engine = engine;
    const tags = a.tags("tags");
    if (tags !== undefined) sel.tags = tags;
    const deny = a.tags("deny_tags");
    if (deny !== undefined) sel.deny_tags = deny;
    return sel;
  }

  #readingInput(a: ArgReader): CapacityReadingInput {
    // The reading may come inline or under `reading`.
    const r = a.has("reading") ? new ArgReader(a.fn, a.hash("reading") ?? {}) : a;
    const input: CapacityReadingInput = {};
    const used = r.nullableNumber("used");
    if (used !== undefined) input.used = used;
    const limit = r.nullableNumber("limit");
    if (limit !== undefined) input.limit = limit;
    const source = r.string("source");
    if (source !== undefined) input.source = source;
    const quota = r.string("quota");
    if (quota !== undefined) input.quota = quota;
    const interval = r.number("interval_ms");
    if (interval !== undefined) input.interval_ms = interval;
    const relative = r.number("retry_after_ms");
    if (relative !== undefined) input.retry_after_ms = relative;
    const retryAfter = r.number("retry_after");
    if (retryAfter !== undefined) input.retry_after = secondsToMs(retryAfter);
    const at = r.number("at");
    if (at !== undefined) input.at = secondsToMs(at);
    const expires = r.number("expires_at");
    if (expires !== undefined) input.expires_at = secondsToMs(expires);
    return input;
  }

  #table(): Record<string, (a: ArgReader) => unknown> {
    const skeid = this.#skeid;
    const capacity = (id: string) => {
      const r = skeid.capacityReading(id);
      return { capacity: r ? readingToWire(r) : null };
    };
    return {
      "metrics.estimate_cost": (a) => {
        const model = a.string("model", true);
        const pricing = a.hash("pricing");
        return skeid.estimateCost({
          model,
          usage: a.has("usage") ? a.args.usage : a.args.response,
          ...(pricing ? { pricing: validatePricingRule(model, pricing) } : {}),
        });
      },
      "metrics.normalize": (a) => {
        const model = a.string("model", true);
        const pricing = a.hash("pricing");
        const toolCalls = a.args.tool_calls;
        if (toolCalls !== undefined && toolCalls !== null && !Array.isArray(toolCalls)) {
          return a.fail("argument 'tool_calls' must be a list");
        }
        return skeid.normalizeMetrics({
          model,
          response: a.args.response,
          usage: a.args.usage,
          tool_calls: Array.isArray(toolCalls) ? toolCalls : undefined,
          duration_ms: a.number("duration_ms"),
          engine: a.string("engine"),
          route: a.string("route"),
          provider: a.string("provider"),
          ...(pricing ? { pricing: validatePricingRule(model, pricing) } : {}),
        });
      },
      "pricing.set": (a) => {
        const model = a.string("model", true);
        a.required("pricing");
        return skeid.setModelPricing(model, a.hash("pricing"));
      },
      "nodes.add": (a) => {
        const spec = a.nestedOrInline("node");
        if (!isJsonObject(spec)) return a.fail("argument 'node' must be an object");
        this.#fenced(a.fn, spec, "nodes[]");
        return { ok: true, node: skeid.addNode(spec) };
      },
      "nodes.remove": (a) => ({ ok: skeid.removeNode(a.string("id", true)) }),
      "nodes.list": () => ({ nodes: skeid.listNodes() }),
      "nodes.select": (a) => {
        const sel: { tags?: string[]; deny_tags?: string[] } = {};
        const tags = a.tags("tags");
        if (tags !== undefined) sel.tags = tags;
        const deny = a.tags("deny_tags");
        if (deny !== undefined) sel.deny_tags = deny;
        return { nodes: skeid.selectNodes(sel) };
      },
      "nodes.set_health": (a) => ({
        ok: skeid.setNodeHealth(a.string("id", true), a.boolean("healthy", true)),
      }),
      "nodes.metrics": (a) => {
        const id = a.string("id");
        if (id === undefined) return { metrics: skeid.nodeMetrics().map(nodeMetricsToWire) };
        const m = skeid.nodeMetrics(id);
        return { metrics: m ? nodeMetricsToWire(m) : null };
      },
      "alias.set": (a) => {
        const name = a.string("name", true);
        return { ok: true, alias: skeid.setModelAlias(name, a.nestedOrInline("alias", "name")) };
      },
      "policy.set": (a) => {
        const name = a.string("name", true);
        const policy = skeid.setPolicy(name, a.nestedOrInline("policy", "name"));
        return { ok: true, policy: policyToJson(policy) };
      },
      "policy.for_key": (a) => {
        const policy = skeid.policyForKey(a.string("api_key_id", true));
        return { policy: policy ? policyToJson(policy) : null };
      },
      "route.plan": (a) => {
        const args: { model: string; engine?: string; api_key_id?: string } = {
          model: a.string("model", true),
        };
        const engine = a.string("engine");
        if (engine !== undefined) args.engine = engine;
        const keyId = a.string("api_key_id");
        if (keyId !== undefined) args.api_key_id = keyId;
        return skeid.routePlan(args);
      },
      "route.next": (a) => ({ node: skeid.pickNode(this.#selection(a)) ?? null }),
      "route.state": (a) => skeid.routeState(this.#selection(a)),
      "capacity.set": (a) => {
        const id = a.string("id", true);
        const r = skeid.setCapacityReading(id, this.#readingInput(a));
        return { capacity: r ? readingToWire(r) : null };
      },
      "capacity.get": (a) => capacity(a.string("id", true)),
      "capacity.observe": (a) => {
        const id = a.string("id", true);
        const raw = a.hash("headers") ?? {};
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(raw)) {
          if (typeof v === "string" || typeof v === "number") headers[k] = String(v);
        }
        const status = a.number("status");
        const r = skeid.observeResponseHeaders(id, headers, status);
        return { capacity: r ? readingToWire(r) : null };
      },
      "capacity.forget": (a) => {
        skeid.forgetCapacity(a.string("id"), a.string("source"));
        return { ok: true };
      },
      "request.start": (a) => ({ ok: skeid.startRequest(a.string("id", true)) }),
      "request.finish": (a) => {
        const id = a.string("id", true);
        const outcome: { ok?: boolean; aborted?: boolean; duration_ms?: number } = {};
        const ok = a.boolean("ok");
        if (ok !== undefined) outcome.ok = ok;
        const aborted = a.boolean("aborted");
        if (aborted !== undefined) outcome.aborted = aborted;
        const duration = a.number("duration_ms");
        if (duration !== undefined) outcome.duration_ms = duration;
        return { ok: skeid.finishRequest(id, outcome) };
      },
      "config.reload": async (a) => {
        const reload = this.#hook(a.fn, "reload", "no config source to reload");
        try {
          return { config: await reload() };
        } catch (e) {
          // The config in force stays; the reason is the operator's to read.
          throw new FunctionError(`${a.fn}: ${errorMessage(e)}`, 500);
        }
      },
      "config.status": (a) => this.#hook(a.fn, "reloadStatus", "no config source")(),
      "usage.record": (a) => this.#hook(a.fn, "usageRecord", "no usage store")(a.args),
      "usage.report": (a) => {
        const report = this.#hook(a.fn, "usageReport", "no usage store");
        const filters: Args = {};
        for (const key of ["since", "api_key_id", "model"]) {
          const v = a.string(key);
          if (v !== undefined && v !== "") filters[key] = v;
        }
        const limit = a.number("limit");
        if (limit !== undefined) filters.limit = limit;
        return report(filters);
      },
      "usage.configure": async (a) => {
        const configure = this.#hook(a.fn, "usageConfigure", "no usage store to configure");
        const spec = a.nestedOrInline("usage_store");
        this.#fenced(a.fn, spec, "usage_store");
        return { usage_store: await configure(spec) };
      },
      "engines.list": () => ({ engines: [...SUPPORTED_ENGINE_IDS] }),
    };
  }
}
