/**
 * `/skeid/metrics` of a group of workers (ADR 0025): each worker's Prometheus text merged into
 * one. Counters and histograms are summed series by series; a gauge is the largest value any
 * worker reports (the gauges are the group's already — inflight from the shared table, health,
 * max_conns, capacity readings — so the workers agree, or the tighter reading shows).
 *
 * @module
 */

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
