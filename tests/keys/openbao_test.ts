import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { createKeyBroker, type KeyBrokerOptions } from "../../src/keys/create.ts";
import { openBaoSettingsFromEnv, verifySslFromEnv } from "../../src/keys/openbao_env.ts";
import { encodedApiPath, keyFromPayload, kvPath, OpenBao } from "../../src/keys/openbao.ts";
import { type Logger, memoryLogger } from "../../src/log.ts";
import { until } from "../_helpers/poll.ts";
import {
  type FakeOpenBao,
  kv1,
  kv2,
  makeTestPki,
  manualClock,
  manualSchedule,
  ROLE_ID,
  SECRET_ID,
  startFakeOpenBao,
} from "./fake_openbao.ts";

const envOf = (vars: Record<string, string>) => (name: string) => vars[name];

function baoEnv(fake: FakeOpenBao, extra: Record<string, string> = {}) {
  return envOf({
    OPENBAO_ADDR: fake.addr + "/",
    OPENBAO_ROLE_ID: ROLE_ID,
    OPENBAO_SECRET_ID: SECRET_ID,
    ...extra,
  });
}

/** A broker on a fake OpenBao, a manual renewal timer, a log collector and a clock. */
async function setup(opts: KeyBrokerOptions = {}) {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const clock = manualClock();
  const timer = manualSchedule();
  const broker = await createKeyBroker(baoEnv(fake), logger, {
    now: clock.now,
    schedule: timer.schedule,
    ...opts,
  });
  assert(broker, "the broker was built");
  return {
    fake,
    logger,
    clock,
    timer,
    broker,
    async [Symbol.asyncDispose]() {
      await broker.close();
      await fake.close();
    },
  };
}

/** Every secret a log line must never carry. */
function assertNoSecrets(logger: { lines: unknown[] }, fake: FakeOpenBao, keys: string[]) {
  const text = JSON.stringify(logger.lines);
  for (const s of [...keys, ROLE_ID, SECRET_ID, fake.failureBody]) {
    assert(!text.includes(s), `a log line carries '${s}'`);
  }
  assert(!/s\.(login|api)-\d/.test(text), "a log line carries a vault token");
}

Deno.test("kvPath: the secret mount reads through secret/data/, other mounts as given", () => {
  assertEquals(kvPath("secret/skeid/remote/groq"), "secret/data/skeid/remote/groq");
  assertEquals(kvPath("/secret/skeid/remote/groq"), "secret/data/skeid/remote/groq");
  assertEquals(kvPath("kv/skeid/groq"), "kv/skeid/groq");
  assertEquals(kvPath("secrets/x"), "secrets/x");
  assertEquals(encodedApiPath("secret/data/a b/c?d"), "secret/data/a%20b/c%3Fd");
  assertEquals(encodedApiPath("secret/data/../sys/x"), undefined);
  assertEquals(encodedApiPath("secret/data//x"), undefined);
  assertEquals(encodedApiPath(kvPath("secret")), undefined);
  assertEquals(encodedApiPath("secret/metadata/skeid/", true), "secret/metadata/skeid");
});

Deno.test("keyFromPayload: data.data.api_key (KV v2), else data.api_key (KV v1)", () => {
  assertEquals(keyFromPayload(kv2("k2")), "k2");
  assertEquals(keyFromPayload(kv1("k1")), "k1");
  assertEquals(keyFromPayload({ data: { data: { other: 1 }, api_key: "k1" } }), "k1");
  assertEquals(keyFromPayload({ data: { data: { api_key: 42 } } }), undefined);
  assertEquals(keyFromPayload({ data: {} }), undefined);
  assertEquals(keyFromPayload("nope"), undefined);
});

Deno.test("env: OPENBAO_* settings; no role id or secret id means no broker", () => {
  assertEquals(openBaoSettingsFromEnv(envOf({ OPENBAO_ROLE_ID: "r" })), undefined);
  assertEquals(
    openBaoSettingsFromEnv(envOf({ OPENBAO_ROLE_ID: "r", OPENBAO_SECRET_ID: " " })),
    undefined,
  );
  assertEquals(openBaoSettingsFromEnv(envOf({ OPENBAO_ROLE_ID: "r", OPENBAO_SECRET_ID: "s" })), {
    addr: "http://127.0.0.1:8200",
    roleId: "r",
    secretId: "s",
    verifySsl: true,
  });
  assertEquals(
    openBaoSettingsFromEnv(envOf({
      OPENBAO_ROLE_ID: "r",
      OPENBAO_SECRET_ID: "s",
      OPENBAO_ADDR: "https://bao:8200//",
      OPENBAO_VERIFY_SSL: "Off",
      OPENBAO_CACERT: "/etc/ca.pem",
    })),
    {
      addr: "https://bao:8200",
      roleId: "r",
      secretId: "s",
      verifySsl: false,
      caCertFile: "/etc/ca.pem",
    },
  );
  for (const off of ["0", "false", "NO", " off "]) assertEquals(verifySslFromEnv(off), false, off);
  for (const on of [undefined, "1", "yes", "true", ""]) assertEquals(verifySslFromEnv(on), true);
});

