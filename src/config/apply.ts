/**
 * Commits a loaded config to the core — all or nothing. Everything is built before anything
 * changes (load.ts builds nodes, aliases, prices and policies through the core's own
 * normalizers), and the one commit step that validates again (`replaceNodes`) runs first, so a
 * failure leaves the core exactly as it was.
 *
 * Section semantics (seed CONFIGURATION): a declared section replaces what is loaded; a section
 * an earlier applied config declared and this one does not goes back to empty; a routing key
 * removed goes back to `skeid.baseRouting`; a section no applied config ever declared is left to
 * whoever set it (admin API, functions). An unchanged `nodes` section keeps the node list, its
 * generation and any health set through the admin API.
 *
 * The change list names only what the commit changed: a section whose content is what the core
 * already holds (compared by content, not by object) is not listed, even though it is installed.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { RoutingSettings } from "../core/types.ts";
import { canonicalPolicy, emptyPolicySet, type PolicySet } from "../core/policies.ts";
import { canonicalJson } from "./canonical.ts";
import type { LoadedConfig } from "./load.ts";
import { ROUTING_KEYS } from "./config_schema.ts";

/** The sections that replace as a whole. */
export type WholeSection = "nodes" | "pricing" | "aliases" | "policy";

/** What earlier applied configs did, which decides what a removed section means. */
export interface ApplyState {
  /** Sections the last applied config declared. */
  readonly declared: ReadonlySet<WholeSection>;
  /** Digest of the nodes section last applied (unchanged → the node list is kept). */
  readonly nodesDigest?: string;
  /** Digest of the policy sections last applied (changed → the policy set is reported). */
  readonly policyDigest?: string;
  /** Routing keys an applied config set (removed → back to the base value). */
  readonly routingKeys: ReadonlySet<keyof RoutingSettings>;
}

/** The state before any config was applied. */
export function initialApplyState(): ApplyState {
  return { declared: new Set(), routingKeys: new Set() };
}

/** What an apply changed, for the log. */
export interface ApplyResult {
  /** What earlier configs declared, to pass to the next apply. */
  state: ApplyState;
  /** Human-readable changes (`nodes replaced (3)`, `pricing emptied`, ...). */
  changes: string[];
}

/**
 * Applies `loaded` to `skeid` given what earlier configs did. Throws (changing nothing) only if
 * the core refuses the node list, which load.ts has already validated the same way.
 */
export function applyLoadedConfig(
  skeid: RoutingCore,
  loaded: LoadedConfig,
  state: ApplyState,
): ApplyResult {
  // ---- build: every value to commit, before anything changes ----
  const changes: string[] = [];
  const declared = new Set<WholeSection>();
  const was = (s: WholeSection) => state.declared.has(s);

  let nodes: "keep" | "empty" | "replace" | "leave" = "leave";
  if (loaded.sections.nodes !== undefined) {
    declared.add("nodes");
    nodes = was("nodes") && state.nodesDigest === loaded.sections.nodes ? "keep" : "replace";
  } else if (was("nodes")) nodes = "empty";

  const plan = <T>(section: WholeSection, value: T | undefined, empty: () => T) => {
    if (value !== undefined) {
      declared.add(section);
      return value;
    }
    return was(section) ? empty() : undefined;
  };
  const pricing = plan("pricing", loaded.pricing, () => new Map());
  const aliases = plan("aliases", loaded.aliases, () => new Map());
  const policySet = plan("policy", loaded.policySet, emptyPolicySet);

  const routing: Partial<RoutingSettings> = {};
  const base = skeid.baseRouting;
  const routingKeys = new Set<keyof RoutingSettings>();
  for (const key of ROUTING_KEYS) {
    if (loaded.routing[key] !== undefined) {
      routingKeys.add(key);
      (routing as Record<string, unknown>)[key] = loaded.routing[key];
    } else if (state.routingKeys.has(key)) {
      (routing as Record<string, unknown>)[key] = base[key];
    }
  }

  // ---- commit: the only step that validates again goes first ----
  if (nodes === "replace") {
    skeid.replaceNodes(loaded.nodeSpecs ?? []);
    changes.push(`nodes replaced (${loaded.nodeSpecs?.length ?? 0})`);
  } else if (nodes === "empty") {
    skeid.replaceNodes([]);
    changes.push("nodes emptied (section removed)");
  }
  if (pricing !== undefined) {
    const changed = mapContent(pricing) !== mapContent(skeid.pricingEntries());
    skeid.replacePricing(pricing);
    if (changed) {
      changes.push(loaded.pricing ? `pricing replaced (${pricing.size})` : "pricing emptied");
    }
  }
  if (aliases !== undefined) {
    const changed = mapContent(aliases) !== mapContent(skeid.aliases);
    skeid.replaceAliases(aliases);
    if (changed) {
      changes.push(loaded.aliases ? `aliases replaced (${aliases.size})` : "aliases emptied");
    }
  }
  if (policySet !== undefined) {
    // Keys, names and the default change only through a config, so the sections' digest tells
    // them; the named policies can also be set in the core (functions), so they are compared.
    const changed = loaded.sections.policy !== state.policyDigest ||
      namedPolicies(policySet) !== namedPolicies(skeid.policySet);
    skeid.replacePolicySet(policySet);
    if (changed) changes.push(loaded.policySet ? "policies replaced" : "policies emptied");
  }
  if (Object.keys(routing).length > 0) skeid.setRouting(routing);
  // The registry's error window sets how far back the snapshot's errors_in_window counts.
  if (loaded.registry) skeid.setErrorWindow(loaded.registry.errorWindowS);

  return {
    state: {
      declared,
      nodesDigest: loaded.sections.nodes,
      policyDigest: loaded.sections.policy,
      routingKeys,
    },
    changes,
  };
}

/** A name → value table as canonical JSON (entry order and key order do not count). */
function mapContent(entries: Iterable<readonly [string, unknown]>): string {
  return canonicalJson(Object.fromEntries(entries));
}

/** The named policies of a set, by content. */
function namedPolicies(set: Readonly<PolicySet>): string {
  return mapContent([...set.policies].map(([name, p]) => [name, canonicalPolicy(p)] as const));
}
