/**
 * Steering the fake model through a request header. A gateway in front of the fake model may
 * rebuild the body (the Anthropic and Ollama faces drop fields they do not know), but it
 * forwards the client's headers: `x-fake-options: <JSON object of fake_* fields>` reaches the
 * fake model either way and acts exactly like the same fields in the body.
 *
 * @module
 */
import { FakeRequestError } from "./answer_plan.ts";
import { isJsonObject } from "../core/json.ts";

/** The request header whose JSON object carries `fake_*` fields. */
export const FAKE_OPTIONS_HEADER = "x-fake-options";

/**
 * Parses an `x-fake-options` value: a JSON object whose every field is a `fake_*` field (the
 * header steers the fake model, it never stands in for the request itself, so `model`, `stream`
 * and the rest stay the body's). `null` (no header) gives no fields. Throws FakeRequestError on
 * anything else, naming the header.
 */
export function parseFakeOptions(value: string | null): Record<string, unknown> {
  if (value === null) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new FakeRequestError(`${FAKE_OPTIONS_HEADER} must be a JSON object`);
  }
  if (!isJsonObject(parsed)) {
    throw new FakeRequestError(`${FAKE_OPTIONS_HEADER} must be a JSON object`);
  }
  for (const name of Object.keys(parsed)) {
    if (!name.startsWith("fake_")) {
      throw new FakeRequestError(
        `${FAKE_OPTIONS_HEADER}: '${name}' is not a fake_* field`,
      );
    }
  }
  return parsed;
}

/**
 * The body the fake model plans its answer from: the header's `fake_*` fields under the body's
 * own (the body wins on conflict, so a test can override a client-wide header per request).
 */
export function withFakeOptions(
  body: Record<string, unknown>,
  headers: Headers,
): Record<string, unknown> {
  const options = parseFakeOptions(headers.get(FAKE_OPTIONS_HEADER));
  if (Object.keys(options).length === 0) return body;
  return { ...options, ...body };
}
