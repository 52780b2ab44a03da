/**
 * The serving side of the response store (ADR 0028): the keeper the gateway holds (the store
 * opened on the usage store's database when `responses.store` is on), the Responses face's intake
 * step that continues a conversation (`previous_response_id`: the earlier input and output go before this
 * request's input), the ticket that keeps the answer before the client gets its terminal event,
 * and `GET`/`DELETE /v1/responses/{id}`.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { keptEcho } from "./responses_request.ts";
import { openaiErrorBody } from "../faces/errors.ts";
import type { JsonObject } from "../core/json.ts";
import type { FaceIntake, FaceRequest } from "../faces/face.ts";
import type { Logger } from "../log.ts";
import { openResponseStore, type ResponsesSettings, type ResponseStore } from "./response_store.ts";
import type { NormalizedUsageStoreConfig } from "../usage/config.ts";
import { jsonResponse, Refusal } from "../proxy/errors.ts";
import { utf8Length } from "../faces/utf8.ts";
import { customerKeyId, type IntakeContext, requestIdOf } from "../proxy/intake.ts";

/** The route whose requests may be kept. */
const RESPONSES_ROUTE = "/v1/responses";

/** Holds the open response store while `responses.store` is on (one per gateway). */
export class ResponseKeeper {
  readonly #logger: Logger;
  /** The clock kept responses are stamped and expired by (epoch ms). */
  readonly now: () => number;
  #store: Promise<ResponseStore | undefined> | undefined;
  #identity = "";

  /** `now`: the clock kept responses are stamped and expired by (epoch ms). */
  constructor(logger: Logger, now: () => number) {
    this.#logger = logger;
    this.now = now;
  }

  /** Whether responses are kept (the store may still be opening). */
  get enabled(): boolean {
    return this.#store !== undefined;
  }

  /** The store, once open; undefined when it could not be opened. */
  store(): Promise<ResponseStore | undefined> {
    return this.#store ?? Promise.resolve(undefined);
  }

  /** Follows the config: opens, reopens or closes the store. */
  apply(settings: ResponsesSettings, usage: NormalizedUsageStoreConfig | undefined): void {
    const on = settings.store && usage !== undefined && usage.backend !== "jsonlog";
    const identity = on ? JSON.stringify([settings, usage]) : "";
    if (identity === this.#identity) return;
    this.#identity = identity;
    const old = this.#store;
    this.#store = on ? this.#open(usage, settings) : undefined;
    old?.then((s) => s?.close()).catch(() => {});
  }

  async #open(
    usage: NormalizedUsageStoreConfig,
    settings: ResponsesSettings,
  ): Promise<ResponseStore | undefined> {
    try {
      return await openResponseStore(usage, settings, this.now);
    } catch (err) {
      this.#logger.error("response_store_open_failed", { error: errorMessage(err) });
      return undefined;
    }
  }

  /** Closes the store. */
  async close(): Promise<void> {
    const old = this.#store;
    this.#store = undefined;
    this.#identity = "";
    await (await old)?.close();
  }
}

/** What the Responses face's intake step needs of the gateway (a Gateway is one). */
export interface ConversationContext {
  /** The response keeper; absent in contexts that keep nothing. */
  readonly responses?: ResponseKeeper;
  /** The gateway's logger. */
  readonly logger: Logger;
}

/** What `GET`/`DELETE /v1/responses/{id}` need of the gateway. */
export interface KeepContext extends IntakeContext, ConversationContext {}

/** One request's promise to keep its answer: the conversation so far, and where it goes. */
export class KeepTicket {
  /**
   * @param store where the answer is kept
   * @param apiKeyId the customer key id that will own it
   * @param input this turn's own input items
   * @param previousId the response this turn continues, if any
   * @param logger says when a write fails (the client still gets its answer)
   * @param now epoch-ms clock
   */
  constructor(
    readonly store: ResponseStore,
    readonly apiKeyId: string,
    readonly input: unknown[],
    readonly previousId: string | undefined,
    readonly logger: Logger,
    readonly now: () => number,
  ) {}

  /** Keeps a `completed` or `incomplete` response object; anything else is let go. */
  async keep(response: JsonObject | undefined): Promise<void> {
    if (response === undefined || typeof response.id !== "string") return;
    if (response.status !== "completed" && response.status !== "incomplete") return;
    try {
      await this.store.put({
        id: response.id,
        apiKeyId: this.apiKeyId,
        createdMs: this.now(),
        input: this.input,
        ...(this.previousId !== undefined ? { previousId: this.previousId } : {}),
        response,
      });
    } catch (err) {
      this.logger.warn("response_store_write_failed", {
        response_id: response.id,
        error: errorMessage(err),
      });
    }
  }
}

/** A Responses `input` as a list of items (a string is one user message). */
function inputItems(input: unknown): unknown[] {
  if (typeof input === "string") return [{ type: "message", role: "user", content: input }];
  return Array.isArray(input) ? input : [];
}

