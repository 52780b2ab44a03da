/**
 * The shape of an issued key (ADR 0029): `sk-skeid-<public id>-<secret><checksum>`. The public id
 * (`ik_` + 16 hex) is what identifies the key everywhere (usage events, logs, limits, budgets,
 * metrics, the admin API); the secret is 160 random bits (40 hex); the checksum (8 hex, CRC-32
 * of everything before it) lets a malformed, truncated or mistyped key be refused without any
 * lookup. A key in the `sk-skeid-` shape is judged only as an issued key.
 *
 * @module
 */

/** What every issued key starts with. */
export const ISSUED_KEY_PREFIX = "sk-skeid-";

const ISSUED_KEY = /^sk-skeid-(ik_[0-9a-f]{16})-([0-9a-f]{40})([0-9a-f]{8})$/;
const PUBLIC_ID = /^ik_[0-9a-f]{16}$/;

/** An issued key taken apart. */
export interface ParsedIssuedKey {
  /** The public id (`ik_` + 16 hex). */
  id: string;
  /** The secret part (40 hex), without the checksum. */
  secret: string;
}

/** Whether a presented customer key is in the issued-key shape (then judged only as one). */
export function isIssuedKeyShape(key: string): boolean {
  return key.startsWith(ISSUED_KEY_PREFIX);
}

/** Whether a string is a public id (`ik_` + 16 hex). */
export function isPublicId(id: string): boolean {
  return id.length === 19 && PUBLIC_ID.test(id);
}

/** The public id and secret of a well-formed key with a matching checksum, else undefined. */
export function parseIssuedKey(key: string): ParsedIssuedKey | undefined {
  const m = ISSUED_KEY.exec(key);
  if (m === null) return undefined;
  const body = key.slice(0, key.length - 8);
  if (checksum(body) !== m[3]) return undefined;
  return { id: m[1], secret: m[2] };
}

/** The full key of a public id and a secret. */
export function formatIssuedKey(id: string, secret: string): string {
  const body = `${ISSUED_KEY_PREFIX}${id}-${secret}`;
  return body + checksum(body);
}

/** `n` random bytes as lowercase hex (Web Crypto's generator). */
export function randomHex(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  let hex = "";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/** A new public id: `ik_` + 64 random bits. */
export function newPublicId(): string {
  return `ik_${randomHex(8)}`;
}

/** A new secret: 160 random bits. */
export function newSecret(): string {
  return randomHex(20);
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (IEEE) of an ASCII string, as 8 hex: a typo check, not a secret. */
export function checksum(text: string): string {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) {
    crc = CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff] ^ (crc >>> 8);
  }
  return ((crc ^ 0xffffffff) >>> 0).toString(16).padStart(8, "0");
}
