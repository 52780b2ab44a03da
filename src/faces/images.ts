/**
 * Images carried to the upstream as OpenAI `image_url` parts: Anthropic image blocks and Ollama
 * raw base64 `images` both become URLs (data URLs for inline bytes).
 *
 * @module
 */
import { FaceError } from "./face.ts";
import { isJsonObject, str } from "./json_narrow.ts";

/**
 * The media type of base64 image bytes, sniffed from their magic numbers: PNG, JPEG, GIF or
 * WebP; anything else is reported as PNG (what Ollama's own clients send most).
 */
export function sniffImageMediaType(base64: string): string {
  let head: string;
  try {
    head = atob(base64.slice(0, 16));
  } catch {
    return "image/png";
  }
  if (head.startsWith("\x89PNG")) return "image/png";
  if (head.startsWith("\xff\xd8\xff")) return "image/jpeg";
  if (head.startsWith("GIF8")) return "image/gif";
  if (head.startsWith("RIFF") && head.slice(8, 12) === "WEBP") return "image/webp";
  return "image/png";
}

/** An Ollama `images[]` entry as a URL: `data:` URLs kept, raw base64 wrapped with its sniffed type. */
export function ollamaImageUrl(image: string): string {
  if (image.startsWith("data:")) return image;
  return `data:${sniffImageMediaType(image)};base64,${image}`;
}

/**
 * An Anthropic image block's `source` as a URL: `base64` → data URL, `url` → the URL. Any other
 * source (e.g. `file`) cannot be carried: FaceError 400 naming `path`.
 */
export function anthropicImageUrl(source: unknown, path: string): string {
  if (!isJsonObject(source)) throw new FaceError(400, `${path}.source: Field required`);
  const type = str(source.type);
  if (type === "base64") {
    const mediaType = str(source.media_type);
    const data = str(source.data);
    if (!mediaType) throw new FaceError(400, `${path}.source.media_type: Field required`);
    if (!data) throw new FaceError(400, `${path}.source.data: Field required`);
    return `data:${mediaType};base64,${data}`;
  }
  if (type === "url") {
    const url = str(source.url);
    if (!url) throw new FaceError(400, `${path}.source.url: Field required`);
    return url;
  }
  throw new FaceError(
    400,
    `${path}.source.type: image source type '${
      type ?? String(source.type)
    }' is not supported (use base64 or url)`,
  );
}
