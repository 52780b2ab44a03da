/**
 * The admin API of customer keys (ADR 0029): `POST /skeid/keys` (create an issued key, shown
 * once), `GET /skeid/keys` (config keys and issued keys in one listing, paged by id),
 * `GET /skeid/keys/{id}` of an issued key (its record, limits, windows and budget),
 * `PATCH /skeid/keys/{id}`, `POST /skeid/keys/{id}/rotate` and `DELETE /skeid/keys/{id}`. No
 * route ever answers a salt or a hash; a key's secret only in the answer that made it.
 *
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { RoutingCore } from "../core/routing_core.ts";
import type { Tenancy } from "../core/tenancy.ts";
import { bodyJson, type JsonObject } from "../core/json.ts";
import { keyStatusOf } from "../admin/keys.ts";
import { errorMessage } from "../error_message.ts";
import type { Logger } from "../log.ts";
import {
  type IssuedKeyDirectory,
  IssuedKeyError,
  PAGE_DEFAULT,
  PAGE_MAX,
  viewOf,
} from "./directory.ts";
import type { IssuedKeyState } from "./issued_store.ts";
import { isPublicId } from "./key_format.ts";

/** What the routes need. */
export interface KeysAdminDeps {
  skeid: RoutingCore;
  tenancy?: Tenancy;
  issuedKeys?: IssuedKeyDirectory;
  logger: Logger;
}

const STATES: readonly IssuedKeyState[] = ["active", "expired", "revoked"];
const KINDS = ["config", "issued"];

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json; charset=utf-8" },
  });
}

function refused(status: number, error: string): Response {
  return json({ ok: false, error }, status);
}

/** The body as JSON; undefined when empty; an IssuedKeyError for bad JSON. */
async function body(c: Context): Promise<unknown> {
  const text = await c.req.text();
  try {
    return bodyJson(text);
  } catch (err) {
    throw new IssuedKeyError(400, errorMessage(err));
  }
}

/** Runs an operation of the directory, its refusals as answers. */
async function answer(
  deps: KeysAdminDeps,
  op: (dir: IssuedKeyDirectory) => Promise<unknown>,
): Promise<Response> {
  const dir = deps.issuedKeys;
  if (dir === undefined) return refused(503, "issued keys are not available here");
  try {
    return json(await op(dir));
  } catch (err) {
    if (err instanceof IssuedKeyError) return refused(err.status, err.message);
    deps.logger.error("admin_keys_failed", { error: errorMessage(err) });
    return refused(500, "issued keys: internal error");
  }
}

/** The config's customer keys as listing rows: listed ids, by name where one is given. */
function configKeys(skeid: RoutingCore): JsonObject[] {
  const set = skeid.policySet;
  const rows: JsonObject[] = [];
  for (const id of set.knownKeyIds) {
    const policy = skeid.policyForKey(id);
    let policyName: string | null = null;
    for (const [name, p] of set.policies) if (p === policy) policyName = name;
    rows.push({
      id,
      kind: "config",
      name: skeid.keyNameForId(id) ?? null,
      policy: policyName,
      state: "active",
    });
  }
  return rows.sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1));
}

/** A listing filter from the query; 400 naming a bad one. */
function queryOf(c: Context) {
  const q = (name: string) => {
    const v = c.req.query(name);
    return v === undefined || v === "" ? undefined : v;
  };
  const limitText = q("limit");
  const limit = limitText === undefined ? PAGE_DEFAULT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_MAX) {
    throw new IssuedKeyError(400, `limit: must be a whole number from 1 to ${PAGE_MAX}`);
  }
  const state = q("state");
  if (state !== undefined && !(STATES as readonly string[]).includes(state)) {
    throw new IssuedKeyError(400, `state: must be one of ${STATES.join(", ")}`);
  }
  const kind = q("kind");
  if (kind !== undefined && !KINDS.includes(kind)) {
    throw new IssuedKeyError(400, `kind: must be one of ${KINDS.join(", ")}`);
  }
  return {
    after: q("after"),
    limit,
    name: q("name"),
    policy: q("policy"),
    state: state as IssuedKeyState | undefined,
    kind,
  };
}

/** The routes, as a Hono app the admin plane mounts (behind its admin key check). */
export function keysAdminRoutes(deps: KeysAdminDeps): Hono {
  const app = new Hono();
  const { skeid } = deps;

  app.post(
    "/skeid/keys",
    async (c) => await answer(deps, async (dir) => dir.create(await body(c))),
  );

  // Both kinds in one order (by id), paged by the last id seen: config keys from the config in
  // force, issued keys from the database.
  app.get("/skeid/keys", async (c) => {
    let q: ReturnType<typeof queryOf>;
    try {
      q = queryOf(c);
    } catch (err) {
      return refused(400, errorMessage(err));
    }
    const fromConfig = q.kind === "issued" || (q.state !== undefined && q.state !== "active")
      ? []
      : configKeys(skeid).filter((k) =>
        (q.after === undefined || String(k.id) > q.after) &&
        (q.name === undefined || k.name === q.name) &&
        (q.policy === undefined || k.policy === q.policy)
      );
    const dir = deps.issuedKeys;
    let issued: JsonObject[] = [];
    if (q.kind !== "config" && dir !== undefined) {
      try {
        const now = skeid.now();
        issued = (await dir.list(q)).map((row) => viewOf(row, now));
      } catch (err) {
        // Without a table (jsonlog, none) the listing still shows the config's keys.
        if (!(err instanceof IssuedKeyError) || err.status !== 503) throw err;
      }
    }
    const merged = [...fromConfig, ...issued]
      .sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1))
      .slice(0, q.limit);
    const more = merged.length === q.limit &&
      (fromConfig.length + issued.length > q.limit || issued.length === q.limit);
    return json({
      keys: merged,
      next_after: more ? String(merged[merged.length - 1].id) : null,
    });
  });

  app.get("/skeid/keys/:id", async (c, next) => {
    const id = c.req.param("id");
    // Config keys, names and other customer key ids: the limits view of `admin/keys.ts`.
    if (!isPublicId(id)) return await next();
    return await answer(deps, async (dir) => {
      const view = await dir.get(id);
      // Its limits, windows and budget as any customer key's; its own name and policy.
      return deps.tenancy ? { ...keyStatusOf(skeid, deps.tenancy, id), ...view } : view;
    });
  });

  app.patch(
    "/skeid/keys/:id",
    async (c) => await answer(deps, async (dir) => dir.patch(c.req.param("id"), await body(c))),
  );

  app.post(
    "/skeid/keys/:id/rotate",
    async (c) => await answer(deps, async (dir) => dir.rotate(c.req.param("id"), await body(c))),
  );

  app.delete(
    "/skeid/keys/:id",
    async (c) => await answer(deps, (dir) => dir.revoke(c.req.param("id"))),
  );

  return app;
}
