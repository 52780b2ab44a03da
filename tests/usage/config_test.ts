import {
  assert,
  assertEquals,
  assertMatch,
  assertNotIncludes,
  assertStringIncludes,
  assertThrows,
} from "../_assert.ts";
import {
  describeStoreConfig,
  type NormalizeOptions,
  normalizeUsageStoreConfig,
  sameStoreConfig,
} from "../../src/usage/config.ts";
import { redactSecrets } from "../../src/usage/secret.ts";
import { tempDir } from "../_helpers/temp.ts";

const noEnv: NormalizeOptions = { env: () => undefined, isDirectory: () => false };
const norm = (raw: unknown, opts: Partial<NormalizeOptions> = {}) =>
  normalizeUsageStoreConfig(raw, { ...noEnv, ...opts });

Deno.test("usage_store: explicit backend, with the postgres*/json* spellings", () => {
  assertEquals(norm({ backend: "postgres" }).backend, "postgresql");
  assertEquals(norm({ backend: "PostgreSQL" }).backend, "postgresql");
  assertEquals(norm({ backend: "json", path: "/x/u.jsonl" }).backend, "jsonlog");
  assertEquals(norm({ backend: "sqlite", path: "/x/u.db" }).backend, "sqlite");
  const err = assertThrows(() => norm({ backend: "mysql" }));
  assertStringIncludes(err.message, "usage_store.backend: unknown backend 'mysql'");
});

Deno.test("usage_store: inference — sqlite paths, pg dsn, log_path, usage_db_path, env", () => {
  for (const key of ["sqlite_path", "path", "db_path"]) {
    const c = norm({ [key]: "/d/u.sqlite" });
    assertEquals(c.backend, "sqlite", key);
    assert(c.backend === "sqlite");
    assertEquals(c.path, "/d/u.sqlite");
    assertEquals(c.auto_migrate, true);
    assertEquals(c.flush_interval_ms, 0);
    assertEquals(c.spill_path, "/d/skeid-usage-spill.jsonl");
  }
  assertEquals(norm({ dsn: "postgresql://h/db" }).backend, "postgresql");
  assertEquals(norm({ dsn: "dbi:Pg:dbname=bill;host=db1;port=6543" }).backend, "postgresql");
  assertEquals(norm({ log_path: "/var/log/u.jsonl" }).backend, "jsonlog");
  const viaOption = norm({}, { usageDbPath: "/opt/u.db" });
  assert(viaOption.backend === "sqlite");
  assertEquals(viaOption.path, "/opt/u.db");
  const viaEnv = norm(undefined, { env: (n) => n === "SKEID_USAGE_DB" ? "/env/u.db" : undefined });
  assert(viaEnv.backend === "sqlite");
  assertEquals(viaEnv.path, "/env/u.db");
  const none = assertThrows(() => norm({}));
  assertMatch(none.message, /^usage_store\.sqlite_path: /);
  assertMatch(assertThrows(() => norm({ dsn: "mysql://x" })).message, /^usage_store\.dsn: /);
  assertMatch(assertThrows(() => norm("nope")).message, /^usage_store: must be a map/);
});

Deno.test("usage_store: postgresql defaults and legacy dbi:Pg fields", () => {
  const d = norm({ backend: "postgresql" });
  assert(d.backend === "postgresql");
  assertEquals([d.host, d.port, d.dbname, d.auto_migrate, d.pool_size], [
    "127.0.0.1",
    5432,
    "skeid",
    true,
    4,
  ]);
  const dbi = norm({ dsn: "dbi:Pg:dbname=bill;host=db1;port=6543", user: "u" });
  assert(dbi.backend === "postgresql");
  assertEquals([dbi.host, dbi.port, dbi.dbname, dbi.user], ["db1", 6543, "bill", "u"]);
  const fields = norm({ backend: "pg", host: "h", port: "7000", database: "x", pool_size: 2 });
  assert(fields.backend === "postgresql");
  assertEquals([fields.host, fields.port, fields.dbname, fields.pool_size], ["h", 7000, "x", 2]);
  assertMatch(assertThrows(() => norm({ backend: "pg", port: 0 })).message, /^usage_store\.port:/);
  assertMatch(
    assertThrows(() => norm({ backend: "sqlite", path: "/a", flush_interval_ms: -1 })).message,
    /^usage_store\.flush_interval_ms:/,
  );
});

