/**
 * The fake model's minimal Responses API (`POST /v1/responses`), for nodes configured
 * `responses: native`: one `message` item of generated words (`fake_tokens`, else the default
 * count), usage in `input_tokens`/`output_tokens` (words), and with `stream: true` the event
 * sequence of one message item: `response.created`, `response.output_item.added`,
 * `response.content_part.added`, `response.output_text.delta`… (one per word), the `.done` events,
 * `response.completed`.
 *
 * @module
 */
import { type FakeDefaults, numberField } from "../fake/answer_plan.ts";
import { contentText, generatedText, textPieces, wordCount } from "../fake/content.ts";
import { isJsonObject } from "../core/json.ts";

/** Input tokens of a Responses `input`: words of a string, or of every item's content. */
function inputWords(input: unknown): number {
  if (typeof input === "string") return wordCount(input);
  if (!Array.isArray(input)) return 0;
  let n = 0;
  for (const item of input) if (isJsonObject(item)) n += wordCount(contentText(item.content));
  return n;
}

/** The fake model's answer to a Responses request (JSON, or the whole event stream at once). */
export function responsesAnswer(
  body: Record<string, unknown>,
  defaults: FakeDefaults,
  seq: number,
): Response {
  const text = generatedText(Math.floor(numberField(body, "fake_tokens") ?? defaults.tokens));
  const input = inputWords(body.input) + wordCount(String(body.instructions ?? ""));
  const output = wordCount(text);
  const id = `resp_fake_${seq}`;
  const message = {
    id: `msg_fake_${seq}`,
    type: "message",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [] }],
  };
  const response = {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "completed",
    model: typeof body.model === "string" ? body.model : defaults.modelName,
    output: [message],
    usage: { input_tokens: input, output_tokens: output, total_tokens: input + output },
  };
  if (body.stream !== true) {
    return new Response(JSON.stringify(response), {
      headers: { "content-type": "application/json" },
    });
  }
  let n = 0;
  const event = (type: string, fields: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n++, ...fields })}\n\n`;
  let sse = event("response.created", {
    response: { ...response, status: "in_progress", output: [], usage: null },
  });
  const at = { item_id: message.id, output_index: 0, content_index: 0 };
  const part = message.content[0];
  sse += event("response.output_item.added", {
    output_index: 0,
    item: { ...message, status: "in_progress", content: [] },
  });
  sse += event("response.content_part.added", { ...at, part: { ...part, text: "" } });
  for (const delta of textPieces(text)) {
    sse += event("response.output_text.delta", { ...at, delta });
  }
  sse += event("response.output_text.done", { ...at, text });
  sse += event("response.content_part.done", { ...at, part });
  sse += event("response.output_item.done", { output_index: 0, item: message });
  sse += event("response.completed", { response });
  return new Response(sse, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}
