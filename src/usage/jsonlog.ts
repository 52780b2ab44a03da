/**
 * The jsonlog usage store: no database. Dir mode writes one `<id>.json` per event (temp name,
 * then rename, so a reader never sees half a file and a replay just rewrites the same file);
 * file mode appends JSON lines to a file kept open (ADR 0054). Reports read the files.
 *
 * @module
 */
import { eventOfRow, EventRing, type EventsPage, type EventsQuery } from "./events_page.ts";
import { dirname, join } from "node:path";
import { writeAll } from "../bytes.ts";
import type { JsonlogStoreConfig } from "./config.ts";
import { aggregate } from "./report.ts";
import { errorMessage } from "./secret.ts";
import type { ReportFilters, UsageEvent, UsageReport, UsageStore } from "./types.ts";
import type { KeyPeriodTotals } from "./types.ts";
import { toAmount, toCount } from "./event.ts";
import { isJsonObject, parseJson } from "../core/json.ts";
import { MemoryRollups } from "./memory_rollups.ts";
import type { SeriesAnswer, SeriesQuery } from "./rollup.ts";

const encoder = new TextEncoder();
/** Lines serialized and written at a time in file mode. */
const LINES_PER_WRITE = 64;
/** Files written or read at once in dir mode. */
const PARALLEL_FILES = 16;

/**
 * The id of an event's record: UTC `YYYYMMDD-HHMMSS-` of its created_at, then its event_id —
 * so dir-mode file names sort by time and the same event always gets the same name.
 */
export function jsonlogRecordId(event: Pick<UsageEvent, "created_at" | "event_id">): string {
  const digits = event.created_at.replace(/\D/g, "").slice(0, 14).padEnd(14, "0");
  const safe = event.event_id.replace(/[^A-Za-z0-9_-]/g, "_");
  return `${digits.slice(0, 8)}-${digits.slice(8, 14)}-${safe}`;
}

/**
 * One record line: `{"id":…}` first, then the event's fields, exactly as
 * `JSON.stringify({ id, ...event })` writes it — without copying the event into a new object
 * (the file-mode hot path: every forwarded request appends one).
 */
export function jsonlogLine(event: UsageEvent): string {
  const id = jsonlogRecordId(event);
  const body = JSON.stringify(event);
  if (body.length <= 2 || Object.hasOwn(event, "id")) return JSON.stringify({ id, ...event });
  return `{"id":${JSON.stringify(id)},${body.slice(1)}`;
}

/** Runs `fn` over `items`, at most `width` at a time, keeping order of results. */
async function inChunks<T, R>(
  items: readonly T[],
  width: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width) {
    out.push(...await Promise.all(items.slice(i, i + width).map(fn)));
  }
  return out;
}

/** How often a kept-open file is checked to still be the file at its path, ms. */
export const REOPEN_CHECK_MS = 1000;

/**
 * The file-mode file, open between appends (ADR 0054): each slice of lines is one `write` with
 * `O_APPEND`, which the kernel puts whole at the end of the file past any other writer's, so
 * no lock is taken and the file is not opened and closed per batch. Once a second at most, an
 * append first checks that the path still names the open file (a log rotation renamed it, or
 * it was deleted) and reopens it if not. A write that fails part-way leaves a torn line: the
 * next append starts with a line break, so the torn part is one line readers skip and the
 * retried batch's lines are whole (readers keep the first of a replayed event).
 */
export class AppendTarget {
  #file: Deno.FsFile | undefined;
  #ino: number | null = null;
  #dev: number | null = null;
  #checkedAt = 0;
  /** A write failed: bytes of a line may be in the file without its end. */
  #torn = false;

  constructor(readonly path: string, readonly now: () => number = Date.now) {}

