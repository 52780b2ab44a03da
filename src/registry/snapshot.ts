/**
 * What this Skeid publishes to a fronting tier (ADR 0019): schema
 * version 1, who and when, and per node what is in flight and what this process may admit.
 *
 * Built from a whitelist, so it cannot carry what it must not: no node URL, no key reference,
 * no metadata, no customer key id, no policy, no usage. Moments are epoch **seconds** on the
 * wire (ADR 0002), fractional, as the original publishes them.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import { encode } from "./encode.ts";
import { SCHEMA_VERSION, sign } from "./sign.ts";

/** A node's current capacity reading as published. */
export interface SnapshotCapacity {
  /** Occupancy the node's current capacity reading reported; null when not measured. */
  used: number | null;
  /** The reading's ceiling; null when it does not constrain admission. */
  limit: number | null;
  /** Where the reading came from (`ratelimit`, `prometheus`, `registry`, `custom`, ...). */
  source: string;
  /** Absolute backoff end, epoch seconds; only when the reading carries one. */
  retry_after?: number;
}

/** One node of a snapshot. */
export interface SnapshotNode {
  /** The node id, as the publishing Skeid names it. */
  id: string;
  /** The node's tags (a fronting tier selects by them). */
  tags: string[];
  /** Operator health state (`healthy`), never derived from errors. */
  healthy: boolean;
  /** This process's inflight. */
  inflight: number;
  /** This process's share of max_conns (0 = unlimited). */
  max_conns: number;
  /** Failed (not aborted) finishes within the registry's error window. */
  errors_in_window: number;
  /** Epoch seconds of the last failure, or null. */
  last_failure_at: number | null;
  /** Only while a current reading exists. */
  capacity?: SnapshotCapacity;
}

/** A registry snapshot, schema version 1. */
export interface RegistrySnapshot {
  /** Schema version: always 1 (`SCHEMA_VERSION`) for what this code writes. */
  version: number;
  /** The publishing Skeid's instance id (`SnapshotSettings.instanceId`). */
  instance: string;
  /** Epoch seconds, fractional. */
  generated_at: number;
  /** How long the snapshot may be believed, seconds. */
  ttl: number;
  /** worker_count of the publishing process. */
  workers: number;
  /** Sorted by id. */
  nodes: SnapshotNode[];
}

/** The publishing settings a snapshot needs (a subset of the config's registry settings). */
export interface SnapshotSettings {
  /** The snapshot's `instance`. */
  instanceId: string;
  /** Seconds the snapshot may be believed. */
  ttlS: number;
}

/** Builds the snapshot of `skeid` now (its injected clock). */
export function buildSnapshot(skeid: RoutingCore, settings: SnapshotSettings): RegistrySnapshot {
  const nodes: SnapshotNode[] = [];
  for (const node of skeid.listNodes()) {
    const failures = skeid.nodeFailures(node.id);
    const entry: SnapshotNode = {
      id: node.id,
      tags: [...node.tags],
      healthy: node.healthy,
      inflight: skeid.nodeMetrics(node.id)?.inflight ?? 0,
      max_conns: skeid.workerMaxConns(node),
      errors_in_window: failures.errors_in_window,
      last_failure_at: failures.last_failure_at === null ? null : failures.last_failure_at / 1000,
    };
    const reading = skeid.capacityReading(node.id);
    if (reading) {
      entry.capacity = { used: reading.used, limit: reading.limit, source: reading.source };
      if (reading.retry_after !== undefined) {
        entry.capacity.retry_after = reading.retry_after / 1000;
      }
    }
    nodes.push(entry);
  }
  nodes.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return {
    version: SCHEMA_VERSION,
    instance: settings.instanceId,
    generated_at: skeid.now() / 1000,
    ttl: settings.ttlS,
    workers: skeid.workerCount,
    nodes,
  };
}

/** A snapshot encoded and signed: the exact body bytes and their signature header value. */
export interface SignedSnapshot {
  /** The exact JSON body bytes that were signed and must be sent unchanged. */
  body: Uint8Array<ArrayBuffer>;
  /** `sha256=<hex HMAC-SHA256>` of `body`, for the `X-Skeid-Registry-Signature` header. */
  signature: string;
}

/**
 * The snapshot, encoded and signed with `secret`. Throws without a secret: a snapshot is never
 * published unsigned.
 */
export async function signedSnapshot(
  skeid: RoutingCore,
  settings: SnapshotSettings & { secret: string },
): Promise<SignedSnapshot> {
  if (!settings.secret) {
    throw new Error("registry secret is not set; a snapshot is never published unsigned");
  }
  const body = encode(buildSnapshot(skeid, settings));
  return { body, signature: await sign(body, settings.secret) };
}