/**
 * The Responses face's intake step while responses are kept: with `previous_response_id`, the
 * kept conversation (its input, then its output) goes before this request's input — an unknown
 * id, or another key's, is refused (400 `previous_response_not_found`); unless the request says
 * `store: false`, the result carries a ticket to keep the answer, and in `echo` what the
 * response says of it. Otherwise (another route, nothing kept) the body itself, at once.
 */
export function continueConversation(
  ctx: ConversationContext,
  req: FaceRequest,
  body: JsonObject,
): FaceIntake | Promise<FaceIntake> {
  const keeper = ctx.responses;
  if (req.endpoint !== RESPONSES_ROUTE || keeper === undefined || !keeper.enabled) {
    return { body };
  }
  return withStore(ctx, keeper, req, body);
}

async function withStore(
  ctx: ConversationContext,
  keeper: ResponseKeeper,
  req: FaceRequest,
  body: JsonObject,
): Promise<FaceIntake> {
  const store = await keeper.store();
  if (store === undefined) return { body };
  const apiKeyId = req.apiKeyId;
  const previous = body.previous_response_id;
  const input = inputItems(body.input);
  let out = body;
  if (previous !== undefined && previous !== null) {
    if (typeof previous !== "string" || previous === "") {
      throw new Refusal(
        400,
        "invalid_request_error",
        "previous_response_id: must be a response id string",
        "bad_request",
      );
    }
    const kept = await store.conversation(apiKeyId, previous);
    if (!kept.found) {
      const why = kept.missing === previous
        ? `no response '${previous}' found for this key`
        : `the conversation's earlier response '${kept.missing}' is no longer kept`;
      throw new Refusal(
        400,
        "invalid_request_error",
        `previous_response_id: ${why}`,
        "previous_response_not_found",
        "previous_response_not_found",
      );
    }
    out = { ...body, input: [...kept.items, ...input] as JsonObject[] };
    delete out.previous_response_id;
  }
  const keep = body.store !== false;
  if (keep) await withinLimits(store, apiKeyId, input);
  const link = typeof previous === "string" ? previous : undefined;
  const echo = keptEcho({ store: keep, previous: link });
  if (!keep) return { body: out, echo };
  const ticket = new KeepTicket(store, apiKeyId, input, link, ctx.logger, keeper.now);
  return { body: out, echo, ticket };
}

/**
 * Refuses (400, before anything is forwarded) a turn whose own input alone is over a byte cap
 * of the store: one response's (`max_response_bytes`), or what its key keeps in all
 * (`max_bytes_per_key`). The output is not known yet; a response that ends up over a cap with
 * it is not kept (logged), and the client still gets its answer.
 */
async function withinLimits(store: ResponseStore, apiKeyId: string, input: unknown[]) {
  const { max_response_bytes, max_bytes_per_key } = store.settings;
  const bytes = utf8Length(JSON.stringify(input));
  const hint = "; send store: false to have it answered and not kept";
  if (bytes > max_response_bytes) {
    throw storeLimit(
      `input: ${bytes} bytes, over the ${max_response_bytes} a kept response may hold ` +
        `(responses.max_response_bytes)${hint}`,
    );
  }
  const kept = await store.keptBytes(apiKeyId);
  if (kept + bytes > max_bytes_per_key) {
    throw storeLimit(
      `input: ${bytes} bytes with the ${kept} this key keeps already is over the ` +
        `${max_bytes_per_key} a key may keep (responses.max_bytes_per_key); delete kept ` +
        `responses (DELETE /v1/responses/{id}) or wait for them to expire${hint}`,
    );
  }
}

function storeLimit(message: string): Refusal {
  return new Refusal(
    400,
    "invalid_request_error",
    message,
    "response_store_full",
    "response_store_full",
  );
}

/** `GET` or `DELETE /v1/responses/{id}` for the key that owns it; 404 for anyone else. */
export async function keptResponseRoute(
  ctx: KeepContext,
  req: Request,
  id: string,
): Promise<Response> {
  const requestId = requestIdOf(req.headers, Date.now());
  let apiKeyId: string;
  try {
    apiKeyId = await customerKeyId(ctx, req.headers);
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    return jsonResponse(err.status, openaiErrorBody(err.type, err.message), requestId);
  }
  const store = await ctx.responses?.store();
  if (store !== undefined) {
    if (req.method === "DELETE") {
      if (await store.delete(apiKeyId, id)) {
        return jsonResponse(200, { id, object: "response.deleted", deleted: true }, requestId);
      }
    } else {
      const kept = await store.get(apiKeyId, id);
      if (kept !== undefined) return jsonResponse(200, kept.response, requestId);
    }
  }
  const message = store === undefined
    ? `No response found with id '${id}' (this gateway keeps no responses: set responses.store)`
    : `No response found with id '${id}'`;
  const error = { ...openaiErrorBody("invalid_request_error", message).error };
  return jsonResponse(404, { error: { ...error, code: "response_not_found" } }, requestId);
}
