import { assert, assertEquals } from "../_assert.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { parseFakeOptions, withFakeOptions } from "../../src/fake/options.ts";
import { chunksOf, postJson } from "./helpers.ts";

const USER = [{ role: "user", content: "weather please" }];
const WEATHER = { fake_tool_calls: [{ name: "get_weather", arguments: { city: "Boston" } }] };

function withHeader(options: unknown): RequestInit {
  return {
    headers: {
      "x-fake-options": typeof options === "string" ? options : JSON.stringify(options),
    },
  };
}

Deno.test("x-fake-options: fake_tool_calls in the header make a tool call, JSON and SSE", async () => {
  await withFakeModel(async (fake) => {
    const body = { model: "m", messages: USER };
    const res = await postJson(`${fake.url}/chat/completions`, body, withHeader(WEATHER));
    assertEquals(res.status, 200);
    const json = await res.json();
    assertEquals(json.choices[0].finish_reason, "tool_calls");
    assertEquals(json.choices[0].message.tool_calls, [{
      id: "call_fake_0",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Boston"}' },
    }]);
    // What was recorded is the body as sent: the header's fields are not merged into it.
    assertEquals(fake.requests.at(-1)?.body, body);
    assertEquals(fake.requests.at(-1)?.headers["x-fake-options"], JSON.stringify(WEATHER));

    const sse = await postJson(
      `${fake.url}/chat/completions`,
      { ...body, stream: true },
      withHeader(WEATHER),
    );
    const chunks = chunksOf(await sse.text());
    const args = chunks.flatMap((c) =>
      (c.choices[0]?.delta.tool_calls ?? []).map((t) => t.function.arguments)
    ).join("");
    assertEquals(args, '{"city":"Boston"}');
    assertEquals(chunks.at(-1)?.choices[0].finish_reason, "tool_calls");
  });
});

Deno.test("x-fake-options: the body wins on conflict, other header fields still apply", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(
      `${fake.url}/chat/completions`,
      { model: "m", messages: USER, fake_text: "from the body" },
      withHeader({ fake_text: "from the header", fake_finish_reason: "length" }),
    );
    const json = await res.json();
    assertEquals(json.choices[0].message.content, "from the body");
    assertEquals(json.choices[0].finish_reason, "length");
  });
});

Deno.test("x-fake-options: status, retry-after and response headers, embeddings too", async () => {
  await withFakeModel(async (fake) => {
    const res = await postJson(
      `${fake.url}/chat/completions`,
      { model: "m", messages: USER },
      withHeader({ fake_status: 429, fake_retry_after: 7, fake_headers: { "x-extra": "yes" } }),
    );
    assertEquals(res.status, 429);
    assertEquals(res.headers.get("retry-after"), "7");
    assertEquals(res.headers.get("x-extra"), "yes");
    assertEquals((await res.json()).error.type, "rate_limit_error");

    const emb = await postJson(
      `${fake.url}/embeddings`,
      { model: "m", input: "a b" },
      withHeader({ fake_status: 503 }),
    );
    assertEquals(emb.status, 503);
    assertEquals((await emb.json()).error.type, "server_error");
  });
});

Deno.test("x-fake-options: a malformed header is a 400 naming the header", async () => {
  await withFakeModel(async (fake) => {
    for (
      const [value, message] of [
        ["{nope", "x-fake-options must be a JSON object"],
        ["[1]", "x-fake-options must be a JSON object"],
        ['{"model":"other"}', "x-fake-options: 'model' is not a fake_* field"],
        ['{"fake_tokens":-1}', "fake_tokens must be a non-negative number"],
      ]
    ) {
      const res = await postJson(
        `${fake.url}/chat/completions`,
        { model: "m", messages: USER },
        withHeader(value),
      );
      assertEquals(res.status, 400, value);
      const json = await res.json();
      assertEquals(json.error, {
        message,
        type: "invalid_request_error",
        param: null,
        code: null,
      });
    }
    // Every refused request was answered: nothing stays in flight.
    assertEquals(fake.stats.inflight, 0);
    assertEquals(fake.stats.completed, 4);
  });
});

Deno.test("parseFakeOptions / withFakeOptions: no header changes nothing", () => {
  assertEquals(parseFakeOptions(null), {});
  const body = { model: "m", fake_tokens: 2 };
  assert(withFakeOptions(body, new Headers()) === body, "same object without a header");
  const merged = withFakeOptions(
    body,
    new Headers({ "x-fake-options": '{"fake_tokens":9,"fake_itl_ms":1}' }),
  );
  assertEquals(merged, { model: "m", fake_tokens: 2, fake_itl_ms: 1 });
});
