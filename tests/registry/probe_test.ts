/**
 * The registry probe end to end: a downstream Skeid publishing its snapshot over real HTTP on
 * 127.0.0.1, and a fronting Skeid whose probe reads it. Both clocks are injected; polls are
 * driven with `pollNow` (the interval timer is a stub that never fires).
 */
import { assert, assertEquals, assertNotIncludes } from "../_assert.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { memoryLogger } from "../../src/log.ts";
import { type CapacityProbes, startCapacityProbes } from "../../src/capacity/probe_manager.ts";
import { registrySnapshotHandler } from "../../src/registry/route.ts";
import { RegistrySettings } from "../../src/config/registry.ts";
import { signedSnapshot } from "../../src/registry/snapshot.ts";
import { sign, SIGNATURE_HEADER } from "../../src/registry/sign.ts";
import {
  ADMIN_KEY,
  type Clock,
  clock,
  envOf,
  READ_KEY,
  SECRET,
  serve,
  type TestServer,
} from "./helpers.ts";

const NO_TIMER = { setInterval: () => 0, clearInterval: () => {} };
const START = 1_700_000_000_000;

/** A downstream Skeid publishing on a real port. */
interface Downstream {
  skeid: RoutingCore;
  clock: Clock;
  server: TestServer;
}

function downstream(): Downstream {
  const c = clock(START);
  const skeid = new RoutingCore({ now: c.now, env: () => undefined });
  skeid.addNode({
    id: "gpu-1",
    url: "http://gpu-1:8000/v1",
    model: "m",
    max_conns: 8,
    tags: "local",
  });
  skeid.addNode({
    id: "gpu-2",
    url: "http://gpu-2:8000/v1",
    model: "m",
    max_conns: 8,
    tags: "cloud",
  });
  const settings = new RegistrySettings(SECRET, READ_KEY, "S", "R", 10, "skeid-b", 60);
  const handle = registrySnapshotHandler({
    skeid,
    registry: () => settings,
    adminKey: () => ADMIN_KEY,
  });
  return { skeid, clock: c, server: serve(handle) };
}

/** A fronting Skeid with one node standing for a downstream, and its probe manager. */
interface Front {
  skeid: RoutingCore;
  clock: Clock;
  probes: CapacityProbes;
  logger: ReturnType<typeof memoryLogger>;
  vars: Record<string, string>;
  /** The probe state log lines, as `state` names. */
  states(): string[];
}

function front(
  origin: string,
  capacity: Record<string, unknown> = {},
  vars: Record<string, string> = { REG_SECRET: SECRET, B_READ: READ_KEY, B_ADMIN: ADMIN_KEY },
): Front {
  const c = clock(START);
  const skeid = new RoutingCore({ now: c.now, env: () => undefined });
  skeid.addNode({
    id: "skeid-b",
    url: `${origin}/v1`,
    model: "m",
    max_conns: 64,
    capacity: {
      probe: "registry",
      secret_env: "REG_SECRET",
      read_key_env: "B_READ",
      interval_ms: 2000,
      ...capacity,
    },
  });
  const logger = memoryLogger();
  const probes = startCapacityProbes({
    skeid,
    logger,
    env: envOf(vars),
    timers: NO_TIMER,
    follow: false,
  });
  return {
    skeid,
    clock: c,
    probes,
    logger,
    vars,
    states: () =>
      logger.lines.filter((l) => l.event === "capacity_probe_state").map((l) => String(l.state)),
  };
}

/** Runs `fn` with a downstream and a front reading it; closes both. */
async function withPair(
  fn: (d: Downstream, f: Front) => void | Promise<void>,
  capacity: Record<string, unknown> = {},
  vars?: Record<string, string>,
): Promise<void> {
  const d = downstream();
  const f = front(d.server.origin, capacity, vars);
  try {
    await f.probes.settled();
    await fn(d, f);
  } finally {
    await f.probes.close();
    await d.server.close();
  }
}

function stateOf(f: Front): string | null {
  return f.probes.status()[0].state;
}

Deno.test("registry probe: accepted snapshot becomes the node's reading, read key as bearer", async () => {
  await withPair(async (d, f) => {
    assertEquals(stateOf(f), "accepted");
    assertEquals(f.probes.status()[0].url, `${d.server.origin}/skeid/registry/snapshot`);
    assertEquals(d.server.requests.length, 1, "start polls once at once");
    assertEquals(d.server.requests[0].headers.get("authorization"), `Bearer ${READ_KEY}`);
    assertEquals(f.skeid.capacityReading("skeid-b"), {
      source: "registry",
      used: 0,
      limit: 16,
      at: START,
      expires_at: START + 10_000,
      interval_ms: 2000,
    });
    assertEquals(f.states(), [], "the first success is not worth a log line");

    // The downstream fills up: the front stops admitting, although it sent nothing itself.
    for (let i = 0; i < 8; i++) assert(d.skeid.startRequest("gpu-1"));
    for (let i = 0; i < 8; i++) assert(d.skeid.startRequest("gpu-2"));
    d.clock.advance(1000);
    f.clock.advance(1000);
    await f.probes.pollNow();
    assertEquals(f.skeid.capacityReading("skeid-b")?.used, 16);
    assertEquals(f.skeid.routeState({ model: "m" }).has_available, false);
    assertEquals(f.skeid.nodeMetrics("skeid-b")?.inflight, 0, "never added to local inflight");
    assertEquals(f.skeid.routeState({ model: "m" }).has_eligible, true, "busy is not unhealthy");
  });
});

