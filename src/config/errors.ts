/**
 * Config errors that name what was wrong and where: a config path (`nodes[2].engine`) and, for a
 * YAML file, the line. A load collects every error it finds instead of stopping at the first.
 *
 * @module
 */

export { formatPath, type PathSegment } from "../core/config_path.ts";

/** One thing wrong with a config (or worth a warning), located. */
export interface ConfigIssue {
  /** Config path as printed, e.g. `nodes[2].engine`; `''` for the document itself. */
  path: string;
  /** 1-based line in the YAML source, when known. */
  line?: number;
  /** 1-based column, for YAML syntax errors. */
  col?: number;
  /** What is wrong, without the path. */
  message: string;
}

/** `nodes[2].engine (line 14): unknown engine 'foo' ...` */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.line === undefined
    ? ""
    : issue.col === undefined
    ? `line ${issue.line}`
    : `line ${issue.line}, column ${issue.col}`;
  if (issue.path === "") return where === "" ? issue.message : `${where}: ${issue.message}`;
  return where === ""
    ? `${issue.path}: ${issue.message}`
    : `${issue.path} (${where}): ${issue.message}`;
}

/** A config that does not load; `issues` lists every error found, in source order. */
export class ConfigLoadError extends Error {
  /** `source` (usually the file path) heads the message; `issues` become one line each. */
  constructor(readonly issues: ConfigIssue[], readonly source?: string) {
    super(ConfigLoadError.describe(issues, source));
    this.name = "ConfigLoadError";
  }

  /** The message: one line per issue, after a heading naming the source and the count. */
  static describe(issues: readonly ConfigIssue[], source?: string): string {
    const head = `${source ? `config ${source}` : "config"}: ${issues.length} ${
      issues.length === 1 ? "error" : "errors"
    }`;
    return [head, ...issues.map((i) => `  ${formatIssue(i)}`)].join("\n");
  }
}
