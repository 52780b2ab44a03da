/**
 * The intake phase on its own: request id, loop guard, customer key id and the known-key rule,
 * body limit, JSON body, and the face's refusal of a body it cannot carry.
 */
import { assert, assertEquals, assertMatch, assertRejects, assertThrows } from "../_assert.ts";
import { faceFor } from "../../src/faces/index.ts";
import { Refusal } from "../../src/proxy/errors.ts";
import { KeyIdCache } from "../../src/proxy/identity.ts";
import {
  customerKeyId,
  type IntakeContext,
  jsonBody,
  nextHop,
  readBody,
  requestIdOf,
  upstreamRequest,
} from "../../src/proxy/intake.ts";
import type { RoutingSettings } from "../../src/core/types.ts";

const enc = new TextEncoder();

/** An intake context whose known customer key ids are `known`; ids are `k_<key>`. */
function intake(
  routing: Partial<RoutingSettings>,
  known: string[] = [],
  derive = (key: string) => Promise.resolve(`k_${key}`),
): IntakeContext {
  return {
    skeid: {
      routing: {
        trust_key_id_header: false,
        require_known_keys: false,
        ...routing,
      } as RoutingSettings,
      isKnownKey: (id) => known.includes(id),
    },
    keyIds: new KeyIdCache({ derive }),
  };
}

/** Asserts `fn` throws a Refusal with `status` and `reason`; answers it. */
function refusalOf(fn: () => unknown, status: number, reason: string): Refusal {
  const err = assertThrows(fn, Refusal);
  assertEquals(err.status, status, "refusal status");
  assertEquals(err.reason, reason, "refusal reason");
  return err;
}

Deno.test("intake request id: the client's 1–200 chars kept, anything else generated", () => {
  assertEquals(requestIdOf(new Headers({ "x-request-id": "abc" }), 5), "abc");
  const long = "x".repeat(200);
  assertEquals(requestIdOf(new Headers({ "x-request-id": long }), 5), long);
  assertMatch(requestIdOf(new Headers({ "x-request-id": "x".repeat(201) }), 5), /^req_5_\d+$/);
  assertMatch(requestIdOf(new Headers({ "x-request-id": "" }), 7), /^req_7_\d+$/);
  assertMatch(requestIdOf(new Headers(), 1_700_000_000_000), /^req_1700000000000_\d{1,6}$/);
});

Deno.test("intake hops: one more than arrived; the eighth gateway refuses with 508", () => {
  assertEquals(nextHop(new Headers()), 1);
  assertEquals(nextHop(new Headers({ "x-skeid-hops": "garbage" })), 1);
  assertEquals(nextHop(new Headers({ "x-skeid-hops": "7" })), 8);
  const err = refusalOf(() => nextHop(new Headers({ "x-skeid-hops": "8" })), 508, "loop_detected");
  assertEquals(err.type, "loop_detected");
  assertMatch(err.message, /passed 8 Skeid gateways/);
});

Deno.test("intake customer key id: anonymous without a key; derived once, then synchronous", async () => {
  let derived = 0;
  const ctx = intake({}, [], (key) => {
    derived++;
    return Promise.resolve(`k_${key}`);
  });
  assertEquals(customerKeyId(ctx, new Headers()), "anonymous");
  const headers = new Headers({ authorization: "Bearer sk-1" });
  const first = customerKeyId(ctx, headers);
  assert(first instanceof Promise, "a new key's id is derived (a promise)");
  assertEquals(await first, "k_sk-1");
  assertEquals(customerKeyId(ctx, headers), "k_sk-1", "a cached id answers synchronously");
  assertEquals(derived, 1, "derived once");
  // The trusted header counts only when the routing settings say so.
  const named = new Headers({ "x-skeid-key-id": "k_front" });
  assertEquals(customerKeyId(ctx, named), "anonymous");
  assertEquals(customerKeyId(intake({ trust_key_id_header: true }), named), "k_front");
});

