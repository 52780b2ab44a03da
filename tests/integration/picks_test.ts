/**
 * The picks through a real gateway in front of simulated engines (KV prefix cache): sessions
 * stick to a node on every face key kind, usage events record the pick and the node's cached
 * tokens, `/skeid/metrics` counts the picks and `GET /skeid/route` explains one.
 */
import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { type FakeModel, startFakeModel } from "../../src/fake/model.ts";
import { post, startGateway } from "./helpers.ts";

const ADMIN = { authorization: "Bearer admin-secret" };
const SYSTEM = (app: string) =>
  `You are the ${app} assistant. ${"Follow the house rules. ".repeat(40)}`;

function engines(n: number): FakeModel[] {
  return Array.from({ length: n }, () =>
    startFakeModel({
      tokens: 4,
      engine: { blockSize: 16, numBlocks: 4096, ttftBaseMs: 1, prefillMsPerToken: 0.001, itlMs: 1 },
    }));
}

Deno.test("affinity through the gateway: sessions stick, events record the pick and cache hits", async () => {
  const fakes = engines(3);
  const t = await startGateway({
    nodes: fakes.map((f, i) => ({ id: `gpu-${i}`, url: f.url, model: "m", max_conns: 16 })),
    aliases: { chat: { tiers: [{ model: "m", pick: "affinity" }] } },
    admin: { api_key: "admin-secret" },
  });
  try {
    // Three conversations, each keyed differently: prompt_cache_key, user, nothing at all.
    const sessions = [
      { app: "billing", extra: { prompt_cache_key: "conv-1" }, kind: "prompt_cache_key" },
      { app: "travel", extra: { user: "u-2" }, kind: "user" },
      { app: "support", extra: {}, kind: "prompt" },
    ];
    const nodes: string[][] = sessions.map(() => []);
    let expected = 0;
    for (let turn = 0; turn < 3; turn++) {
      for (const [s, session] of sessions.entries()) {
        const messages: Record<string, unknown>[] = [{
          role: "system",
          content: SYSTEM(session.app),
        }];
        for (let k = 0; k <= turn; k++) {
          messages.push({ role: "user", content: `question ${k} of ${session.app}` });
          if (k < turn) messages.push({ role: "assistant", content: "tök0 tök1 tök2 tök3" });
        }
        const r = await post(`${t.base}/v1/chat/completions`, {
          model: "chat",
          messages,
          ...session.extra,
        });
        assertEquals(r.status, 200, r.text);
        nodes[s].push(r.headers.get("x-skeid-node")!);
        expected++;
      }
    }
    for (const [s, seen] of nodes.entries()) {
      assertEquals(new Set(seen).size, 1, `${sessions[s].app} moved: ${seen}`);
    }
    const events = await t.sink.waitFor(expected);
    for (const [s, session] of sessions.entries()) {
      const mine = events.filter((e) =>
        e.node_id === nodes[s][0] && e.route?.key_kind === session.kind
      );
      assertEquals(mine.length, 3, `${session.app}: ${JSON.stringify(events.map((e) => e.route))}`);
      for (const e of mine) assertEquals(e.route?.pick, "affinity");
      // The later turns found the earlier ones' prefix in the node's KV cache.
      assert(
        mine.slice(1).every((e) => e.cached_tokens > 0),
        JSON.stringify(mine.map((e) => e.cached_tokens)),
      );
      assert(mine.slice(1).every((e) => e.route?.hit === true));
    }

    const metrics = await (await fetch(`${t.base}/skeid/metrics`, { headers: ADMIN })).text();
    assertMatch(
      metrics,
      /skeid_route_picks_total\{pick="affinity",key_kind="prompt_cache_key",outcome="hit"\} 3/,
    );
    assertMatch(metrics, /skeid_prefix_index_blocks \d+/);

    const explain =
      await (await fetch(`${t.base}/skeid/route?model=chat&session=conv-1&prompt=hi`, {
        headers: ADMIN,
      })).json();
    assertEquals(explain.bound, 1.25);
    assertEquals(explain.tiers[0].pick, "affinity");
    assertEquals(explain.tiers[0].key_kind, "prompt_cache_key");
    assertEquals(explain.tiers[0].candidates.length, 3);
    assert(typeof explain.tiers[0].winner === "string");
    // Nothing to key on (no prompt, no session): the pick goes by load, and no node is "home".
    const bare = await (await fetch(`${t.base}/skeid/route?model=chat`, { headers: ADMIN })).json();
    assertEquals([bare.tiers[0].key_kind, bare.tiers[0].hit], ["none", false]);
    const missing = await fetch(`${t.base}/skeid/route`, { headers: ADMIN });
    assertEquals(missing.status, 400);
    await missing.body?.cancel();
  } finally {
    await t.stop();
    await Promise.all(fakes.map((f) => f.close()));
  }
});

