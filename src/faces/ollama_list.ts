/**
 * Bodies of the Ollama face's listing routes: `/api/tags`, `/api/ps`, `/api/version`.
 *
 * @module
 */
import type { JsonObject } from "./face.ts";
import type { ListedModel } from "../core/types.ts";
import { isoAt } from "./ollama_answer.ts";

/**
 * The Ollama server version `/api/version` reports. Clients gate features on it (Codex `--oss`
 * refuses anything older than 0.13.4); why this one: ADR 0022.
 */
export const OLLAMA_VERSION = "0.13.5";

/** `/api/tags`: the listed models (the same names as `/v1/models`), `modified_at` = now. */
export function tagsBody(models: readonly ListedModel[], nowMs: number): JsonObject {
  const modifiedAt = isoAt(nowMs);
  return {
    models: models.map((m) => ({
      name: m.model,
      model: m.model,
      modified_at: modifiedAt,
      size: 0,
      digest: "",
      details: {
        family: m.engine || "openaibase",
        parameter_size: "unknown",
        quantization_level: "unknown",
      },
    })),
  };
}

/** `/api/ps`: nothing is loaded by Skeid itself. */
export function psBody(): JsonObject {
  return { models: [] };
}

/** `/api/version`. */
export function versionBody(): JsonObject {
  return { version: OLLAMA_VERSION };
}
