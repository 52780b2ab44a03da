/**
 * Test helpers for the admin plane: a real core with stub deps around it.
 * @module
 */
import { type AdminDeps, adminRoutes } from "../../src/admin/routes.ts";
import { GatewayMetrics } from "../../src/admin/metrics.ts";
import { FunctionTable } from "../../src/core/functions.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { memoryLogger } from "../../src/log.ts";
import type { ReloadStatus } from "../../src/core/types.ts";
import type { ReportFilters, UsageReport } from "../../src/usage/types.ts";
import type { Hono } from "hono";

/** The admin key the tests use. */
export const ADMIN_KEY = "adm-test-key-0123456789";

/** A gateway's admin plane with a mutable admin key and recorded calls. */
export interface AdminFixture {
  app: Hono;
  skeid: RoutingCore;
  metrics: GatewayMetrics;
  state: {
    adminKey: string;
    reloadStatus: ReloadStatus;
    reloadError?: string;
    reloads: number;
    report: UsageReport;
    reportFilters: ReportFilters[];
  };
  deps: AdminDeps;
  /** `app.request` with the admin bearer (or another token, or none with `null`). */
  req(path: string, init?: RequestInit & { token?: string | null }): Promise<Response>;
}

/** Builds the admin plane over a real Skeid on a fixed clock. */
export function adminFixture(adminKey = ADMIN_KEY): AdminFixture {
  const skeid = new RoutingCore({ now: () => 1_700_000_000_000, env: () => undefined });
  const metrics = new GatewayMetrics();
  const state: AdminFixture["state"] = {
    adminKey,
    reloadStatus: { ok: true, error: null, failed_at: null, failures: 0 },
    reloads: 0,
    report: { ok: true, enabled: true, backend: "sqlite" },
    reportFilters: [],
  };
  const deps: AdminDeps = {
    skeid,
    functions: new FunctionTable(skeid),
    adminKey: () => state.adminKey,
    reloadStatus: () => state.reloadStatus,
    reload: () => {
      state.reloads++;
      return state.reloadError === undefined
        ? Promise.resolve(true)
        : Promise.reject(new Error(state.reloadError));
    },
    usageReport: (filters) => {
      state.reportFilters.push(filters);
      return Promise.resolve(state.report);
    },
    metrics,
    logger: memoryLogger(),
  };
  const app = adminRoutes(deps);
  const req: AdminFixture["req"] = (path, init = {}) => {
    const { token = state.adminKey, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (token !== null) headers.set("authorization", `Bearer ${token}`);
    return Promise.resolve(app.request(path, { ...rest, headers }));
  };
  return { app, skeid, metrics, state, deps, req };
}

/** A JSON POST init. */
export function post(
  body: unknown,
  extra: RequestInit & { token?: string | null } = {},
): RequestInit & { token?: string | null } {
  return {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...extra,
  };
}
