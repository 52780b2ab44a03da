/**
 * The relay: an upstream SSE body becomes the client's response body.
 *
 * Three modes (the face's `relayMode`):
 * - `raw`: the upstream's bytes go out unchanged, chunk for chunk, while the SSE parser reads
 *   along and the translator's `pass` does the accounting; the start of an incomplete frame is
 *   held until its end arrives, so a stream that breaks never leaves half a frame at the client
 *   for the error frame to be glued onto;
 * - `strip`: complete frames go out as received except those the translator's `pass` refuses
 *   (the usage-only chunk Skeid asked for and the client did not, ADR 0014); an incomplete frame
 *   is held until its end arrives;
 * - `translate`: each parsed chunk goes through the face's translator.
 *
 * The relay is a pull source: it reads upstream only when the client is ready for more, so a slow
 * client slows the upstream read instead of filling memory. Empty reads are never written. Its
 * cost is linear in the bytes: each read is scanned once, and an incomplete frame is kept as the
 * list of its reads. An event larger than `maxEventBytes` (`SKEID_MAX_EVENT_BYTES`) ends the
 * stream as broken. The relay ends exactly once, reporting how (done, upstream broke, client
 * gone, the relay itself failed) to its owner, which releases the node's slot and writes the usage
 * event: every step of a read runs under one catch, so an error thrown anywhere in it (Skeid's
 * code, the face's translator, Deno) ends the relay as `failed` (ADR 0030). When the client leaves
 * before the upstream's usage report, the relay keeps reading (relaying nothing) for the abort
 * drain to catch it (ADR 0027); the upstream call, and so the slot, ends when the drain does.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type {
  AnswerTimings,
  Face,
  JsonObject,
  RelayMode,
  ResponseTicket,
  StreamTranslator,
  UpstreamRequest,
} from "../faces/face.ts";
import { isJsonObject, parseJson } from "../core/json.ts";
import { type SseFrame, SseParser } from "./sse_parser.ts";
import { FrameHold, lastFrameEnd } from "./frame_hold.ts";
import { relayedResponse } from "./upstream.ts";
import {
  type Abortable,
  type ChunkSource,
  streamSource,
  type UpstreamAnswer,
} from "./upstream_answer.ts";
import type { IdleWatch, Watched } from "./idle_watch.ts";
import { type AnswerFacts, StreamFacts } from "../telemetry/genai.ts";

/** How a relayed stream ended. */
export interface RelayOutcome {
  /**
   * `done` (upstream ended), `broken` (upstream failed after the stream opened, or sent an event
   * over the bound), `aborted` (client gone), `failed` (an error thrown in the relay or the face's
   * translator: the gateway's failure, not the node's).
   */
  end: "done" | "broken" | "aborted" | "failed";
  /** Why it broke (no secret in it). */
  error?: string;
  /** The last usage object the upstream reported. */
  usage: JsonObject | undefined;
  /** Tool calls seen (OpenAI shape). */
  toolCalls: JsonObject[];
  /** UTF-8 bytes of content relayed or translated. */
  contentBytes: number;
  /** Routing start → first content byte handed to the client, ms. */
  ttftMs: number | undefined;
  /** What the chunks said of the answer (id, model, finish reasons); OpenTelemetry on only. */
  facts?: AnswerFacts;
}

/** Told once when the relay ends. */
export interface RelayOwner {
  /** Called exactly once, with how the stream ended, so the owner can record the usage event. */
  relayEnded(outcome: RelayOutcome): void;
}

/** What relaying an answer needs of its request (an Exchange is one). */
export interface RelayRequest extends RelayOwner {
  /** The client's face: its relay mode and translator. */
  readonly face: Face;
  /** The client-facing endpoint path. */
  readonly endpoint: string;
  /** The client's model (translated streams name it). */
  readonly requestedModel: string;
  /** Sent back as `x-request-id`. */
  readonly requestId: string;
  /** Epoch ms the request arrived; ttft counts from here. */
  readonly startedAt: number;
  /** Keeps the finished response before its terminal event goes out (response store, ADR 0028). */
  readonly responseTicket?: ResponseTicket;
}

