/**
 * The text of anything thrown, for logs and error answers: `catch` binds `unknown`, and not
 * everything thrown is an Error.
 *
 * @module
 */

/** An Error's message, else the thrown value as text. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
