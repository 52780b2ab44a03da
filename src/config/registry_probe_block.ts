/**
 * Validation of a node's `capacity: {probe: registry}` block (seed 001, `validate_config`): a
 * block the probe cannot work with fails the config load instead of forgetting silently on every
 * poll. Unknown keys are refused here because the likely one is a secret written into the file
 * instead of named by variable.
 *
 * @module
 */
import type { PathSegment } from "./errors.ts";
import { isJsonObject } from "../core/json.ts";

/** Keys the registry probe reads. */
export const REGISTRY_PROBE_KEYS: readonly string[] = [
  "probe",
  "type",
  "secret_env",
  "read_key_env",
  "admin_key_env",
  "url",
  "path",
  "interval_ms",
  "tags",
  "max_skew_s",
];

/** A problem in a capacity block, located relative to the block. */
export interface ProbeProblem {
  /** Where the problem is: config path segments relative to the capacity block. */
  segments: PathSegment[];
  /** What is wrong there. */
  message: string;
}

/** The probe kind of a capacity block (`probe`, else `type`), lowercased; `inflight` when absent. */
export function probeKind(block: Record<string, unknown>): string {
  const raw = block.probe ?? block.type;
  return typeof raw === "string" && raw.trim() !== "" ? raw.trim().toLowerCase() : "inflight";
}

/** Every problem of a registry probe block (empty when it is usable, or not a registry probe). */
export function validateRegistryProbeBlock(block: unknown): ProbeProblem[] {
  if (!isJsonObject(block) || probeKind(block) !== "registry") return [];
  const problems: ProbeProblem[] = [];
  const nonEmpty = (k: string) => typeof block[k] === "string" && (block[k] as string) !== "";
  for (const key of Object.keys(block)) {
    if (!REGISTRY_PROBE_KEYS.includes(key)) {
      problems.push({
        segments: [key],
        message: `unknown key for the registry probe (expected one of: ${
          REGISTRY_PROBE_KEYS.join(", ")
        }); secrets are named by variable, never written here`,
      });
    }
  }
  for (const key of ["secret_env", "read_key_env", "admin_key_env"]) {
    if (block[key] !== undefined && block[key] !== null && !nonEmpty(key)) {
      problems.push({ segments: [key], message: "must be a variable name" });
    }
  }
  if (!nonEmpty("secret_env")) {
    if (block.secret_env === undefined || block.secret_env === null) {
      problems.push({
        segments: [],
        message: "the registry probe needs secret_env (the variable holding the HMAC secret)",
      });
    }
  }
  if (!nonEmpty("read_key_env") && !nonEmpty("admin_key_env")) {
    problems.push({
      segments: [],
      message: "the registry probe needs read_key_env or admin_key_env (the bearer to send)",
    });
  }
  if (block.url !== undefined && block.url !== null) {
    if (typeof block.url !== "string" || !/^https?:\/\/[^/\s]+/i.test(block.url)) {
      problems.push({ segments: ["url"], message: "must be an http(s) URL" });
    }
  }
  if (block.path !== undefined && block.path !== null && typeof block.path !== "string") {
    problems.push({ segments: ["path"], message: "must be a string" });
  }
  // interval_ms (> 0) is checked by the core's normalizeNode for every probe kind.
  if (block.max_skew_s !== undefined && block.max_skew_s !== null) {
    const v = Number(block.max_skew_s);
    if (typeof block.max_skew_s === "boolean" || !Number.isFinite(v) || v < 0) {
      problems.push({ segments: ["max_skew_s"], message: "must be a number >= 0" });
    }
  }
  if (
    block.tags !== undefined && block.tags !== null && typeof block.tags !== "string" &&
    !Array.isArray(block.tags)
  ) {
    problems.push({ segments: ["tags"], message: "must be a list of tags or a string" });
  }
  return problems;
}

/**
 * A node validator for the core (`new Skeid({validateNode})`): throws on a registry probe block
 * this probe cannot work with, so `addNode` (admin API, functions) refuses what a config load
 * refuses.
 */
export function assertRegistryProbeBlock(node: { capacity?: unknown }): void {
  const problems = validateRegistryProbeBlock(node.capacity);
  if (problems.length === 0) return;
  throw new Error(
    problems.map((p) =>
      p.segments.length === 0 ? p.message : `${p.segments.join(".")}: ${p.message}`
    ).join("; "),
  );
}
