/**
 * The Requests page: the latest usage events, newest first, paged by keyset — `(created_at, id)`
 * below the last row of the page before, never an OFFSET, so every page costs one index range
 * however deep it is — filtered by customer key, model, node, status and error type
 * (`GET /skeid/usage/events`). The SQL stores answer from `usage_events` over the
 * `(created_at, id)` order; jsonlog from a bounded ring of the events it wrote since it opened.
 *
 * @module
 */
import { QueryParamError } from "./query_param_error.ts";
import type { UsageEvent } from "./types.ts";
import { withoutCredentials } from "../url_credentials.ts";

/** Default and largest page. */
export const EVENTS_PAGE_DEFAULT = 50;
export const EVENTS_PAGE_MAX = 200;

/** The filters of the Requests page; each absent when not asked. */
export interface EventsFilters {
  api_key_id?: string;
  /** The served or the requested model. */
  model?: string;
  node?: string;
  status?: number;
  error_type?: string;
}

/** Where a page starts: below this row (the last of the page before). */
export interface EventsCursor {
  /** The row's `created_at` as the store compares it. */
  ts: string;
  /** The row's id in the store (the table's id; the ring's sequence number). */
  id: number;
}

/** One page's query. */
export interface EventsQuery {
  limit: number;
  before?: EventsCursor;
  filters: EventsFilters;
}

/** A page. `source: "memory"`: the jsonlog store's ring of events since start. */
export interface EventsPage {
  events: Record<string, unknown>[];
  next: string | null;
  source: "database" | "memory";
}

/** The cursor as the client holds it: opaque base64url. */
export function encodeCursor(c: EventsCursor): string {
  return btoa(JSON.stringify([c.ts, c.id])).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

/** A cursor back from the client; throws QueryParamError naming `before`. */
export function decodeCursor(text: string): EventsCursor {
  try {
    const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
    const value = JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)));
    if (
      Array.isArray(value) && value.length === 2 && typeof value[0] === "string" &&
      value[0].length <= 64 && Number.isSafeInteger(value[1])
    ) {
      return { ts: value[0], id: value[1] };
    }
  } catch {
    // fall through to the error
  }
  throw new QueryParamError("before", "not a cursor this gateway gave (use `next` as it came)");
}

/** The page's query from the request's parameters; throws QueryParamError naming one. */
export function parseEventsQuery(q: (name: string) => string | undefined): EventsQuery {
  const given = (name: string) => {
    const v = q(name);
    return v === undefined || v === "" ? undefined : v;
  };
  const limitText = given("limit");
  const limit = limitText === undefined ? EVENTS_PAGE_DEFAULT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > EVENTS_PAGE_MAX) {
    throw new QueryParamError("limit", `must be a whole number from 1 to ${EVENTS_PAGE_MAX}`);
  }
  const beforeText = given("before");
  const filters: EventsFilters = {};
  for (const name of ["api_key_id", "model", "node", "error_type"] as const) {
    const v = given(name);
    if (v === undefined) continue;
    if (v.length > 512) throw new QueryParamError(name, "at most 512 characters");
    filters[name] = v;
  }
  const statusText = given("status");
  if (statusText !== undefined) {
    const status = Number(statusText);
    if (!Number.isInteger(status) || status < 100 || status > 599) {
      throw new QueryParamError("status", `'${statusText}' is not an HTTP status (100-599)`);
    }
    filters.status = status;
  }
  return {
    limit,
    ...(beforeText !== undefined ? { before: decodeCursor(beforeText) } : {}),
    filters,
  };
}

/** How one SQL database spells the page's query. */
export interface EventsDialect {
  param(n: number): string;
  /** The `created_at` as the cursor compares it (exact), selected as `cursor_ts`. */
  readonly cursorTs: string;
  /** The condition `created_at <= <param>` with the cursor's ts. */
  atOrBefore(param: string): string;
  /** The condition `created_at = <param>` with the cursor's ts. */
  at(param: string): string;
  /** The select list of the event's columns (created_at as UTC text). */
  readonly columns: string;
  /** Whether the table has column `name`. */
  has(name: string): boolean;
}

/** The SQL and arguments of a page (one row more than the limit: whether a next page exists). */
export function eventsSql(
  d: EventsDialect,
  q: EventsQuery,
): { text: string; args: (string | number)[] } {
  const where: string[] = [];
  const args: (string | number)[] = [];
  const arg = (v: string | number) => {
    args.push(v);
    return d.param(args.length);
  };
  const f = q.filters;
  if (f.api_key_id !== undefined) where.push(`api_key_id = ${arg(f.api_key_id)}`);
  if (f.model !== undefined) {
    // Each placeholder its own argument: SQLite's `?` are positional.
    where.push(
      d.has("requested_model")
        ? `(model = ${arg(f.model)} OR requested_model = ${arg(f.model)})`
        : `model = ${arg(f.model)}`,
    );
  }
  if (f.node !== undefined) where.push(`node_id = ${arg(f.node)}`);
  if (f.status !== undefined) where.push(`status_code = ${arg(f.status)}`);
  if (f.error_type !== undefined) where.push(`error_type = ${arg(f.error_type)}`);
  if (q.before) {
    // A range on created_at (the index's first column), then the tie on it broken by id.
    where.push(d.atOrBefore(arg(q.before.ts)));
    where.push(`(NOT (${d.at(arg(q.before.ts))}) OR usage_events.id < ${arg(q.before.id)})`);
  }
  const text = `SELECT ${d.columns}, ${d.cursorTs} AS cursor_ts FROM usage_events` +
    (where.length ? ` WHERE ${where.join(" AND ")}` : "") +
    // Qualified: an output column named created_at (PostgreSQL's UTC text) must not be the order.
    // The limit is a validated integer, written in (SQLite refuses a float-bound LIMIT).
    ` ORDER BY usage_events.created_at DESC, usage_events.id DESC LIMIT ${q.limit + 1}`;
  return { text, args };
}

