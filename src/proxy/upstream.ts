/**
 * The upstream request's rules: the node URL, the headers sent upstream (hop count included),
 * and the headers of a relayed answer.
 *
 * @module
 */
import type { Node } from "../core/types.ts";
import { basicAuthorization, withoutCredentials } from "../url_credentials.ts";
import { ANONYMOUS } from "./identity.ts";
import { attemptTraceparent, type TraceContext } from "./trace_context.ts";
import { ListedResponse } from "../edge/listed_response.ts";

/**
 * The upstream URL of a path below `/v1`: the node URL without trailing `/`; when it ends in `/v1`
 * the path is appended, else `/v1` + path (`http://a:1` → `http://a:1/v1/chat/completions`).
 */
export function upstreamUrl(nodeUrl: string, path: string): string {
  // Credentials in the node URL go as `Authorization: Basic` (upstreamHeaders), never in the URL.
  let base = withoutCredentials(nodeUrl);
  while (base.endsWith("/")) base = base.slice(0, -1);
  return base.endsWith("/v1") ? base + path : base + "/v1" + path;
}

/** Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, never relayed. */
const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
];

/** Client request headers never forwarded upstream: hop-by-hop plus what the fetch sets itself. */
export const DROPPED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  "host",
  "content-length",
  "accept-encoding",
]);

/**
 * Client identity headers: never forwarded. A downstream Skeid that trusts them
 * (`routing.trust_key_id_header`) would bill whoever the client named; a node that opts in
 * (`forward_key_id`) gets Skeid's own resolved customer key id instead.
 */
export const IDENTITY_HEADERS: ReadonlySet<string> = new Set(["x-skeid-key-id", "x-api-key-id"]);

/**
 * The client's trace context headers: never forwarded as they are. Each attempt sends its own
 * `traceparent` (the request's trace, the attempt's span id) and the `tracestate` kept when it
 * was well-formed (`trace_context.ts`).
 */
export const TRACE_HEADERS: ReadonlySet<string> = new Set(["traceparent", "tracestate"]);

/** The client's credential and provider-account headers: never sent to a node with its own key. */
export const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "x-goog-user-project",
  "openai-organization",
  "openai-project",
  "cookie",
]);

/** Upstream response headers never relayed to the client (the body is re-framed and decoded). */
export const DROPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  "content-length",
  "content-encoding",
]);

/**
 * Headers for the upstream call. With `nodeKey` the node's key replaces the client's credentials:
 * `Authorization: Bearer <nodeKey>` is set and none of the client's credential or
 * provider-account headers (`CREDENTIAL_HEADERS`) go; without one the client's headers go through
 * (minus the dropped set), an `x-api-key` (Anthropic clients) as `Authorization: Bearer` when the
 * client sent no `Authorization`. `x-api-key`, `anthropic-*`, the client identity headers and the
 * headers the client's `Connection` names are never forwarded. `keyId`, when given, goes as
 * `x-skeid-key-id` (a node with `forward_key_id`). `basic` (the node URL's credentials, see
 * `basicAuthorization`) counts as the node's own key when it has none. `hops` is this request's
 * hop count (`x-skeid-hops`), one more than it arrived with. `trace`, when given, is the
 * request's trace context: the attempt's own `traceparent` (a new span id) and its `tracestate`
 * go instead of the client's (`TRACE_HEADERS`); `spanId`, when given, is that attempt's span
 * (OpenTelemetry on), else a new id.
 */
export function upstreamHeaders(
  client: Headers,
  nodeKey: string | undefined,
  hops = 1,
  keyId?: string,
  basic?: string,
  trace?: TraceContext,
  spanId?: string,
): [string, string][] {
  // Pairs, not a Headers object: fetch builds its own from them, and a Headers handed over would
  // be iterated (sorted) a second time. `forEach` walks the same sorted, combined list as
  // `for…of`, at an eighth of the cost (no iterator objects).
  const out: [string, string][] = [];
  const named = connectionNamed(client);
  client.forEach((value, name) => {
    // Headers iteration yields lowercase names.
    if (DROPPED_REQUEST_HEADERS.has(name) || name === "content-type" || name === HOPS_HEADER) {
      return;
    }
    if (IDENTITY_HEADERS.has(name) || TRACE_HEADERS.has(name) || named?.has(name)) return;
    if ((nodeKey !== undefined || basic !== undefined) && CREDENTIAL_HEADERS.has(name)) return;
    // Anthropic-only headers mean nothing to an OpenAI-compatible node (ADR 0003); a client's
    // x-api-key travels as the Bearer token the node reads (below), never as itself.
    if (name === "x-api-key" || name.startsWith("anthropic-")) return;
    out.push([name, value]);
  });
  if (nodeKey !== undefined) out.push(["authorization", `Bearer ${nodeKey}`]);
  else if (basic !== undefined) out.push(["authorization", basic]);
  else if (!client.has("authorization") && client.has("x-api-key")) {
    out.push(["authorization", `Bearer ${client.get("x-api-key")}`]);
  }
  if (keyId !== undefined) out.push(["x-skeid-key-id", keyId]);
  if (trace !== undefined) {
    out.push(["traceparent", attemptTraceparent(trace, spanId)]);
    if (trace.tracestate !== undefined) out.push(["tracestate", trace.tracestate]);
  }
  out.push(["content-type", "application/json"], [HOPS_HEADER, String(hops)]);
  return out;
}

