/**
 * Builds the process's key broker from the environment: OpenBao when OPENBAO_ROLE_ID and
 * OPENBAO_SECRET_ID are set, nothing otherwise. A broker that cannot log in at start is not
 * built (warned): nodes then fall back to `api_key_env`.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type { EnvReader } from "../core/env.ts";
import type { Logger } from "../log.ts";
import { CachingKeyBroker } from "./broker.ts";
import { openBaoSettingsFromEnv } from "./openbao_env.ts";
import { OpenBao, type Schedule } from "./openbao.ts";

/** Settings of {@link createKeyBroker}; times in milliseconds except `renewSecs`. */
export interface KeyBrokerOptions {
  /** Epoch milliseconds (default `Date.now`): cache and token expiry. */
  now?: () => number;
  /** Positive cache lifetime (default 300 000; 0 disables). */
  cacheTtlMs?: number;
  /** Negative cache lifetime (default 5 000; 0 disables). */
  negativeCacheTtlMs?: number;
  /** Token renewal period in seconds (default 300; below 1 → 60). */
  renewSecs?: number;
  /** Bound on one OpenBao exchange (default 10 000). */
  timeoutMs?: number;
  /**
   * Called once when the token expired and could not be renewed: the process must stop
   * (non-zero exit) so its supervisor restarts it and it logs in again. Without it the failure
   * is only logged and every resolution fails from then on.
   */
  onFatal?: (error: Error) => void;
  /** The renewal timer (default: an unref'd `setInterval`); tests inject a manual one. */
  schedule?: Schedule;
}

/** The OpenBao-backed broker: the caching broker plus the session's LIST helper. */
export class OpenBaoKeyBroker extends CachingKeyBroker {
  readonly #session: OpenBao;

  /** Wraps a logged-in session; `close()` closes the session too. */
  constructor(session: OpenBao, opts: ConstructorParameters<typeof CachingKeyBroker>[1] = {}) {
    super(session, opts);
    this.#session = session;
  }

  /** Names under an API path (`secret/metadata/skeid/remote`); empty on failure. Not for the
   * request path. */
  listSecrets(path: string): Promise<string[]> {
    return this.#session.listSecrets(path);
  }
}

/**
 * The key broker the environment asks for: undefined when OPENBAO_ROLE_ID or OPENBAO_SECRET_ID
 * is empty, or when the initial AppRole login fails (warned as `Failed to initialize OpenBao
 * KeyBroker: …`). On success the renewal timer is running; call `close()` at shutdown.
 */
export async function createKeyBroker(
  env: EnvReader,
  logger: Logger,
  opts: KeyBrokerOptions = {},
): Promise<OpenBaoKeyBroker | undefined> {
  const settings = openBaoSettingsFromEnv(env);
  if (settings === undefined) return undefined;
  if (!settings.verifySsl && settings.addr.toLowerCase().startsWith("https:")) {
    logger.warn("openbao_verify_ssl_unsupported", {
      message: "OPENBAO_VERIFY_SSL is off, but Deno cannot skip certificate verification for " +
        "one client: the OpenBao certificate is still verified. Trust a self-signed vault with " +
        "OPENBAO_CACERT=<PEM file>, or start skeid with " +
        "--unsafely-ignore-certificate-errors=<vault host> (development only).",
    });
  }
  let session: OpenBao | undefined;
  try {
    let caCerts: string[] | undefined;
    if (settings.caCertFile !== undefined) {
      try {
        caCerts = [await Deno.readTextFile(settings.caCertFile)];
      } catch (err) {
        const why = err instanceof Error ? err.name : "unreadable";
        throw new Error(`OPENBAO_CACERT '${settings.caCertFile}' could not be read (${why})`);
      }
    }
    session = new OpenBao(settings, {
      logger,
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.renewSecs !== undefined ? { renewSecs: opts.renewSecs } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.onFatal ? { onFatal: opts.onFatal } : {}),
      ...(opts.schedule ? { schedule: opts.schedule } : {}),
      ...(caCerts ? { caCerts } : {}),
    });
    await session.login();
    session.startRenewal();
    logger.info("key_broker_ready", {
      openbao_addr: settings.addr,
      renew_secs: session.renewEveryMs / 1000,
    });
    return new OpenBaoKeyBroker(session, {
      logger,
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.cacheTtlMs !== undefined ? { cacheTtlMs: opts.cacheTtlMs } : {}),
      ...(opts.negativeCacheTtlMs !== undefined
        ? { negativeCacheTtlMs: opts.negativeCacheTtlMs }
        : {}),
    });
  } catch (err) {
    session?.close();
    const why = errorMessage(err);
    logger.warn("key_broker_init_failed", {
      message: `Failed to initialize OpenBao KeyBroker: ${why}`,
    });
    return undefined;
  }
}
