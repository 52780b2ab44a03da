/**
 * YAML text → plain data, keeping where each value was written so that every config error can
 * name its line. Syntax errors are reported with line and column.
 *
 * @module
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, visit } from "yaml";
import { type ConfigIssue, ConfigLoadError, type PathSegment } from "./errors.ts";
import { errorMessage } from "../error_message.ts";

/** A parsed YAML document: its data and a way back from a config path to a source line. */
export interface ParsedYaml {
  /** The document as plain data (`undefined` for an empty document). */
  readonly value: unknown;
  /** The line of the deepest part of `path` that exists in the source. */
  lineOf(path: readonly PathSegment[]): number | undefined;
}

/** Parses YAML text; throws ConfigLoadError naming line and column of every syntax error. */
export function parseYaml(text: string, source?: string): ParsedYaml {
  const counter = new LineCounter();
  // The library's own duplicate-key check compares each key with every earlier one of its
  // mapping: quadratic, 10 s for a `keys:` section of 20k entries. It is off; duplicateKeys
  // does the same check with a set.
  const doc = parseDocument(text, {
    lineCounter: counter,
    prettyErrors: false,
    merge: true,
    uniqueKeys: false,
  });
  const issues: ConfigIssue[] = doc.errors.map((e) => {
    const pos = counter.linePos(e.pos[0]);
    return { path: "", line: pos.line, col: pos.col, message: firstLine(e.message) };
  });
  if (issues.length === 0) {
    for (const offset of duplicateKeys(doc)) {
      const pos = counter.linePos(offset);
      issues.push({ path: "", line: pos.line, col: pos.col, message: "Map keys must be unique" });
    }
  }
  if (issues.length > 0) throw new ConfigLoadError(issues, source);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    throw new ConfigLoadError([{ path: "", message: errorMessage(e) }], source);
  }
  const lineAt = (offset: number | undefined) =>
    offset === undefined ? undefined : counter.linePos(offset).line;
  return {
    value,
    lineOf(path) {
      let node: unknown = doc.contents;
      let line = lineAt(rangeStart(node));
      for (const seg of path) {
        if (isMap(node)) {
          const pair = node.items.find((p) =>
            isScalar(p.key) ? String(p.key.value) === String(seg) : false
          );
          if (!pair) break;
          line = lineAt(rangeStart(pair.key)) ?? line;
          node = pair.value;
        } else if (isSeq(node) && typeof seg === "number") {
          const item = node.items[seg];
          if (item === undefined) break;
          line = lineAt(rangeStart(item)) ?? line;
          node = item;
        } else break;
      }
      return line;
    },
  };
}

/**
 * Source offsets of every mapping key that repeats an earlier key of the same mapping (scalar
 * keys by value; YAML merge keys `<<` may repeat). One set per mapping: linear in the document.
 */
function duplicateKeys(doc: ReturnType<typeof parseDocument>): number[] {
  const out: number[] = [];
  visit(doc, {
    Map(_, map) {
      const seen = new Set<unknown>();
      for (const pair of map.items) {
        if (!isScalar(pair.key) || pair.key.value === "<<") continue;
        const value = pair.key.value;
        if (seen.has(value)) out.push(rangeStart(pair.key) ?? 0);
        else seen.add(value);
      }
    },
  });
  return out;
}

function rangeStart(node: unknown): number | undefined {
  if (node !== null && typeof node === "object" && "range" in node) {
    const range = (node as { range?: [number, number, number] | null }).range;
    return range ? range[0] : undefined;
  }
  return undefined;
}

function firstLine(message: string): string {
  return message.split("\n")[0].trim();
}
