import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { type ServedGroup, serveWorkers } from "../_helpers/cli.ts";
import { tempDir } from "../_helpers/temp.ts";
import { startFakeModel } from "../../src/fake/model.ts";

Deno.test("serve --workers 2: SIGTERM drains both workers, stores every event, exits 0", async () => {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0 });
  const events = `${tmp.dir}/events.jsonl`;
  await Deno.writeTextFile(
    `${tmp.dir}/skeid.yaml`,
    `nodes:\n  - id: n\n    url: ${fake.url}\n    model: m\n    max_conns: 64\n` +
      `usage_store:\n  backend: jsonlog\n  path: ${events}\n`,
  );
  let served: ServedGroup | undefined;
  try {
    served = await serveWorkers(`${tmp.dir}/skeid.yaml`);
    const { proc, base } = served;
    assertMatch(served.banner, /--workers 2: 2 workers share each node's max_conns/);
    const send = () =>
      fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { connection: "close" },
        body: JSON.stringify({ model: "m", messages: [] }),
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    const quick = await Promise.all(Array.from({ length: 20 }, () => send()));
    assert(quick.every((s) => s === 200), `all answered: ${quick}`);
    // Streams in flight in both workers when SIGTERM comes: they finish, and their events are
    // stored (connection: close spreads them over the workers).
    const streams = await Promise.all(Array.from({ length: 6 }, async () => {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { connection: "close" },
        body: JSON.stringify({
          model: "m",
          messages: [],
          stream: true,
          fake_tokens: 10,
          fake_itl_ms: 80,
        }),
      });
      const reader = res.body!.getReader();
      assert(!(await reader.read()).done, "the stream started");
      return reader;
    }));
    proc.kill("SIGTERM");
    for (const reader of streams) {
      let rest = "";
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        rest += dec.decode(value);
      }
      assert(rest.includes("data: [DONE]"), "the in-flight stream finished");
    }
    assertEquals((await proc.status).code, 0, "exit 0");
    const lines = (await Deno.readTextFile(events)).split("\n").filter((l) => l.trim() !== "");
    assertEquals(lines.length, 26, "every event stored");
    const records = lines.map((l) => JSON.parse(l) as { request_id: string; event_id: string });
    const ids = new Set(records.map((r) => r.request_id));
    // On a failure, the lines that share a request id say whether an event was written twice
    // (the same event_id) or two requests were given one id.
    const shared = records.filter((r) =>
      records.filter((o) => o.request_id === r.request_id).length > 1
    )
      .map((r) => `${r.request_id} ${r.event_id}`);
    assertEquals(ids.size, 26, `each once; shared: ${shared.join(", ")}`);
  } finally {
    await served?.stop();
    await fake.close();
    await tmp.cleanup();
  }
});
