/**
 * The HTTP app: the data plane (OpenAI, Anthropic and Ollama faces), `/health`, the provider
 * manifest, and the admin plane under `/skeid/*`, assembled over one Gateway.
 *
 * @module
 */
import { errorMessage } from "./error_message.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import type { Gateway } from "./gateway.ts";
import type { ServeHandler } from "./edge/listener.ts";
import { asRequest, type InboundRequest } from "./edge/inbound_request.ts";
import { adminRoutes } from "./admin/routes.ts";
import { consoleRoutes } from "./console/console_routes.ts";
import { registrySnapshotRoute } from "./registry/route.ts";
import {
  countTokens,
  faceFor,
  modelsBody,
  psBody,
  ResponsesFace,
  tagsBody,
  versionBody,
} from "./faces/index.ts";
import type { FaceName } from "./faces/face.ts";
import { handleProxy } from "./proxy/handler.ts";
import { errorResponse, jsonResponse } from "./proxy/errors.ts";
import { requestKeyId } from "./proxy/identity.ts";
import { requestIdOf } from "./proxy/intake.ts";
import { localKeyId, withLocalBody } from "./proxy/local_intake.ts";
import { ollamaRootResponse, showResponse, withOllamaLoad } from "./faces/ollama_local.ts";
import { notFoundResponse } from "./faces/not_found.ts";
import { keptResponseRoute } from "./responses/response_keeper.ts";

/** The data-plane routes each face proxies. */
const PROXIED: readonly { face: FaceName; path: string }[] = [
  { face: "openai", path: "/v1/chat/completions" },
  { face: "openai", path: "/v1/completions" },
  { face: "openai", path: "/v1/embeddings" },
  { face: "anthropic", path: "/v1/messages" },
  { face: "responses", path: "/v1/responses" },
  { face: "ollama", path: "/api/chat" },
  { face: "ollama", path: "/api/generate" },
  { face: "ollama", path: "/api/embed" },
  { face: "ollama", path: "/api/embeddings" },
];

/**
 * The gateway's HTTP app: a request (the edge's own, or a `Request`) and what the listener said
 * of it (Hono's `env`, optional for a caller with no connection) to its answer.
 */
