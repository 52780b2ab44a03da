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

/**
 * An Error's message with the messages of its causes: `fetch` rejects with a bare
 * `fetch failed` and puts what happened (the URL, `Connection refused`) in `cause`.
 */
export function errorChain(err: unknown): string {
  const parts = [errorMessage(err)];
  let cause = err instanceof Error ? err.cause : undefined;
  // Bounded: a cause chain can loop.
  for (let i = 0; i < 4 && cause !== undefined; i++) {
    parts.push(errorMessage(cause));
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return parts.join(": ");
}