  /** The open file, reopened when the path names another file (or none) since the last check. */
  async file(): Promise<Deno.FsFile> {
    const t = this.now();
    if (this.#file !== undefined && t - this.#checkedAt < REOPEN_CHECK_MS) return this.#file;
    if (this.#file !== undefined) {
      const at = await Deno.stat(this.path).catch(() => undefined);
      if (at !== undefined && at.ino === this.#ino && at.dev === this.#dev) {
        this.#checkedAt = t;
        return this.#file;
      }
      this.close();
    }
    const file = await Deno.open(this.path, { create: true, append: true });
    try {
      const st = await file.stat();
      this.#ino = st.ino;
      this.#dev = st.dev;
    } catch (err) {
      file.close();
      throw err;
    }
    this.#file = file;
    this.#checkedAt = t;
    return file;
  }

  /** Appends `bytes` (whole lines) to `file` in one write where the kernel takes it whole. */
  async append(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
    let out = bytes;
    if (this.#torn) {
      out = new Uint8Array(bytes.length + 1);
      out[0] = 10;
      out.set(bytes, 1);
    }
    try {
      await writeAll(file, out);
      this.#torn = false;
    } catch (err) {
      // Whatever reached the file may end mid-line; the file may be gone: reopen next time.
      this.#torn = true;
      this.close();
      throw err;
    }
  }

  close(): void {
    try {
      this.#file?.close();
    } catch {
      // closed already
    }
    this.#file = undefined;
  }
}

/** A line's JSON object; a torn line (crash mid-append) is undefined: skipped, not fatal. */
function parseRecord(line: string): Record<string, unknown> | undefined {
  const v = parseJson(line);
  return isJsonObject(v) ? v : undefined;
}

/** A jsonlog store. */
export class JsonlogStore implements UsageStore {
  /** What the charts read: the files are not scanned for them. */
  readonly #rollups = new MemoryRollups();
  /** The Requests page's recent events, kept in memory since this store opened. */
  readonly #recent = new EventRing();
  /** Batches whose write the ledger gave up on (`abandoned`). */
  readonly #abandonedBatches = new WeakSet<readonly UsageEvent[]>();
  /** Always `jsonlog`. */
  readonly backend = "jsonlog" as const;
  /** `jsonlog dir|file <path>`. */
  readonly description: string;
  readonly #cfg: JsonlogStoreConfig;
  readonly #readOnly: boolean;
  /** File mode: the file appended to, open between appends. */
  #target: AppendTarget | undefined;

  /** `readOnly`: prepare only checks the path exists (reports, `skeid usage`). */
  constructor(cfg: JsonlogStoreConfig, opts: { readOnly?: boolean } = {}) {
    this.#cfg = cfg;
    this.#readOnly = opts.readOnly ?? false;
    this.description = `jsonlog ${cfg.mode} ${cfg.path}`;
  }

  /** Creates the directory (dir mode) or the file and its parent (file mode). */
  async prepare(): Promise<void> {
    const { path, mode } = this.#cfg;
    try {
      if (this.#readOnly) {
        const st = await Deno.stat(path);
        if (mode === "dir" && !st.isDirectory) throw new Error("not a directory");
        if (mode === "file" && !st.isFile) throw new Error("not a file");
        return;
      }
      if (mode === "dir") {
        await Deno.mkdir(path, { recursive: true });
      } else {
        await Deno.mkdir(dirname(path), { recursive: true });
        (await Deno.open(path, { create: true, append: true })).close();
      }
    } catch (err) {
      throw new Error(`usage_store jsonlog ${mode} ${path}: ${errorMessage(err)}`);
    }
  }

