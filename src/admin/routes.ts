/**
 * The admin plane: `/skeid/*` routes for operators (inventory, metrics, usage, config reload and
 * the core's function table), behind `Authorization: Bearer <admin key>`. With no admin key in
 * force every admin route answers a plain 404, as if the plane did not exist.
 *
 * The registry snapshot (`/skeid/registry/*`) has its own credentials (admin key or registry
 * read key) and is left to its own route: the admin check here steps aside for it.
 *
 * @module
 */
import { QueryParamError } from "../usage/query_param_error.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import type { RoutingCore } from "../core/routing_core.ts";
import type { ReloadStatus } from "../core/types.ts";
import type { ReportFilters, UsageReport } from "../usage/types.ts";
import { parseSeriesQuery, type SeriesAnswer, type SeriesQuery } from "../usage/rollup.ts";
import type { Logger } from "../log.ts";
import { seriesCsv, seriesCsvName } from "../usage/series_csv.ts";
import { type EventsPage, type EventsQuery, parseEventsQuery } from "../usage/events_page.ts";
import { withPublicUrl } from "../url_credentials.ts";
import { FunctionError, type FunctionTable, nodeMetricsToWire } from "../core/functions.ts";
import { NodeSpecError } from "../core/inventory.ts";
import type { GatewayMetrics } from "./metrics.ts";
import type { Tenancy } from "../core/tenancy.ts";
import { keyStatus } from "./keys.ts";
import { tenancyListing } from "./tenancy_list.ts";
import type { LiveFeed, LiveSnapshot } from "./live.ts";
import type { ConfigCheck, ConfigHistory } from "../config/config_manager.ts";
import type { IssuedKeyDirectory } from "../customer_keys/directory.ts";
import { keysAdminRoutes } from "../customer_keys/admin_keys.ts";
import { explainRoute } from "./route_explain.ts";
import { bearerToken, secretMatches } from "./auth.ts";
import { errorMessage } from "../error_message.ts";
import { LocalSessionStore, type SessionStore, sha256Hex } from "./sessions.ts";
import {
  cookieValue,
  CSRF_ERROR,
  csrfMatches,
  DEFAULT_SESSION_TTL_S,
  isWrite,
  SESSION_COOKIE,
} from "./session_auth.ts";
import { SESSION_PATH, sessionRoutes } from "./session_routes.ts";
import { bodyJson, isJsonObject } from "../core/json.ts";
import { fenceMessage, type OwnSecrets, ownSecretVariables } from "../config/own_secrets.ts";

/** What the admin plane needs from the gateway around it. */
export interface AdminDeps {
  /** The routing and admission core. */
  skeid: RoutingCore;
  /** The core's function table (`POST /skeid/call/:function`). */
  functions: FunctionTable;
  /** The admin key in force; `''` = admin API off → every `/skeid/*` route 404. */
  adminKey(): string;
  /** Reload status, message included (admin only; `/health` never shows the message). */
  reloadStatus(): ReloadStatus;
  /** When the config in force was applied and the SHA-256 of its file text (`GET /skeid/config`). */
  configApplied?(): { applied_at: string | null; file_sha256: string | null };
  /** The config file, its last change and its last failure (`GET /skeid/config`). */
  configHistory?(): ConfigHistory;
  /** A dry run of the file on disk now (`POST /skeid/config/check`). */
  checkConfig?(): Promise<ConfigCheck>;
  /** Explicit reload; throws with the error message (the config in force stays). */
  reload(): Promise<unknown>;
  /** A usage report for the filters. */
  usageReport(filters: ReportFilters): Promise<UsageReport>;
  /** The Usage page's series from the ledger's roll-ups; undefined when there is no store. */
  usageSeries?(q: SeriesQuery): Promise<SeriesAnswer | undefined>;
  /** A page of usage events, newest first (`GET /skeid/usage/events`); undefined: no store. */
  usageEvents?(q: EventsQuery): Promise<EventsPage | undefined>;
  /** One usage event by event id; null: none; undefined: no store. */
  usageEvent?(eventId: string): Promise<Record<string, unknown> | null | undefined>;
  /** Volatile process counters for `/skeid/metrics`. */
  metrics: GatewayMetrics;
  /** Rate windows and budgets per customer key (`GET /skeid/keys/:key`). */
  tenancy?: Tenancy;
  /** The issued keys (`/skeid/keys`, ADR 0029). */
  issuedKeys?: IssuedKeyDirectory;
  /** The capacity probes' states (`GET /skeid/metrics/nodes`), when probes run. */
  probes?: () => readonly unknown[];
  /** The variables a node's `api_key_env` may not name (Skeid's own secrets). */
  ownSecretVariables?: () => OwnSecrets;
  /** Where admin actions and failures are logged (never the admin key). */
  logger: Logger;
  /** Epoch ms this gateway started (`GET /skeid/workers`). */
  startedAt?: number;
  /** The `created_at` of a customer key's last usage event since start (`GET /skeid/tenancy`). */
  lastSeen?: (keyId: string) => string | null;
  /** The Live page's one snapshot (`GET /skeid/live/snapshot`): this gateway's, or its group's. */
  liveSnapshot?: () => Promise<LiveSnapshot>;
  /** The live stream's producer (`GET /skeid/live`), one per gateway. */
  live?: LiveFeed;
  /** The console sessions (ADR 0035); default a store of this admin plane's own. */
  sessions?: SessionStore;
  /** Lifetime of a new console session, s (`admin.session_ttl_s`). */
  sessionTtlS?: () => number;
  /** Peers whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed (`admin.trusted_proxies`). */
  trustedProxies?: () => ReadonlySet<string>;
}

