/**
 * The spill files: where usage events wait, as fsynced JSON lines, while the store cannot take
 * them. Two files keep the order without ever rewriting a file in place:
 *
 * - `<path>.replay` holds the oldest events: the ones being replayed into the store. Only the
 *   ledger's single writer touches it (append on a failed write, stream on replay, remove).
 * - `<path>` collects newer events while the ledger is spilling, through one buffered writer.
 *   `rotate` turns it into the replay file when the replay file is empty.
 *
 * @module
 */
import { dirname } from "node:path";
import { writeAll } from "../bytes.ts";
import type { UsageEvent } from "./types.ts";

const encoder = new TextEncoder();
const NEWLINE = 0x0a;

async function size(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).size;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 0;
    throw err;
  }
}

/** Appends bytes to `path` (created with its directory), after a torn last line, then fsyncs. */
async function appendBytes(path: string, bytes: Uint8Array): Promise<void> {
  await Deno.mkdir(dirname(path), { recursive: true });
  const file = await Deno.open(path, { read: true, create: true, append: true });
  try {
    const len = (await file.stat()).size;
    if (len > 0) {
      // A crash mid-append may have left a line without its newline: end it first.
      const last = new Uint8Array(1);
      await file.seek(len - 1, Deno.SeekMode.Start);
      if ((await file.read(last)) === 1 && last[0] !== NEWLINE) {
        await writeAll(file, new Uint8Array([NEWLINE]));
      }
    }
    await writeAll(file, bytes);
    await file.sync();
  } finally {
    file.close();
  }
}

function lines(events: readonly UsageEvent[]): Uint8Array {
  return encoder.encode(events.map((e) => JSON.stringify(e) + "\n").join(""));
}

function parseEvent(line: string): UsageEvent | undefined {
  try {
    const v: unknown = JSON.parse(line);
    if (typeof v === "object" && v !== null && typeof (v as UsageEvent).event_id === "string") {
      return v as UsageEvent;
    }
  } catch { /* a torn line */ }
  return undefined;
}

/** The spill files of one ledger. */
export class SpillFiles {
  /** The file collecting events while spilling. */
  readonly path: string;
  /** The file being replayed (`<path>.replay`). */
  readonly replayPath: string;
  readonly #onLost: (events: UsageEvent[], err: unknown) => void;
  #buffer: UsageEvent[] = [];
  #writing: Promise<void> | undefined;
  #paused = false;

  /** `onLost` gets the events an append could not write (the only way an event is lost). */
  constructor(path: string, onLost: (events: UsageEvent[], err: unknown) => void) {
    this.path = path;
    this.replayPath = `${path}.replay`;
    this.#onLost = onLost;
  }

  /** Queues events for the spill file; one writer appends whatever is waiting, then fsyncs. */
  append(events: UsageEvent[]): void {
    this.#buffer.push(...events);
    this.#startWriter();
  }

  #startWriter(): void {
    if (this.#writing || this.#paused || this.#buffer.length === 0) return;
    this.#writing = (async () => {
      while (this.#buffer.length > 0 && !this.#paused) {
        const batch = this.#buffer.splice(0);
        try {
          await appendBytes(this.path, lines(batch));
        } catch (err) {
          this.#onLost(batch, err);
        }
      }
    })().finally(() => {
      this.#writing = undefined;
      this.#startWriter();
    });
  }

  /** Resolves when every appended event has been written (or reported lost). */
  async idle(): Promise<void> {
    for (let i = 0; i < 1000 && (this.#writing || (!this.#paused && this.#buffer.length)); i++) {
      this.#startWriter();
      await this.#writing;
    }
  }

  /** Appends events to the replay file (they are older than anything in the spill file). */
  async appendReplay(events: readonly UsageEvent[]): Promise<void> {
    if (events.length) await appendBytes(this.replayPath, lines(events));
  }

  /** Whether the replay file holds anything. */
  async hasReplay(): Promise<boolean> {
    return await size(this.replayPath) > 0;
  }

  /**
   * Moves the spill file into the replay file (rename, or append when a replay file is left
   * from an earlier run). `swapped`, when given, runs synchronously right after and takes the
   * events still buffered in memory, while appends are paused — so the caller can switch where
   * new events go without a gap. Without it the buffer stays for the new spill file. Answers
   * whether the replay file now holds anything.
   */
  async rotate(swapped?: (buffered: UsageEvent[]) => void): Promise<boolean> {
    this.#paused = true;
    try {
      await this.#writing;
      if (await size(this.path) > 0) {
        if (await size(this.replayPath) > 0) {
          await appendBytes(this.replayPath, await Deno.readFile(this.path));
          await Deno.remove(this.path);
        } else {
          await Deno.rename(this.path, this.replayPath);
        }
      }
      swapped?.(this.#buffer.splice(0));
    } finally {
      this.#paused = false;
      this.#startWriter();
    }
    return await this.hasReplay();
  }

  /**
   * Streams the replay file in batches, oldest first. A torn or unreadable line is skipped and
   * counted through `onCorrupt`.
   */
  async *readReplay(
    batchSize: number,
    onCorrupt: (lineNo: number) => void = () => {},
  ): AsyncGenerator<UsageEvent[]> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.replayPath, { read: true });
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    let rest = "";
    let lineNo = 0;
    let batch: UsageEvent[] = [];
    const take = (line: string) => {
      lineNo++;
      if (line.trim() === "") return;
      const e = parseEvent(line);
      if (e) batch.push(e);
      else onCorrupt(lineNo);
    };
    for await (const chunk of file.readable.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop() ?? "";
      for (const line of parts) {
        take(line);
        if (batch.length >= batchSize) {
          yield batch;
          batch = [];
        }
      }
    }
    if (rest !== "") take(rest);
    if (batch.length) yield batch;
  }

  /** Removes the replay file once everything in it is stored. */
  async removeReplay(): Promise<void> {
    await Deno.remove(this.replayPath).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
  }
}
