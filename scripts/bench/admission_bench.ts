/**
 * `deno task bench:admission`: what admitting and releasing one request costs the core, alone
 * (`--workers 1`: the core's own counters, the shared table untouched) and as a worker of two
 * (one compare-and-swap on the shared inflight table to take the slot, one atomic release that
 * bumps the generation and notifies the other worker). Compare with the ~150–200 µs of gateway
 * CPU a proxied request costs (docs/bench/).
 *
 * @module
 */
import { RoutingCore } from "../../src/core/routing_core.ts";
import { InflightTable } from "../../src/core/inflight_table.ts";

function core(inflight?: InflightTable): RoutingCore {
  const skeid = new RoutingCore({ env: () => undefined, ...(inflight ? { inflight } : {}) });
  skeid.addNode({ id: "gpu", url: "http://gpu:8000/v1", model: "m", max_conns: 1000 });
  return skeid;
}

const alone = core();
const shared = InflightTable.shared(64, 2);
const worker = core(new InflightTable(shared.words.buffer, { capacity: 64, workers: 2 }, 1));

Deno.bench("admit + release, one worker", { group: "admission", baseline: true }, () => {
  if (!alone.startRequest("gpu")) throw new Error("not admitted");
  alone.finishRequest("gpu", { ok: true });
});

Deno.bench("admit + release, a worker of two (shared table)", { group: "admission" }, () => {
  if (!worker.startRequest("gpu")) throw new Error("not admitted");
  worker.finishRequest("gpu", { ok: true });
});
