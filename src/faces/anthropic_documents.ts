/**
 * Anthropic `document` blocks carried as OpenAI chat content parts.
 *
 * Plain text (a `text` source, base64 `text/plain`, or a `content` source of text blocks)
 * becomes a `text` part; a base64 PDF becomes a `file` part whose `file_data` is a data URL
 * (the chat API's own way to carry a file inline). A URL source cannot be carried: the chat
 * API's `file` part takes inline data or an uploaded file id, never a URL, and the gateway
 * does not fetch URLs on a client's behalf; that is a 400 naming the source.
 *
 * @module
 */
import { FaceError, type JsonObject } from "./face.ts";
import { isJsonObject, str } from "./json_narrow.ts";

/** The text of base64 bytes decoded as UTF-8; FaceError 400 naming `path` when not base64. */
function decodedText(data: string, path: string): string {
  try {
    const bin = atob(data);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new TextDecoder().decode(bytes);
  } catch {
    throw new FaceError(400, `${path}.source.data: must be base64`);
  }
}

/** A text part, titled when the document has a title (the model sees which document it is). */
function textPart(block: JsonObject, text: string): JsonObject {
  const title = str(block.title);
  return { type: "text", text: title ? `${title}\n\n${text}` : text };
}

/** One `document` block at `path` → the OpenAI content part that carries it. */
export function documentPart(block: JsonObject, path: string): JsonObject {
  const source = block.source;
  if (!isJsonObject(source)) throw new FaceError(400, `${path}.source: Field required`);
  const type = str(source.type);
  if (type === "text") return textPart(block, str(source.data) ?? "");
  if (type === "content") {
    const content = source.content;
    const text = typeof content === "string"
      ? content
      : Array.isArray(content)
      ? content.map((b) => (isJsonObject(b) ? str(b.text) ?? "" : "")).join("\n")
      : "";
    return textPart(block, text);
  }
  if (type === "base64") {
    const mediaType = str(source.media_type);
    const data = str(source.data);
    if (!mediaType) throw new FaceError(400, `${path}.source.media_type: Field required`);
    if (!data) throw new FaceError(400, `${path}.source.data: Field required`);
    if (mediaType.startsWith("text/")) return textPart(block, decodedText(data, path));
    const filename = str(block.title) ||
      (mediaType === "application/pdf" ? "document.pdf" : "document");
    return { type: "file", file: { filename, file_data: `data:${mediaType};base64,${data}` } };
  }
  if (type === "url") {
    throw new FaceError(
      400,
      `${path}.source: a document by URL cannot be carried to an OpenAI-compatible model ` +
        "(the chat API takes files inline only); send it as a base64 source",
    );
  }
  throw new FaceError(
    400,
    `${path}.source.type: document source type '${
      type ?? String(source.type)
    }' is not supported (use text, content, base64 or url)`,
  );
}
