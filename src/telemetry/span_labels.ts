/**
 * What the spans of many requests share, made once and kept (bounded): an attempt's name, fixed
 * attributes and metric series per node and served model; a request span's name and fixed
 * attributes per route; an admitted walk step's attributes per key step, node, tier and pick
 * decision. The request path looks them up by the config's own strings, making no key string.
 *
 * @module
 */
import type { PickedNode, Tier } from "../core/types.ts";
import { tierName } from "../proxy/walk.ts";
import { GENAI, providerName, serverOf } from "./genai.ts";
import type { GenAiHistograms, GenAiSeries } from "./genai_histograms.ts";
import { encodeAttrs } from "./otlp_encode.ts";
import { SKEID } from "./skeid_attrs.ts";
import { type AttrList, spanName } from "./span_record.ts";

/** What every attempt to one node for one served model shares, made once. */
export class AttemptLabels {
  readonly op: string;
  readonly url: string;
  readonly engine: string;
  /** `{operation} {served model}`, encoded. */
  readonly name: Uint8Array;
  /** The attempt span's fixed attributes, encoded. */
  readonly fixed: Uint8Array;
  /** The metric labels (operation, provider, model, server, node, worker). */
  readonly labels: AttrList;
  /** Points per response model and error type. */
  readonly #series = new Map<string, GenAiSeries>();

  constructor(op: string, node: PickedNode, served: string, worker: number | undefined) {
    this.op = op;
    this.url = node.url;
    this.engine = node.engine;
    const server = serverOf(node.url);
    const provider = providerName(node.engine);
    this.name = spanName(`${op} ${served}`);
    const labels: AttrList = [
      GENAI.operation,
      op,
      GENAI.provider,
      provider,
      GENAI.requestModel,
      served,
      GENAI.serverAddress,
      server.address,
      GENAI.serverPort,
      server.port,
      SKEID.node,
      node.id,
    ];
    // Each worker's points are its own series (their histograms are not merged across isolates).
    if (worker !== undefined) labels.push(SKEID.worker, worker);
    this.labels = labels;
    this.fixed = encodeAttrs([...labels, GENAI.system, provider]);
  }

  /** The points of `responseModel` and `errorType` (each undefined when none). */
  series(
    all: GenAiHistograms,
    responseModel: string | undefined,
    errorType: string | undefined,
  ): GenAiSeries {
    const key = errorType === undefined
      ? responseModel ?? ""
      : `${responseModel ?? ""}\u0000${errorType}`;
    let s = this.#series.get(key);
    if (s === undefined) {
      // The response model is the node's word: one that names a new model in every answer must
      // not grow this table (nor make a label set per answer). Past the bound its points go to
      // the overflow set, as past the histograms' own bound.
      if (this.#series.size >= MAX_SERIES_CACHED) return all.overflow();
      const labels = [...this.labels];
      if (responseModel !== undefined) labels.push(GENAI.responseModel, responseModel);
      if (errorType !== undefined) labels.push(GENAI.errorType, errorType);
      s = all.add(labels);
      this.#series.set(key, s);
    }
    return s;
  }
}

/** The request span's name and fixed attributes of one route, made once. */
export interface RouteLabels {
  readonly method: string;
  readonly apiFormat: string;
  readonly name: Uint8Array;
  readonly fixed: Uint8Array;
}

/**
 * An admitted walk step's attributes but its wait, encoded once per key step, node, tier and
 * pick decision (an admission span otherwise wrote the same six to nine strings every request).
 */
interface AdmittedLabels {
  readonly limited: boolean;
  /** The tier's served model and tags (what its name is made of). */
  readonly model: string;
  readonly tags: readonly string[];
  readonly pick: string;
  readonly keyKind: string | undefined;
  readonly hit: boolean | undefined;
  readonly spilled: boolean | undefined;
  readonly fixed: Uint8Array;
}

/** Whether `tier` names the served model and tags the labels were made for. */
function sameTier(l: AdmittedLabels, tier: Tier): boolean {
  if (l.model !== tier.model || l.tags.length !== tier.tags.length) return false;
  for (let i = 0; i < l.tags.length; i++) if (l.tags[i] !== tier.tags[i]) return false;
  return true;
}

/** Entries kept in each of the caches of `SpanLabels` at most; a full one starts over. */
const MAX_CACHED = 4096;
/** Series one node and model keeps at hand, by response model and error type. */
const MAX_SERIES_CACHED = 256;

/** The labels a gateway's telemetry keeps, for one process or one worker of a group. */
export class SpanLabels {
  /** `skeid.worker` of this gateway's spans; undefined for one process. */
  readonly worker: number | undefined;
  /** By node id, then served model: the labels of each operation (one or two). */
  readonly #attempts = new Map<string, Map<string, AttemptLabels[]>>();
  /** By route: the labels of each method and face. */
  readonly #routes = new Map<string, RouteLabels[]>();
  /** By node id: the fixed attributes of its admissions. */
  readonly #admissions = new Map<string, AdmittedLabels[]>();
  #cached = 0;

