/**
 * Helpers of the fake model tests: post JSON, parse an SSE body.
 *
 * @module
 */

/** POSTs `body` as JSON to `url`. */
export function postJson(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: JSON.stringify(body),
    signal: init.signal,
  });
}

/** The `data:` payloads of an SSE text, in order (`[DONE]` kept as the string). */
export function sseData(text: string): string[] {
  return text.split("\n\n").filter((f) => f !== "").map((f) => {
    if (!f.startsWith("data: ")) throw new Error(`not an SSE data frame: ${JSON.stringify(f)}`);
    return f.slice("data: ".length);
  });
}

/** A parsed `chat.completion.chunk` (the fields the tests read). */
export interface Chunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: string;
      content?: string | null;
      tool_calls?: {
        index: number;
        id?: string;
        type?: string;
        function: { name?: string; arguments: string };
      }[];
    };
    finish_reason: string | null;
    stop_reason?: unknown;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** Parses every frame but `[DONE]` (which must be last) into chunks. */
export function chunksOf(text: string): Chunk[] {
  const data = sseData(text);
  if (data[data.length - 1] !== "[DONE]") throw new Error("stream does not end with [DONE]");
  return data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
}
