/**
 * The response store (ADR 0028): responses the Responses face answered, kept per customer key in
 * the usage store's database (sqlite or postgresql, table `responses`), so `previous_response_id`
 * can continue a conversation and `GET`/`DELETE /v1/responses/{id}` can find one. A row holds
 * its turn's own input items and output and a link to the response it continued; continuing
 * walks the links back. A kept response lives `ttl_s` seconds (its earlier turns with it); a key
 * keeps at most `max_per_key` and `max_bytes_per_key`, a response at most `max_response_bytes`.
 *
 * @module
 */
import type { NormalizedUsageStoreConfig } from "../usage/config.ts";
import { postgresDriver, type Row, type SqlDriver, sqliteDriver } from "../usage/sql_driver.ts";
import { responsesTableStatements, responsesUpgradeStatements } from "../usage/ledger_schema.ts";
import { utf8Length } from "../faces/utf8.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";

/** The `responses` config section, normalized. */
export interface ResponsesSettings {
  /** Keep responses (needs a sqlite or postgresql usage store). */
  store: boolean;
  /** Seconds a kept response lives (a continued one keeps its earlier turns alive with it). */
  ttl_s: number;
  /** Responses kept per customer key; the least recently continued go first. */
  max_per_key: number;
  /** Bytes one kept response may hold (its own input items and its `response` object, JSON). */
  max_response_bytes: number;
  /** Bytes a customer key may keep in all. */
  max_bytes_per_key: number;
}

/** The defaults of the `responses` section. */
export const RESPONSES_DEFAULTS: Readonly<ResponsesSettings> = {
  store: false,
  ttl_s: 86400,
  max_per_key: 1000,
  max_response_bytes: 16 * 1024 * 1024,
  max_bytes_per_key: 256 * 1024 * 1024,
};

/** One kept response. */
export interface KeptResponse {
  /** The response id (`resp_…`). */
  id: string;
  /** The customer key id that owns it. */
  apiKeyId: string;
  /** Epoch ms it was kept. */
  createdMs: number;
  /**
   * This turn's own input items; the conversation before them is the previous response's.
   * (A row kept before responses were linked holds the whole conversation's input here.)
   */
  input: unknown[];
  /** The response this one continued; absent for the first turn. */
  previousId?: string;
  /** The `response` object the client got. */
  response: JsonObject;
}

/** A conversation read back by walking the links from its newest response. */
export type Conversation =
  /** Its items in order (each turn's input, then its output). */
  | { found: true; items: unknown[] }
  /** Not this key's, expired, or unknown (`missing` is `id`), or an earlier turn is gone. */
  | { found: false; missing: string };

/** A response too large for a byte cap of `responses`; `setting` names the cap. */
export class ResponseLimitError extends Error {
  /** `setting`: `max_response_bytes` or `max_bytes_per_key`. */
  constructor(message: string, readonly setting: "max_response_bytes" | "max_bytes_per_key") {
    super(message);
    this.name = "ResponseLimitError";
  }
}

/** Where responses are kept. */
export interface ResponseStore {
  /** The settings it keeps by. */
  readonly settings: Readonly<ResponsesSettings>;
  /** The response `id` of `apiKeyId`, unless unknown, another key's, or expired. */
  get(apiKeyId: string, id: string): Promise<KeptResponse | undefined>;
  /**
   * The conversation up to and including the response `id` of `apiKeyId`, walked back along
   * its links (at most `max_per_key` turns, every one the key's own and unexpired).
   */
  conversation(apiKeyId: string, id: string): Promise<Conversation>;
  /** The bytes `apiKeyId` keeps now. */
  keptBytes(apiKeyId: string): Promise<number>;
  /**
   * Keeps `r` (throws ResponseLimitError past a byte cap, keeping nothing); drops what expired
   * and the key's least recently continued beyond `max_per_key`; the earlier turns of the
   * conversation `r` continues live as long as `r` does.
   */
  put(r: KeptResponse): Promise<void>;
  /** Deletes the response `id` of `apiKeyId`; whether there was one. */
  delete(apiKeyId: string, id: string): Promise<boolean>;
  /** Closes the connection. */
  close(): Promise<void>;
}

/** More rows than any key keeps: the LIMIT of "everything after the first N". */
const ALL_ROWS = 2 ** 31 - 1;

/** The store over one SQL database; `now` is the clock (epoch ms). */
class SqlResponseStore implements ResponseStore {
  readonly #db: SqlDriver;
  readonly settings: Readonly<ResponsesSettings>;
  readonly #now: () => number;

  constructor(db: SqlDriver, settings: ResponsesSettings, now: () => number) {
    this.#db = db;
    this.settings = settings;
    this.#now = now;
  }