/** What relaying needs of the gateway (a ProxyContext is one). */
export interface RelayContext {
  /** The clock. */
  readonly skeid: { readonly now: () => number };
  /** The idle watch over the stream's silence (and its keepalives). */
  readonly idle: IdleWatch;
  /** Keepalive interval of a translated stream, ms; 0 or absent = never. */
  readonly keepaliveMs?: number;
  /** The abort drain, ms (ADR 0027); 0 or absent = stop the upstream when the client leaves. */
  readonly abortDrainMs?: number;
  /** The largest upstream event relayed, bytes (`SKEID_MAX_EVENT_BYTES`); absent = the default. */
  readonly maxEventBytes?: number;
  /** With OpenTelemetry on, a stream's chunks are read for its attempt span (`StreamFacts`). */
  readonly telemetry?: { readonly on: boolean };
}

/**
 * The client's response to a streamed upstream answer from `nodeId`, relayed in the face's mode:
 * raw and stripped streams keep the upstream's headers, a translated one gets its own. From here
 * the relay owns the request's life and tells `req.relayEnded` once how the stream ended.
 */
export function streamResponse(
  ctx: RelayContext,
  req: RelayRequest,
  upstream: UpstreamRequest,
  res: UpstreamAnswer,
  call: Abortable,
  nodeId: string,
): Response {
  const face = req.face;
  const mode = face.relayMode(upstream);
  const translator = face.streamTranslator(req.endpoint, req.requestedModel, upstream.context);
  const pairs: readonly (readonly [string, string])[] = mode === "translate"
    ? [["cache-control", "no-cache"], ["content-type", translator.contentType]]
    : res.pairs();
  // Built last: from here the relay owns the request's life (its stream starts reading at once).
  const relay = new StreamRelay({
    mode,
    translator,
    body: res.source(),
    upstream: call,
    owner: req,
    now: ctx.skeid.now,
    startedAt: req.startedAt,
    idle: ctx.idle,
    keepaliveMs: mode === "translate" ? ctx.keepaliveMs : undefined,
    drainMs: ctx.abortDrainMs,
    maxEventBytes: ctx.maxEventBytes,
    ticket: req.responseTicket,
    facts: ctx.telemetry?.on === true ? new StreamFacts() : undefined,
  });
  const body = new ReadableStream<Uint8Array>(relay);
  return relayedResponse(res.status, body, pairs, nodeId, req.requestId);
}

/** Options of a StreamRelay. */
export interface StreamRelayOptions {
  /**
   * `raw` passes bytes through, `strip` drops the usage-only frame the client did not ask for,
   * `translate` rewrites to the face's format.
   */
  mode: RelayMode;
  /** The upstream body: a stream, or the HTTP/1.1 client's body source read directly. */
  body: ReadableStream<Uint8Array> | ChunkSource;
  /** Aborts the upstream call (client gone, idle timeout). */
  upstream: Abortable;
  /** The face's translator: the accounting in every mode, the text in `translate`. */
  translator: StreamTranslator;
  /** Told once when the relay ends (the Exchange). */
  owner: RelayOwner;
  /** Epoch-ms clock and the routing start, for ttft and timings. */
  now: () => number;
  /** Epoch ms the request arrived; ttft counts from here. */
  startedAt: number;
  /** Body inactivity watch (SKEID_UPSTREAM_TIMEOUT); its sweep also drives the keepalive. */
  idle?: IdleWatch;
  /**
   * `translate`: after this many ms without upstream data (or a keepalive), the translator's
   * `keepalive()` text is sent (Anthropic `ping`); 0 or absent = never. Needs `idle`.
   */
  keepaliveMs?: number;
  /**
   * After the client left without the upstream's usage report, read on (relaying nothing) at
   * most this long for it (ADR 0027); 0 or absent = stop the upstream at once.
   */
  drainMs?: number;
  /** Keeps the translator's `final` response before the frame that ends the stream goes out. */
  ticket?: ResponseTicket;
  /**
   * An event (or line) of more bytes than this ends the stream as broken; default
   * `DEFAULT_MAX_EVENT_BYTES`.
   */
  maxEventBytes?: number;
  /** Reads each chunk for what the answer says of itself; absent (OpenTelemetry off): nothing. */
  facts?: StreamFacts;
}

/** Default of `SKEID_MAX_EVENT_BYTES`: 16 MiB, far above any real event. */
export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;
/** The most `SKEID_MAX_EVENT_BYTES` may say: one event is held as a string, below V8's limit. */
export const MAX_EVENT_BYTES = 256 * 1024 * 1024;

