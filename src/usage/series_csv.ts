/**
 * The Usage page's table as a file: `GET /skeid/usage/series?…&format=csv`, the rows of the JSON
 * answer (one per bucket and group; a bucket without events has none) under a header row. Group
 * names are chosen by whoever named a model, key or node: every field is quoted when it must be,
 * and one that a spreadsheet would run as a formula is prefixed with `'`.
 *
 * @module
 */
import type { SeriesAnswer } from "./rollup.ts";

/** The header's name of the group column per split. */
const GROUP_COLUMN: Record<SeriesAnswer["by"], string> = {
  key: "api_key_id",
  alias: "alias",
  model: "served_model",
  node: "node_id",
};

/** One CSV field: quoted when it holds a comma, quote or line break; a formula made inert. */
export function csvField(value: string | number): string {
  let s = String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** The CSV text of a series answer (CRLF line ends, as RFC 4180 has them). */
export function seriesCsv(a: SeriesAnswer): string {
  const head = [
    "bucket_start",
    GROUP_COLUMN[a.by],
    "requests",
    "errors",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
  ];
  const lines = [head.join(",")];
  for (const b of a.buckets) {
    for (const g of b.groups) {
      lines.push(
        [
          b.start,
          g.name,
          g.requests,
          g.errors,
          g.input_tokens,
          g.output_tokens,
          g.cached_tokens,
          g.cost_usd,
        ].map(csvField).join(","),
      );
    }
  }
  return lines.join("\r\n") + "\r\n";
}

/** The download's file name: `skeid-usage-<from hour>-<to hour>.csv` (no colon in it). */
export function seriesCsvName(a: SeriesAnswer): string {
  const hour = (iso: string) => iso.slice(0, 13).replaceAll(":", "");
  return `skeid-usage-${hour(a.from)}-${hour(a.to)}.csv`;
}
