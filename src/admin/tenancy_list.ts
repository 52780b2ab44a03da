/**
 * `GET /skeid/tenancy`: every customer key an operator manages — each listed under `keys:` in the
 * config and each issued key — with its policy, limits, the current minute of its rate windows,
 * its budget in its period, its share and when it was last seen. Built from what
 * `GET /skeid/keys/:key` shows (`keyStatusOf`); never a secret, a hash or key material.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { Tenancy } from "../core/tenancy.ts";
import { type IssuedKeyDirectory, IssuedKeyError } from "../customer_keys/directory.ts";
import { formatCreatedAt } from "../usage/event.ts";

/** Issued keys read per page, and pages at most (a listing of 25,000 keys stays bounded). */
const ISSUED_PAGE = 500;
const ISSUED_PAGES = 50;

/** One customer key on the Keys page. */
export interface TenancyRow {
  key_id: string;
  name: string | null;
  source: "config" | "issued";
  policy: string | null;
  /** The key's rate limits as its policy has them; `{}` without any. */
  limits: Record<string, unknown>;
  windows: { requests_this_minute: number; tokens_this_minute: number };
  budget: {
    limit: { usd: number | null; tokens: number | null };
    spent: { usd: number; tokens: number };
    left: { usd: number | null; tokens: number | null };
    period: string;
    resets_at: string | null;
  } | null;
  share: { weight: number; priority: number };
  last_seen: string | null;
}

/** What the listing reads. */
export interface TenancyListDeps {
  skeid: RoutingCore;
  tenancy: Tenancy;
  issuedKeys?: IssuedKeyDirectory;
  /** The `created_at` of a key's last usage event since start, or null. */
  lastSeen?: (keyId: string) => string | null;
}

/** USD sums carry float noise: shown to 1e-9 USD, as `GET /skeid/keys/:key` does. */
function usd<T extends number | null>(v: T): T {
  return (v === null ? v : Math.round(v * 1e9) / 1e9) as T;
}

/** One key's row. */
function rowOf(
  deps: TenancyListDeps,
  id: string,
  source: "config" | "issued",
  name: string | null,
  policy: string | null,
): TenancyRow {
  const { skeid, tenancy } = deps;
  const now = skeid.now();
  const kp = skeid.keyPolicy(id);
  const w = tenancy.rates.state(id, now);
  const b = tenancy.budgets.status(id, now);
  return {
    key_id: id,
    name,
    source,
    policy,
    limits: kp.limits === null ? {} : { ...kp.limits },
    windows: { requests_this_minute: w.requests, tokens_this_minute: w.tokens },
    budget: b === null ? null : {
      limit: { usd: b.cap.usd, tokens: b.cap.tokens },
      spent: { usd: usd(b.spent.usd), tokens: b.spent.tokens },
      left: { usd: usd(b.remaining.usd), tokens: b.remaining.tokens },
      period: b.period,
      resets_at: b.resetsAt === null ? null : formatCreatedAt(b.resetsAt),
    },
    share: { weight: kp.share.weight, priority: kp.share.priority },
    last_seen: deps.lastSeen?.(id) ?? null,
  };
}

/** Every configured customer key, then every issued key, each in id order. */
export async function tenancyListing(deps: TenancyListDeps): Promise<{ keys: TenancyRow[] }> {
  const { skeid } = deps;
  const set = skeid.policySet;
  const keys: TenancyRow[] = [];
  for (const id of [...set.knownKeyIds].sort()) {
    const policy = skeid.policyForKey(id);
    let policyName: string | null = null;
    for (const [name, p] of set.policies) if (p === policy) policyName = name;
    keys.push(rowOf(deps, id, "config", skeid.keyNameForId(id) ?? null, policyName));
  }
  const dir = deps.issuedKeys;
  if (dir) {
    let after: string | undefined;
    try {
      for (let page = 0; page < ISSUED_PAGES; page++) {
        const rows = await dir.list({ limit: ISSUED_PAGE, after });
        for (const r of rows) keys.push(rowOf(deps, r.id, "issued", r.name, r.policy));
        if (rows.length < ISSUED_PAGE) break;
        after = rows[rows.length - 1].id;
      }
    } catch (err) {
      // Without an issued-key table (jsonlog, no store) the config's keys are the listing.
      if (!(err instanceof IssuedKeyError) || err.status !== 503) throw err;
    }
  }
  return { keys };
}