/** `SKEID_MAX_EVENT_BYTES`: a whole number of bytes > 0 (at most 256 MiB), else the default. */
export function maxEventBytes(raw: string | undefined): number {
  const n = raw === undefined || raw.trim() === "" ? NaN : Number(raw.trim());
  return Number.isSafeInteger(n) && n > 0 ? Math.min(n, MAX_EVENT_BYTES) : DEFAULT_MAX_EVENT_BYTES;
}

const encoder = new TextEncoder();

/** A pull source relaying one upstream stream to the client. */
export class StreamRelay implements UnderlyingDefaultSource<Uint8Array>, Watched {
  readonly #opts: StreamRelayOptions;
  readonly #reader: ChunkSource;
  readonly #parser: SseParser;
  readonly #translator: StreamTranslator;
  /** Text produced by the frames of the current read (strip / translate). */
  #out = "";
  #ttftMs: number | undefined;
  #ended = false;
  #keptFinal = false;
  #idleTimedOut = false;
  /** Strip mode: the current read had a frame dropped. */
  #dropped = false;
  /** Epoch ms of the last upstream byte (IdleWatch). */
  lastActivity: number;
  /** Epoch ms of the last keepalive sent. */
  #lastKeepalive = 0;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** The client left; the relay drains the upstream for its usage report. */
  #gone = false;
  /** The pull in flight (the drain waits for its read: one reader at a time). */
  #pulling: Promise<void> | undefined;
  #drainTimer: ReturnType<typeof setTimeout> | undefined;
  /** Raw mode: the start of an incomplete frame, held until its end arrives. */
  readonly #hold = new FrameHold();
  /** Bytes of the incomplete frame so far (since the last frame end). */
  #open = 0;
  readonly #maxEventBytes: number;

  /** Throws when `raw`/`strip` get a translator without `pass`. */
  constructor(opts: StreamRelayOptions) {
    this.#opts = opts;
    this.#reader = opts.body instanceof ReadableStream ? streamSource(opts.body) : opts.body;
    this.#parser = new SseParser((frame) => this.#frame(frame), opts.mode === "strip");
    if (opts.mode !== "translate" && opts.translator.pass === undefined) {
      throw new Error(`relay mode '${opts.mode}' needs a translator with pass()`);
    }
    this.#translator = opts.translator;
    this.#maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    this.lastActivity = opts.now();
    opts.idle?.add(this);
  }