Deno.test("createKeyBroker: no credentials → no broker and no call to OpenBao", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  assertEquals(await createKeyBroker(envOf({ OPENBAO_ADDR: fake.addr }), logger), undefined);
  assertEquals(
    await createKeyBroker(envOf({ OPENBAO_ADDR: fake.addr, OPENBAO_ROLE_ID: ROLE_ID }), logger),
    undefined,
  );
  assertEquals(fake.calls.login, 0);
  assertEquals(logger.lines, []);
  await fake.close();
});

Deno.test("createKeyBroker: a failed login warns and gives no broker, naming the status only", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const env = envOf({
    OPENBAO_ADDR: fake.addr,
    OPENBAO_ROLE_ID: ROLE_ID,
    OPENBAO_SECRET_ID: "wrong",
  });
  assertEquals(await createKeyBroker(env, logger), undefined);
  assertEquals(fake.calls.login, 1);
  const warned = logger.lines.find((l) => l.event === "key_broker_init_failed");
  assertEquals(
    warned?.message,
    "Failed to initialize OpenBao KeyBroker: OpenBao AppRole login failed: HTTP 400",
  );
  assertEquals(warned?.level, "warn");
  assert(!JSON.stringify(logger.lines).includes("wrong"), "not the secret id");
  assertNoSecrets(logger, fake, []);
  await fake.close();
});

Deno.test("createKeyBroker: a login answer without a token is a failed start", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  // Undefined TTL and a 200 without auth: simulate by pointing at the renew endpoint's shape.
  fake.loginStatus = 200;
  const broker = await createKeyBroker(baoEnv(fake), logger);
  assert(broker, "control: a good login builds a broker");
  await broker.close();
  await fake.close();

  const bare = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => Response.json({ auth: {} }),
  );
  const logger2 = memoryLogger();
  const env = envOf({
    OPENBAO_ADDR: `http://127.0.0.1:${bare.addr.port}`,
    OPENBAO_ROLE_ID: ROLE_ID,
    OPENBAO_SECRET_ID: SECRET_ID,
  });
  assertEquals(await createKeyBroker(env, logger2), undefined);
  assertEquals(
    logger2.lines[0]?.message,
    "Failed to initialize OpenBao KeyBroker: OpenBao AppRole login returned no token",
  );
  await bare.shutdown();
});

Deno.test("createKeyBroker: an unreachable OpenBao is a failed start, said plainly", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const logger = memoryLogger();
  const env = envOf({
    OPENBAO_ADDR: `http://127.0.0.1:${port}`,
    OPENBAO_ROLE_ID: ROLE_ID,
    OPENBAO_SECRET_ID: SECRET_ID,
  });
  assertEquals(await createKeyBroker(env, logger), undefined);
  assertMatch(
    String(logger.lines[0]?.message),
    /^Failed to initialize OpenBao KeyBroker: OpenBao AppRole login failed: no response \(connection refused\)$/,
  );
});

Deno.test("createKeyBroker: an unreadable OPENBAO_CACERT is a failed start naming the variable", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const env = baoEnv(fake, { OPENBAO_CACERT: "/nonexistent/skeid-ca.pem" });
  assertEquals(await createKeyBroker(env, logger), undefined);
  assertMatch(
    String(logger.lines[0]?.message),
    /OPENBAO_CACERT '\/nonexistent\/skeid-ca\.pem' could not be read \(NotFound\)/,
  );
  assertEquals(fake.calls.login, 0);
  await fake.close();
});

Deno.test("createKeyBroker: OPENBAO_VERIFY_SSL off on https is warned as unsupported", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const logger = memoryLogger();
  const env = envOf({
    OPENBAO_ADDR: `https://127.0.0.1:${port}`,
    OPENBAO_ROLE_ID: ROLE_ID,
    OPENBAO_SECRET_ID: SECRET_ID,
    OPENBAO_VERIFY_SSL: "0",
  });
  assertEquals(await createKeyBroker(env, logger), undefined);
  const warned = logger.lines.find((l) => l.event === "openbao_verify_ssl_unsupported");
  assertMatch(String(warned?.message), /OPENBAO_CACERT/);
});