export type GatewayApp = (
  req: InboundRequest,
  info?: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

/**
 * Builds the app over a gateway. `front` is the handler clients reach (a worker's hands the
 * group's admin requests to its supervisor, ADR 0025); the console asks its first calls through
 * it, as its page's script would. Without it, the app itself.
 */
export function buildApp(gw: Gateway, front?: ServeHandler): GatewayApp {
  const app = new Hono();
  const faces = {
    openai: faceFor("openai", { now: gw.skeid.now }),
    anthropic: faceFor("anthropic", { now: gw.skeid.now }),
    ollama: faceFor("ollama", { now: gw.skeid.now }),
    responses: new ResponsesFace({ now: gw.skeid.now, conversations: gw }),
  };

  app.get("/health", () => healthResponse(gw));

  // The data-plane routes are also dispatched without Hono (`dispatch` below); the Hono routes
  // stay for paths it leaves to Hono (percent-encoded) and as the one description of the surface.
  const proxied = new Map<string, (req: InboundRequest) => Promise<Response>>();
  for (const { face, path } of PROXIED) {
    const f = faces[face];
    // Ollama load/unload requests are answered locally (no node call, no usage event).
    const proxy = (req: InboundRequest) => handleProxy(gw, f, path, req);
    const load = withOllamaLoad(path, proxy, gw.skeid.now, (model, keyId) => {
      const plan = gw.skeid.routePlan({ model, api_key_id: keyId });
      return plan.permitted && plan.tiers.some((t) => gw.skeid.routeState(t).has_eligible);
    });
    // A load/unload request Skeid answers itself takes the known-key rule first, like any other.
    const handle = load === undefined ? proxy : async (req: InboundRequest) => {
      const id = await localKeyId(gw, f, req);
      return id instanceof Response ? id : load(req, id);
    };
    proxied.set(path, handle);
    app.post(path, (c: Context) => handle(c.req.raw));
  }

  app.post("/v1/messages/count_tokens", (c: Context) => {
    const face = faces.anthropic;
    const req = c.req.raw;
    return withLocalBody(gw, face, req, ({ body }) => {
      const rid = requestIdOf(req.headers, Date.now());
      try {
        return jsonResponse(200, countTokens(body), rid);
      } catch (err) {
        const status = typeof (err as { status?: unknown }).status === "number"
          ? (err as { status: number }).status
          : 400;
        const message = errorMessage(err);
        return errorResponse(face, status, "invalid_request_error", message, rid);
      }
    });
  });

  // Kept responses (ADR 0028): the key that owns one reads or deletes it.
  const kept = (c: Context) => keptResponseRoute(gw, c.req.raw, c.req.param("id") ?? "");
  app.get("/v1/responses/:id", kept);
  app.delete("/v1/responses/:id", kept);

  app.get("/v1/models", async (c: Context) => {
    const id = await localKeyId(gw, faces.openai, c.req.raw);
    if (id instanceof Response) return id;
    const models = gw.skeid.listModels({ api_key_id: id });
    return Response.json(modelsBody(models, gw.skeid.now()));
  });

  app.get("/api/tags", async (c: Context) => {
    const id = await localKeyId(gw, faces.ollama, c.req.raw);
    if (id instanceof Response) return id;
    const models = gw.skeid.listModels({ api_key_id: id });
    return Response.json(tagsBody(models, gw.skeid.now()));
  });
  app.get("/api/ps", async (c: Context) => {
    const id = await localKeyId(gw, faces.ollama, c.req.raw);
    return id instanceof Response ? id : Response.json(psBody());
  });
  app.get("/api/version", async (c: Context) => {
    const id = await localKeyId(gw, faces.ollama, c.req.raw);
    return id instanceof Response ? id : Response.json(versionBody());
  });
  // Ollama's local answers: the `Ollama is running` probe (GET and HEAD: open, like /health; it
  // says nothing but that the server runs) and /api/show.
  app.get("/", () => ollamaRootResponse());
  app.post(
    "/api/show",
    (c: Context) =>
      withLocalBody(
        gw,
        faces.ollama,
        c.req.raw,
        ({ id, body }) =>
          showResponse(body, gw.skeid.listModels({ api_key_id: id }), gw.skeid.now()),
      ),
  );

  app.get("/.well-known/langertha.json", async (c: Context) => {
    if (!gw.config.manifestEnabled()) return c.text("Not Found", 404);
    const req = c.req.raw;
    const r = requestKeyId(req.headers, gw.skeid.routing.trust_key_id_header, gw.keyIds);
    const id = r instanceof Promise ? await r : r;
    if (id === undefined) {
      return errorResponse(
        faces.openai,
        401,
        "authentication_error",
        "An API key is required",
        requestIdOf(req.headers, Date.now()),
      );
    }
    const manifest = gw.config.manifestFor(id);
    if (manifest === undefined) {
      return errorResponse(
        faces.openai,
        403,
        "permission_error",
        "No provider manifest is published for this key",
        requestIdOf(req.headers, Date.now()),
      );
    }
    return new Response(manifest, {
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });
  });

  app.route(
    "/",
    registrySnapshotRoute({
      skeid: gw.skeid,
      registry: () => gw.config.registry(),
      adminKey: () => gw.config.adminApiKey(),
    }),
  );
  const admin = adminRoutes(gw.adminDeps());
  // Before the admin routes: the console's files are public (the data behind them is not). A
  // page carries its first calls' answers, asked with the page request's cookie (ADR 0051).
  app.route(
    "/",
    consoleRoutes({
      adminKey: () => gw.config.adminApiKey(),
      adminKeyProblem: () => gw.config.adminKeyProblem(),
      firstAnswer: async (path, page, info) => {
        const cookie = page.headers.get("cookie");
        const req = new Request(new URL(path, page.url), {
          headers: cookie === null ? {} : { cookie },
        });
        // `info` is what the listener handed the page's request (Hono's `c.env`).
        const res = await (front ?? dispatch)(req, info as Deno.ServeHandlerInfo<Deno.NetAddr>);
        return { status: res.status, body: await res.json().catch(() => null) };
      },
    }),
  );
  app.route("/", admin);

  app.notFound((c: Context) => {
    gw.logger.debug("route_not_found", { method: c.req.method, path: c.req.path });
    return notFoundResponse(c.req.method, c.req.path, faces);
  });
  app.onError((err) => {
    gw.logger.error("http_error", { error: errorMessage(err) });
    return new Response(
      JSON.stringify({ error: { message: "Internal gateway error", type: "api_error" } }),
      { status: 500, headers: { "content-type": "application/json" } },
    );
  });
  // Hot path: a proxied POST goes straight to its handler (no router walk, Context or promise
  // wrapping: about a tenth of the gateway's CPU per request) with the request as the edge made
  // it; everything else, and any path that needs decoding, goes through Hono as a `Request`.
  const dispatch: GatewayApp = (req, info) => {
    if (req.method === "POST") {
      const path = plainPath(req.url);
      const handle = path === undefined ? undefined : proxied.get(path);
      if (handle) return handle(req);
    }
    return app.fetch(asRequest(req), info);
  };
  return dispatch;
}

/**
 * The path of a request URL, as Hono's router sees it, or undefined when it holds a `%` (Hono
 * decodes those: left to it).
 */
export function plainPath(url: string): string | undefined {
  const start = url.indexOf("/", url.indexOf(":") + 4);
  if (start < 0) return undefined;
  let end = url.length;
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 37 /* % */) return undefined;
    if (c === 63 /* ? */) {
      end = i;
      break;
    }
  }
  return url.slice(start, end);
}

function healthResponse(gw: Gateway): Response {
  return new Response(JSON.stringify(gw.health()), {
    headers: { "content-type": "application/json" },
  });
}
