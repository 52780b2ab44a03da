/**
 * What every stream translator tracks of an upstream OpenAI stream, one parsed chunk at a time:
 * content bytes, the last usage, finish_reason, the matched stop string, and tool calls
 * assembled from their fragments. The translators turn the parts of each chunk into their own
 * frames; the proxy reads the totals for the usage event (`StreamAccounting`, the base of every
 * face's translator).
 *
 * @module
 */
import type { JsonObject } from "./face.ts";
import { isJsonObject } from "../core/json.ts";
import { num, obj, str } from "./json_narrow.ts";
import { utf8Length } from "./utf8.ts";

/** A tool call being assembled, in order of first appearance. */
export interface ToolCallState {
  /** 0-based order of first appearance (the client-side block/call number). */
  readonly position: number;
  /** The upstream's `tool_calls[].index`. */
  readonly index: number;
  /** The upstream's call id, or `<idPrefix><n>` when it sent none. */
  id: string;
  /** The function name; '' until a fragment names it. */
  name: string;
  /** Argument JSON text so far (fragments concatenated verbatim). */
  arguments: string;
}

/** One tool-call piece of a chunk. */
export interface ToolDelta {
  /** The call this piece belongs to. */
  call: ToolCallState;
  /** This chunk is the call's first sighting. */
  opened: boolean;
  /** The argument fragment this chunk carried ('' when none). */
  fragment: string;
}

/** The parts of one upstream chunk (its first choice). */
export interface ChunkParts {
  /** `delta.content` (chat) or `text` (completions); '' when none. */
  text: string;
  /** Tool-call pieces of the chunk, in the order they came. */
  tools: ToolDelta[];
  /** `finish_reason` when this chunk carries one. */
  finishReason?: string;
}

/** Accumulates an upstream stream; `idPrefix` names tool calls the upstream sent without id. */
export class StreamState {
  /** UTF-8 bytes of content text and tool-call argument fragments so far. */
  contentBytes = 0;
  /** The last `usage` object a chunk carried (usually only the final one). */
  usage: JsonObject | undefined;
  /** The last `finish_reason` seen. */
  finishReason: string | undefined;
  /** The stop string the upstream says matched (vLLM `stop_reason`, SGLang `matched_stop`). */
  matchedStop: string | undefined;
  /** The first non-empty upstream `id` and the last non-empty `model`. */
  upstreamId: string | undefined;
  /** The last non-empty upstream `model` (the model as the node names it). */
  upstreamModel: string | undefined;
  /** Tool calls in order of first appearance. */
  readonly calls: ToolCallState[] = [];
  readonly #byIndex = new Map<number, ToolCallState>();

  /**
   * An empty state, fed one parsed chunk at a time by `read`.
   *
   * @param idPrefix prefix of the ids made for tool calls the upstream sent without one
   * (`toolu_skeid_`, `call_skeid_`)
   */
  constructor(readonly idPrefix: string) {}

  /** Reads one chunk: remembers what it reports and returns its parts. */
  read(chunk: JsonObject): ChunkParts {
    const id = str(chunk.id);
    if (id && this.upstreamId === undefined) this.upstreamId = id;
    const model = str(chunk.model);
    if (model) this.upstreamModel = model;
    if (isJsonObject(chunk.usage)) this.usage = chunk.usage;
    const parts: ChunkParts = { text: "", tools: [] };
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    const choice = obj(choices.find((c) => isJsonObject(c) && (c.index ?? 0) === 0)) ??
      obj(choices[0]);
    if (!choice) return parts;
    const delta = obj(choice.delta);
    const text = str(delta?.content) ?? str(choice.text) ?? "";
    parts.text = text;
    this.contentBytes += utf8Length(text);
    const toolCalls = Array.isArray(delta?.tool_calls) ? delta.tool_calls : [];
    toolCalls.forEach((raw, i) => {
      const tc = obj(raw);
      if (tc) parts.tools.push(this.#tool(tc, i));
    });
    const finish = str(choice.finish_reason);
    if (finish) {
      this.finishReason = finish;
      parts.finishReason = finish;
    }
    const matched = str(choice.stop_reason) ?? str(choice.matched_stop);
    if (matched !== undefined) this.matchedStop = matched;
    return parts;
  }

  #tool(tc: JsonObject, position: number): ToolDelta {
    const index = num(tc.index) ?? position;
    const fn = obj(tc.function);
    const fragment = str(fn?.arguments) ?? "";
    let call = this.#byIndex.get(index);
    const opened = call === undefined;
    if (!call) {
      call = {
        position: this.calls.length,
        index,
        id: str(tc.id) || `${this.idPrefix}${this.calls.length + 1}`,
        name: str(fn?.name) || "",
        arguments: "",
      };
      this.calls.push(call);
      this.#byIndex.set(index, call);
    } else if (!call.name && str(fn?.name)) call.name = str(fn?.name) ?? "";
    call.arguments += fragment;
    this.contentBytes += utf8Length(fragment);
    return { call, opened, fragment };
  }

  /** Tool calls so far, OpenAI shape. */
  get toolCalls(): JsonObject[] {
    return this.calls.map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.name, arguments: c.arguments },
    }));
  }
}

/**
 * What a stream answers for the usage event, read off its StreamState: the same accounting
 * whatever the client's format. Every face's stream translator is one; the proxy wraps the
 * state of a stream it relays untranslated in one.
 */
export class StreamAccounting {
  /** What the upstream stream reported so far. */
  protected readonly state: StreamState;

  /** Accounting over `state` (which the owner feeds chunk by chunk). */
  constructor(state: StreamState) {
    this.state = state;
  }

  /** UTF-8 bytes of `delta.content` (or completions `text`) and tool-call argument fragments. */
  get contentBytes(): number {
    return this.state.contentBytes;
  }

  /** The last usage object the upstream reported. */
  get usage(): JsonObject | undefined {
    return this.state.usage;
  }

  /** Tool calls seen so far, fragments assembled, OpenAI shape. */
  get toolCalls(): JsonObject[] {
    return this.state.toolCalls;
  }
}
