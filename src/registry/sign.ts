/**
 * Signing and verifying registry snapshots (ADR 0019): `sha256=` plus the hex HMAC-SHA256 of the
 * exact response body, through Web Crypto. `generated_at` and `ttl` sit inside the signed body,
 * so a snapshot's age cannot be changed without breaking its signature.
 *
 * @module
 */
import { timingSafeEqual } from "../admin/auth.ts";
import { MIN_SECRET_BYTES } from "../config/registry.ts";

/** The response header carrying the signature. */
export const SIGNATURE_HEADER = "X-Skeid-Registry-Signature";

/** The snapshot schema this code writes and accepts. */
export const SCHEMA_VERSION = 1;

/** The shortest signing secret either side accepts: 32 bytes, the HMAC-SHA256 output size. */
export { MIN_SECRET_BYTES };

const encoder = new TextEncoder();

/** Bytes of a body given as text (UTF-8) or already as bytes. */
function bytesOf(body: string | Uint8Array): Uint8Array<ArrayBuffer> {
  if (typeof body === "string") return encoder.encode(body);
  return new Uint8Array(body);
}

/** Hex of bytes, lowercase. */
function hex(bytes: ArrayBuffer): string {
  let out = "";
  for (const b of new Uint8Array(bytes)) out += b.toString(16).padStart(2, "0");
  return out;
}

/** `sha256=<hex HMAC-SHA256(body, secret)>`. */
export async function sign(body: string | Uint8Array, secret: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return `sha256=${hex(await crypto.subtle.sign("HMAC", key, bytesOf(body)))}`;
}

/**
 * Whether `header` is the signature of these exact bytes under `secret`. The header is trimmed;
 * the comparison takes the same time wherever the first difference is, so a caller cannot find
 * the signature one character at a time. A missing header or an empty secret never verifies.
 */
export async function verify(
  body: string | Uint8Array,
  header: string | null | undefined,
  secret: string,
): Promise<boolean> {
  if (header === null || header === undefined || secret === "") return false;
  const want = encoder.encode(await sign(body, secret));
  return timingSafeEqual(encoder.encode(header.trim()), want);
}
