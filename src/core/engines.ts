/**
 * Engine ids: Langertha engine class names, lowercased (see reference engines.md).
 * SKELETON — owner: core-routing.
 * @module
 */

/** Every engine id a node may name, sorted. */
export const SUPPORTED_ENGINE_IDS: readonly string[] = [];

/**
 * Lowercases, strips a `Langertha::Engine::`/`LangerthaX::Engine::` prefix; `''` for empty.
 * Throws `unknown engine '<raw>' (expected one of: ...)` for an id not in the list.
 */
export function normalizeEngineId(_raw: unknown): string {
  throw new Error("TODO");
}