  async get(apiKeyId: string, id: string): Promise<KeptResponse | undefined> {
    const p = this.#db.param;
    const rows = await this.#db.run(
      `SELECT created_ms, previous_id, input, response FROM responses WHERE id = ${p(1)} ` +
        `AND api_key_id = ${p(2)} AND expires_ms > ${p(3)}`,
      [id, apiKeyId, this.#now()],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const read = readRow(row);
    if (read === undefined) return undefined;
    return { id, apiKeyId, createdMs: Number(row.created_ms), ...read };
  }

  async conversation(apiKeyId: string, id: string): Promise<Conversation> {
    const p = this.#db.param;
    const now = this.#now();
    // One statement walks the links back; every step is the same key's and unexpired, and the
    // walk stops after max_per_key turns (no key keeps more).
    const rows = await this.#db.run(
      `WITH RECURSIVE chain (id, previous_id, input, response, depth) AS (` +
        `SELECT id, previous_id, input, response, 0 FROM responses WHERE id = ${p(1)} ` +
        `AND api_key_id = ${p(2)} AND expires_ms > ${p(3)} UNION ALL ` +
        `SELECT r.id, r.previous_id, r.input, r.response, c.depth + 1 FROM responses r ` +
        `JOIN chain c ON r.id = c.previous_id WHERE r.api_key_id = ${p(4)} ` +
        `AND r.expires_ms > ${p(5)} AND c.depth < ${p(6)}) ` +
        `SELECT previous_id, input, response FROM chain ORDER BY depth DESC`,
      [id, apiKeyId, now, apiKeyId, now, this.settings.max_per_key],
    );
    if (rows.length === 0) return { found: false, missing: id };
    const first = rows[0].previous_id;
    if (typeof first === "string" && first !== "") return { found: false, missing: first };
    const items: unknown[] = [];
    for (const row of rows) {
      const read = readRow(row);
      if (read === undefined) return { found: false, missing: id };
      items.push(...read.input);
      if (Array.isArray(read.response.output)) items.push(...read.response.output);
    }
    return { found: true, items };
  }

  async keptBytes(apiKeyId: string): Promise<number> {
    const p = this.#db.param;
    const rows = await this.#db.run(
      `SELECT COALESCE(SUM(bytes), 0) AS total FROM responses WHERE api_key_id = ${p(1)} ` +
        `AND expires_ms > ${p(2)}`,
      [apiKeyId, this.#now()],
    );
    return Number(rows[0]?.total ?? 0);
  }

  async put(r: KeptResponse): Promise<void> {
    const p = this.#db.param;
    const { ttl_s, max_per_key, max_response_bytes, max_bytes_per_key } = this.settings;
    const input = JSON.stringify(r.input);
    const response = JSON.stringify(r.response);
    const bytes = utf8Length(input) + utf8Length(response);
    if (bytes > max_response_bytes) {
      throw new ResponseLimitError(
        `response ${r.id} is ${bytes} bytes, over responses.max_response_bytes ` +
          `(${max_response_bytes})`,
        "max_response_bytes",
      );
    }
    await this.#db.run(`DELETE FROM responses WHERE expires_ms <= ${p(1)}`, [this.#now()]);
    const kept = await this.keptBytes(r.apiKeyId);
    if (kept + bytes > max_bytes_per_key) {
      throw new ResponseLimitError(
        `response ${r.id} (${bytes} bytes) would take the key's kept responses to ` +
          `${kept + bytes} bytes, over responses.max_bytes_per_key (${max_bytes_per_key})`,
        "max_bytes_per_key",
      );
    }
    const expires = r.createdMs + ttl_s * 1000;
    await this.#db.run(
      `INSERT INTO responses (id, api_key_id, created_ms, expires_ms, previous_id, bytes, input, ` +
        `response) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)})`,
      [r.id, r.apiKeyId, r.createdMs, expires, r.previousId ?? "", bytes, input, response],
    );
    if (r.previousId !== undefined) {
      // The earlier turns live as long as the newest: a continued conversation stays whole.
      await this.#db.run(
        `UPDATE responses SET expires_ms = ${p(1)} WHERE api_key_id = ${p(2)} AND ` +
          `expires_ms < ${p(3)} AND id IN (WITH RECURSIVE chain (id, previous_id, depth) AS (` +
          `SELECT id, previous_id, 0 FROM responses WHERE id = ${p(4)} AND api_key_id = ${p(5)} ` +
          `UNION ALL SELECT r.id, r.previous_id, c.depth + 1 FROM responses r JOIN chain c ` +
          `ON r.id = c.previous_id WHERE r.api_key_id = ${p(6)} AND c.depth < ${p(7)}) ` +
          `SELECT id FROM chain)`,
        [expires, r.apiKeyId, expires, r.previousId, r.apiKeyId, r.apiKeyId, max_per_key],
      );
    }
    // The key's max_per_key latest-expiring stay (a continued conversation's turns among them);
    // the others go.
    await this.#db.run(
      `DELETE FROM responses WHERE api_key_id = ${p(1)} AND n IN (SELECT n FROM responses ` +
        `WHERE api_key_id = ${p(2)} ORDER BY expires_ms DESC, n DESC LIMIT ${p(3)} OFFSET ${p(4)})`,
      [r.apiKeyId, r.apiKeyId, ALL_ROWS, max_per_key],
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

/** A row's own input, link and response; undefined when its JSON is not of those shapes. */
function readRow(row: Row): Pick<KeptResponse, "input" | "previousId" | "response"> | undefined {
  const input = parseJson(String(row.input));
  const response = parseJson(String(row.response));
  if (!Array.isArray(input) || !isJsonObject(response)) return undefined;
  const previous = row.previous_id;
  return {
    input,
    response,
    ...(typeof previous === "string" && previous !== "" ? { previousId: previous } : {}),
  };
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
    // A table made before responses were linked gets the link and size columns.
    const existing = usage.backend === "sqlite"
      ? new Set((await driver.run("PRAGMA table_info(responses)", [])).map((r) => String(r.name)))
      : undefined;
    const upgrade = responsesUpgradeStatements(usage.backend, existing);
    if (upgrade.length > 0) await driver.migrate(upgrade);
  } catch (err) {
    await driver.close().catch(() => {});
    throw err;
  }
  return new SqlResponseStore(driver, settings, now);
}
