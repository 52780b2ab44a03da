/**
 * Custom probes (`probe: custom`): Skeid fronts whatever an operator runs, so "any way of finding
 * out how busy a node is" is part of the contract (ADR 0019). A config names a probe factory
 * registered in code (`class: Acme::QueueDepth`); code is never loaded from a path a config
 * gives. An in-process node spec may instead carry the poll function itself (`code`).
 *
 * Either way the probe reports through the same {@link ProbeContext} as the built-in ones
 * (source `custom`), runs on the timer, never on the request path, and must not block.
 *
 * @module
 */
import type { CapacityProbe, ProbeContext, ProbeFactory } from "./probe.ts";

/** What a probe factory name must look like: `Word(::Word)*`. */
export const PROBE_CLASS_NAME = /^[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*$/;

/** A poll function an in-process node spec carries as `capacity.code`. */
export type ProbeCode = (probe: ProbeContext) => void | Promise<void>;

/**
 * Named probe factories, registered in code by the program that embeds Skeid. One per gateway
 * (no module state): `startCapacityProbes({factories})` looks `capacity.class` up here.
 */
export class ProbeFactories {
  readonly #byName = new Map<string, ProbeFactory>();

  /** Registers a factory under `name` (`Word(::Word)*`); throws on a bad or taken name. */
  register(name: string, factory: ProbeFactory): this {
    if (!PROBE_CLASS_NAME.test(name)) throw new Error(`invalid capacity probe class '${name}'`);
    if (this.#byName.has(name)) {
      throw new Error(`capacity probe class '${name}' is already registered`);
    }
    this.#byName.set(name, factory);
    return this;
  }

  /** The factory registered under `name`, if any. */
  get(name: string): ProbeFactory | undefined {
    return this.#byName.get(name);
  }

  /** Registered names, sorted. */
  names(): string[] {
    return [...this.#byName.keys()].sort();
  }
}

/**
 * Builds a custom probe: `code` (a function) when the block carries one, else the factory named
 * by `class`. Throws `capacity probe 'custom' needs a code or class` with neither, and on a
 * class name that does not look like one or is not registered.
 */
export function customProbe(ctx: ProbeContext, factories?: ProbeFactories): CapacityProbe {
  const { code, class: className } = ctx.config;
  if (typeof code === "function") {
    const poll = code as ProbeCode;
    return { poll: () => poll(ctx) };
  }
  if (className === undefined || className === null || className === "") {
    throw new Error("capacity probe 'custom' needs a code or class");
  }
  if (typeof className !== "string" || !PROBE_CLASS_NAME.test(className)) {
    throw new Error(`invalid capacity probe class '${String(className)}'`);
  }
  const factory = factories?.get(className);
  if (!factory) {
    const known = factories?.names() ?? [];
    throw new Error(
      `unknown capacity probe class '${className}' (registered: ${
        known.length > 0 ? known.join(", ") : "none"
      })`,
    );
  }
  return factory(ctx);
}