/** Default row limit of `GET /skeid/usage`. */
const ADMIN_USAGE_LIMIT = 50;

const UNAUTHORIZED_BODY = JSON.stringify({
  error: { message: "Missing or invalid admin bearer token", type: "unauthorized" },
});

const NO_PROXIES: ReadonlySet<string> = new Set();

/**
 * The paths under `/skeid/` the admin check steps aside for, each answered by a later handler
 * with its own rules: the registry snapshot (its own credentials) and the console's pages
 * (`/skeid/ui`, which answer even while the admin API is off, saying how to turn it on).
 */
export function passesAdminCheck(path: string): boolean {
  return path.startsWith("/skeid/registry/") || path === "/skeid/ui" ||
    path.startsWith("/skeid/ui/");
}

/** The 401 of a request with no valid admin credential. */
function unauthorized(): Response {
  return new Response(UNAUTHORIZED_BODY, {
    status: 401,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "www-authenticate": 'Bearer realm="skeid-admin"',
    },
  });
}

/** SHA-256 of the admin key, computed again only when the key in force changes. */
function cachedKeyHash(): (key: string) => Promise<string> {
  let last: { key: string; hash: Promise<string> } | undefined;
  return (key) => {
    if (last?.key !== key) last = { key, hash: sha256Hex(key) };
    return last.hash;
  };
}

/** A JSON response. */
function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body ?? null), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/** An OpenAI-shaped error, as the data plane answers. */
function openaiError(status: number, message: string, type = "invalid_request_error"): Response {
  return json({ error: { message, type } }, status);
}

/** The request body as JSON; `undefined` for an empty body; throws on bad JSON. */
async function readJson(c: Context): Promise<unknown> {
  return bodyJson(await c.req.text());
}

/** A node spec error's message, naming the field when the message does not already. */
function nodeSpecMessage(e: Error): string {
  if (e instanceof NodeSpecError && e.field && !e.message.includes(e.field)) {
    return `${e.field}: ${e.message}`;
  }
  return e.message;
}