  /** Writes the batch: one file per event (dir) or appends to the kept-open file (file). */
  async write(events: UsageEvent[]): Promise<void> {
    if (events.length === 0) return;
    if (this.#cfg.mode === "dir") {
      await inChunks(events, PARALLEL_FILES, (e) => this.#writeOne(e));
    } else {
      await this.#append(events);
    }
    // A batch the ledger gave up on comes again from the spill file: counted then, not now.
    if (this.#abandonedBatches.has(events)) return;
    this.#rollups.add(events);
    this.#recent.add(events);
  }

  /** The ledger timed out on this batch's write: a late completion counts nothing. */
  abandoned(events: readonly UsageEvent[]): void {
    this.#abandonedBatches.add(events);
  }

  /** A page of the Requests page from the ring of recent events (`source: "memory"`). */
  events(q: EventsQuery): Promise<EventsPage> {
    return Promise.resolve(this.#recent.page(q));
  }

  /** One event while the ring holds it. */
  event(eventId: string): Promise<Record<string, unknown> | undefined> {
    const e = this.#recent.get(eventId);
    return Promise.resolve(e ? eventOfRow(e as unknown as Record<string, unknown>) : undefined);
  }

  /** The Usage page's series from the roll-ups kept in memory since this store opened. */
  series(q: SeriesQuery): Promise<SeriesAnswer> {
    return Promise.resolve(this.#rollups.series(q, "jsonlog"));
  }

  async #writeOne(event: UsageEvent): Promise<void> {
    const id = jsonlogRecordId(event);
    const final = join(this.#cfg.path, `${id}.json`);
    const tmp = join(this.#cfg.path, `.${id}.${crypto.randomUUID().slice(0, 8)}.tmp`);
    const bytes = encoder.encode(JSON.stringify({ id, ...event }) + "\n");
    try {
      const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        await writeAll(file, bytes);
        if (this.#cfg.fsync) await file.sync();
      } finally {
        file.close();
      }
      await Deno.rename(tmp, final);
    } catch (err) {
      await Deno.remove(tmp).catch(() => {});
      throw new Error(`jsonlog write ${final}: ${errorMessage(err)}`);
    }
  }

  async #append(events: UsageEvent[]): Promise<void> {
    const target = this.#target ??= new AppendTarget(this.#cfg.path);
    try {
      const file = await target.file();
      // The batch in slices, one write each: serializing 500 events at once would hold the
      // event loop for a millisecond (a latency spike for the requests in flight); between
      // two slices it serves them.
      for (let i = 0; i < events.length; i += LINES_PER_WRITE) {
        const end = Math.min(events.length, i + LINES_PER_WRITE);
        let text = "";
        for (let j = i; j < end; j++) text += jsonlogLine(events[j]) + "\n";
        await target.append(file, encoder.encode(text));
      }
      if (this.#cfg.fsync) await file.sync();
    } catch (err) {
      throw new Error(`jsonlog append ${this.#cfg.path}: ${errorMessage(err)}`);
    }
  }

  /** Reads every record and aggregates (dir mode: files in name order). */
  async report(filters: ReportFilters): Promise<UsageReport> {
    let records: Record<string, unknown>[];
    try {
      records = this.#cfg.mode === "dir" ? await this.#readDir() : await this.#readFile();
    } catch (err) {
      return {
        ok: false,
        enabled: true,
        backend: "jsonlog",
        error: `jsonlog read ${this.#cfg.path}: ${errorMessage(err)}`,
      };
    }
    return {
      ok: true,
      enabled: true,
      backend: "jsonlog",
      since: filters.since ?? "",
      ...aggregate(records, filters),
    };
  }

  /**
   * Cost and tokens per customer key id since `since`. There is no index: this reads the whole
   * file or folder once (the cost of a report), so a process calls it at start and when the store
   * changes, not per request; between reads the budgets count their own settlements.
   */
  async periodTotals(since: string): Promise<Map<string, KeyPeriodTotals>> {
    let records: Record<string, unknown>[];
    try {
      records = this.#cfg.mode === "dir" ? await this.#readDir() : await this.#readFile();
    } catch (err) {
      throw new Error(`jsonlog read ${this.#cfg.path}: ${errorMessage(err)}`);
    }
    const totals = new Map<string, KeyPeriodTotals>();
    for (const r of records) {
      // created_at is `YYYY-MM-DDTHH:MM:SSZ`: the string order is the time order.
      if (typeof r.created_at !== "string" || r.created_at < since) continue;
      const key = typeof r.api_key_id === "string" ? r.api_key_id : "";
      const t = totals.get(key) ?? { usd: 0, tokens: 0 };
      t.usd += toAmount(r.cost_total_usd);
      t.tokens += toCount(r.input_tokens) + toCount(r.output_tokens);
      totals.set(key, t);
    }
    return totals;
  }

  async #readDir(): Promise<Record<string, unknown>[]> {
    const names: string[] = [];
    for await (const entry of Deno.readDir(this.#cfg.path)) {
      if (entry.isFile && entry.name.endsWith(".json") && !entry.name.startsWith(".")) {
        names.push(entry.name);
      }
    }
    names.sort();
    const records = await inChunks(names, PARALLEL_FILES, async (name) => {
      const rec = parseRecord(await Deno.readTextFile(join(this.#cfg.path, name)));
      if (rec && typeof rec.id !== "string") rec.id = name.slice(0, -".json".length);
      return rec;
    });
    return records.filter((r): r is Record<string, unknown> => r !== undefined);
  }

  async #readFile(): Promise<Record<string, unknown>[]> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.#cfg.path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw err;
    }
    const seen = new Set<string>();
    const out: Record<string, unknown>[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      const rec = parseRecord(line);
      if (!rec) continue;
      // A replayed batch may have appended an event twice: the first one counts.
      const id = typeof rec.event_id === "string" ? rec.event_id : "";
      if (id !== "") {
        if (seen.has(id)) continue;
        seen.add(id);
      }
      out.push(rec);
    }
    return out;
  }

  /** Closes the file-mode file kept open between appends. */
  close(): Promise<void> {
    this.#target?.close();
    this.#target = undefined;
    return Promise.resolve();
  }
}
