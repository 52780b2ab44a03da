/**
 * What each face publishes in the provider manifest: its endpoint format, where it sits under
 * `public_url`, and the capabilities its translator carries upstream (a model's claims are cut
 * to this list per face — a claim holds at that endpoint or is not made there).
 *
 * @module
 */
import type { FaceName } from "./face.ts";

/** One face's manifest endpoint description. */
export interface FaceManifest {
  /** The manifest's endpoint format id. */
  readonly format: string;
  /** Path below `public_url` (`/v1` for OpenAI, root for the others). */
  readonly path: string;
  /** Capabilities this face carries. */
  readonly capabilities: readonly string[];
}

/** What every face carries: chat, streamed, with a system prompt, tools native and Hermes. */
const CHAT_BASICS = ["chat", "streaming", "system_prompt", "tools_native", "tools_hermes"];

/** Every `tool_choice` form. */
const TOOL_CHOICE = [
  "tool_choice_auto",
  "tool_choice_any",
  "tool_choice_none",
  "tool_choice_named",
];

/** What the OpenAI face carries; the Responses face carries all of it but `seed`. */
const OPENAI_WIRE = [
  ...CHAT_BASICS,
  ...TOOL_CHOICE,
  "parallel_tool_use",
  "response_format_json_object",
  "response_format_json_schema",
  "reasoning_effort",
  "temperature",
  "seed",
  "response_size",
  "prompt_cache_key",
  "image_input",
];

/**
 * The faces in the order a manifest lists them. The Responses face is not listed yet: no manifest
 * consumer reads its format id.
 */
export const FACE_NAMES: readonly FaceName[] = ["openai", "anthropic", "ollama"];

/** Every face's manifest description: the one table config builds each manifest from. */
export const FACE_MANIFESTS: Readonly<Record<FaceName, FaceManifest>> = {
  openai: {
    format: "openai-chat",
    path: "/v1",
    capabilities: OPENAI_WIRE,
  },
  anthropic: {
    format: "anthropic-compat",
    path: "",
    capabilities: [
      ...CHAT_BASICS,
      ...TOOL_CHOICE,
      "temperature",
      "response_size",
      "image_input",
    ],
  },
  ollama: {
    format: "ollama",
    path: "",
    capabilities: [
      ...CHAT_BASICS,
      "temperature",
      "response_size",
      "image_input",
      "response_format_json_object",
      "response_format_json_schema",
    ],
  },
  responses: {
    format: "openai-responses",
    path: "/v1",
    capabilities: OPENAI_WIRE.filter((c) => c !== "seed"),
  },
};

/** The endpoint URL of a face under `publicUrl` (trailing `/` of the URL dropped). */
export function faceEndpointUrl(face: FaceName, publicUrl: string): string {
  return publicUrl.replace(/\/+$/, "") + FACE_MANIFESTS[face].path;
}
