/**
 * The answer phase on its own: a whole upstream answer passed through (OpenAI) or translated
 * (the other faces), an upstream error passed through or reshaped, a failed attempt's 502, and
 * what each returns for the usage event.
 */
import { assertEquals } from "../_assert.ts";
import { faceFor } from "../../src/faces/index.ts";
import type { FaceName } from "../../src/faces/face.ts";
import {
  answerResponse,
  type AnswerTarget,
  parseAnswer,
  toolCallsOf,
  transportFailureResponse,
  upstreamErrorResponse,
} from "../../src/proxy/answer.ts";

const enc = new TextEncoder();

function target(face: FaceName, endpoint: string): AnswerTarget {
  return {
    face: faceFor(face, { now: () => 1_700_000_000_000 }),
    endpoint,
    requestedModel: "alias-m",
    requestId: "rid-1",
    faceContext: undefined,
  };
}

/** An upstream head with `pairs` as `Headers` iteration yields them. */
function head(status: number, pairs: [string, string][]) {
  return { status, pairs: () => pairs };
}

const chatAnswer = {
  id: "c1",
  object: "chat.completion",
  model: "served-m",
  choices: [{
    index: 0,
    message: { role: "assistant", content: "hi" },
    finish_reason: "stop",
  }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
};

Deno.test("answer openai: the upstream's status, headers and bytes, plus node and request id", async () => {
  const t = target("openai", "/v1/chat/completions");
  const text = JSON.stringify(chatAnswer) + " ";
  const a = answerResponse(
    t,
    head(200, [
      ["content-length", "999"],
      ["content-type", "application/json"],
      ["x-request-id", "upstream-rid"],
      ["x-upstream", "1"],
    ]),
    enc.encode(text),
    "node-a",
    12,
  );
  const res = a.reply;
  assertEquals(res.status, 200);
  assertEquals(await res.text(), text, "bytes unchanged");
  assertEquals(res.headers.get("x-request-id"), "rid-1", "our request id replaces the upstream's");
  assertEquals(res.headers.get("x-skeid-node"), "node-a");
  assertEquals(res.headers.get("x-upstream"), "1");
  assertEquals(res.headers.get("content-length"), null, "the upstream's framing is dropped");
  assertEquals(a.status, 200);
  assertEquals(a.response, chatAnswer, "the answer object is noted for the usage event");
  assertEquals(a.errorType, undefined);
});

Deno.test("answer anthropic: a JSON answer is translated; anything else is a 502", async () => {
  const t = target("anthropic", "/v1/messages");
  const a = answerResponse(t, head(200, []), enc.encode(JSON.stringify(chatAnswer)), "n", 12);
  const res = a.reply;
  assertEquals(res.status, 200);
  assertEquals(res.headers.get("x-request-id"), "rid-1");
  assertEquals(res.headers.get("x-skeid-node"), "n");
  const body = await res.json();
  assertEquals(body.type, "message");
  assertEquals(body.model, "alias-m", "the client's model is named");
  assertEquals(body.content, [{ type: "text", text: "hi" }]);
  assertEquals(a.status, 200);

  const bad = answerResponse(
    target("anthropic", "/v1/messages"),
    head(200, []),
    enc.encode("[1,2]"),
    "n",
    12,
  );
  const res502 = bad.reply;
  assertEquals(res502.status, 502);
  assertEquals(await res502.json(), {
    type: "error",
    error: { type: "api_error", message: "Upstream error: Upstream answer is not a JSON object" },
  });
  assertEquals(bad.status, 502);
  assertEquals(bad.errorType, "upstream_error");
  assertEquals(bad.errorMessage, "Upstream answer is not a JSON object");
});

Deno.test("answer upstream error: passed through by openai, reshaped by ollama; message noted", async () => {
  const upstreamError = { error: { message: "context too long", type: "invalid_request_error" } };
  const bytes = enc.encode(JSON.stringify(upstreamError));
  const o = answerResponse(
    target("openai", "/v1/chat/completions"),
    head(400, [["x-a", "1"]]),
    bytes,
    "n",
    1,
  );
  const passed = o.reply;
  assertEquals(passed.status, 400);
  assertEquals(await passed.json(), upstreamError, "the upstream's body as it was");
  assertEquals(passed.headers.get("x-a"), "1");
  assertEquals(o.errorType, "upstream_error");
  assertEquals(o.errorMessage, "context too long");
  assertEquals(o.response, upstreamError);

  const l = upstreamErrorResponse(
    target("ollama", "/api/chat"),
    head(503, []),
    enc.encode("busy"),
    undefined,
    "n",
  );
  const reshaped = l.reply;
  assertEquals(reshaped.status, 503);
  assertEquals(reshaped.headers.get("content-type"), "application/json");
  // The face reshapes what parsed (nothing here); the usage event keeps the upstream's text.
  assertEquals((await reshaped.json()).error, "Upstream error: Service Unavailable");
  assertEquals(l.status, 503);
  assertEquals(l.errorMessage, "busy");
});

Deno.test("answer transport failure: 502 in the face's shape with the reason", async () => {
  const t = transportFailureResponse(
    target("openai", "/v1/chat/completions"),
    "connection refused",
    "node-b",
  );
  const res = t.reply;
  assertEquals(res.status, 502);
  assertEquals(res.headers.get("x-skeid-node"), "node-b");
  assertEquals(await res.json(), {
    error: { message: "Upstream error: connection refused", type: "upstream_error" },
  });
  assertEquals(t.status, 502);
  assertEquals(t.errorMessage, "Upstream error: connection refused");
});

Deno.test("answer helpers: parseAnswer and toolCallsOf read what is there, nothing else", () => {
  assertEquals(parseAnswer(new Uint8Array(0)), undefined);
  assertEquals(parseAnswer(enc.encode("not json")), undefined);
  assertEquals(parseAnswer(enc.encode("[1]")), [1]);
  const calls = [{ id: "c", function: { name: "f", arguments: "{}" } }];
  assertEquals(toolCallsOf({ choices: [{ message: { tool_calls: calls } }] }), calls);
  assertEquals(toolCallsOf({ choices: [] }), undefined);
  assertEquals(toolCallsOf({ choices: [{ message: "x" }] }), undefined);
  assertEquals(toolCallsOf(undefined), undefined);
});
