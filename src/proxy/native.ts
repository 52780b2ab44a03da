/**
 * Which face an attempt speaks to its node: the client's face, or — for a node that speaks the
 * client's API itself (`responses: native`, ADR 0028) — the face's native sibling, which sends the
 * request as it came and passes the answer through.
 *
 * @module
 */
import type { Node } from "../core/types.ts";
import type { Face, JsonObject, UpstreamRequest } from "../faces/face.ts";
import { upstreamRequest } from "./intake.ts";

/** The face and upstream request of the current attempt, switched per node. */
export class NodeFaces {
  /** The face the current attempt speaks. */
  face: Face;
  /** Its upstream request. */
  upstream: UpstreamRequest;
  readonly #client: Face;
  readonly #native: Face;
  readonly #endpoint: string;
  readonly #body: JsonObject;
  readonly #clientUpstream: UpstreamRequest;

  /** `upstream`: the client face's request of `body`. */
  constructor(
    client: Face,
    native: Face,
    endpoint: string,
    body: JsonObject,
    upstream: UpstreamRequest,
  ) {
    this.face = client;
    this.upstream = upstream;
    this.#client = client;
    this.#native = native;
    this.#endpoint = endpoint;
    this.#body = body;
    this.#clientUpstream = upstream;
  }

  /** Switches to the face `node` is called with; whether that changed the face. */
  to(node: Node): boolean {
    const face = node.responses === "native" ? this.#native : this.#client;
    if (face === this.face) return false;
    this.face = face;
    this.upstream = face === this.#client
      ? this.#clientUpstream
      : upstreamRequest(face, this.#endpoint, this.#body);
    return true;
  }
}

/** The switch for a request, or undefined when the face has no native sibling. */
export function nodeFaces(
  face: Face,
  endpoint: string,
  body: JsonObject,
  upstream: UpstreamRequest,
): NodeFaces | undefined {
  return face.native === undefined
    ? undefined
    : new NodeFaces(face, face.native, endpoint, body, upstream);
}
