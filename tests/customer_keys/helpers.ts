/**
 * Test helpers for issued keys: a gateway with a fresh SQLite database and the pepper set, admin
 * calls and chat requests against it.
 *
 * @module
 */
import { startFakeModel } from "../../src/fake/model.ts";
import { chat, post, startGateway, type TestGateway } from "../integration/helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

const ADMIN = { authorization: "Bearer adm" };
/** The pepper variable the gateways see. */
export const PEPPER = { SKEID_KEY_PEPPER: "pepper-for-tests-0123456789" };

/** An admin call: status and parsed body. */
export async function admin(
  base: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...ADMIN, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text === "" ? {} : JSON.parse(text), text };
}

/** A chat request with `key`; its status and body. */
export function ask(
  t: TestGateway,
  key: string,
  extra: Record<string, unknown> = {},
): ReturnType<typeof post> {
  return post(`${t.base}/v1/chat/completions`, chat("m1", extra), {
    authorization: `Bearer ${key}`,
  });
}

/**
 * A gateway on a fresh SQLite database (or the `store` made in the temp dir) with one fake node,
 * the pepper set (unless `env` replaces the environment); `now` its clock.
 */
export async function withGateway(
  fn: (t: TestGateway) => Promise<void>,
  opts: {
    config?: Record<string, unknown>;
    now?: () => number;
    env?: Record<string, string>;
    store?: (dir: string) => Record<string, unknown>;
    /** The fake node's time to its first token, ms. */
    ttftMs?: number;
  } = {},
): Promise<void> {
  const tmp = await tempDir();
  const fake = startFakeModel({ ttftMs: opts.ttftMs });
  const t = await startGateway({
    admin_api_key: "adm",
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    pricing: { m1: { input_per_million: 1, output_per_million: 1 } },
    policies: { std: {}, tiny: { budget: { tokens: 5, period: "month" } } },
    usage_store: opts.store?.(tmp.dir) ?? { backend: "sqlite", path: `${tmp.dir}/usage.db` },
    ...opts.config,
  }, { env: opts.env ?? PEPPER, now: opts.now });
  try {
    await fn(t);
  } finally {
    await t.stop();
    await fake.close();
    await tmp.cleanup();
  }
}
