/**
 * The response store (ADR 0028): responses the Responses face answered, kept per customer key in
 * the usage store's database (sqlite or postgresql, table `responses`), so `previous_response_id`
 * can continue a conversation and `GET`/`DELETE /v1/responses/{id}` can find one. A kept response
 * lives `ttl_s` seconds; a key keeps at most `max_per_key` (its oldest are dropped).
 *
 * @module
 */
import type { NormalizedUsageStoreConfig } from "../usage/config.ts";
import { postgresDriver, type SqlDriver, sqliteDriver } from "../usage/sql_driver.ts";
import { responsesTableStatements } from "../usage/schema.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";

/** The `responses` config section, normalized. */
export interface ResponsesSettings {
  /** Keep responses (needs a sqlite or postgresql usage store). */
  store: boolean;
  /** Seconds a kept response lives. */
  ttl_s: number;
  /** Responses kept per customer key; the oldest go first. */
  max_per_key: number;
}

/** The defaults of the `responses` section. */
export const RESPONSES_DEFAULTS: Readonly<ResponsesSettings> = {
  store: false,
  ttl_s: 86400,
  max_per_key: 1000,
};

/** One kept response. */
export interface KeptResponse {
  /** The response id (`resp_…`). */
  id: string;
  /** The customer key id that owns it. */
  apiKeyId: string;
  /** Epoch ms it was kept. */
  createdMs: number;
  /** The conversation's input items up to this response (earlier turns included), in order. */
  input: unknown[];
  /** The `response` object the client got. */
  response: JsonObject;
}

/** Where responses are kept. */
export interface ResponseStore {
  /** The response `id` of `apiKeyId`, unless unknown, another key's, or expired. */
  get(apiKeyId: string, id: string): Promise<KeptResponse | undefined>;
  /** Keeps `r`; drops what expired and the key's oldest beyond `max_per_key`. */
  put(r: KeptResponse): Promise<void>;
  /** Deletes the response `id` of `apiKeyId`; whether there was one. */
  delete(apiKeyId: string, id: string): Promise<boolean>;
  /** Closes the connection. */
  close(): Promise<void>;
}

/** The store over one SQL database; `now` is the clock (epoch ms). */
class SqlResponseStore implements ResponseStore {
  readonly #db: SqlDriver;
  readonly #settings: ResponsesSettings;
  readonly #now: () => number;

  constructor(db: SqlDriver, settings: ResponsesSettings, now: () => number) {
    this.#db = db;
    this.#settings = settings;
    this.#now = now;
  }

  async get(apiKeyId: string, id: string): Promise<KeptResponse | undefined> {
    const p = this.#db.param;
    const rows = await this.#db.run(
      `SELECT created_ms, input, response FROM responses WHERE id = ${p(1)} AND api_key_id = ${
        p(2)
      } AND expires_ms > ${p(3)}`,
      [id, apiKeyId, this.#now()],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const input = parseJson(String(row.input));
    const response = parseJson(String(row.response));
    if (!Array.isArray(input) || !isJsonObject(response)) return undefined;
    return { id, apiKeyId, createdMs: Number(row.created_ms), input, response };
  }

  async put(r: KeptResponse): Promise<void> {
    const p = this.#db.param;
    const { ttl_s, max_per_key } = this.#settings;
    await this.#db.run(`DELETE FROM responses WHERE expires_ms <= ${p(1)}`, [this.#now()]);
    await this.#db.run(
      `INSERT INTO responses (id, api_key_id, created_ms, expires_ms, input, response) VALUES (${
        p(1)
      }, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`,
      [
        r.id,
        r.apiKeyId,
        r.createdMs,
        r.createdMs + ttl_s * 1000,
        JSON.stringify(r.input),
        JSON.stringify(r.response),
      ],
    );
    // The key's newest max_per_key stay; older ones go.
    await this.#db.run(
      `DELETE FROM responses WHERE api_key_id = ${p(1)} AND n <= (SELECT n FROM responses ` +
        `WHERE api_key_id = ${p(2)} ORDER BY n DESC LIMIT 1 OFFSET ${p(3)})`,
      [r.apiKeyId, r.apiKeyId, max_per_key],
    );
  }

  async delete(apiKeyId: string, id: string): Promise<boolean> {
    const p = this.#db.param;
    const rows = await this.#db.run(
      `DELETE FROM responses WHERE id = ${p(1)} AND api_key_id = ${p(2)} AND expires_ms > ${
        p(3)
      } RETURNING id`,
      [id, apiKeyId, this.#now()],
    );
    return rows.length > 0;
  }

  close(): Promise<void> {
    return this.#db.close();
  }
}

/**
 * Opens the response store in the usage store's database (creating the `responses` table), or
 * throws naming why: a jsonlog usage store cannot keep responses.
 */
export async function openResponseStore(
  usage: NormalizedUsageStoreConfig,
  settings: ResponsesSettings,
  now: () => number,
): Promise<ResponseStore> {
  let driver: SqlDriver;
  if (usage.backend === "sqlite") {
    driver = sqliteDriver(usage.path);
  } else if (usage.backend === "postgresql") {
    driver = postgresDriver(usage);
  } else {
    throw new Error("responses.store needs a sqlite or postgresql usage_store, not jsonlog");
  }
  try {
    await driver.migrate(responsesTableStatements(usage.backend));
  } catch (err) {
    await driver.close().catch(() => {});
    throw err;
  }
  return new SqlResponseStore(driver, settings, now);
}
