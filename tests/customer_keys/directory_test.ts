/**
 * The issued-key directory on its own (ADR 0029): a malformed key never reaches the database, an
 * unknown public id costs the same hash compares as a known one, and a read that raced a
 * revocation never undoes it.
 */
import { assert, assertEquals } from "../_assert.ts";
import { IssuedKeyDirectory } from "../../src/customer_keys/directory.ts";
import {
  type IssuedKeyRow,
  IssuedKeyStore,
  type IssuedKeyTable,
} from "../../src/customer_keys/issued_store.ts";
import { checksum, formatIssuedKey, parseIssuedKey } from "../../src/customer_keys/key_format.ts";
import { emptyPolicySet } from "../../src/core/policies.ts";
import { memoryLogger } from "../../src/log.ts";
import { tempDir } from "../_helpers/temp.ts";

/** A real SQLite table whose reads are counted (and can be held back). */
class CountingTable implements IssuedKeyTable {
  reads = 0;
  /** While set, `getMany` answers what it read only once this resolves. */
  hold: Promise<void> | undefined;
  /** Resolved when a `getMany` has read its rows. */
  read = Promise.withResolvers<void>();
  constructor(readonly inner: IssuedKeyStore) {}
  insert(row: IssuedKeyRow) {
    return this.inner.insert(row);
  }
  get(id: string) {
    this.reads++;
    return this.inner.get(id);
  }
  async getMany(ids: readonly string[]) {
    this.reads++;
    const rows = await this.inner.getMany(ids);
    this.read.resolve();
    await this.hold;
    return rows;
  }
  update(row: IssuedKeyRow) {
    return this.inner.update(row);
  }
  list(q: Parameters<IssuedKeyStore["list"]>[0]) {
    return this.inner.list(q);
  }
  close() {
    return this.inner.close();
  }
}

async function withDirectory(
  fn: (dir: IssuedKeyDirectory, table: CountingTable) => Promise<void>,
): Promise<void> {
  const tmp = await tempDir();
  let table: CountingTable | undefined;
  const dir = new IssuedKeyDirectory({
    now: Date.now,
    logger: memoryLogger(),
    env: (name) => name === "SKEID_KEY_PEPPER" ? "pepper-0123456789" : undefined,
    policySet: emptyPolicySet,
    // A long refresh: the tests call refresh() themselves.
    refreshMs: () => 3_600_000,
    open: async (usage) => (table = new CountingTable(await IssuedKeyStore.open(usage))),
  });
  dir.apply(
    { pepper_env: "SKEID_KEY_PEPPER" },
    {
      backend: "sqlite",
      path: `${tmp.dir}/usage.db`,
    } as Parameters<IssuedKeyDirectory["apply"]>[1],
  );
  try {
    await dir.list({ limit: 1 }); // opened
    await fn(dir, table!);
  } finally {
    await dir.close();
    await tmp.cleanup();
  }
}

Deno.test("key format: a changed, truncated or extended key fails its checksum", () => {
  const key = formatIssuedKey("ik_0123456789abcdef", "a".repeat(40));
  assertEquals(parseIssuedKey(key), { id: "ik_0123456789abcdef", secret: "a".repeat(40) });
  assertEquals(key.slice(-8), checksum(key.slice(0, -8)));
  for (let i = "sk-skeid-".length; i < key.length; i++) {
    const changed = key.slice(0, i) + (key[i] === "b" ? "c" : "b") + key.slice(i + 1);
    assertEquals(parseIssuedKey(changed), undefined, `position ${i}`);
  }
  assertEquals(parseIssuedKey(key.slice(0, -1)), undefined);
  assertEquals(parseIssuedKey(key + "0"), undefined);
});

Deno.test("issued keys: a malformed key is refused before any lookup", async () => {
  await withDirectory(async (dir, table) => {
    const made = await dir.create({});
    const key = String(made.key);
    const reads = table.reads;
    for (const bad of [key.slice(0, -1), key.slice(0, -8) + "00000000", "sk-skeid-x"]) {
      assertEquals(await dir.authenticate(bad), undefined, bad);
    }
    assertEquals(table.reads, reads, "no database read for a malformed key");
    const unknown = formatIssuedKey("ik_ffffffffffffffff", "0".repeat(40));
    assertEquals(await dir.authenticate(unknown), undefined);
    assertEquals(table.reads, reads + 1, "a well-formed unknown id is looked up");
  });
});

Deno.test("issued keys: an unknown id is hashed and compared like a known one", async () => {
  await withDirectory(async (dir) => {
    const made = await dir.create({});
    const id = String(made.id);
    const sign = crypto.subtle.sign.bind(crypto.subtle);
    let signs = 0;
    crypto.subtle.sign = ((...args: Parameters<typeof sign>) => {
      signs++;
      return sign(...args);
    }) as typeof sign;
    try {
      await dir.authenticate(formatIssuedKey(id, "1".repeat(40)));
      const known = signs;
      signs = 0;
      await dir.authenticate(formatIssuedKey("ik_ffffffffffffffff", "1".repeat(40)));
      assert(known > 0, "a wrong secret of a known id is hashed");
      assertEquals(signs, known, "an unknown id costs the same HMACs");
    } finally {
      crypto.subtle.sign = sign;
    }
  });
});

Deno.test("issued keys: a refresh read from before a revocation does not undo it", async () => {
  await withDirectory(async (dir, table) => {
    const made = await dir.create({});
    const key = String(made.key);
    assert(await dir.authenticate(key), "accepted");
    // A refresh reads the row, then the key is revoked before the read is installed.
    const gate = Promise.withResolvers<void>();
    table.hold = gate.promise;
    table.read = Promise.withResolvers<void>();
    const refresh = dir.refresh();
    await table.read.promise;
    await dir.revoke(String(made.id));
    gate.resolve();
    await refresh;
    table.hold = undefined;
    assertEquals(await dir.authenticate(key), undefined, "still revoked");
  });
});