  /** ReadableStream: the controller, kept for keepalives sent between reads. */
  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.#controller = controller;
  }

  /**
   * The client wants more: read upstream until something can be written, or the end. Whatever
   * throws in a read's steps ends the relay here (`failed`), so its owner is told once.
   */
  pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    return this.#pulling = this.#pull(controller).catch((err) => this.#fault(controller, err));
  }

  async #pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    const opts = this.#opts;
    for (;;) {
      let chunk: Uint8Array | null;
      try {
        chunk = await this.#reader.read();
      } catch (err) {
        if (this.#ended) return;
        if (this.#gone) return this.#stop();
        const reason = this.#idleTimedOut ? "upstream stopped sending (timeout)" : describe(err);
        this.#broken(controller, "broken", reason);
        return;
      }
      if (this.#ended) return;
      if (this.#gone) {
        this.#drainChunk(chunk);
        return;
      }
      if (chunk === null) {
        this.#parser.end();
        // The upstream ended cleanly with an incomplete frame: it goes out as the upstream sent it.
        const held = this.#hold.take();
        if (held !== undefined) controller.enqueue(held);
        let tail = this.#out;
        this.#out = "";
        if (opts.mode === "translate") tail += this.#translator.end(this.#timings());
        if (opts.ticket !== undefined && !(await this.#kept(opts.ticket))) return;
        if (tail.length > 0) controller.enqueue(encoder.encode(tail));
        this.#finish("done");
        controller.close();
        return;
      }
      if (chunk.byteLength === 0) continue;
      this.lastActivity = opts.now();
      const before = this.#translator.contentBytes;
      const aligned = this.#parser.atBoundary;
      this.#dropped = false;
      const frames = this.#parser.frames;
      this.#parser.push(chunk);
      if (this.#oversized(chunk, frames)) {
        const bound = this.#maxEventBytes;
        this.#broken(
          controller,
          "broken",
          `upstream event over ${bound} bytes (SKEID_MAX_EVENT_BYTES)`,
        );
        return;
      }
      if (opts.ticket !== undefined && !(await this.#kept(opts.ticket))) return;
      if (opts.mode === "raw") {
        const out = this.#hold.out(chunk, this.#parser.atBoundary);
        if (out === undefined) continue;
        controller.enqueue(out);
      } else if (
        opts.mode === "strip" && !this.#dropped && aligned && this.#parser.atBoundary &&
        endsWithNewline(chunk)
      ) {
        // Whole frames in, none dropped: the text is the chunk itself, so send its bytes as
        // they came instead of encoding them again (the usual case: one frame per write).
        this.#out = "";
        controller.enqueue(chunk);
      } else {
        if (this.#out.length === 0) continue;
        controller.enqueue(encoder.encode(this.#out));
        this.#out = "";
      }
      if (this.#ttftMs === undefined && this.#translator.contentBytes > before) {
        this.#ttftMs = this.lastActivity - opts.startedAt;
      }
      return;
    }
  }

  /**
   * The client went away: without the upstream's usage report yet, drain for it (ADR 0027);
   * else (or with no drain) stop the upstream. Reports `aborted` either way, when it ends.
   */
  cancel(): void {
    try {
      this.#cancel();
    } catch {
      this.#stop();
    }
  }

  #cancel(): void {
    if (this.#ended || this.#gone) return;
    const ms = this.#opts.drainMs ?? 0;
    if (ms <= 0 || this.#translator.usage !== undefined) return this.#stop();
    this.#gone = true;
    this.#drainTimer = setTimeout(() => this.#stop(), ms);
    this.#drain().catch(() => this.#stop());
  }

  /** Ends the relay now as `aborted`: the upstream call is stopped. */
  #stop(): void {
    if (this.#ended) return;
    this.#finish("aborted");
    this.#opts.upstream.abort();
    this.#reader.cancel();
  }

  /** Reads the upstream after the client left, for the accounting only, until the usage report. */
  async #drain(): Promise<void> {
    // A pull in flight finishes its read first (and hands its chunk to #drainChunk).
    await this.#pulling;
    for (;;) {
      if (this.#ended) return;
      let chunk: Uint8Array | null;
      try {
        chunk = await this.#reader.read();
      } catch {
        return this.#stop();
      }
      if (this.#ended || !this.#drainChunk(chunk)) return;
    }
  }

  /** One chunk read while draining: accounted, never relayed. False once the drain is over. */
  #drainChunk(chunk: Uint8Array | null): boolean {
    if (chunk === null) {
      this.#parser.end();
      this.#finish("aborted");
      return false;
    }
    this.lastActivity = this.#opts.now();
    this.#parser.push(chunk);
    this.#out = "";
    if (this.#translator.usage === undefined) return true;
    this.#stop();
    return false;
  }

  /**
   * IdleWatch sweep: when translating and the upstream was silent for `keepaliveMs` (counting
   * from the last keepalive too), the translator's keepalive text goes to the client. It lands
   * between two of the relay's writes, so always on a frame boundary.
   */
  tick(now: number): void {
    const every = this.#opts.keepaliveMs;
    if (this.#ended || this.#gone || every === undefined || every <= 0) return;
    if (this.#opts.mode !== "translate") return;
    const controller = this.#controller;
    if (controller === undefined) return;
    if (now - Math.max(this.lastActivity, this.#lastKeepalive) < every) return;
    this.#lastKeepalive = now;
    try {
      const text = this.#translator.keepalive();
      if (text.length > 0) controller.enqueue(encoder.encode(text));
    } catch (err) {
      this.#fault(controller, err);
    }
  }

  /** IdleWatch: the upstream was silent for too long. */
  idleTimeout(): void {
    if (this.#ended) return;
    this.#idleTimedOut = true;
    this.#opts.upstream.abort();
  }

  #frame(frame: SseFrame): void {
    const mode = this.#opts.mode;
    const data = frame.data;
    if (data.length === 0 || data.charCodeAt(0) !== 123 /* '{' */) {
      // [DONE], keepalive comments and the like: kept as they are in strip mode, dropped when
      // translating (the translator writes its own end).
      if (mode === "strip") this.#out += frame.raw;
      return;
    }
    const chunk = parseJson(data);
    if (!isJsonObject(chunk)) {
      if (mode === "strip") this.#out += frame.raw;
      return;
    }
    this.#opts.facts?.read(chunk);
    if (mode === "translate") {
      this.#out += this.#translator.chunk(chunk);
      return;
    }
    const passed = this.#translator.pass!(chunk);
    if (mode === "strip") {
      if (passed) this.#out += frame.raw;
      else this.#dropped = true;
    }
  }

  /**
   * Whether the frame still open after this read (`frames`: the parser's count before it) holds
   * more than `maxEventBytes`. Only the new read is scanned: a read that ended frames leaves open
   * what follows the last frame end in it, one that did not adds its bytes to the open frame.
   */
  #oversized(chunk: Uint8Array, frames: number): boolean {
    if (this.#parser.atBoundary) this.#open = 0;
    else if (this.#parser.frames === frames) this.#open += chunk.byteLength;
    else {
      const end = lastFrameEnd(chunk);
      this.#open = end < 0 ? chunk.byteLength : chunk.byteLength - end;
    }
    return this.#open > this.#maxEventBytes;
  }

  /**
   * An error thrown in a step of the relay (not a failed upstream read): the relay ends as
   * `failed`, or `aborted` when the client had already left. Nothing thrown after the end
   * matters (the owner was told).
   */
  #fault(controller: ReadableStreamDefaultController<Uint8Array>, err: unknown): void {
    if (this.#ended) return;
    if (this.#gone) return this.#stop();
    this.#broken(controller, "failed", errorMessage(err).split("\n")[0].slice(0, 200));
  }

  /**
   * The stream ends early (`broken`: the upstream failed or sent an event over the bound;
   * `failed`: the relay's own step threw). The owner is told first, whatever the face's
   * translator does after; the upstream call is stopped (a no-op when it already broke).
   */
  #broken(
    controller: ReadableStreamDefaultController<Uint8Array>,
    end: "broken" | "failed",
    reason: string,
  ): void {
    // Half a frame never reaches the client: the error frame below stands on its own.
    this.#hold.drop();
    let tail: string | undefined;
    try {
      this.#parser.end();
      // A stream that breaks says so in-band, in the face's own shape, instead of ending as if
      // complete (OpenAI SDKs raise the error frame as an APIError; ADR 0015 for Anthropic).
      tail = this.#out +
        (end === "failed"
          ? this.#translator.fail(500, "Internal gateway error")
          : this.#translator.fail(502, `Upstream error: ${reason}`));
    } catch {
      // The translator itself fails: no frame of its can be trusted; the stream errors below.
    }
    this.#out = "";
    this.#finish(end, reason);
    try {
      if (tail === undefined) controller.error(new Error(reason));
      else {
        if (tail.length > 0) controller.enqueue(encoder.encode(tail));
        controller.close();
      }
    } catch {
      // The client went away in the same instant.
    }
    this.#opts.upstream.abort();
    this.#reader.cancel();
  }

  /**
   * Keeps the translator's `final` response once (before the terminal event goes out); false when
   * the client went away meanwhile (nothing more is written then).
   */
  async #kept(ticket: ResponseTicket): Promise<boolean> {
    const final = this.#translator.final;
    if (final === undefined || this.#keptFinal) return true;
    this.#keptFinal = true;
    await ticket.keep(final);
    return !this.#ended;
  }

  #timings(): AnswerTimings {
    const t: AnswerTimings = { totalMs: this.#opts.now() - this.#opts.startedAt };
    if (this.#ttftMs !== undefined) t.ttftMs = this.#ttftMs;
    return t;
  }

  #finish(end: RelayOutcome["end"], error?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#drainTimer);
    this.#opts.idle?.delete(this);
    const outcome: RelayOutcome = {
      end,
      usage: undefined,
      toolCalls: [],
      contentBytes: 0,
      ttftMs: this.#ttftMs,
    };
    try {
      const acc = this.#translator;
      outcome.usage = acc.usage;
      outcome.toolCalls = acc.toolCalls;
      outcome.contentBytes = acc.contentBytes;
    } catch {
      // A translator that cannot say what it counted still ends the relay (nothing counted).
    }
    if (error !== undefined) outcome.error = error;
    if (this.#opts.facts !== undefined) outcome.facts = this.#opts.facts;
    this.#opts.owner.relayEnded(outcome);
  }
}

/** Whether the chunk's last byte is LF or CR (so it cannot end inside a UTF-8 sequence). */
function endsWithNewline(chunk: Uint8Array): boolean {
  const last = chunk[chunk.byteLength - 1];
  return last === 10 || last === 13;
}

function describe(err: unknown): string {
  const msg = errorMessage(err);
  if (/reading a body|connection/i.test(msg)) return "connection closed mid-stream";
  return msg.split("\n")[0].slice(0, 200);
}