const NUMBERS = new Set([
  "status_code",
  "duration_ms",
  "input_tokens",
  "output_tokens",
  "total_tokens",
  "tool_calls",
  "cost_input_usd",
  "cost_output_usd",
  "cost_total_usd",
  "cached_tokens",
  "content_bytes",
  "cost_cache_read_usd",
  "cost_cache_write_usd",
  "cache_write_tokens",
  "ttft_ms",
  "attempts",
]);

/**
 * A stored row as a usage event: the columns it has (a NULL one left out, as an event leaves out
 * what was not measured), `ok` a boolean, numbers numbers, the pick's `route` parsed, the node's
 * URL without credentials. The table's own `id` is not part of an event.
 */
export function eventOfRow(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (k === "id" || k === "cursor_ts" || v === null || v === undefined) continue;
    if (k === "ok") out.ok = v === true || v === 1 || v === "1" || v === "t";
    else if (NUMBERS.has(k)) out[k] = typeof v === "bigint" ? Number(v) : Number(v);
    else if (k === "route" && typeof v === "string") {
      try {
        out.route = JSON.parse(v);
      } catch {
        out.route = v;
      }
    } else if (k === "route_url" && typeof v === "string") out.route_url = withoutCredentials(v);
    else out[k] = v;
  }
  return out;
}

/** A page from the rows of `eventsSql` (limit + 1 of them at most). */
export function eventsPageOf(
  rows: readonly Record<string, unknown>[],
  q: EventsQuery,
): EventsPage {
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const next = rows.length > q.limit && last
    ? encodeCursor({ ts: String(last.cursor_ts), id: Number(last.id) })
    : null;
  return { events: page.map(eventOfRow), next, source: "database" };
}

/** Events the jsonlog store keeps for the Requests page. */
export const RING_EVENTS = 10_000;

/**
 * The jsonlog store's recent events: a ring of the last {@link RING_EVENTS} it wrote, each with a
 * sequence number (its id for the keyset), looked up by event id too.
 */
export class EventRing {
  readonly #events: (UsageEvent | undefined)[];
  readonly #cap: number;
  /** Sequence number of the next event (the first is 1). */
  #seq = 1;
  readonly #byId = new Map<string, number>();

  constructor(cap = RING_EVENTS) {
    this.#cap = cap;
    this.#events = new Array(cap);
  }

  /** Adds written events, oldest first. */
  add(events: readonly UsageEvent[]): void {
    for (const e of events) {
      // A replayed event (its id already held) is the same event: kept once.
      if (this.#byId.has(e.event_id)) continue;
      const seq = this.#seq++;
      const slot = seq % this.#cap;
      const old = this.#events[slot];
      if (old && this.#byId.get(old.event_id) === seq - this.#cap) this.#byId.delete(old.event_id);
      this.#events[slot] = e;
      this.#byId.set(e.event_id, seq);
    }
  }

  /** One event by its event id, while the ring holds it. */
  get(eventId: string): UsageEvent | undefined {
    const seq = this.#byId.get(eventId);
    return seq === undefined ? undefined : this.#events[seq % this.#cap];
  }

  /** A page, newest first: written order is the keyset (a sequence number per event). */
  page(q: EventsQuery): EventsPage {
    const out: Record<string, unknown>[] = [];
    const oldest = Math.max(1, this.#seq - this.#cap);
    let seq = q.before ? Math.min(q.before.id - 1, this.#seq - 1) : this.#seq - 1;
    let lastSeq = 0;
    let more = false;
    for (; seq >= oldest; seq--) {
      const e = this.#events[seq % this.#cap];
      if (!e || !matches(e, q.filters)) continue;
      if (out.length === q.limit) {
        more = true;
        break;
      }
      out.push(eventOfRow(e as unknown as Record<string, unknown>));
      lastSeq = seq;
    }
    const last = out[out.length - 1];
    return {
      events: out,
      next: more && last ? encodeCursor({ ts: String(last.created_at ?? ""), id: lastSeq }) : null,
      source: "memory",
    };
  }
}

function matches(e: UsageEvent, f: EventsFilters): boolean {
  return (f.api_key_id === undefined || e.api_key_id === f.api_key_id) &&
    (f.model === undefined || e.model === f.model || e.requested_model === f.model) &&
    (f.node === undefined || e.node_id === f.node) &&
    (f.status === undefined || e.status_code === f.status) &&
    (f.error_type === undefined || e.error_type === f.error_type);
}