/** The admin routes, as a Hono app the server mounts under `/`. */
export function adminRoutes(deps: AdminDeps): Hono {
  const { skeid, logger } = deps;
  const app = new Hono();

  const sessions = deps.sessions ?? new LocalSessionStore(skeid.now);
  const keyHash = cachedKeyHash();

  // Admin answers hold the operator's data: never kept by a browser or a proxy, unless the
  // route said how (the console's files, a stream).
  app.use("/skeid/*", async (c, next) => {
    await next();
    if (c.res.headers.has("cache-control")) return;
    try {
      c.res.headers.set("cache-control", "no-store");
    } catch {
      // Headers of a response taken as it came (immutable): a copy carries the header.
      const res = new Response(c.res.body, c.res);
      res.headers.set("cache-control", "no-store");
      c.res = res;
    }
  });

  app.use("/skeid/*", async (c, next) => {
    if (passesAdminCheck(c.req.path)) return await next();
    const key = deps.adminKey();
    if (key === "") return c.text("Not Found", 404);
    // The session routes judge their own requests (a sign-in carries no credential yet).
    if (c.req.path === SESSION_PATH) return await next();
    const authorization = c.req.header("authorization");
    if (authorization !== undefined) {
      const token = bearerToken(authorization);
      if (token === undefined || !(await secretMatches(token, key))) return unauthorized();
      return await next();
    }
    const cookie = cookieValue(c.req.header("cookie"), SESSION_COOKIE);
    if (cookie === undefined) return unauthorized();
    const session = await sessions.find(cookie, await keyHash(key));
    if (!session) return unauthorized();
    if (isWrite(c.req.method) && !csrfMatches(c.req.header("x-csrf-token"), session.csrf_token)) {
      return json({ ok: false, error: CSRF_ERROR }, 403);
    }
    await next();
  });

  app.route(
    "/",
    sessionRoutes({
      sessions,
      adminKey: deps.adminKey,
      sessionTtlS: () => deps.sessionTtlS?.() ?? DEFAULT_SESSION_TTL_S,
      trustedProxies: () => deps.trustedProxies?.() ?? NO_PROXIES,
      logger,
    }),
  );

  // ---- inventory ---------------------------------------------------------------------------

  app.get("/skeid/nodes", () =>
    json(publicNodes({
      nodes: skeid.listNodes().map((n) => ({ ...n, draining: skeid.nodeDraining(n.id) === true })),
    })));

  app.post("/skeid/nodes", async (c) => {
    let spec: unknown;
    try {
      spec = await readJson(c);
    } catch (err) {
      return openaiError(400, errorMessage(err));
    }
    if (!isJsonObject(spec)) return openaiError(400, "body must be a JSON object (a node spec)");
    const own = deps.ownSecretVariables?.() ?? ownSecretVariables(undefined);
    const secret = fenceMessage(spec, "nodes[]", own);
    if (secret !== undefined) return openaiError(400, secret);
    try {
      const node = skeid.addNode(spec);
      logger.info("admin_node_added", { node_id: node.id });
      return json(publicNodes({ ok: true, node }));
    } catch (e) {
      if (!(e instanceof Error)) throw e;
      return openaiError(400, nodeSpecMessage(e));
    }
  });

  app.delete("/skeid/nodes/:id", (c) => {
    const id = c.req.param("id");
    if (!skeid.removeNode(id)) return json({ ok: false, error: `unknown node '${id}'` }, 404);
    logger.info("admin_node_removed", { node_id: id });
    return json({ ok: true });
  });

  app.post("/skeid/nodes/:id/health", async (c) => {
    const id = c.req.param("id");
    // An unknown node is refused before anything else: this route never creates one.
    if (!skeid.getNode(id)) return json({ ok: false, error: `unknown node '${id}'` }, 404);
    let body: unknown;
    try {
      body = await readJson(c);
    } catch (err) {
      return json({ ok: false, error: errorMessage(err) }, 400);
    }
    const healthy = isJsonObject(body) ? body.healthy : undefined;
    if (typeof healthy !== "boolean") {
      return json({ ok: false, error: "healthy must be true or false" }, 400);
    }
    if (!skeid.setNodeHealth(id, healthy)) {
      return json({ ok: false, error: `unknown node '${id}'` }, 404);
    }
    logger.info("admin_node_health", { node_id: id, healthy });
    return json({ ok: true, id, healthy });
  });

  // Draining: the node admits nothing new; what it runs finishes (with --workers N the
  // supervisor hands it to every worker, as a health change).
  app.post("/skeid/nodes/:id/drain", async (c) => {
    const id = c.req.param("id");
    if (skeid.nodeDraining(id) === undefined) {
      return json({ ok: false, error: `unknown node '${id}'` }, 404);
    }
    let body: unknown;
    try {
      body = await readJson(c);
    } catch (err) {
      return json({ ok: false, error: errorMessage(err) }, 400);
    }
    const draining = isJsonObject(body) ? body.draining : undefined;
    if (typeof draining !== "boolean") {
      return json({ ok: false, error: "draining must be true or false" }, 400);
    }
    skeid.setNodeDraining(id, draining);
    logger.info("admin_node_draining", { node_id: id, draining });
    const node = skeid.getNode(id);
    const inflight = skeid.nodeMetrics(id)?.inflight ?? 0;
    return json(publicNodes({ ok: true, node: { ...node, draining, inflight } }));
  });

  // ---- metrics -----------------------------------------------------------------------------

  app.get(
    "/skeid/metrics/nodes",
    () =>
      json({
        metrics: skeid.nodeMetrics().map(nodeMetricsToWire),
        probes: deps.probes?.() ?? [],
        fair_share: deps.metrics.shareSnapshot(),
        // ADR 0021: every node that had a transport failure since it last answered.
        ejections: skeid.nodeEjections(),
      }),
  );

  app.get("/skeid/metrics", () =>
    new Response(deps.metrics.render(skeid), {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
    }));

  // How each tier of a model's route plan would pick for a sample request, with the scores.
  app.get("/skeid/route", (c) => {
    const model = c.req.query("model") ?? "";
    if (model === "") return json({ ok: false, error: "model: query parameter required" }, 400);
    return json(explainRoute(skeid, {
      model,
      prompt: c.req.query("prompt"),
      session: c.req.query("session"),
      apiKeyId: c.req.query("api_key_id"),
    }));
  });

  // ---- usage -------------------------------------------------------------------------------

  app.get("/skeid/usage", async (c) => {
    const filters: ReportFilters = {};
    for (const key of ["since", "api_key_id", "model"] as const) {
      const v = c.req.query(key);
      if (v !== undefined && v !== "") filters[key] = v;
    }
    const limit = Number.parseInt(c.req.query("limit") ?? "", 10);
    filters.limit = Number.isFinite(limit) ? limit : ADMIN_USAGE_LIMIT;
    try {
      const report = await deps.usageReport(filters);
      return json(report, report.ok ? 200 : 400);
    } catch (e) {
      logger.error("admin_usage_report_failed", { error: String(e) });
      return json({ ok: false, enabled: false, error: "usage report failed" }, 500);
    }
  });

  // The Usage page's charts: per bucket and group, from the hourly roll-ups (never a scan of a
  // large ledger once they are built).
  app.get("/skeid/usage/series", async (c) => {
    const format = c.req.query("format") ?? "json";
    if (format !== "json" && format !== "csv") {
      return json(
        { ok: false, error: `format: '${format}' is not json or csv`, param: "format" },
        400,
      );
    }
    let q: SeriesQuery;
    try {
      q = parseSeriesQuery((name) => c.req.query(name));
    } catch (e) {
      if (e instanceof QueryParamError) {
        return json({ ok: false, error: e.message, param: e.param }, 400);
      }
      throw e;
    }
    try {
      const answer = await deps.usageSeries?.(q);
      if (!answer) {
        return json({ ok: false, enabled: false, error: "usage_store not configured" }, 404);
      }
      if (format === "csv") {
        return new Response(seriesCsv(answer), {
          headers: {
            "content-type": "text/csv; charset=utf-8",
            "content-disposition": `attachment; filename="${seriesCsvName(answer)}"`,
            "x-content-type-options": "nosniff",
          },
        });
      }
      return json(answer);
    } catch (e) {
      logger.error("admin_usage_series_failed", { error: String(e) });
      return json({ ok: false, error: "usage series failed" }, 500);
    }
  });

  // The Requests page: the latest events, newest first, by keyset (never an OFFSET).
  app.get("/skeid/usage/events", async (c) => {
    let q: EventsQuery;
    try {
      q = parseEventsQuery((name) => c.req.query(name));
    } catch (e) {
      if (e instanceof QueryParamError) {
        return json({ ok: false, error: e.message, param: e.param }, 400);
      }
      throw e;
    }
    try {
      const page = await deps.usageEvents?.(q);
      if (!page) {
        return json({ ok: false, enabled: false, error: "usage_store not configured" }, 404);
      }
      return json(page);
    } catch (e) {
      logger.error("admin_usage_events_failed", { error: String(e) });
      return json({ ok: false, error: "usage events failed" }, 500);
    }
  });

  app.get("/skeid/usage/events/:id", async (c) => {
    const id = c.req.param("id");
    try {
      const found = await deps.usageEvent?.(id);
      if (found === undefined) {
        return json({ ok: false, enabled: false, error: "usage_store not configured" }, 404);
      }
      if (found === null) return json({ ok: false, error: `unknown usage event '${id}'` }, 404);
      return json(found);
    } catch (e) {
      logger.error("admin_usage_event_failed", { error: String(e) });
      return json({ ok: false, error: "usage event failed" }, 500);
    }
  });

  // ---- customer keys -----------------------------------------------------------------------

  // Issued keys and the listing of both kinds; other ids fall through to the limits view below.
  app.route("/", keysAdminRoutes(deps));

  app.get("/skeid/keys/:key", (c) => {
    const ref = c.req.param("key");
    const status = deps.tenancy ? keyStatus(skeid, deps.tenancy, ref) : undefined;
    if (!status) return json({ ok: false, error: `unknown customer key '${ref}'` }, 404);
    return json(status);
  });

  app.get("/skeid/tenancy", async () => {
    if (!deps.tenancy) return json({ keys: [] });
    return json(
      await tenancyListing({
        skeid,
        tenancy: deps.tenancy,
        issuedKeys: deps.issuedKeys,
        lastSeen: deps.lastSeen,
      }),
    );
  });

  // ---- live ------------------------------------------------------------------------------

  app.get("/skeid/live/snapshot", async () => {
    if (!deps.liveSnapshot) return json({ ok: false, error: "live data not available" }, 404);
    return json(await deps.liveSnapshot(), 200, { "cache-control": "no-store" });
  });

  app.get("/skeid/live", () => {
    if (!deps.live) return json({ ok: false, error: "live data not available" }, 404);
    return new Response(deps.live.open(), {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        "x-accel-buffering": "no",
      },
    });
  });

  // ---- config ------------------------------------------------------------------------------

  app.get("/skeid/config", () =>
    json({
      ...deps.reloadStatus(),
      ...deps.configApplied?.(),
      ...(deps.configHistory?.() ?? { path: null, last_change: null, last_failure: null }),
    }));

  // What a reload would do now, applying nothing.
  app.post("/skeid/config/check", async () => {
    if (!deps.checkConfig) return json({ ok: false, error: "no config manager" }, 404);
    return json(await deps.checkConfig());
  });

  // One process serving alone is the one worker of its group (with --workers N the supervisor
  // answers this route for all of them).
  app.get("/skeid/workers", () => {
    let requests = 0;
    let inflight = 0;
    for (const m of skeid.nodeMetrics()) {
      requests += m.started;
      inflight += m.inflight;
    }
    const started = new Date(deps.startedAt ?? skeid.now()).toISOString();
    return json({ workers: [{ index: 0, started_at: started, restarts: 0, requests, inflight }] });
  });

  app.post("/skeid/config/reload", async () => {
    try {
      const result = await deps.reload();
      return json({ ok: true, config: result ?? null, status: deps.reloadStatus() });
    } catch (e) {
      const error = errorMessage(e);
      return json({ ok: false, error, status: deps.reloadStatus() }, 500);
    }
  });

  // ---- the function table ------------------------------------------------------------------

  app.post("/skeid/call/:function", async (c) => {
    const name = c.req.param("function");
    let args: unknown;
    try {
      args = await readJson(c);
    } catch (err) {
      return json({ ok: false, error: `${name}: ${errorMessage(err)}` }, 400);
    }
    try {
      return json(publicNodes(await deps.functions.call(name, args ?? {})));
    } catch (e) {
      if (e instanceof FunctionError) return json({ ok: false, error: e.message }, e.status);
      logger.error("admin_call_failed", { function: name, error: String(e) });
      return json({ ok: false, error: `${name}: internal error` }, 500);
    }
  });

  return app;
}

/** An admin answer with its nodes' URLs free of credentials (`nodes` lists, a `node`). */
function publicNodes(answer: unknown): unknown {
  if (!isJsonObject(answer)) return answer;
  const out: Record<string, unknown> = { ...answer };
  if (Array.isArray(answer.nodes)) out.nodes = answer.nodes.map(publicNode);
  if (answer.node !== undefined) out.node = publicNode(answer.node);
  return out;
}

function publicNode(node: unknown): unknown {
  return isJsonObject(node) && typeof node.url === "string"
    ? withPublicUrl(node as { url: string })
    : node;
}