Deno.test("registry probe: tags count only the downstream nodes carrying them", async () => {
  await withPair(async (d, f) => {
    assert(d.skeid.startRequest("gpu-1"));
    await f.probes.pollNow();
    assertEquals(f.skeid.capacityReading("skeid-b")?.used, 1);
    assertEquals(f.skeid.capacityReading("skeid-b")?.limit, 8, "only gpu-1 carries 'local'");
  }, { tags: ["Local"] });
});

Deno.test("registry probe: the admin key is sent only without read_key_env", async () => {
  await withPair((d, f) => {
    assertEquals(stateOf(f), "accepted");
    assertEquals(d.server.requests[0].headers.get("authorization"), `Bearer ${ADMIN_KEY}`);
  }, { read_key_env: undefined, admin_key_env: "B_ADMIN" });

  // Both named: the read key wins.
  await withPair((d, f) => {
    assertEquals(stateOf(f), "accepted");
    assertEquals(d.server.requests[0].headers.get("authorization"), `Bearer ${READ_KEY}`);
  }, { admin_key_env: "B_ADMIN" });

  // read_key_env named but empty: missing_secret, and the admin key never goes on the wire.
  await withPair(
    (d, f) => {
      assertEquals(stateOf(f), "missing_secret");
      assertEquals(d.server.requests.length, 0, "nothing was sent at all");
    },
    { admin_key_env: "B_ADMIN" },
    { REG_SECRET: SECRET, B_READ: "", B_ADMIN: ADMIN_KEY },
  );
});

Deno.test("registry probe: missing or short secret, empty bearer → missing_secret, nothing sent", async () => {
  for (
    const vars of <Record<string, string>[]> [
      { B_READ: READ_KEY },
      { REG_SECRET: "", B_READ: READ_KEY },
      { REG_SECRET: SECRET.slice(1), B_READ: READ_KEY }, // 31 bytes
      { REG_SECRET: SECRET },
    ]
  ) {
    await withPair(
      (d, f) => {
        assertEquals(stateOf(f), "missing_secret", JSON.stringify(Object.keys(vars)));
        assertEquals(d.server.requests.length, 0);
        assertEquals(f.skeid.capacityReading("skeid-b"), undefined);
        assertEquals(f.states(), ["missing_secret"]);
      },
      {},
      vars,
    );
  }
});

Deno.test("registry probe: a wrong secret is bad_signature", async () => {
  await withPair(
    (_d, f) => {
      assertEquals(stateOf(f), "bad_signature");
      assertEquals(f.skeid.capacityReading("skeid-b"), undefined);
    },
    {},
    { REG_SECRET: "x".repeat(32), B_READ: READ_KEY },
  );
});

Deno.test("registry probe: stale (older than ttl) and future (beyond max_skew_s)", async () => {
  await withPair(async (_d, f) => {
    assertEquals(stateOf(f), "accepted");
    f.clock.advance(10_001); // the next snapshot is generated at START, ttl 10 s
    await f.probes.pollNow();
    assertEquals(stateOf(f), "stale");
    assertEquals(f.skeid.capacityReading("skeid-b"), undefined, "its own reading forgotten");

    f.clock.set(START - 5_001); // downstream 5.001 s ahead of the front, max_skew_s 5
    await f.probes.pollNow();
    assertEquals(stateOf(f), "future");

    f.clock.set(START - 4_000); // within the skew: believed
    await f.probes.pollNow();
    assertEquals(stateOf(f), "accepted");
    assertEquals(f.states(), ["stale", "future", "accepted"]);
  });

  await withPair(async (_d, f) => {
    f.clock.set(START - 1_500);
    await f.probes.pollNow();
    assertEquals(stateOf(f), "future", "max_skew_s 1");
  }, { max_skew_s: 1 });
});

Deno.test("registry probe: unreachable on a non-2xx answer and on a closed port", async () => {
  await withPair(async (d, f) => {
    // A downstream that no longer knows us: 401 is not a snapshot.
    f.vars.B_READ = "wrong-read-key";
    await f.probes.pollNow();
    assertEquals(stateOf(f), "unreachable");
    assertEquals(d.server.requests.at(-1)?.headers.get("authorization"), "Bearer wrong-read-key");
  });

  const gone = serve(() => new Response("x"));
  const origin = gone.origin;
  await gone.close();
  const f = front(origin);
  try {
    await f.probes.settled();
    assertEquals(stateOf(f), "unreachable");
    assertEquals(f.skeid.capacityReading("skeid-b"), undefined);
  } finally {
    await f.probes.close();
  }
});