  constructor(worker: number | undefined) {
    this.worker = worker;
  }

  /** The labels of attempts with `op` to `node` for `served`. */
  attempt(op: string, node: PickedNode, served: string): AttemptLabels {
    // Looked up by the config's own strings (their hashes kept), no key string made per attempt.
    let byModel = this.#attempts.get(node.id);
    if (byModel === undefined) {
      byModel = new Map();
      this.#attempts.set(node.id, byModel);
    }
    let ops = byModel.get(served);
    if (ops === undefined) {
      ops = [];
      byModel.set(served, ops);
    }
    for (let i = 0; i < ops.length; i++) {
      const l = ops[i];
      // A node whose URL or engine a config reload changed gets its labels anew.
      if (l.op === op && l.url === node.url && l.engine === node.engine) return l;
    }
    if (this.#cached >= MAX_CACHED) {
      this.#startOver();
      return this.attempt(op, node, served);
    }
    const l = new AttemptLabels(op, node, served, this.worker);
    ops.push(l);
    this.#cached++;
    return l;
  }

  /** The request span's name and fixed attributes for a route. */
  route(method: string, endpoint: string, apiFormat: string): RouteLabels {
    let list = this.#routes.get(endpoint);
    if (list === undefined) {
      if (this.#routes.size >= MAX_CACHED) this.#routes.clear();
      list = [];
      this.#routes.set(endpoint, list);
    }
    for (let i = 0; i < list.length; i++) {
      const r = list[i];
      if (r.method === method && r.apiFormat === apiFormat) return r;
    }
    const attrs: AttrList = [
      SKEID.method,
      method,
      SKEID.route,
      endpoint,
      SKEID.apiFormat,
      apiFormat,
    ];
    if (this.worker !== undefined) attrs.push(SKEID.worker, this.worker);
    const r = {
      method,
      apiFormat,
      name: spanName(`${method} ${endpoint}`),
      fixed: encodeAttrs(attrs),
    };
    // Bounded: methods and faces are few; a route's list past them starts over.
    if (list.length >= 16) list.length = 0;
    list.push(r);
    return r;
  }

  /** The fixed attributes of an admission span whose walk step admitted `node` from `tier`. */
  admitted(limited: boolean, node: PickedNode, tier: Tier): Uint8Array {
    let list = this.#admissions.get(node.id);
    if (list === undefined) {
      if (this.#admissions.size >= MAX_CACHED) this.#admissions.clear();
      list = [];
      this.#admissions.set(node.id, list);
    }
    const route = node.route;
    const pick = route?.pick ?? "round_robin";
    for (let i = 0; i < list.length; i++) {
      const l = list[i];
      if (
        l.limited === limited && l.pick === pick && l.keyKind === route?.key_kind &&
        l.hit === route?.hit && l.spilled === route?.spilled && sameTier(l, tier)
      ) return l.fixed;
    }
    const attrs: AttrList = [
      SKEID.keyStep,
      limited ? "passed_limited" : "passed",
      SKEID.result,
      "admitted",
      SKEID.tier,
      tierName(tier),
      SKEID.node,
      node.id,
      SKEID.pick,
      pick,
    ];
    if (route !== undefined) {
      attrs.push(SKEID.keyKind, route.key_kind, SKEID.hit, route.hit, SKEID.spilled, route.spilled);
    }
    const fixed = encodeAttrs(attrs);
    // Bounded: tiers, picks and their outcomes per node are few; past them the list starts over.
    if (list.length >= 32) list.length = 0;
    list.push({
      limited,
      model: tier.model,
      tags: [...tier.tags],
      pick,
      keyKind: route?.key_kind,
      hit: route?.hit,
      spilled: route?.spilled,
      fixed,
    });
    return fixed;
  }

  /** Bounded: node ids and models come from the config; a table grown past it starts over. */
  #startOver(): void {
    this.#attempts.clear();
    this.#cached = 0;
  }
}
