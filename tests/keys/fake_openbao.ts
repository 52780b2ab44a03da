/**
 * A fake OpenBao for the key broker tests: AppRole login, renew-self, KV reads and LIST on
 * 127.0.0.1 (port 0), counting every call and remembering the tokens it saw.
 *
 * @module
 */

/** Calls the fake answered, per endpoint. */
export interface FakeCalls {
  login: number;
  renew: number;
  read: number;
  list: number;
}

/** A running fake OpenBao; change its fields between calls to steer the next answers. */
export interface FakeOpenBao {
  /** `http://127.0.0.1:<port>` */
  addr: string;
  calls: FakeCalls;
  /** API path below `/v1/` → the JSON a GET answers with. */
  secrets: Map<string, unknown>;
  /** API path below `/v1/` (no trailing `/`) → the names a LIST answers with. */
  listings: Map<string, string[]>;
  /** Status of the next logins / renewals / reads when not 200. */
  loginStatus: number;
  renewStatus: number;
  readStatus: number;
  /** `auth.ttl` handed out, in seconds. */
  ttl: number;
  /** The X-Vault-Token of every read and renewal, in order. */
  readTokens: string[];
  renewTokens: string[];
  /** Bodies the fake sent on failures, so tests can check none leaked. */
  readonly failureBody: string;
  /** Holds every read until the returned function is called. */
  holdReads(): () => void;
  /** Resolves once `n` reads have arrived (held or not). */
  readsArrived(n: number): Promise<void>;
  close(): Promise<void>;
}