/** A server answering the bodies `next()` gives, signed with `secret` (default SECRET). */
function scripted(
  next: () => { body: Uint8Array<ArrayBuffer> | string; sig?: string },
): TestServer {
  return serve(async () => {
    const { body, sig } = next();
    const headers = new Headers({ "content-type": "application/json" });
    headers.set(SIGNATURE_HEADER, sig ?? await sign(body, SECRET));
    return new Response(body, { headers });
  });
}

Deno.test("registry probe: malformed bodies (not JSON, another version, no ttl)", async () => {
  const bodies = [
    "not json",
    "[1,2]",
    JSON.stringify({ version: 2, generated_at: START / 1000, ttl: 10, nodes: [] }),
    JSON.stringify({ version: 1, generated_at: START / 1000, nodes: [] }),
    JSON.stringify({ version: 1, generated_at: START / 1000, ttl: 0, nodes: [] }),
  ];
  let i = 0;
  const server = scripted(() => ({ body: bodies[i] }));
  const f = front(server.origin);
  try {
    await f.probes.settled();
    for (i = 0; i < bodies.length; i++) {
      await f.probes.pollNow();
      assertEquals(stateOf(f), "malformed", bodies[i]);
    }
    assertEquals(f.states(), ["malformed"], "one warning for five malformed polls");
  } finally {
    await f.probes.close();
    await server.close();
  }
});

Deno.test("registry probe: a tampered body is bad_signature", async () => {
  const d = downstream();
  const { body, signature } = await signedSnapshot(d.skeid, {
    instanceId: "b",
    ttlS: 10,
    secret: SECRET,
  });
  const tampered = new TextDecoder().decode(body).replace('"inflight":0', '"inflight":9');
  const server = scripted(() => ({ body: tampered, sig: signature }));
  const f = front(server.origin);
  try {
    await f.probes.settled();
    assertEquals(stateOf(f), "bad_signature");
  } finally {
    await f.probes.close();
    await server.close();
    await d.server.close();
  }
});

Deno.test("registry probe: a snapshot older than the last accepted one is replayed", async () => {
  const d = downstream();
  const older = await signedSnapshot(d.skeid, { instanceId: "b", ttlS: 10, secret: SECRET });
  d.clock.advance(2000);
  const newer = await signedSnapshot(d.skeid, { instanceId: "b", ttlS: 10, secret: SECRET });
  let serveOlder = false;
  const server = scripted(() => {
    const s = serveOlder ? older : newer;
    return { body: s.body, sig: s.signature };
  });
  const f = front(server.origin);
  f.clock.advance(2000);
  try {
    await f.probes.settled(); // the first poll ran on START: both fresh enough, newer accepted
    await f.probes.pollNow();
    assertEquals(stateOf(f), "accepted");
    serveOlder = true;
    await f.probes.pollNow();
    assertEquals(stateOf(f), "replayed");
    assertEquals(f.skeid.capacityReading("skeid-b"), undefined);
    serveOlder = false;
    await f.probes.pollNow();
    assertEquals(stateOf(f), "accepted", "the same snapshot again is not older: believed");
  } finally {
    await f.probes.close();
    await server.close();
    await d.server.close();
  }
});

Deno.test("registry probe: forgets only its own reading — a 429 backoff survives", async () => {
  await withPair(async (_d, f) => {
    assertEquals(f.skeid.capacityReading("skeid-b")?.source, "registry");
    f.skeid.observeResponseHeaders("skeid-b", { "retry-after": "30" }, 429);
    const backoff = f.skeid.capacityReading("skeid-b");
    assertEquals(backoff?.source, "ratelimit");

    await f.probes.pollNow(); // an accepted "empty" snapshot cannot lift the backoff
    assertEquals(f.skeid.capacityReading("skeid-b"), backoff);

    f.clock.advance(10_001);
    await f.probes.pollNow(); // stale: the probe forgets — its own reading only
    assertEquals(stateOf(f), "stale");
    assertEquals(f.skeid.capacityReading("skeid-b"), backoff);
    assertEquals(f.skeid.routeState({ model: "m" }).has_available, false);
  });
});

Deno.test("registry probe: each state change is warned once, return to accepted at info", async () => {
  await withPair(async (_d, f) => {
    f.clock.advance(20_000);
    await f.probes.pollNow();
    await f.probes.pollNow();
    f.clock.set(START);
    await f.probes.pollNow();
    await f.probes.pollNow();
    const lines = f.logger.lines.filter((l) => l.event === "capacity_probe_state");
    assertEquals(lines.map((l) => [l.level, l.state]), [["warn", "stale"], ["info", "accepted"]]);
    assertEquals(lines[0].message, "registry probe for 'skeid-b': stale (older than its ttl)");
    for (const line of f.logger.lines) {
      const text = JSON.stringify(line);
      assertNotIncludes(text, SECRET, "no signing secret in any log line");
      assertNotIncludes(text, READ_KEY, "no read key in any log line");
    }
  });
});