Deno.test("openbao: login, then the first read renews and reads with the renewed token", async () => {
  await using t = await setup();
  t.fake.secrets.set("secret/data/skeid/remote/groq", kv2("gsk-live-groq-1"));
  assertEquals(t.fake.calls.login, 1);
  assertEquals(t.fake.calls.renew, 0, "nothing renewed before it is needed");
  assertEquals(await t.broker.keyFor("secret/skeid/remote/groq"), { key: "gsk-live-groq-1" });
  assertEquals(t.fake.calls, { login: 1, renew: 1, read: 1, list: 0 });
  assertEquals(t.fake.renewTokens, ["s.login-1"], "renewed with the login token");
  assertEquals(t.fake.readTokens, ["s.api-2"], "read with the renewed token");

  assertEquals(await t.broker.keyFor("secret/skeid/remote/groq"), { key: "gsk-live-groq-1" });
  assertEquals(t.fake.calls.read, 1, "cached: no second read");
  t.broker.forget("secret/skeid/remote/groq");
  await t.broker.keyFor("secret/skeid/remote/groq");
  assertEquals(t.fake.calls, { login: 1, renew: 1, read: 2, list: 0 }, "token still good");
  assertNoSecrets(t.logger, t.fake, ["gsk-live-groq-1"]);
});

Deno.test("openbao: five concurrent misses are one read; different refs share one renewal", async () => {
  await using t = await setup();
  for (const n of ["a", "b", "c"]) t.fake.secrets.set(`secret/data/r/${n}`, kv2(`key-${n}`));
  const release = t.fake.holdReads();
  const same = Array.from({ length: 5 }, () => t.broker.keyFor("secret/r/a"));
  const others = [t.broker.keyFor("secret/r/b"), t.broker.keyFor("secret/r/c")];
  await t.fake.readsArrived(3);
  release();
  assertEquals(await Promise.all(same), Array(5).fill({ key: "key-a" }));
  assertEquals(await Promise.all(others), [{ key: "key-b" }, { key: "key-c" }]);
  assertEquals(t.fake.calls.renew, 1, "one renewal for three references");
  assertEquals(t.fake.calls.read, 3, "one read per reference");
});

Deno.test("openbao: the KV v1 shape is read too; a secret without api_key is a failure", async () => {
  await using t = await setup();
  t.fake.secrets.set("kv1/skeid/groq", kv1("gsk-v1-key"));
  t.fake.secrets.set("secret/data/skeid/empty", { data: { data: { token: "x" } } });
  assertEquals(await t.broker.keyFor("kv1/skeid/groq"), { key: "gsk-v1-key" });
  assertEquals(await t.broker.keyFor("secret/skeid/empty"), {
    error: "OpenBao returned no api_key for 'secret/skeid/empty'",
  });
});

Deno.test("openbao: a failed read names the ref and status, is cached 5 s, and leaks no body", async () => {
  await using t = await setup();
  assertEquals(await t.broker.keyFor("secret/skeid/missing"), {
    error: "OpenBao read failed for 'secret/skeid/missing': HTTP 404",
  });
  t.fake.readStatus = 503;
  t.fake.secrets.set("secret/data/skeid/groq", kv2("gsk-not-served"));
  assertEquals(await t.broker.keyFor("secret/skeid/groq"), {
    error: "OpenBao read failed for 'secret/skeid/groq': HTTP 503",
  });
  assertEquals(t.fake.calls.read, 2);
  await t.broker.keyFor("secret/skeid/groq");
  assertEquals(t.fake.calls.read, 2, "the failure is cached");
  t.clock.advance(5_000);
  t.fake.readStatus = 200;
  assertEquals(await t.broker.keyFor("secret/skeid/groq"), { key: "gsk-not-served" });
  assertEquals(t.fake.calls.read, 3, "asked again after 5 s");
  const warned = t.logger.lines.filter((l) => l.event === "key_resolve_failed");
  assertEquals(warned.map((l) => l.api_key_ref), ["secret/skeid/missing", "secret/skeid/groq"]);
  assertNoSecrets(t.logger, t.fake, ["gsk-not-served"]);
});

