/**
 * What the Ollama face answers itself, without a node: `GET /` (`Ollama is running`, the probe
 * the `ollama` CLI and other tools use), `/api/show` from the inventory, and the load / unload
 * requests (`/api/generate` with an empty prompt, `/api/chat` with no messages), which an Ollama
 * server answers at once with `done_reason: "load"` or `"unload"`. Skeid loads nothing: the
 * nodes keep their models resident, so there is nothing to do, nothing to forward and nothing
 * to bill (no usage event).
 *
 * @module
 */
import { type InboundRequest, withBody } from "../edge/inbound_request.ts";
import type { JsonObject } from "./face.ts";
import type { ListedModel } from "../core/types.ts";
import { isJsonObject, parseJsonObject, str } from "./json_narrow.ts";
import { isoAt } from "./ollama_answer.ts";

/** The body of `GET /`, as an Ollama server answers it. */
export const OLLAMA_ROOT_TEXT = "Ollama is running";

/** `GET /` and `HEAD /`: the text Ollama's probes look for. */
export function ollamaRootResponse(): Response {
  return new Response(OLLAMA_ROOT_TEXT, {
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/** Load requests are tiny; a body longer than this is a real request and is not parsed twice. */
const LOAD_BODY_MAX = 4096;

const decoder = new TextDecoder();

/** Whether `keep_alive` asks to unload: 0, or a duration string of zero (`"0"`, `"0s"`, `"0m"`). */
function isUnload(keepAlive: unknown): boolean {
  if (keepAlive === 0) return true;
  return typeof keepAlive === "string" && /^\s*0+(\.0+)?\s*[a-z]*\s*$/i.test(keepAlive);
}

/**
 * The local answer to a load or unload request on `endpoint` (`/api/generate` or `/api/chat`),
 * or undefined when `body` is not one (it is then proxied as usual). A request is a load when
 * it names a model and has nothing to answer: generate without prompt, images or suffix, chat
 * without messages.
 */
export function ollamaLoadAnswer(
  endpoint: string,
  body: JsonObject,
  nowMs: number,
): JsonObject | undefined {
  const model = str(body.model);
  if (!model) return undefined;
  if (endpoint === "/api/generate") {
    const images = body.images;
    if (str(body.prompt) || str(body.suffix) || (Array.isArray(images) && images.length > 0)) {
      return undefined;
    }
    if (body.prompt !== undefined && body.prompt !== null && typeof body.prompt !== "string") {
      return undefined;
    }
  } else if (endpoint === "/api/chat") {
    const messages = body.messages;
    if (messages !== undefined && messages !== null) {
      if (!Array.isArray(messages) || messages.length > 0) return undefined;
    }
  } else return undefined;
  const out: JsonObject = { model, created_at: isoAt(nowMs) };
  if (endpoint === "/api/generate") out.response = "";
  else out.message = { role: "assistant", content: "" };
  out.done_reason = isUnload(body.keep_alive) ? "unload" : "load";
  out.done = true;
  return out;
}

/** Whether a request for `model` by customer key `keyId` has a node that could serve it. */
export type Servable = (model: string, keyId: string) => boolean;

/**
 * Wraps the proxy handler of `/api/generate` or `/api/chat`: a load or unload request for a
 * model some node could serve is answered here (no node call, no usage event); anything else —
 * a load of a model nothing serves included, which then gets the answer any request for that
 * model gets — goes to `handle` unchanged. The wrapper takes the request's customer key id.
 */
export function withOllamaLoad(
  endpoint: string,
  handle: (req: InboundRequest) => Promise<Response>,
  now: () => number,
  servable: Servable,
): ((req: InboundRequest, keyId: string) => Promise<Response>) | undefined {
  if (endpoint !== "/api/generate" && endpoint !== "/api/chat") return undefined;
  return async (req: InboundRequest, keyId: string) => {
    const length = Number(req.headers.get("content-length") ?? NaN);
    if (!(length <= LOAD_BODY_MAX) || req.body === null) return handle(req);
    const bytes = await req.bytes();
    const body = parseJsonObject(decoder.decode(bytes));
    const answer = body && ollamaLoadAnswer(endpoint, body, now());
    if (answer !== undefined && servable(String(answer.model), keyId)) {
      return new Response(JSON.stringify(answer) + "\n", {
        headers: { "content-type": "application/json; charset=utf-8" },
      });
    }
    // The signal is passed on: the copy would otherwise keep one that never aborts.
    return handle(withBody(req, bytes));
  };
}

/** The model `/api/show` asks about: `model`, or the older `name`. */
export function showModelName(body: unknown): string | undefined {
  if (!isJsonObject(body)) return undefined;
  return str(body.model) || str(body.name) || undefined;
}

/**
 * `/api/show` for a listed model (a node model or an alias), answered from the inventory: Skeid
 * knows no weights, template or parameters, so those are empty and the details say `unknown`;
 * `capabilities` are what the chat API carries for every model (`completion`, `tools`).
 */
export function showBody(listed: ListedModel, nowMs: number): JsonObject {
  const family = listed.engine || "openaibase";
  return {
    modelfile: "",
    parameters: "",
    template: "",
    details: {
      parent_model: "",
      format: "",
      family,
      families: [family],
      parameter_size: "unknown",
      quantization_level: "unknown",
    },
    model_info: { "general.architecture": family },
    capabilities: ["completion", "tools"],
    modified_at: isoAt(nowMs),
  };
}

/**
 * The `/api/show` answer for a request `body` over the models the caller may use: the model's
 * details, 400 `{"error"}` without a model name, 404 `{"error"}` for a model not listed.
 */
export function showResponse(
  body: unknown,
  models: readonly ListedModel[],
  nowMs: number,
): Response {
  const name = showModelName(body);
  if (name === undefined) return Response.json({ error: "model: Field required" }, { status: 400 });
  const listed = models.find((m) => m.model === name);
  if (listed === undefined) {
    return Response.json({ error: `model '${name}' not found` }, { status: 404 });
  }
  return Response.json(showBody(listed, nowMs));
}
