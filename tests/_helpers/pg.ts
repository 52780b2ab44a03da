/**
 * The test PostgreSQL: its admin DSN, whether it answers, a gate that ignores PostgreSQL tests
 * (with the reason printed) where there is no server, and databases made fresh for one run.
 *
 * @module
 */
import postgres from "postgres";

/** The admin DSN of the test PostgreSQL (`SKEID_TEST_PG_DSN`, else local trust auth). */
export function pgAdminDsn(): string {
  return Deno.env.get("SKEID_TEST_PG_DSN") ??
    "postgres://postgres@127.0.0.1:5432/postgres";
}

/** Why PostgreSQL cannot be used, or undefined when it answers. */
export async function pgUnavailable(): Promise<string | undefined> {
  const sql = postgres(pgAdminDsn(), { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await sql.end({ timeout: 0 });
  }
}

/**
 * Test registration options for PostgreSQL tests: ignored, with the reason printed, when the
 * server does not answer — unless `SKEID_REQUIRE_PG=1` (CI), where they run and fail.
 */
export async function pgTestGate(): Promise<{ ignore: boolean }> {
  const reason = await pgUnavailable();
  if (reason === undefined) return { ignore: false };
  if (Deno.env.get("SKEID_REQUIRE_PG") === "1") {
    console.error(`PostgreSQL unreachable (${reason}) and SKEID_REQUIRE_PG=1: tests will fail`);
    return { ignore: false };
  }
  console.error(
    `IGNORED PostgreSQL usage-store tests: ${reason} (set SKEID_REQUIRE_PG=1 to make this fail)`,
  );
  return { ignore: true };
}

/** A fresh database `skeid_test_<random>`; `drop` removes it (and its connections). */
export async function freshPgDatabase(): Promise<{ dsn: string; drop: () => Promise<void> }> {
  const name = `skeid_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(pgAdminDsn(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  const url = new URL(pgAdminDsn());
  url.pathname = `/${name}`;
  return {
    dsn: url.toString(),
    drop: async () => {
      const sql = postgres(pgAdminDsn(), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
  };
}
