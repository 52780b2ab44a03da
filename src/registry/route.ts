/**
 * `GET /skeid/registry/snapshot` (ADR 0019): the signed snapshot for a
 * fronting tier. It takes the admin key or the registry read key as a bearer token; the read key
 * opens this route and nothing else, so a fronting tier holding it cannot add nodes or flip
 * health.
 *
 * Answers: 404 while the registry is off or no credential could read it (as if the route did
 * not exist); 401 on a missing or wrong token; 503 when no signing secret is in force (a
 * snapshot is never published unsigned); else 200 with the canonical JSON body,
 * `X-Skeid-Registry-Signature: sha256=<hex>` and `Cache-Control: no-store`.
 *
 * @module
 */
import { Hono } from "hono";
import type { RoutingCore } from "../core/routing_core.ts";
import { bearerToken, secretMatches } from "../admin/auth.ts";
import { signedSnapshot, type SnapshotSettings } from "./snapshot.ts";
import { SIGNATURE_HEADER } from "./sign.ts";

/** The route's path. */
export const SNAPSHOT_PATH = "/skeid/registry/snapshot";

/** The registry settings the route reads (the config manager's `RegistrySettings` fits). */
export interface RegistryPublishing extends SnapshotSettings {
  /** HMAC-SHA256 signing secret. */
  readonly secret: string;
  /** Bearer accepted besides the admin key. */
  readonly readKey?: string;
}

/** What the route needs from the gateway around it; read on every request (reloads apply). */
export interface RegistryRouteDeps {
  /** The core whose snapshot is published. */
  skeid: RoutingCore;
  /** The registry settings in force, or undefined while the registry is off. */
  registry(): RegistryPublishing | undefined;
  /** The admin key in force; `''` = none. */
  adminKey(): string;
}

const JSON_TYPE = "application/json; charset=utf-8";

function jsonError(status: number, message: string, type: string, extra?: HeadersInit): Response {
  const headers = new Headers(extra);
  headers.set("content-type", JSON_TYPE);
  headers.set("cache-control", "no-store");
  return new Response(JSON.stringify({ error: { message, type } }), { status, headers });
}

/** Whether the presented token is the admin key or the read key (each compared in constant time). */
async function tokenAccepted(
  token: string,
  adminKey: string,
  readKey: string | undefined,
): Promise<boolean> {
  const [admin, read] = await Promise.all([
    adminKey !== "" ? secretMatches(token, adminKey) : false,
    readKey ? secretMatches(token, readKey) : false,
  ]);
  return admin || read;
}

/** The snapshot handler as a plain `(Request) => Response` function (any method, any path). */
export function registrySnapshotHandler(
  deps: RegistryRouteDeps,
): (req: Request) => Promise<Response> {
  return async (req) => {
    const settings = deps.registry();
    const adminKey = deps.adminKey();
    if (!settings || (adminKey === "" && !settings.readKey)) {
      return new Response("Not Found", { status: 404 });
    }
    const token = bearerToken(req.headers.get("authorization"));
    if (token === undefined || !(await tokenAccepted(token, adminKey, settings.readKey))) {
      return jsonError(401, "Missing or invalid bearer token", "unauthorized", {
        "www-authenticate": 'Bearer realm="skeid-registry"',
      });
    }
    if (!settings.secret) return jsonError(503, "Registry secret is not set", "unavailable");
    const { body, signature } = await signedSnapshot(deps.skeid, settings);
    return new Response(body, {
      status: 200,
      headers: {
        "content-type": JSON_TYPE,
        "cache-control": "no-store",
        [SIGNATURE_HEADER]: signature,
      },
    });
  };
}

/** A Hono app with `GET /skeid/registry/snapshot`; the server mounts it with `app.route("/", …)`. */
export function registrySnapshotRoute(deps: RegistryRouteDeps): Hono {
  const handle = registrySnapshotHandler(deps);
  const app = new Hono();
  app.get(SNAPSHOT_PATH, (c) => handle(c.req.raw));
  return app;
}
