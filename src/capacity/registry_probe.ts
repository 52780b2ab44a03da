/**
 * The registry probe (`probe: registry`): when the node is another Skeid, what is in
 * flight there and what that process may admit already exists in its memory. This probe reads
 * the downstream's signed snapshot (`GET /skeid/registry/snapshot`) and turns it into the node's
 * capacity reading (ADR 0019).
 *
 * A snapshot is believed only when the answer is 2xx, its signature verifies over the exact body
 * with the secret from `secret_env`, its schema version is 1, it is not older than its own ttl,
 * not more than `max_skew_s` (default 5) in the future, and not older than the last snapshot
 * accepted (a replay). Otherwise — or when the secret or bearer variable is empty, or the secret
 * is shorter than 32 bytes — the probe forgets **its own** reading only, so a 429 backoff
 * recorded from a response survives a rejected snapshot.
 *
 * The bearer is the downstream's registry read key (`read_key_env`) when that is configured, and
 * its admin key (`admin_key_env`) only otherwise: with `read_key_env` set the admin key is never
 * sent, not even when the read key variable is empty. The block itself is validated at node add
 * (src/config/registry_probe_block.ts).
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type { CapacityProbe, ProbeContext } from "./probe.ts";
import { endpointUrl } from "./probe.ts";
import { normalizeTags } from "../core/tags.ts";
import { MIN_SECRET_BYTES, SCHEMA_VERSION, SIGNATURE_HEADER, verify } from "../registry/sign.ts";
import { readingFromSnapshot } from "../registry/reading.ts";
import { isJsonObject, parseJson } from "../core/json.ts";

/** The probe's states; each change is logged once. */
export type RegistryProbeState =
  | "accepted"
  | "unreachable"
  | "bad_signature"
  | "malformed"
  | "stale"
  | "future"
  | "replayed"
  | "missing_secret";

/** Default suffix of the snapshot URL, after the node URL minus its `/v1`. */
export const SNAPSHOT_SUFFIX = "/skeid/registry/snapshot";

/** Default `max_skew_s`: how far in the future a snapshot may claim to be, seconds. */
export const DEFAULT_MAX_SKEW_S = 5;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** A finite number from a JSON number or numeric string, else undefined. */
function numeric(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  if (typeof value === "string" && value.trim() !== "") {
    const n = Number(value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

/** Builds the registry probe of one node. */
export function registryProbe(ctx: ProbeContext): CapacityProbe & { readonly state?: string } {
  const cfg = ctx.config;
  const url = endpointUrl(ctx.node.url, cfg, SNAPSHOT_SUFFIX);
  const tags = normalizeTags(cfg.tags);
  const skew = numeric(cfg.max_skew_s) ?? DEFAULT_MAX_SKEW_S;
  const secretEnv = typeof cfg.secret_env === "string" ? cfg.secret_env : undefined;
  // The read key when one is configured, never falling back to the admin key (skeid #49).
  const keyEnvName = cfg.read_key_env !== undefined && cfg.read_key_env !== null
    ? "read_key_env"
    : "admin_key_env";
  const keyEnv = typeof cfg[keyEnvName] === "string" ? cfg[keyEnvName] as string : undefined;
  let state: RegistryProbeState | undefined;
  /** generated_at (seconds) of the last accepted snapshot; nothing older is believed after it. */
  let lastGeneratedAt: number | undefined;

  const reject = (next: RegistryProbeState, detail: string): void => {
    ctx.forget();
    state = next;
    ctx.enter(next, detail);
  };

  return {
    url,
    get state() {
      return state;
    },
    async poll() {
      const secret = secretEnv ? ctx.env(secretEnv) ?? "" : "";
      const bearer = keyEnv ? ctx.env(keyEnv) ?? "" : "";
      if (secret === "" || bearer === "") {
        return reject("missing_secret", `${keyEnvName} or secret_env is not set`);
      }
      // The downstream refuses to publish with a shorter secret, so nothing could verify.
      if (encoder.encode(secret).length < MIN_SECRET_BYTES) {
        return reject("missing_secret", `secret_env is shorter than ${MIN_SECRET_BYTES} bytes`);
      }

      let answer;
      try {
        answer = await ctx.get(url, { authorization: `Bearer ${bearer}` });
      } catch (err) {
        return reject("unreachable", errorMessage(err));
      }
      if (ctx.stopped) return;
      if (answer.status < 200 || answer.status > 299) {
        return reject("unreachable", `HTTP ${answer.status}`);
      }
      if (!(await verify(answer.body, answer.headers.get(SIGNATURE_HEADER), secret))) {
        return reject("bad_signature", "signature missing or not valid for this body");
      }

      const snapshot = parseJson(decoder.decode(answer.body));
      if (!isJsonObject(snapshot)) return reject("malformed", "body is not a JSON object");
      if (numeric(snapshot.version) !== SCHEMA_VERSION) {
        return reject("malformed", "unknown schema version");
      }
      const generatedAt = numeric(snapshot.generated_at);
      const ttl = numeric(snapshot.ttl);
      if (generatedAt === undefined || ttl === undefined || ttl <= 0) {
        return reject("malformed", "generated_at / ttl missing");
      }

      const now = ctx.now();
      const nowS = now / 1000;
      if (generatedAt > nowS + skew) {
        return reject("future", "generated_at is ahead of this clock by more than max_skew_s");
      }
      if (nowS - generatedAt > ttl) return reject("stale", "older than its ttl");
      if (lastGeneratedAt !== undefined && generatedAt < lastGeneratedAt) {
        return reject("replayed", "older than the last snapshot accepted");
      }

      lastGeneratedAt = generatedAt;
      const reading = readingFromSnapshot(snapshot, { tags, now });
      ctx.report({
        used: reading.used,
        limit: reading.limit,
        at: generatedAt * 1000,
        expires_at: (generatedAt + ttl) * 1000,
      });
      state = "accepted";
      ctx.enter("accepted");
    },
  };
}
