/**
 * The usage layer's public surface: build events, normalize the `usage_store` config, and the
 * ledger the gateway records into (plus the stores, for tools and tests).
 *
 * @module
 */
export { buildUsageEvent, formatCreatedAt, type UsageEventFields } from "./event.ts";
export {
  describeStoreConfig,
  type NormalizedUsageStoreConfig,
  normalizeUsageStoreConfig,
  sameStoreConfig,
} from "./config.ts";
export { type FlushResult, UsageLedger, type UsageLedgerOptions } from "./ledger.ts";
export { type UsageCallbacks } from "./callback.ts";
export { createUsageStore } from "./open.ts";
export { normalizeReportFilters, NOT_CONFIGURED } from "./report.ts";
export { POSTGRES_SCHEMA, SQLITE_SCHEMA } from "./ledger_schema.ts";
export type * from "./types.ts";
