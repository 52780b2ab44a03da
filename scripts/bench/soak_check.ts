/**
 * The pure checks of the soak (`scripts/bench/soak.ts`): usage events reconciled with the
 * requests the soak sent, node inflight read from the admin metrics, and the summary table.
 *
 * @module
 */

/** What the soak knows of one request it sent. */
export interface SentRequest {
  /** The `x-request-id` it sent. */
  id: string;
  /** The status of the response head, or null when no head arrived (aborted or failed first). */
  status: number | null;
  /** Whether the body was read to its end without an abort or an error. */
  completed: boolean;
}

/** The fields of a usage event the reconciliation reads. */
export interface EventRef {
  event_id: string;
  request_id: string;
  status_code: number;
}

/** How the usage events match the requests sent. */
export interface Reconciliation {
  /** Requests that got a response head. */
  answered: number;
  /** Usage events read. */
  events: number;
  /** Answered requests with no usage event (ids, at most `SAMPLE`). */
  missing: string[];
  missingCount: number;
  /** Request ids with more than one usage event. */
  duplicated: string[];
  duplicatedCount: number;
  /** Event ids written more than once. */
  duplicateEventIds: string[];
  duplicateEventIdCount: number;
  /** Events whose request id the soak never sent. */
  unknown: string[];
  unknownCount: number;
  /** Requests without a response head (aborted before it) that have an event: allowed. */
  headlessWithEvent: number;
  /** Completed requests whose event's status_code differs from the status the client got. */
  statusMismatch: string[];
  statusMismatchCount: number;
}

/** Ids listed per finding (the counts are exact). */
const SAMPLE = 5;

function note(list: string[], id: string): void {
  if (list.length < SAMPLE) list.push(id);
}

/**
 * Matches events to requests by request id: every answered request has exactly one event, no
 * event id repeats, no event names a request never sent. A request aborted before its head may
 * have one event (the gateway forwarded it and bills the abort) or none (it never got that far).
 */
export function reconcile(sent: Iterable<SentRequest>, events: Iterable<EventRef>): Reconciliation {
  const r: Reconciliation = {
    answered: 0,
    events: 0,
    missing: [],
    missingCount: 0,
    duplicated: [],
    duplicatedCount: 0,
    duplicateEventIds: [],
    duplicateEventIdCount: 0,
    unknown: [],
    unknownCount: 0,
    headlessWithEvent: 0,
    statusMismatch: [],
    statusMismatchCount: 0,
  };
  const byRequest = new Map<string, EventRef[]>();
  const eventIds = new Set<string>();
  for (const e of events) {
    r.events++;
    if (eventIds.has(e.event_id)) {
      r.duplicateEventIdCount++;
      note(r.duplicateEventIds, e.event_id);
    }
    eventIds.add(e.event_id);
    const list = byRequest.get(e.request_id);
    if (list) list.push(e);
    else byRequest.set(e.request_id, [e]);
  }
  const seen = new Set<string>();
  for (const req of sent) {
    seen.add(req.id);
    const list = byRequest.get(req.id) ?? [];
    if (list.length > 1) {
      r.duplicatedCount++;
      note(r.duplicated, req.id);
    }
    if (req.status === null) {
      if (list.length > 0) r.headlessWithEvent++;
      continue;
    }
    r.answered++;
    if (list.length === 0) {
      r.missingCount++;
      note(r.missing, req.id);
    } else if (req.completed && list[0].status_code !== req.status) {
      r.statusMismatchCount++;
      note(r.statusMismatch, `${req.id} (client ${req.status}, event ${list[0].status_code})`);
    }
  }
  for (const [id, list] of byRequest) {
    if (seen.has(id)) continue;
    r.unknownCount += list.length;
    note(r.unknown, id);
  }
  return r;
}

/** The problems of a reconciliation, one line each; empty when it holds. */
export function reconciliationProblems(r: Reconciliation): string[] {
  const out: string[] = [];
  const add = (n: number, what: string, ids: string[]) => {
    if (n > 0) out.push(`${n} ${what} (e.g. ${ids.join(", ")})`);
  };
  add(r.missingCount, "answered requests without a usage event", r.missing);
  add(r.duplicatedCount, "requests with more than one usage event", r.duplicated);
  add(r.duplicateEventIdCount, "repeated event ids", r.duplicateEventIds);
  add(r.unknownCount, "usage events for request ids never sent", r.unknown);
  add(r.statusMismatchCount, "events whose status differs from the client's", r.statusMismatch);
  return out;
}

/** Parses the event lines of a jsonlog file (file mode); throws naming the bad line. */
export function parseEventLines(text: string): EventRef[] {
  const out: EventRef[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "") continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new Error(`usage file line ${i + 1}: not JSON (${e instanceof Error ? e.message : e})`);
    }
    const o = v as Record<string, unknown>;
    if (
      typeof o !== "object" || o === null || typeof o.event_id !== "string" ||
      typeof o.request_id !== "string" || typeof o.status_code !== "number"
    ) {
      throw new Error(`usage file line ${i + 1}: no event_id, request_id or status_code`);
    }
    out.push({ event_id: o.event_id, request_id: o.request_id, status_code: o.status_code });
  }
  return out;
}

/**
 * `skeid_node_inflight` per node from the Prometheus text of `/skeid/metrics`; throws when the
 * family is absent (the check would otherwise pass on nothing).
 */
export function parseNodeInflight(text: string): Map<string, number> {
  const out = new Map<string, number>();
  let family = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE skeid_node_inflight ")) family = true;
    const m = /^skeid_node_inflight\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const node = /(?:^|,)node="((?:[^"\\]|\\.)*)"/.exec(m[1])?.[1];
    if (node === undefined) continue;
    out.set(node, Number(m[2]));
  }
  if (!family && out.size === 0) throw new Error("/skeid/metrics has no skeid_node_inflight");
  return out;
}

/** A markdown table from a header and rows. */
export function markdownTable(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}
