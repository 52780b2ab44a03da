/// <reference lib="deno.worker" />
/**
 * A worker of the inflight-table test: takes and releases slots of one node as fast as it can,
 * checking after each take that the group total never passes the limit.
 */
import { InflightTable } from "../../../src/core/inflight_table.ts";

self.onmessage = (e: MessageEvent) => {
  const { buffer, size, worker, rounds, limit, hold } = e.data as {
    buffer: SharedArrayBuffer;
    size: { capacity: number; workers: number };
    worker: number;
    rounds: number;
    limit: number;
    hold: boolean;
  };
  const table = new InflightTable(buffer, size, worker);
  const row = table.slot("node-a");
  let taken = 0;
  let over = 0;
  for (let i = 0; i < rounds; i++) {
    if (!table.tryTake(row, limit)) continue;
    taken++;
    if (table.total(row) > limit) over++;
    if (!hold) table.release(row);
  }
  self.postMessage({ taken, over, held: table.held(row) });
};
