/**
 * The answer to a route no face serves: 404 in the error shape of the face its prefix belongs
 * to (`/v1/messages/*` Anthropic's, other `/v1/*` OpenAI's, `/api/*` Ollama's), so a client
 * that calls a route Skeid does not have reads a clear error instead of failing to parse text.
 * Other paths get a plain `Not Found`.
 *
 * @module
 */
import type { Face, FaceName } from "./face.ts";
import { faceNameFor } from "./index.ts";

/** The 404 answer to `method path`; `faces` gives the face of each name. */
export function notFoundResponse(
  method: string,
  path: string,
  faces: Readonly<Record<FaceName, Face>>,
): Response {
  if (!path.startsWith("/v1/") && !path.startsWith("/api/")) {
    return new Response("Not Found", { status: 404 });
  }
  const face = faces[faceNameFor(path)];
  const message = face.name === "ollama"
    ? `404 page not found: ${method} ${path}`
    : `Invalid URL (${method} ${path})`;
  return new Response(JSON.stringify(face.errorBody(404, "invalid_request_error", message)), {
    status: 404,
    headers: { "content-type": "application/json" },
  });
}
