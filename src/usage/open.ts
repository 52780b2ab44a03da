/**
 * Builds the store a normalized `usage_store` config names (not yet prepared).
 *
 * @module
 */
import type { NormalizedUsageStoreConfig } from "./config.ts";
import { JsonlogStore } from "./jsonlog.ts";
import { PostgresStore } from "./postgres.ts";
import { SqliteStore } from "./sqlite.ts";
import type { UsageStore } from "./types.ts";

/** Options of `createUsageStore`. */
export interface CreateStoreOptions {
  /** Open for reports only: create and migrate nothing (`skeid usage`). */
  readOnly?: boolean;
}

/** The store for `cfg`; call `prepare()` before use. */
export function createUsageStore(
  cfg: NormalizedUsageStoreConfig,
  opts: CreateStoreOptions = {},
): UsageStore {
  switch (cfg.backend) {
    case "jsonlog":
      return new JsonlogStore(cfg, opts);
    case "sqlite":
      return new SqliteStore(cfg, opts);
    case "postgresql":
      return new PostgresStore(cfg, opts);
  }
}
