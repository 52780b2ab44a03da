/**
 * `/skeid/metrics` of a group of workers (ADR 0025): each worker's Prometheus text merged into
 * one. Counters and histograms are summed series by series; a gauge is the largest value any
 * worker reports (the gauges are the group's already — inflight from the shared table, health,
 * max_conns, capacity readings — so the workers agree, or the tighter reading shows).
 *
 * @module
 */
import type { EjectionSnapshot, EjectionState } from "../core/ejection.ts";
import type { NodeMetrics } from "../core/types.ts";
import type { ShareWire, TierShareWire } from "../proxy/share_stats.ts";

/** One family: its header lines and its series in first-seen order. */
interface Family {
  header: string[];
  type: string;
  series: Map<string, number>;
}

/** The family a sample belongs to: its name without a histogram's `_bucket`/`_sum`/`_count`. */
function familyOf(name: string, families: Map<string, Family>): string {
  if (families.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return families.has(base) ? base : name;
}

/** Merges the Prometheus text of several workers into the group's. */
export function mergePrometheus(texts: string[]): string {
  const families = new Map<string, Family>();
  for (const text of texts) {
    let current: Family | undefined;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (meta) {
        const name = meta[2];
        let family = families.get(name);
        if (!family) {
          family = { header: [], type: "untyped", series: new Map() };
          families.set(name, family);
        }
        if (!family.header.includes(line)) family.header.push(line);
        if (meta[1] === "TYPE") family.type = (meta[3] ?? "untyped").trim();
        current = family;
        continue;
      }
      if (line.startsWith("#")) continue;
      const cut = line.lastIndexOf(" ");
      const key = line.slice(0, cut);
      const value = Number(line.slice(cut + 1));
      const name = key.replace(/\{.*$/, "");
      const family = families.get(familyOf(name, families)) ?? current;
      if (!family) continue;
      const before = family.series.get(key);
      if (before === undefined) family.series.set(key, value);
      else {family.series.set(
          key,
          family.type === "gauge" ? Math.max(before, value) : before + value,
        );}
    }
  }
  const out: string[] = [];
  for (const family of families.values()) {
    out.push(...family.header);
    for (const [key, value] of family.series) out.push(`${key} ${value}`);
  }
  return out.join("\n") + "\n";
}

/** How far from closed an ejection state is. */
const SEVERITY: Record<EjectionState, number> = { ejected: 3, trial: 2, due: 1, closed: 0 };

/**
 * The ejections of `/skeid/metrics/nodes` of a group: ejection is per worker (ADR 0025), so a
 * node shows the state of the worker where it stands furthest from closed (then most failures
 * in a row), with the ejections of every worker summed.
 */
export function mergeEjections(lists: (EjectionSnapshot[] | undefined)[]): EjectionSnapshot[] {
  const out = new Map<string, EjectionSnapshot>();
  for (const list of lists) {
    for (const e of list ?? []) {
      const seen = out.get(e.node_id);
      if (!seen) {
        out.set(e.node_id, { ...e });
        continue;
      }
      const total = seen.ejections_total + e.ejections_total;
      const worse = SEVERITY[e.state] - SEVERITY[seen.state] ||
        e.consecutive_failures - seen.consecutive_failures;
      if (worse > 0) Object.assign(seen, e);
      seen.ejections_total = total;
    }
  }
  return [...out.values()];
}

/** Fair-share figures of a group: waiters, backlogs, waits and served tokens of every worker. */
export function mergeShare(shares: (ShareWire | undefined)[]): ShareWire {
  const tiers = new Map<string, TierShareWire>();
  const served = new Map<string, { key: string; input: number; output: number }>();
  for (const share of shares) {
    if (!share) continue;
    for (const t of share.tiers) {
      const sum = tiers.get(t.tier);
      if (!sum) {
        tiers.set(t.tier, structuredClone(t));
        continue;
      }
      sum.queued += t.queued;
      for (const k of t.backlogged_keys) {
        const b = sum.backlogged_keys.find((x) => x.key === k.key);
        if (b) b.queued += k.queued;
        else sum.backlogged_keys.push({ ...k });
      }
      for (const w of t.waits) {
        const s = sum.waits.find((x) => x.key === w.key);
        if (!s) {
          sum.waits.push(structuredClone(w));
          continue;
        }
        const count = s.count + w.count;
        s.mean_ms = count === 0 ? 0 : (s.mean_ms * s.count + w.mean_ms * w.count) / count;
        s.count = count;
        s.max_ms = Math.max(s.max_ms, w.max_ms);
        for (const b of w.buckets) {
          const sb = s.buckets.find((x) => x.le === b.le);
          if (sb) sb.count += b.count;
          else s.buckets.push({ ...b });
        }
      }
    }
    for (const s of share.served_tokens) {
      const sum = served.get(s.key);
      if (sum) {
        sum.input += s.input;
        sum.output += s.output;
      } else served.set(s.key, { ...s });
    }
  }
  return { tiers: [...tiers.values()], served_tokens: [...served.values()] };
}

/**
 * Node counters of a group: each worker's started/ok/error/aborted/duration summed; `inflight`
 * is the group's already (the shared table), taken as the first worker says it.
 */
export function sumNodeMetrics(lists: NodeMetrics[][]): NodeMetrics[] {
  const sums = new Map<string, NodeMetrics>();
  for (const list of lists) {
    for (const m of list) {
      const sum = sums.get(m.node_id);
      if (!sum) {
        sums.set(m.node_id, { ...m });
        continue;
      }
      for (const k of ["started", "ok", "error", "aborted", "duration_ms_total"] as const) {
        sum[k] += m[k];
      }
    }
  }
  return [...sums.values()];
}