/**
 * The upstream headers of a call to `node`: its own key, its URL credentials, and with
 * `forward_key_id` the request's resolved customer key id (`apiKeyId`, never `anonymous`), and
 * the attempt's own `traceparent` of the request's `trace` (with `spanId`: the attempt span's).
 */
export function nodeHeaders(
  client: Headers,
  node: Pick<Node, "url" | "forward_key_id">,
  nodeKey: string | undefined,
  hops: number,
  apiKeyId: string,
  trace: TraceContext,
  spanId?: string,
): [string, string][] {
  const keyId = node.forward_key_id && apiKeyId !== ANONYMOUS ? apiKeyId : undefined;
  return upstreamHeaders(client, nodeKey, hops, keyId, basicAuthorization(node.url), trace, spanId);
}

/** The header names the client's `Connection` header lists (hop-by-hop, RFC 9110 §7.6.1). */
function connectionNamed(client: Headers): Set<string> | undefined {
  const value = client.get("connection");
  if (value === null) return undefined;
  const names = new Set<string>();
  for (const token of value.split(",")) {
    const name = token.trim().toLowerCase();
    if (name !== "" && name !== "close" && name !== "keep-alive") names.add(name);
  }
  return names.size > 0 ? names : undefined;
}

/** Counts the Skeid gateways a request passed through, so a node that points back at the
 * gateway (a config mistake) ends in a refusal instead of a request loop. */
export const HOPS_HEADER = "x-skeid-hops";

/** Most gateways a request may pass (chained Skeids are fine; a loop is not). */
export const MAX_HOPS = 8;

/** The hop count a request arrived with (0 from a client). */
export function hopsOf(headers: Headers): number {
  const raw = headers.get(HOPS_HEADER);
  if (raw === null) return 0;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * The client's answer to a relayed upstream one: `status` and `body`, the upstream's headers
 * (`pairs`, as `Headers` iteration yields them) minus the dropped set, and `x-skeid-node` and
 * `x-request-id` (replacing the upstream's own). A listed response (ADR 0058): the edge writes
 * these pairs as they are unless something reads its `headers` first.
 */
export function relayedResponse(
  status: number,
  body: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array> | null,
  pairs: readonly (readonly [string, string])[],
  nodeId: string,
  requestId: string,
): Response {
  return new ListedResponse(body, status, relayedPairs(pairs, nodeId, requestId));
}

/**
 * The relayed answer's header pairs, in the order of `pairs` (`Headers` iteration order): the
 * dropped set left out, Skeid's `x-request-id` and `x-skeid-node` in their sorted places, in
 * place of the upstream's own.
 */
function relayedPairs(
  pairs: readonly (readonly [string, string])[],
  nodeId: string,
  requestId: string,
): (readonly [string, string])[] {
  const out: (readonly [string, string])[] = [];
  let rid = false;
  let node = false;
  for (const pair of pairs) {
    const name = pair[0];
    if (DROPPED_RESPONSE_HEADERS.has(name)) continue;
    if (!rid && name >= REQUEST_ID) {
      out.push([REQUEST_ID, requestId]);
      rid = true;
    }
    if (!node && name >= SKEID_NODE) {
      out.push([SKEID_NODE, nodeId]);
      node = true;
    }
    if (name !== REQUEST_ID && name !== SKEID_NODE) out.push(pair);
  }
  if (!rid) out.push([REQUEST_ID, requestId]);
  if (!node) out.push([SKEID_NODE, nodeId]);
  return out;
}
const REQUEST_ID = "x-request-id";
const SKEID_NODE = "x-skeid-node";

/**
 * Header pairs as `Headers` iteration yields them: names lowercase, sorted, the values of a
 * repeated name joined with `, ` (`set-cookie` apart, each kept).
 */
export function iteratedPairs(raw: readonly (readonly [string, string])[]): [string, string][] {
  const out: [string, string][] = [];
  let seen: Map<string, number> | undefined;
  let sorted = true;
  for (const [rawName, value] of raw) {
    const name = rawName.toLowerCase();
    if (name !== "set-cookie") {
      seen ??= new Map();
      const at = seen.get(name);
      if (at !== undefined) {
        const prev = out[at][1];
        out[at][1] = prev.length > 0 ? `${prev}, ${value}` : value;
        continue;
      }
      seen.set(name, out.length);
    }
    if (sorted && out.length > 0 && out[out.length - 1][0] > name) sorted = false;
    out.push([name, value]);
  }
  if (!sorted) out.sort((a, b) => (a[0] > b[0] ? 1 : a[0] < b[0] ? -1 : 0));
  return out;
}
