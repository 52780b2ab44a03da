/**
 * The client API faces: pick one by name (`faceFor`) or by route (`faceNameFor`).
 *
 * @module
 */
import type { Face, FaceName, FaceOptions } from "./face.ts";
import { AnthropicFace } from "./anthropic.ts";
import { OllamaFace } from "./ollama.ts";
import { OpenAIFace } from "./openai.ts";
import { ResponsesFace } from "../responses/responses_face.ts";

export * from "./face.ts";
export { AnthropicFace, countTokens } from "./anthropic.ts";
export { OllamaFace } from "./ollama.ts";
export { ResponsesFace } from "../responses/responses_face.ts";
export { modelsBody, OpenAIFace } from "./openai.ts";
export { OLLAMA_VERSION, psBody, tagsBody, versionBody } from "./ollama_list.ts";
export { anthropicErrorType, readUpstreamError } from "./errors.ts";
export { extractHermesToolCalls } from "./hermes.ts";
export { FACE_MANIFESTS, faceEndpointUrl } from "./face_manifest.ts";

/** A new face of `name`; `options.now` is its clock. */
export function faceFor(name: FaceName, options: FaceOptions = {}): Face {
  switch (name) {
    case "openai":
      return new OpenAIFace();
    case "anthropic":
      return new AnthropicFace(options);
    case "ollama":
      return new OllamaFace(options);
    case "responses":
      return new ResponsesFace(options);
  }
}

/**
 * The face that serves a client route: `/v1/messages…` Anthropic, `/api/…` Ollama,
 * `/v1/responses` Responses, else OpenAI.
 */
export function faceNameFor(route: string): FaceName {
  if (route === "/v1/messages" || route.startsWith("/v1/messages/")) return "anthropic";
  if (route.startsWith("/api/")) return "ollama";
  if (route === "/v1/responses") return "responses";
  return "openai";
}
