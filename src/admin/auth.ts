/**
 * Admin bearer authentication. The admin key is compared in constant time: both sides are
 * hashed with SHA-256 and the two digests compared byte by byte without an early exit, so
 * neither the admin key's content nor its length leaks through timing.
 *
 * @module
 */

const encoder = new TextEncoder();

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization);
  return m ? m[1] : undefined;
}

/** Whether two equal-length byte arrays are equal, in time independent of where they differ. */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

/** Whether a presented secret equals the expected one (SHA-256 both, constant-time compare). */
export async function secretMatches(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(presented)),
    crypto.subtle.digest("SHA-256", encoder.encode(expected)),
  ]);
  return timingSafeEqual(new Uint8Array(a), new Uint8Array(b));
}
