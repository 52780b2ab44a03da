/**
 * A usage report's `since`: where the report starts, as the stores compare `created_at` —
 * `YYYY-MM-DDTHH:MM:SSZ`, UTC, whole seconds. Every store compares that text (jsonlog and
 * SQLite as strings, PostgreSQL as a timestamp), so a `since` in any other spelling (a space
 * instead of `T`, an offset, a word) would be compared letter by letter and count the wrong
 * events; it is turned into that form here, or refused.
 *
 * @module
 */

/** A `since` that names no time; the message says what it takes. */
export class SinceError extends Error {
  override name = "SinceError";
}

const ISO_PREFIX =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(\.\d+)?)?)?)?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** A span back from now: minutes, hours, days, weeks. */
const AGO = /^(\d{1,9})\s*(min|m|h|d|w)$/i;
const UNIT_MS: Record<string, number> = {
  min: 60_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

/**
 * An ISO-8601 prefix (`2026-09`, `2026-09-01`, `2026-09-01T10:00`, `2026-09-01 10:00:00+02:00`…)
 * as a full timestamp: missing parts take their lowest value, the zone is UTC unless given (and
 * kept as given). Undefined for anything else, or a day the month does not have.
 */
export function sinceTimestamp(since: string): string | undefined {
  const m = ISO_PREFIX.exec(since.trim());
  if (!m) return undefined;
  const [, y, mo = "01", d = "01", h = "00", mi = "00", s = "00", frac = "", zone = "Z"] = m;
  const tz = zone.toUpperCase();
  const text = `${y}-${mo}-${d}T${h}:${mi}:${s}${frac}${tz}`;
  const check = new Date(text);
  if (Number.isNaN(check.getTime())) return undefined;
  // Reject day/month overflow that Date would roll over (2026-02-30).
  if (tz === "Z" && check.toISOString().slice(0, 10) !== `${y}-${mo}-${d}`) return undefined;
  return text;
}

/** Epoch ms as `YYYY-MM-DDTHH:MM:SSZ` (the fraction of a second dropped). */
function utcSeconds(ms: number): string {
  return `${new Date(Math.max(0, ms)).toISOString().slice(0, 19)}Z`;
}

/**
 * `text` as a report's `since` (see the module), `now` being epoch ms; throws `SinceError`.
 * Takes an ISO date or time (`sinceTimestamp`) or a span back from `now` (`30m`, `24h`, `7d`,
 * `2w`).
 */
export function reportSince(text: string, now: number): string {
  const t = text.trim();
  const ago = AGO.exec(t);
  if (ago) return utcSeconds(now - Number(ago[1]) * UNIT_MS[ago[2].toLowerCase()]);
  const ts = sinceTimestamp(t);
  if (ts !== undefined) return utcSeconds(new Date(ts).getTime());
  const shown = t.length > 40 ? `${t.slice(0, 40)}…` : t;
  throw new SinceError(
    `'${shown}' is not a time: give an ISO date or time (2026-09-01, 2026-09-01T12:00:00Z; ` +
      `UTC unless it names a zone) or a span back from now (30m, 24h, 7d, 2w)`,
  );
}
