/**
 * End-to-end harness: the official client libraries talk to a real gateway (in-process, on
 * 127.0.0.1:0) in front of a real fake model. Usage events are read from the gateway's ledger
 * (its callback sink); every test ends with every node idle.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { ok, strictEqual } from "node:assert/strict";
import type { FakeModel } from "../../src/fake/model.ts";
import type { UsageEvent } from "../../src/usage/types.ts";
import { assertIdle, startGateway, type TestGateway } from "../integration/helpers.ts";
import { withFakeModel } from "../_helpers/fake.ts";

/** The chat model every node serves. */
export const CHAT_MODEL = "m1";
/** The embedding model. */
export const EMBED_MODEL = "e1";
/** Prices of the chat model (USD per million tokens). */
export const PRICING = { input_per_million: 1000, output_per_million: 2000 };

/** A gateway in front of one fake model, the way a client sees it. */
export interface E2E {
  /** Gateway root, `http://127.0.0.1:PORT` (no trailing slash). */
  base: string;
  /** The fake model behind it. */
  fake: FakeModel;
  /** The gateway under test (ledger sink, core, config). */
  t: TestGateway;
}

/** The config of the e2e gateway: a chat node and an embedding node on the same fake model. */
export function e2eConfig(
  fakeUrl: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    nodes: [
      { id: "chat-1", url: fakeUrl, model: CHAT_MODEL },
      { id: "embed-1", url: fakeUrl, model: EMBED_MODEL },
    ],
    pricing: { [CHAT_MODEL]: PRICING },
    ...extra,
  };
}

/**
 * Runs `fn` against a fresh gateway and fake model; afterwards checks that nothing is in flight
 * (every node's inflight 0, no open exchange, no waiter) and closes both, whatever happened.
 */
export function withGateway(
  fn: (e: E2E) => Promise<void>,
  extra: Record<string, unknown> = {},
): Promise<void> {
  return withFakeModel(async (fake) => {
    const t = await startGateway(e2eConfig(fake.url, extra));
    try {
      await fn({ base: t.base, fake, t });
      // The SDKs are done with their streams; the gateway may still be ending its side of one.
      ok(await t.gw.drain(3000), "every request ended within 3 s");
      assertIdle(t.gw);
    } finally {
      await t.stop();
    }
  });
}

/** Waits for the `n`th usage event (1-based) and answers it. */
export async function nthEvent(e: E2E, n: number): Promise<UsageEvent> {
  const events = await e.t.sink.waitFor(n);
  return events[n - 1];
}

/**
 * `x-fake-options` steering the fake model through the gateway (see `src/fake/options.ts`).
 * Non-ASCII characters go as JSON `\uXXXX` escapes: a header value is bytes, and ASCII is the
 * only text every client library and proxy carries the same way.
 */
export function fakeOptions(options: Record<string, unknown>): Record<string, string> {
  const json = JSON.stringify(options).replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return { "x-fake-options": json };
}

/** The fake model's tool call for the weather in Boston. */
export const WEATHER_CALL = {
  fake_tool_calls: [{ name: "get_weather", arguments: { city: "Boston" } }],
};

/** The JSON schema of the `get_weather` tool the tests declare. */
export const WEATHER_SCHEMA = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
};

/** What the test's `get_weather` tool answers. */
export function getWeather(args: unknown): string {
  const city = typeof args === "object" && args !== null && "city" in args
    ? String((args as { city: unknown }).city)
    : "nowhere";
  return `72F and sunny in ${city}`;
}

/** The fake model's default answer of `n` words (`tök0 … tök{n-1}`). */
export function fakeWords(n: number): string {
  return Array.from({ length: n }, (_, i) => `tök${i}`).join(" ");
}

/** The customer key id the gateway derives from a customer key. */
export function customerKeyIdOf(key: string): string {
  return "k_" + createHash("sha1").update(key).digest("hex");
}

/** Checks the event's common fields and that its cost is priced from its token counts. */
export function assertEventBasics(
  event: UsageEvent,
  want: { apiFormat: string; endpoint: string; stream: boolean; status?: number },
): void {
  strictEqual(event.api_format, want.apiFormat, "api_format");
  strictEqual(event.endpoint, want.endpoint, "endpoint");
  strictEqual(event.status_code, want.status ?? 200, "status_code");
  strictEqual(event.ok, (want.status ?? 200) < 400, "ok");
  strictEqual(event.total_tokens, event.input_tokens + event.output_tokens, "total_tokens");
  if (want.stream) {
    ok(
      typeof event.content_bytes === "number" && event.content_bytes > 0,
      `content_bytes on a stream: ${event.content_bytes}`,
    );
  } else {
    strictEqual(event.content_bytes, undefined, "content_bytes is for streams only");
  }
  if (event.model === CHAT_MODEL) {
    const cost = event.input_tokens / 1e6 * PRICING.input_per_million +
      event.output_tokens / 1e6 * PRICING.output_per_million;
    ok(Math.abs(event.cost_total_usd - cost) < 1e-12, `cost ${event.cost_total_usd} vs ${cost}`);
  }
}

/** UTF-8 length of a string. */
export function utf8Bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}
