/**
 * Upstream OpenAI chat stream → Ollama NDJSON (`/api/chat` and `/api/generate`).
 *
 * Each chunk with text or reasoning becomes `{model, created_at, message:{role, content,
 * thinking?}, done:false}` (generate: `response` and `thinking` instead of `message`); `model`
 * is the one the client asked for. Tool calls are assembled and sent in the line of
 * the chunk that carries the upstream's `finish_reason` (or before the last line when none
 * came). The last line is `done:true` with `done_reason`, the token counts and the durations.
 * A failure ends with `{"error":"..."}`.
 *
 * @module
 */
import type { AnswerTimings, JsonObject, StreamTranslator } from "./face.ts";
import { closingFields, isoAt, ollamaToolCalls } from "./ollama_answer.ts";
import { StreamAccounting, StreamState } from "./stream_state.ts";
import { chunkReasoning } from "./reasoning.ts";

function line(o: unknown): string {
  return JSON.stringify(o) + "\n";
}

/** One Ollama stream; `generate` picks the `/api/generate` shape. */
export class OllamaStreamTranslator extends StreamAccounting implements StreamTranslator {
  /** Content type of the translated stream. */
  readonly contentType = "application/x-ndjson";
  readonly #model: string;
  #toolsSent = false;
  #closed = false;

  /**
   * A translator that has sent nothing yet.
   *
   * @param requestedModel the model named in every line (the client's, not the served model)
   * @param generate true for `/api/generate` lines (`response`), false for `/api/chat` ones
   * (`message`)
   * @param now epoch-ms clock for each line's `created_at`
   */
  constructor(
    requestedModel: string,
    readonly generate: boolean,
    readonly now: () => number,
  ) {
    super(new StreamState("call_skeid_"));
    this.#model = requestedModel;
  }

  /** One parsed upstream chunk → at most one line. */
  chunk(chunk: JsonObject): string {
    if (this.#closed) return "";
    const parts = this.state.read(chunk);
    const thinking = chunkReasoning(chunk);
    const withTools = parts.finishReason !== undefined && this.#toolsPending();
    if (parts.text === "" && thinking === "" && !withTools) return "";
    return this.#line(parts.text, withTools, thinking);
  }

  /** Nothing: Ollama streams have no keepalive line. */
  keepalive(): string {
    return "";
  }

  /** Pending tool calls, then the `done:true` line. */
  end(timings?: AnswerTimings): string {
    if (this.#closed) return "";
    this.#closed = true;
    let out = this.#toolsPending() ? this.#line("", true) : "";
    const s = this.state;
    const last: JsonObject = { model: this.#model, created_at: isoAt(this.now()) };
    if (this.generate) last.response = "";
    else last.message = { role: "assistant", content: "" };
    last.done = true;
    last.done_reason = s.finishReason ?? "stop";
    Object.assign(last, closingFields(s.usage, timings));
    out += line(last);
    return out;
  }

  /** A last `{"error": message}` line. */
  fail(_status: number, message: string): string {
    if (this.#closed) return "";
    this.#closed = true;
    return line({ error: message });
  }

  #toolsPending(): boolean {
    return !this.generate && !this.#toolsSent && this.state.calls.length > 0;
  }

  #line(text: string, withTools: boolean, thinking = ""): string {
    const o: JsonObject = { model: this.#model, created_at: isoAt(this.now()) };
    if (this.generate) {
      o.response = text;
      if (thinking !== "") o.thinking = thinking;
    } else {
      const message: JsonObject = { role: "assistant", content: text };
      if (thinking !== "") message.thinking = thinking;
      if (withTools) {
        message.tool_calls = ollamaToolCalls(this.state.toolCalls);
        this.#toolsSent = true;
      }
      o.message = message;
    }
    o.done = false;
    return line(o);
  }
}