Deno.test("least_loaded and round_robin: no route on a round_robin event, least_loaded recorded", async () => {
  const fakes = engines(2);
  const t = await startGateway({
    nodes: fakes.map((f, i) => ({ id: `gpu-${i}`, url: f.url, model: "m" })),
    aliases: { fast: { tiers: [{ model: "m", pick: "least_loaded" }] } },
  });
  try {
    const a = await post(`${t.base}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "x" }],
    });
    const b = await post(`${t.base}/v1/chat/completions`, {
      model: "fast",
      messages: [{ role: "user", content: "y" }],
    });
    assertEquals([a.status, b.status], [200, 200]);
    const events = await t.sink.waitFor(2);
    const byModel = Object.fromEntries(events.map((e) => [e.requested_model, e.route]));
    assertEquals(byModel.m, undefined);
    assertEquals(byModel.fast, {
      pick: "least_loaded",
      key_kind: "none",
      hit: false,
      spilled: false,
    });
  } finally {
    await t.stop();
    await Promise.all(fakes.map((f) => f.close()));
  }
});

Deno.test("affinity on every face: Anthropic, Ollama and Responses sessions stick to their node", async () => {
  const fakes = engines(3);
  const t = await startGateway({
    nodes: fakes.map((f, i) => ({ id: `gpu-${i}`, url: f.url, model: "m", max_conns: 16 })),
    routing: { pick: "affinity" },
  });
  try {
    const system = SYSTEM("faces");
    const bodies: [string, (turn: number) => Record<string, unknown>, Record<string, string>][] = [
      ["/v1/messages", (turn) => ({
        model: "m",
        max_tokens: 4,
        system,
        metadata: { user_id: "anthropic-user" },
        messages: [{ role: "user", content: `anthropic turn ${turn}` }],
      }), { "anthropic-version": "2023-06-01" }],
      ["/api/chat", (turn) => ({
        model: "m",
        stream: false,
        messages: [{ role: "system", content: system }, {
          role: "user",
          content: `ollama turn ${turn}`,
        }],
      }), {}],
      ["/v1/responses", (turn) => ({
        model: "m",
        instructions: system,
        prompt_cache_key: "responses-session",
        input: `responses turn ${turn}`,
      }), {}],
    ];
    const seen = new Map<string, Set<string>>();
    for (let turn = 0; turn < 3; turn++) {
      for (const [path, body, headers] of bodies) {
        const r = await post(`${t.base}${path}`, body(turn), headers);
        assertEquals(r.status, 200, `${path}: ${r.text}`);
        const nodes = seen.get(path) ?? new Set();
        nodes.add(r.headers.get("x-skeid-node")!);
        seen.set(path, nodes);
      }
    }
    for (const [path, nodes] of seen) assertEquals(nodes.size, 1, `${path}: ${[...nodes]}`);
    const events = await t.sink.waitFor(9);
    const kinds = Object.fromEntries(events.map((e) => [e.endpoint, e.route?.key_kind]));
    assertEquals(kinds, {
      "/v1/messages": "metadata_user_id",
      "/api/chat": "prompt",
      "/v1/responses": "prompt_cache_key",
    });
  } finally {
    await t.stop();
    await Promise.all(fakes.map((f) => f.close()));
  }
});