Deno.test("usage_store: a password never prints (password, password_env, dsn)", () => {
  const env = (n: string) => n === "PGPW" ? "s3cret-from-env" : undefined;
  const fromEnv = norm({ backend: "postgresql", password_env: "PGPW" }, { env });
  assert(fromEnv.backend === "postgresql");
  assertEquals(fromEnv.password?.reveal(), "s3cret-from-env");
  const fromDsn = norm({
    dsn: "postgres://bill:dsn-secret@db.example:6000/ledger?sslmode=require",
  });
  assert(fromDsn.backend === "postgresql");
  assertEquals(fromDsn.password?.reveal(), "dsn-secret");
  assertEquals([fromDsn.host, fromDsn.port, fromDsn.dbname, fromDsn.user], [
    "db.example",
    6000,
    "ledger",
    "bill",
  ]);
  const literal = norm({ backend: "postgresql", password: "literal-secret" });
  for (
    const [cfg, secret] of [[fromEnv, "s3cret-from-env"], [fromDsn, "dsn-secret"], [
      literal,
      "literal-secret",
    ]] as const
  ) {
    for (const shown of [JSON.stringify(cfg), Deno.inspect(cfg), describeStoreConfig(cfg)]) {
      assertNotIncludes(shown, secret);
    }
  }
  assertStringIncludes(JSON.stringify(fromDsn), '"password":"***"');
  const missing = assertThrows(() => norm({ backend: "postgresql", password_env: "NOPE" }));
  assertEquals(missing.message, "usage_store.password_env: variable NOPE is not set");
});

Deno.test("usage_store: jsonlog mode — trailing slash or existing dir → dir, else file", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const real = { env: () => undefined };
    const slash = normalizeUsageStoreConfig({ backend: "jsonlog", path: "/nowhere/events/" }, real);
    assert(slash.backend === "jsonlog");
    assertEquals([slash.mode, slash.path], ["dir", "/nowhere/events"]);
    const existing = normalizeUsageStoreConfig({ backend: "jsonlog", path: dir }, real);
    assert(existing.backend === "jsonlog");
    assertEquals(existing.mode, "dir");
    const file = normalizeUsageStoreConfig({ log_path: `${dir}/u.jsonl` }, real);
    assert(file.backend === "jsonlog");
    assertEquals([file.mode, file.fsync], ["file", false]);
    const forced = normalizeUsageStoreConfig(
      { backend: "jsonlog", path: dir, mode: "file", fsync: true },
      real,
    );
    assert(forced.backend === "jsonlog");
    assertEquals([forced.mode, forced.fsync], ["file", true]);
    assertMatch(
      assertThrows(() => norm({ backend: "jsonlog", path: "/x", mode: "lines" })).message,
      /^usage_store\.mode:/,
    );
    assertMatch(assertThrows(() => norm({ backend: "jsonlog" })).message, /^usage_store\.path:/);
  } finally {
    await cleanup();
  }
});

Deno.test("sameStoreConfig: store identity, not ledger settings", () => {
  const a = norm({ backend: "postgresql", password: "one" });
  assert(sameStoreConfig(a, norm({ backend: "postgresql", password: "one" })));
  assert(!sameStoreConfig(a, norm({ backend: "postgresql", password: "two" })));
  assert(!sameStoreConfig(a, norm({ backend: "postgresql", password: "one", user: "x" })));
  assert(
    sameStoreConfig(a, norm({ backend: "postgresql", password: "one", flush_interval_ms: 9 })),
  );
  assert(!sameStoreConfig(norm({ path: "/a" }), norm({ path: "/b" })));
  assert(!sameStoreConfig(norm({ path: "/a" }), norm({ path: "/a", auto_migrate: false })));
  assert(!sameStoreConfig(a, undefined));
  assert(sameStoreConfig(undefined, undefined));
});

Deno.test("redactSecrets: literal secrets, password= pairs and URL user-info", () => {
  assertEquals(
    redactSecrets("failed: password=abc host=x; postgres://u:pw@h/db; token zz", ["zz"]),
    "failed: password=*** host=x; postgres://u:***@h/db; token ***",
  );
});
