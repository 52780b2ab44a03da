/**
 * `GET /skeid/usage/series`: a wrong range or split is a 400 naming the parameter; the jsonlog
 * store answers from the roll-ups it keeps in memory since start, and says so.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { adminFixture } from "./helpers.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { JsonlogStore } from "../../src/usage/jsonlog.ts";
import { event } from "../usage/helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

const RANGE = "from=2026-09-01T00:00:00Z&to=2026-09-02T00:00:00Z";

Deno.test("GET /skeid/usage/series: bad ranges and splits are 400s naming the parameter", async () => {
  const f = adminFixture();
  const cases: [string, string, string][] = [
    ["from=2026-09-02T00:00:00Z&to=2026-09-01T00:00:00Z", "to", "must be after from"],
    [
      "from=2020-01-01T00:00:00Z&to=2026-09-01T00:00:00Z&step=hour",
      "to",
      "is 58440 hours; at most 1000 at step=hour",
    ],
    ["from=2020-01-01&to=2026-09-01&step=day", "to", "is 2435 days; at most 1000 at step=day"],
    ["to=2026-09-01T00:00:00Z", "from", "required"],
    ["from=yesterday&to=2026-09-01T00:00:00Z", "from", "'yesterday' is not an ISO-8601 time"],
    [`${RANGE}&by=colour`, "by", "'colour' is not one of key, alias, model, node"],
    [`${RANGE}&step=week`, "step", "'week' is not hour or day"],
  ];
  for (const [query, param, message] of cases) {
    const res = await f.req(`/skeid/usage/series?${query}`);
    assertEquals(res.status, 400, query);
    const body = await res.json();
    assertEquals([body.ok, body.param], [false, param], query);
    assert(body.error.startsWith(`${param}: `), body.error);
    assertStringIncludes(body.error, message);
  }
});

Deno.test("GET /skeid/usage/series without a store: 404 saying none is configured", async () => {
  const f = adminFixture();
  const res = await f.req(`/skeid/usage/series?${RANGE}`);
  assertEquals(res.status, 404);
  assertEquals((await res.json()).error, "usage_store not configured");
});

Deno.test("GET /skeid/usage/series on jsonlog: since_start, per bucket and group, a given-up write uncounted", async () => {
  const tmp = await tempDir();
  try {
    const cfg = normalizeUsageStoreConfig(
      { backend: "jsonlog", path: `${tmp.dir}/events/` },
      { env: () => undefined },
    );
    assert(cfg.backend === "jsonlog");
    const store = new JsonlogStore(cfg);
    await store.prepare();
    const first = [
      event({ created_at: "2026-09-01T10:05:00Z", node_id: "n1", cost_total_usd: 0.5 }),
      event({ created_at: "2026-09-01T10:59:59Z", node_id: "n2", status_code: 500 }),
      event({
        created_at: "2026-09-01T12:00:00Z",
        node_id: "n1",
        usage: { prompt_tokens: 7, completion_tokens: 3 },
      }),
    ];
    await store.write(first);
    // A batch whose write the ledger gave up on (timed out): counted when the spill file brings
    // it again, not when this late write completes.
    const givenUp = [event({ created_at: "2026-09-01T10:20:00Z", node_id: "n1" })];
    const late = store.write(givenUp);
    store.abandoned(givenUp);
    await late;
    const f = adminFixture();
    f.deps.usageSeries = (q) => store.series(q);
    const res = await f.req(
      "/skeid/usage/series?from=2026-09-01T10:30:00Z&to=2026-09-01T12:10:00Z&by=node",
    );
    assertEquals(res.status, 200);
    const body = await res.json();
    assertEquals([body.since_start, body.backend, body.step, body.by], [
      true,
      "jsonlog",
      "hour",
      "node",
    ]);
    // The range widens to whole hours: 10:00 to 13:00.
    assertEquals([body.from, body.to], ["2026-09-01T10:00:00Z", "2026-09-01T13:00:00Z"]);
    assertEquals(
      body.buckets.map((b: { start: string; groups: Record<string, unknown>[] }) => [
        b.start,
        b.groups.map((g) => [g.name, g.requests, g.errors, g.input_tokens, g.cost_usd]),
      ]),
      [
        ["2026-09-01T10:00:00Z", [["n1", 1, 0, 0, 0.5], ["n2", 1, 1, 0, 0]]],
        ["2026-09-01T11:00:00Z", []],
        ["2026-09-01T12:00:00Z", [["n1", 1, 0, 7, 0]]],
      ],
    );
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("GET /skeid/usage/series?format=csv: the JSON's rows under a header, as a download", async () => {
  const tmp = await tempDir();
  try {
    const cfg = normalizeUsageStoreConfig(
      { backend: "jsonlog", path: `${tmp.dir}/events/` },
      { env: () => undefined },
    );
    assert(cfg.backend === "jsonlog");
    const store = new JsonlogStore(cfg);
    await store.prepare();
    await store.write([
      event({ created_at: "2026-09-01T10:05:00Z", node_id: "n1", cost_total_usd: 0.5 }),
      event({ created_at: "2026-09-01T12:00:00Z", node_id: '=HYPERLINK("x"),a', status_code: 500 }),
    ]);
    const f = adminFixture();
    f.deps.usageSeries = (q) => store.series(q);
    const range = "from=2026-09-01T10:30:00Z&to=2026-09-01T12:10:00Z&by=node";
    const res = await f.req(`/skeid/usage/series?${range}&format=csv`);
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "text/csv; charset=utf-8");
    assertEquals(
      res.headers.get("content-disposition"),
      'attachment; filename="skeid-usage-2026-09-01T10-2026-09-01T13.csv"',
    );
    const lines = (await res.text()).split("\r\n");
    assertEquals(lines, [
      "bucket_start,node_id,requests,errors,input_tokens,output_tokens,cached_tokens,cost_usd",
      "2026-09-01T10:00:00Z,n1,1,0,0,0,0,0.5",
      // A formula is made inert, and the quotes and comma in it quoted.
      `2026-09-01T12:00:00Z,"'=HYPERLINK(""x""),a",1,1,0,0,0,0`,
      "",
    ]);
    const json = await (await f.req(`/skeid/usage/series?${range}`)).json();
    const rows = json.buckets.flatMap((b: { groups: unknown[] }) => b.groups).length;
    assertEquals(rows, lines.length - 2, "the same rows as the JSON");
    const bad = await f.req(`/skeid/usage/series?${range}&format=xml`);
    assertEquals([bad.status, (await bad.json()).param], [400, "format"]);
    const huge = await f.req(
      "/skeid/usage/series?from=2020-01-01T00:00:00Z&to=2026-09-01T00:00:00Z&format=csv",
    );
    assertEquals([huge.status, (await huge.json()).param], [400, "to"]);
  } finally {
    await tmp.cleanup();
  }
});