Deno.test("openbao: a token about to expire is renewed before the read", async () => {
  await using t = await setup();
  t.fake.secrets.set("secret/data/x", kv2("k-x"));
  await t.broker.keyFor("secret/x");
  assertEquals(t.fake.calls.renew, 1);
  t.clock.advance(3600_000 - 60_000); // within the 60 s margin
  t.broker.forget();
  assertEquals(await t.broker.keyFor("secret/x"), { key: "k-x" });
  assertEquals(t.fake.calls.renew, 2, "renewed first");
  assertEquals(t.fake.renewTokens, ["s.login-1", "s.api-2"], "with the current token");
  assertEquals(t.fake.readTokens, ["s.api-2", "s.api-3"]);
});

Deno.test("openbao: a renewal failing on the request path fails the resolution, not the process", async () => {
  let fatal = 0;
  await using t = await setup({ onFatal: () => fatal++ });
  t.fake.renewStatus = 500;
  assertEquals(await t.broker.keyFor("secret/x"), {
    error: "OpenBao token renewal failed: HTTP 500",
  });
  assertEquals(t.fake.calls.read, 0);
  assertEquals(fatal, 0);
  assertNoSecrets(t.logger, t.fake, []);
});

Deno.test("openbao: the renewal timer runs every renew_secs and renews", async () => {
  await using t = await setup({ renewSecs: 120 });
  assertEquals(t.timer.started, 1);
  assertEquals(t.timer.everyMs, 120_000);
  t.timer.tick();
  await until(() => t.fake.calls.renew === 1, "a timer renewal");
  t.fake.secrets.set("secret/data/x", kv2("k-x"));
  await t.broker.keyFor("secret/x");
  assertEquals(t.fake.calls.renew, 1, "the request path found a fresh token");
  await t.broker.close();
  assertEquals(t.timer.stopped, true, "close stops the timer");
});

Deno.test("openbao: renew_secs below 1 or missing falls back to 60 s, default 300 s", () => {
  assertEquals(new OpenBao({ addr: "http://x", roleId: "r", secretId: "s" }).renewEveryMs, 300_000);
  assertEquals(
    new OpenBao({ addr: "http://x", roleId: "r", secretId: "s" }, { renewSecs: 0 }).renewEveryMs,
    60_000,
  );
  assertEquals(
    new OpenBao({ addr: "http://x", roleId: "r", secretId: "s" }, { renewSecs: Number.NaN })
      .renewEveryMs,
    60_000,
  );
});

/** A logged-in session on a fake, driven directly (renewTick awaited). */
async function session(
  fake: FakeOpenBao,
  logger: Logger,
  clock: { now: () => number },
  onFatal: (e: Error) => void,
) {
  const timer = manualSchedule();
  const bao = new OpenBao(
    { addr: fake.addr, roleId: ROLE_ID, secretId: SECRET_ID },
    { logger, now: clock.now, onFatal, schedule: timer.schedule },
  );
  await bao.login();
  bao.startRenewal();
  bao.startRenewal();
  assertEquals(timer.started, 1, "startRenewal twice starts one timer");
  return { bao, timer };
}

Deno.test("openbao: renewal failing while the token is valid warns and keeps going", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const clock = manualClock();
  const fatal: Error[] = [];
  const { bao, timer } = await session(fake, logger, clock, (e) => fatal.push(e));
  fake.renewStatus = 403;
  clock.advance(3599_999);
  await bao.renewTick();
  assertEquals(fatal, []);
  const warned = logger.lines.filter((l) => l.event === "openbao_renewal_failed");
  assertEquals(warned.length, 1);
  assertEquals(
    warned[0].message,
    "OpenBao token renewal failed (token still valid): OpenBao token renewal failed: HTTP 403",
  );
  assertEquals(timer.stopped, false, "the timer keeps running");
  fake.renewStatus = 200;
  await bao.renewTick();
  assertEquals(bao.tokenExpiresAt, clock.now() + 3600_000, "a later tick renews");
  bao.close();
  await fake.close();
});

Deno.test("openbao: renewal failing after expiry calls onFatal once and stops the timer", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const clock = manualClock();
  const fatal: Error[] = [];
  const { bao, timer } = await session(fake, logger, clock, (e) => fatal.push(e));
  fake.renewStatus = 403;
  clock.advance(3600_000);
  const ticks = [bao.renewTick(), bao.renewTick()];
  await Promise.all(ticks);
  assertEquals(fake.calls.renew, 1, "concurrent ticks share one renewal");
  await bao.renewTick();
  assertEquals(fatal.length, 1, "onFatal once");
  assertEquals(
    fatal[0].message,
    "OpenBao token renewal failed and the token has expired: OpenBao token renewal failed: HTTP 403",
  );
  assertEquals(timer.stopped, true);
  const errors = logger.lines.filter((l) => l.level === "error");
  assertEquals(errors.length, 1);
  assertEquals(errors[0].event, "openbao_token_expired");
  assertNoSecrets(logger, fake, []);
  bao.close();
  await fake.close();
});

