/**
 * The fake model's timed SSE writer: sends prepared frames on a schedule (time to first token,
 * inter-token latency), can cut the connection abruptly or split every frame across two writes,
 * and stops at once when the client goes away.
 *
 * @module
 */

/** Frames written together after a pause. */
export interface TimedStep {
  /** Milliseconds after the previous step was due (0: together with it). */
  delayMs: number;
  /** Complete SSE frames (`data: …\n\n`). */
  frames: string[];
}

/**
 * How a timed stream ended: sent completely, cut on purpose, its client went away, or the
 * server stopped it (`stop` signal).
 */
export type StreamOutcome = "done" | "cut" | "aborted" | "stopped";

/** Options of {@link timedStream}. */
export interface TimedStreamOptions {
  /** End by breaking the connection (no terminating chunk) instead of closing it cleanly. */
  cut: boolean;
  /** Write every frame in two writes split mid-line, with an empty chunk between them. */
  split: boolean;
  /** Called once, when the stream ends for any reason (possibly before `timedStream` returns). */
  onEnd: (outcome: StreamOutcome) => void;
  /** Breaks the stream off at once (the server is closing). */
  stop?: AbortSignal;
}

/** The error a cut stream ends with; `startFakeModel`'s error handler keeps it out of the log. */
export class FakeCut extends Error {
  constructor() {
    super("fake_cut_after: connection cut on purpose");
    this.name = "FakeCut";
  }
}

/**
 * Pause between the two halves of a split frame: long enough for the first half to leave in
 * its own TCP segment, so the reader really sees a partial frame.
 */
const SPLIT_PAUSE_MS = 2;

/** How late a timer fires past its delay (Deno: about 1 ms); waits are shortened by it. */
const TIMER_LATENESS_MS = 1;

const encoder = new TextEncoder();

/**
 * Where to split a frame: inside its first multi-byte UTF-8 character when it has one (the
 * nastiest place for a reader that decodes chunk by chunk), else in the middle.
 */
export function splitPoint(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] >= 0xc0) return i + 1;
  return Math.max(1, bytes.length >> 1);
}

/** The UTF-8 byte offset where each step ends in the concatenation of all steps. */
function stepEnds(steps: TimedStep[]): number[] {
  const ends: number[] = [];
  let at = 0;
  for (const step of steps) {
    for (const frame of step.frames) at += utf8Length(frame);
    ends.push(at);
  }
  return ends;
}

/** UTF-8 length of `s` without encoding it. */
function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) n += c >= 0x800 && !(c >= 0xd800 && c <= 0xdfff) ? 2 : 1;
  }
  return n;
}

/**
 * A byte stream that writes `steps` on their schedule. Steps without a delay are written
 * synchronously, so a stream with no timing is fully queued before the response is returned.
 */
export function timedStream(
  steps: TimedStep[],
  opts: TimedStreamOptions,
): ReadableStream<Uint8Array> {
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wake: (() => void) | undefined;
  let controller!: ReadableStreamDefaultController<Uint8Array>;

  const end = (outcome: StreamOutcome) => {
    if (ended) return;
    ended = true;
    opts.stop?.removeEventListener("abort", onStop);
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    wake?.();
    opts.onEnd(outcome);
  };
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(() => {
        timer = undefined;
        resolve();
      }, ms);
    });
  const finish = async () => {
    if (ended) return;
    if (opts.cut) {
      // Erroring a stream drops what is still queued: let the sent frames drain first.
      for (let i = 0; i < 1000 && (controller.desiredSize ?? 1) < 1; i++) {
        await sleep(1);
        if (ended) return;
      }
      await sleep(1);
      if (ended) return;
      end("cut");
      controller.error(new FakeCut());
    } else {
      end("done");
      controller.close();
    }
  };
  // Writes the steps; returns synchronously while no step has to wait. Steps are due on an
  // absolute schedule from the start, so timer lateness does not add up over a stream.
  const run = async () => {
    // All frames encoded once, up front: a long stream then holds one buffer instead of a
    // string per token (the strings would outlive young-generation GC).
    const whole = opts.split
      ? undefined
      : encoder.encode(steps.map((s) => s.frames.join("")).join(""));
    const ends = opts.split ? [] : stepEnds(steps);
    let due = performance.now();
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i];
      due += step.delayMs;
      const wait = due - performance.now();
      if (wait > 0.5) await sleep(Math.max(0, wait - TIMER_LATENESS_MS));
      if (ended) return;
      if (whole) {
        controller.enqueue(whole.subarray(i === 0 ? 0 : ends[i - 1], ends[i]));
        continue;
      }
      for (const frame of step.frames) {
        const bytes = encoder.encode(frame);
        const at = splitPoint(bytes);
        controller.enqueue(bytes.subarray(0, at));
        controller.enqueue(new Uint8Array(0));
        await sleep(SPLIT_PAUSE_MS);
        if (ended) return;
        controller.enqueue(bytes.subarray(at));
      }
    }
    await finish();
  };

  const onStop = () => {
    if (ended) return;
    end("stopped");
    controller.error(new FakeCut());
  };
  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      if (opts.stop?.aborted) return onStop();
      opts.stop?.addEventListener("abort", onStop, { once: true });
      run().catch(() => end("aborted"));
    },
    cancel() {
      end("aborted");
    },
  });
}
