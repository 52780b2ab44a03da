/**
 * What an identity judged on the request path (an issued key, ADR 0029, or a JWT) is held to:
 * its grant — the key id it routes and bills as, and the policy it is on — and the policies the
 * core reads for those key ids. A grant replaces the one before it for the same id, so a change
 * to an issued key applies from the next request that presents it.
 *
 * @module
 */
import type { JsonObject } from "../core/json.ts";
import type { Policy } from "../core/types.ts";
import { type PolicySet, resolveEntryPolicy } from "../core/policies.ts";
import type { IssuedKeyRow } from "./issued_store.ts";
import type { Logger } from "../log.ts";

/** An identity's key id and the policy it is on (plain data: it crosses isolates). */
export interface Grant {
  /** The customer key id it routes and bills as (a public id, or a JWT identity's id). */
  id: string;
  /** A named policy; null: the default policy. */
  policy: string | null;
  /** Fields over it (`limits`, `budget`, `share`, `models`, `deny_tags`). */
  spec: JsonObject;
}

/** The grant of an issued key's row. */
export function grantOf(row: IssuedKeyRow): Grant {
  return { id: row.id, policy: row.policy, spec: row.spec };
}

/** Grants kept at most (the least recently used go first). */
const CAPACITY = 65536;

interface Resolved {
  grant: Grant;
  /** The policy set it was resolved against, and the answer. */
  set: Readonly<PolicySet> | undefined;
  policy: Policy | null;
}

/** The grants of the identities seen lately, and their resolved policies. */
export class GrantPolicies {
  readonly #policySet: () => Readonly<PolicySet>;
  readonly #logger: Logger;
  readonly #grants = new Map<string, Resolved>();
  readonly #warned = new Set<string>();
  readonly #changed: ((grant: Grant) => void) | undefined;

  /**
   * `policySet`: the one in force (a reload re-resolves every grant lazily); `changed` hears of
   * every grant new or different from the one recorded before.
   */
  constructor(
    policySet: () => Readonly<PolicySet>,
    logger: Logger,
    changed?: (grant: Grant) => void,
  ) {
    this.#policySet = policySet;
    this.#logger = logger;
    this.#changed = changed;
  }

  /** Records the grant of an identity just judged. */
  record(grant: Grant): void {
    const have = this.#grants.get(grant.id);
    if (have !== undefined && sameGrant(have.grant, grant)) {
      this.#grants.delete(grant.id);
      this.#grants.set(grant.id, have);
      return;
    }
    this.#grants.delete(grant.id);
    this.#grants.set(grant.id, { grant, set: undefined, policy: null });
    if (this.#grants.size > CAPACITY) this.#grants.delete(this.#grants.keys().next().value!);
    this.#changed?.(grant);
  }

  /**
   * The policy of a key id judged here (undefined: not one, the config decides). A named policy a
   * reload removed leaves the identity on the default policy, said once.
   */
  policyFor(id: string): Policy | null | undefined {
    const r = this.#grants.get(id);
    if (r === undefined) return undefined;
    const set = this.#policySet();
    if (r.set !== set) {
      const name = r.grant.policy !== null && set.policies.has(r.grant.policy)
        ? r.grant.policy
        : null;
      if (name !== r.grant.policy && !this.#warned.has(id)) {
        this.#warned.add(id);
        this.#logger.warn("grant_policy_unknown", {
          id,
          policy: r.grant.policy,
          message: `policy '${r.grant.policy}' is not defined: the default policy applies`,
        });
      }
      r.set = set;
      if (Object.keys(r.grant.spec).length === 0) {
        // The policy object itself: its route plans are shared with every key on it.
        r.policy = name === null ? set.defaultPolicy : set.policies.get(name) ?? null;
      } else {
        const { policy, errors } = resolveEntryPolicy(set, name, r.grant.spec);
        r.policy = errors.length > 0 ? set.defaultPolicy : policy;
      }
    }
    return r.policy;
  }
}

function sameGrant(a: Grant, b: Grant): boolean {
  return a.policy === b.policy && JSON.stringify(a.spec) === JSON.stringify(b.spec);
}
