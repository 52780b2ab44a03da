/**
 * Config paths as data: the segments of where a value sits (`["nodes", 2, "engine"]`), printed
 * in one place (`nodes[2].engine`). Core functions that check a spec throw a ConfigPathError
 * whose segments are relative to the spec they were given; the config loader puts the section's
 * own segments in front, so no caller rebuilds a path by editing a message.
 *
 * @module
 */

/** One segment of a config path: a mapping key or a list index. */
export type PathSegment = string | number;

const PLAIN_KEY = /^[A-Za-z0-9_*\-]+$/;

/** Prints path segments the way errors name them: `nodes[2].engine`, `pricing["gpt-4.1"]`. */
export function formatPath(segments: readonly PathSegment[]): string {
  let out = "";
  for (const seg of segments) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (PLAIN_KEY.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/**
 * A spec error located by path. `message` is what an API caller reads (it may name the path
 * or the entry); `detail` is the same without the location, for a caller that prints the path
 * itself; `segments` is the location relative to the spec that was checked.
 */
export class ConfigPathError extends Error {
  /** See the class comment; `detail` defaults to the message. */
  constructor(
    message: string,
    readonly segments: readonly PathSegment[],
    readonly detail: string = message,
  ) {
    super(message);
    this.name = "ConfigPathError";
  }
}