Deno.test("openbao: concurrent renewals are one renew-self call", async () => {
  const fake = startFakeOpenBao();
  const logger = memoryLogger();
  const { bao } = await session(fake, logger, manualClock(), () => {});
  const answers = await Promise.all([bao.renew(), bao.renew(), bao.renew()]);
  assertEquals(fake.calls.renew, 1);
  assertEquals(answers, Array(3).fill({ token: "s.api-2" }));
  await bao.renew();
  assertEquals(fake.calls.renew, 2, "a later renewal is a new call");
  assertEquals(fake.renewTokens, ["s.login-1", "s.api-2"]);
  bao.close();
  await fake.close();
});

Deno.test("openbao: LIST helper returns the names, empty on failure", async () => {
  await using t = await setup();
  t.fake.listings.set("secret/metadata/skeid/remote", ["groq", "openai"]);
  assertEquals(await t.broker.listSecrets("secret/metadata/skeid/remote"), ["groq", "openai"]);
  assertEquals(await t.broker.listSecrets("/secret/metadata/skeid/remote/"), ["groq", "openai"]);
  assertEquals(await t.broker.listSecrets("secret/metadata/none"), []);
  assertEquals(t.fake.calls.list, 3);
  assertMatch(
    String(t.logger.lines.find((l) => l.event === "openbao_list_failed")?.message),
    /OpenBao list failed for 'secret\/metadata\/none': HTTP 404/,
  );
});

Deno.test("openbao: a read that takes too long fails with a timeout", async () => {
  await using t = await setup({ timeoutMs: 50 });
  t.fake.secrets.set("secret/data/slow", kv2("k"));
  await t.broker.keyFor("secret/warm-up-renewal"); // renew now, so only the read is held
  const release = t.fake.holdReads();
  assertEquals(await t.broker.keyFor("secret/slow"), {
    error: "OpenBao read failed for 'secret/slow': no response (timed out after 50 ms)",
  });
  release();
});

Deno.test("openbao: close stops a read in flight and drops keys and tokens", async () => {
  await using t = await setup();
  t.fake.secrets.set("secret/data/a", kv2("k-a"));
  t.fake.secrets.set("secret/data/b", kv2("k-b"));
  await t.broker.keyFor("secret/a");
  const release = t.fake.holdReads();
  const pending = t.broker.keyFor("secret/b");
  await t.fake.readsArrived(2);
  await t.broker.close();
  assertEquals(await pending, { error: "key broker closed" }, "the waiting caller is answered");
  assertEquals(t.broker.cached("secret/a"), undefined);
  assertEquals(await t.broker.keyFor("secret/a"), { error: "key broker closed" });
  release();
});

Deno.test("openbao: an invalid reference is refused without a call", async () => {
  await using t = await setup();
  assertEquals(await t.broker.keyFor("secret/../sys/policy"), {
    error: "invalid key reference 'secret/../sys/policy'",
  });
  assertEquals(t.fake.calls.read, 0);
});

Deno.test("openbao: an https vault with its own CA works through OPENBAO_CACERT", async () => {
  const pki = await makeTestPki();
  if (pki === undefined) {
    console.warn("openssl not found: TLS case not exercised");
    return;
  }
  const fake = startFakeOpenBao({ cert: pki.cert, key: pki.key });
  try {
    fake.secrets.set("secret/data/skeid/remote/groq", kv2("gsk-over-tls"));
    const untrusted = memoryLogger();
    assertEquals(await createKeyBroker(baoEnv(fake), untrusted), undefined, "not trusted");
    assertMatch(
      String(untrusted.lines[0]?.message),
      /login failed: no response \(TLS handshake failed/,
    );

    const logger = memoryLogger();
    const broker = await createKeyBroker(baoEnv(fake, { OPENBAO_CACERT: pki.caFile }), logger);
    assert(broker, "trusted through OPENBAO_CACERT");
    assertEquals(await broker.keyFor("secret/skeid/remote/groq"), { key: "gsk-over-tls" });
    await broker.close();
    assertNoSecrets(logger, fake, ["gsk-over-tls"]);
  } finally {
    await fake.close();
    await Deno.remove(pki.dir, { recursive: true });
  }
});