Deno.test("intake known-key rule: 401 without a key or with an unknown one (sync and async)", async () => {
  const ctx = intake({ require_known_keys: true }, ["k_good"]);
  const none = refusalOf(() => customerKeyId(ctx, new Headers()), 401, "unknown_key");
  assertEquals(none.type, "authentication_error");
  assertEquals(none.message, "An API key is required");
  const unknown = customerKeyId(ctx, new Headers({ "x-api-key": "bad" }));
  const err = await assertRejects(() => Promise.resolve(unknown), Refusal);
  assertEquals(err.status, 401, "unknown key status");
  assertEquals(err.message, "Unknown API key");
  assertEquals(await customerKeyId(ctx, new Headers({ "x-api-key": "good" })), "k_good");
});

Deno.test("intake body: a declared length over the limit is refused before reading; under it read", async () => {
  const over = new Request("http://g/v1/chat/completions", {
    method: "POST",
    headers: { "content-length": "11" },
    body: "x".repeat(11),
  });
  const err = await assertRejects(() => readBody(over, 10), Refusal);
  assertEquals(err.status, 413, "status");
  assertEquals(err.reason, "body_too_large");
  assertEquals(err.message, "Request body too large (limit 10 bytes)");
  assertEquals(over.bodyUsed, false, "the body was not read");
  const ok = new Request("http://g/x", { method: "POST", body: '{"a":1}' });
  assertEquals(new TextDecoder().decode(await readBody(ok, 10)), '{"a":1}');
});

Deno.test("intake body: a chunked body is refused as soon as it passes the limit", async () => {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled++;
      if (pulled > 100) c.close();
      else c.enqueue(enc.encode("xxxx"));
    },
  });
  const req = new Request("http://g/x", { method: "POST", body });
  const err = await assertRejects(() => readBody(req, 10), Refusal);
  assertEquals(err.status, 413, "status");
  assert(pulled < 10, `reading stopped at the limit (pulled ${pulled})`);
});

Deno.test("intake JSON: an object passes; bad JSON, arrays and scalars are 400 invalid_json", () => {
  assertEquals(jsonBody(enc.encode('{"model":"m"}')), { model: "m" });
  const messages: Record<string, string> = {
    "{": "Invalid JSON body: at line 1, column 2: expected property name or '}'",
    '{"model": "m",\n "stream": tru}': 'Invalid JSON body: unexpected "}"',
    '{"model": "m",\n "messages": [] "x": 1}':
      "Invalid JSON body: at line 2, column 17: expected ',' or '}' after property value",
    '{"model": ': "Invalid JSON body: it ends before its JSON value does",
    "[1]": "Request body must be a JSON object, got an array",
    "3": "Request body must be a JSON object, got a number",
    '"s"': "Request body must be a JSON object, got a string",
    "null": "Request body must be a JSON object, got null",
    "": "Empty request body: expected a JSON object",
  };
  for (const [text, message] of Object.entries(messages)) {
    const err = refusalOf(() => jsonBody(enc.encode(text)), 400, "invalid_json");
    assertEquals(err.message, message, `message for ${JSON.stringify(text)}`);
  }
});

Deno.test("intake upstream request: the face's refusal becomes the client's, in its status", () => {
  const openai = faceFor("openai");
  const req = upstreamRequest(openai, "/v1/chat/completions", { model: "m", messages: [] });
  assertEquals(req.path, "/chat/completions");
  const missing = refusalOf(
    () => upstreamRequest(openai, "/v1/chat/completions", {}),
    400,
    "bad_request",
  );
  assertEquals(missing.type, "invalid_request_error");
  assertEquals(missing.message, "model: Field required");
  const route = refusalOf(
    () => upstreamRequest(openai, "/v1/nope", { model: "m" }),
    404,
    "bad_request",
  );
  assertEquals(route.type, "not_found_error");
});