/** The AppRole credentials the fake accepts. */
export const ROLE_ID = "role-7f3a";
/** The secret id the fake accepts. */
export const SECRET_ID = "secret-id-91c2e";

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** Starts a fake OpenBao; with `tls` (PEM certificate chain and key) it speaks HTTPS. */
export function startFakeOpenBao(tls?: { cert: string; key: string }): FakeOpenBao {
  const valid = new Set<string>();
  let issued = 0;
  let gate: Promise<void> | undefined;
  const arrivals: { n: number; resolve: () => void }[] = [];
  const failureBody = "vault-body-detail-must-not-leak";

  const fake: Omit<FakeOpenBao, "addr" | "close"> = {
    calls: { login: 0, renew: 0, read: 0, list: 0 },
    secrets: new Map(),
    listings: new Map(),
    loginStatus: 200,
    renewStatus: 200,
    readStatus: 200,
    ttl: 3600,
    readTokens: [],
    renewTokens: [],
    failureBody,
    holdReads() {
      let release!: () => void;
      gate = new Promise<void>((r) => release = r);
      return () => {
        gate = undefined;
        release();
      };
    },
    readsArrived(n: number) {
      if (fake.calls.read >= n) return Promise.resolve();
      return new Promise<void>((resolve) => arrivals.push({ n, resolve }));
    },
  };

  const handler = async (req: Request): Promise<Response> => {
    const path = new URL(req.url).pathname.replace(/^\/v1\//, "");
    const token = req.headers.get("x-vault-token") ?? "";
    if (req.method === "POST" && path === "auth/approle/login") {
      fake.calls.login++;
      const body = await req.json() as Record<string, unknown>;
      if (fake.loginStatus !== 200) return json(fake.loginStatus, { errors: [failureBody] });
      if (body.role_id !== ROLE_ID || body.secret_id !== SECRET_ID) {
        return json(400, { errors: [failureBody] });
      }
      const t = `s.login-${++issued}`;
      valid.add(t);
      return json(200, { auth: { client_token: t, ttl: fake.ttl } });
    }
    if (req.method === "POST" && path === "auth/token/renew-self") {
      fake.calls.renew++;
      fake.renewTokens.push(token);
      await req.body?.cancel();
      if (fake.renewStatus !== 200) return json(fake.renewStatus, { errors: [failureBody] });
      if (!valid.has(token)) return json(403, { errors: ["permission denied"] });
      const t = `s.api-${++issued}`;
      valid.add(t);
      return json(200, { auth: { client_token: t, ttl: fake.ttl } });
    }
    if (req.method === "GET") {
      fake.calls.read++;
      fake.readTokens.push(token);
      for (const a of arrivals.filter((a) => fake.calls.read >= a.n)) {
        arrivals.splice(arrivals.indexOf(a), 1);
        a.resolve();
      }
      if (gate) await gate;
      if (!valid.has(token)) return json(403, { errors: ["permission denied"] });
      if (fake.readStatus !== 200) return json(fake.readStatus, { errors: [failureBody] });
      const secret = fake.secrets.get(decodeURIComponent(path));
      return secret === undefined ? json(404, { errors: [] }) : json(200, secret);
    }
    if (req.method === "LIST") {
      fake.calls.list++;
      if (!valid.has(token)) return json(403, { errors: ["permission denied"] });
      const keys = fake.listings.get(path.replace(/\/$/, ""));
      return keys === undefined ? json(404, { errors: [] }) : json(200, { data: { keys } });
    }
    return json(405, { errors: ["unsupported"] });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {}, ...tls }, handler);
  return Object.assign(fake, {
    addr: `${tls ? "https" : "http"}://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  });
}

/** A KV v2 read answer carrying `apiKey`. */
export function kv2(apiKey: string): unknown {
  return { data: { data: { api_key: apiKey }, metadata: { version: 1 } } };
}

/** A KV v1 read answer carrying `apiKey`. */
export function kv1(apiKey: string): unknown {
  return { data: { api_key: apiKey } };
}

/** An injected clock: `now()` and `advance(ms)`. */
export function manualClock(
  start = 1_700_000_000_000,
): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

/** A renewal schedule the test drives: the tick, its period, and whether it was stopped. */
export function manualSchedule(): {
  schedule: (tick: () => void, everyMs: number) => () => void;
  tick(): void;
  everyMs: number | undefined;
  started: number;
  stopped: boolean;
} {
  let saved: (() => void) | undefined;
  const s = {
    schedule(tick: () => void, everyMs: number) {
      saved = tick;
      s.everyMs = everyMs;
      s.started++;
      return () => void (s.stopped = true);
    },
    tick() {
      saved?.();
    },
    everyMs: undefined as number | undefined,
    started: 0,
    stopped: false,
  };
  return s;
}

/** PEM files of a throwaway test CA and a server certificate for 127.0.0.1 signed by it. */
export interface TestPki {
  dir: string;
  caFile: string;
  cert: string;
  key: string;
}

/**
 * Makes a throwaway CA and a 127.0.0.1 server certificate with `openssl` in a temp dir;
 * undefined when openssl is not there. Remove `dir` afterwards.
 */
export async function makeTestPki(): Promise<TestPki | undefined> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-keys-pki-" });
  const run = async (args: string[]) => {
    const out = await new Deno.Command("openssl", {
      args,
      cwd: dir,
      stdout: "null",
      stderr: "piped",
    })
      .output();
    if (!out.success) {
      throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
    }
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  try {
    await run([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "1",
      "-subj",
      "/CN=skeid-test-ca",
    ]);
    await run(["req", ...ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1"]);
    await Deno.writeTextFile(
      `${dir}/srv.ext`,
      "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n" +
        "extendedKeyUsage=serverAuth\n",
    );
    await run([
      "x509",
      "-req",
      "-in",
      "srv.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "srv.pem",
      "-days",
      "1",
      "-extfile",
      "srv.ext",
    ]);
  } catch (err) {
    await Deno.remove(dir, { recursive: true });
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  return {
    dir,
    caFile: `${dir}/ca.pem`,
    cert: await Deno.readTextFile(`${dir}/srv.pem`),
    key: await Deno.readTextFile(`${dir}/srv.key`),
  };
}
