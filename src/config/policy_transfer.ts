/**
 * A policy set carried from the config parser's worker to the serving thread in bounded pieces.
 * A structured clone is rebuilt on the receiving thread in one task: the policy set of a `keys:`
 * section of tens of thousands of entries, sent as one message, held that thread (and with it
 * every request and `/health`) for about 200 ms. Sent as a head and pieces of at most
 * `PIECE_ENTRIES` entries, each piece is one short task, and requests are answered between them.
 *
 * A key whose policy is a named policy travels as that name, so the assembled set shares the
 * named policy objects as the worker's did (a structured clone keeps sharing only within one
 * message).
 *
 * @module
 */
import type { Policy } from "../core/types.ts";
import type { PolicySet } from "../core/policies.ts";

/** Entries of one piece: a few milliseconds of rebuilding on the receiving thread. */
export const PIECE_ENTRIES = 2_000;

/** A key's policy on the wire: a named policy's name, or the key's own policy. */
type PolicyRef = string | Policy;

/** What the pieces refer to: the named policies, the default policy and the warnings. */
export interface PolicyHead {
  policies: Map<string, Policy>;
  defaultPolicy: PolicyRef | null;
  warnings: string[];
}

/** One bounded part of a policy set's per-key tables. */
export type PolicyPiece =
  | { table: "keyPolicies" | "shortKeyPolicies"; entries: [string, PolicyRef][] }
  | { table: "keyNames"; entries: [string, string][] }
  | { table: "knownKeyIds"; ids: string[] };

/** The head of `set` and its pieces, in the order the receiver assembles them. */
export function policyTransfer(set: PolicySet): { head: PolicyHead; pieces: PolicyPiece[] } {
  const nameOf = new Map<Policy, string>();
  for (const [name, p] of set.policies) nameOf.set(p, name);
  const ref = (p: Policy): PolicyRef => nameOf.get(p) ?? p;
  const pieces: PolicyPiece[] = [];
  for (const table of ["keyPolicies", "shortKeyPolicies"] as const) {
    for (const part of chunks(set[table])) {
      pieces.push({ table, entries: part.map(([id, p]) => [id, ref(p)]) });
    }
  }
  for (const entries of chunks(set.keyNames)) pieces.push({ table: "keyNames", entries });
  for (const ids of chunks(set.knownKeyIds)) pieces.push({ table: "knownKeyIds", ids });
  const head: PolicyHead = {
    policies: set.policies,
    defaultPolicy: set.defaultPolicy === null ? null : ref(set.defaultPolicy),
    warnings: set.warnings,
  };
  return { head, pieces };
}

/** A policy set put together from a head and its pieces, one piece a task. */
export class PolicySetAssembly {
  readonly #set: PolicySet;

  constructor(head: PolicyHead) {
    for (const p of head.policies.values()) freezePolicy(p);
    this.#set = {
      policies: head.policies,
      defaultPolicy: null,
      keyPolicies: new Map(),
      shortKeyPolicies: new Map(),
      keyNames: new Map(),
      knownKeyIds: new Set(),
      warnings: head.warnings,
    };
    this.#set.defaultPolicy = head.defaultPolicy === null
      ? null
      : this.#resolve(head.defaultPolicy);
  }

  /** Adds one piece. */
  add(piece: PolicyPiece): void {
    const set = this.#set;
    if (piece.table === "knownKeyIds") {
      for (const id of piece.ids) set.knownKeyIds.add(id);
    } else if (piece.table === "keyNames") {
      for (const [name, id] of piece.entries) set.keyNames.set(name, id);
    } else {
      const table = set[piece.table];
      for (const [id, ref] of piece.entries) table.set(id, this.#resolve(ref));
    }
  }

  /** The assembled set. */
  finish(): PolicySet {
    return this.#set;
  }

  #resolve(ref: PolicyRef): Policy {
    if (typeof ref !== "string") return freezePolicy(ref);
    const named = this.#set.policies.get(ref);
    if (!named) throw new Error(`policy transfer: no named policy "${ref}"`);
    return named;
  }
}

/** Structured clone drops `Object.freeze`: the core's policies are immutable, so freeze again. */
export function freezePolicy(p: Policy): Policy {
  if (Object.isFrozen(p)) return p;
  Object.freeze(p.deny_tags);
  if (p.manifest_models) Object.freeze(p.manifest_models);
  return Object.freeze(p);
}

function chunks<T>(items: Iterable<T>): T[][] {
  const out: T[][] = [];
  let part: T[] = [];
  for (const item of items) {
    part.push(item);
    if (part.length === PIECE_ENTRIES) {
      out.push(part);
      part = [];
    }
  }
  if (part.length > 0) out.push(part);
  return out;
}
