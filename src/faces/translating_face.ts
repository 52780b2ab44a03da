/**
 * What the translating faces (Anthropic, Ollama, Responses) share: answers are translated and
 * upstream errors reshaped (ADR 0012), the upstream body is the face's translation with the served
 * model written in, streams always go through the face's translator, and a clock for the stamps
 * of translated answers.
 *
 * @module
 */
import type { Face, FaceName, FaceOptions, UpstreamRequest } from "./face.ts";
import { servedBody } from "./face.ts";

/**
 * The base of a face that translates to the one chat wire and back; each subclass implements the
 * rest of `Face`.
 */
export abstract class TranslatingFace
  implements Pick<Face, "passesThrough" | "upstreamBody" | "relayMode"> {
  abstract readonly name: FaceName;
  /** Answers are translated and upstream errors reshaped (ADR 0012). */
  readonly passesThrough = false;
  /** Clock, epoch ms, for `created_at` stamps and fallback ids. */
  protected readonly now: () => number;

  /** Uses `options.now` (epoch ms, default `Date.now`). */
  constructor(options: FaceOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  /** The translated body with the served model. */
  upstreamBody(upstream: UpstreamRequest, served: string): string {
    return servedBody(upstream, served);
  }

  /** Streams are always translated. */
  relayMode(): "translate" {
    return "translate";
  }
}
