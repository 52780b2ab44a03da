/**
 * Server-sent event frames as the Anthropic face writes them.
 *
 * @module
 */

/** One frame: `event: <name>\ndata: <compact JSON>\n\n`. */
export function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
