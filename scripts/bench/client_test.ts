import { assert, assertEquals } from "../../tests/_assert.ts";
import { withFakeModel } from "../../tests/_helpers/fake.ts";
import { type LoadOptions, runLoad } from "./client.ts";

const MESSAGES = [{ role: "user", content: "hi" }];

function load(url: string, over: Partial<LoadOptions>): LoadOptions {
  return {
    url: `${url}/chat/completions`,
    body: JSON.stringify({ model: "m", messages: MESSAGES }),
    stream: false,
    concurrency: 4,
    requests: 40,
    durationMs: 10_000,
    timeoutMs: 10_000,
    warmup: 4,
    transport: "raw",
    ...over,
  };
}

for (const transport of ["raw", "fetch"] as const) {
  Deno.test(`load client (${transport}): JSON requests bounded by count`, async () => {
    await withFakeModel(async (fake) => {
      const r = await runLoad(load(fake.url, { transport }));
      assertEquals(r.completed, 40);
      assertEquals(r.errors, 0);
      assertEquals(r.latency.n, 40);
      assert(r.latency.p50 > 0, `p50 ${r.latency.p50} is positive`);
      assert(
        r.latency.p99 >= r.latency.p50,
        `p99 ${r.latency.p99} is at least p50 ${r.latency.p50}`,
      );
      assertEquals(fake.stats.completed, 44, "40 measured + 4 warm-up");
    }, { record: 0 });
  });

  Deno.test(`load client (${transport}): streams timed to the first content byte`, async () => {
    await withFakeModel(async (fake) => {
      const body = {
        model: "m",
        messages: MESSAGES,
        stream: true,
        fake_ttft_ms: 30,
        fake_tokens: 5,
        fake_itl_ms: 5,
      };
      const r = await runLoad(load(fake.url, {
        transport,
        body: JSON.stringify(body),
        stream: true,
        requests: 8,
        warmup: 0,
        expectChunks: 5,
      }));
      assertEquals([r.completed, r.errors, r.errorSamples], [8, 0, []]);
      assert(r.ttft!.p50 >= 28, `ttft ${r.ttft!.p50}`);
      assertEquals(r.gap!.n, 8 * 4, "four gaps per five-token stream");
      assert(r.gap!.mean > 2, `mean gap ${r.gap!.mean} is above 2 ms`);
      assert(r.gap!.mean < 30, `mean gap ${r.gap!.mean} is below 30 ms`);
    }, { record: 0 });
  });
}

Deno.test("load client: chunks split mid-frame (and mid-character) are still counted", async () => {
  await withFakeModel(async (fake) => {
    const body = { model: "m", messages: MESSAGES, stream: true, fake_split_frames: true };
    const r = await runLoad(load(fake.url, {
      body: JSON.stringify(body),
      stream: true,
      concurrency: 2,
      requests: 4,
      warmup: 0,
      expectChunks: 8,
    }));
    assertEquals([r.completed, r.errors, r.errorSamples], [4, 0, []]);
  }, { record: 0 });
});

Deno.test("load client: error answers, broken and short streams are counted", async () => {
  await withFakeModel(async (fake) => {
    const status = await runLoad(load(fake.url, {
      body: JSON.stringify({ model: "m", messages: MESSAGES, fake_status: 503 }),
      requests: 6,
      warmup: 0,
    }));
    assertEquals([status.completed, status.errors, status.errorSamples], [0, 6, ["status 503"]]);

    const cut = await runLoad(load(fake.url, {
      body: JSON.stringify({ model: "m", messages: MESSAGES, stream: true, fake_cut_after: 2 }),
      stream: true,
      requests: 3,
      warmup: 0,
    }));
    assertEquals([cut.completed, cut.errors], [0, 3]);

    const short = await runLoad(load(fake.url, {
      body: JSON.stringify({ model: "m", messages: MESSAGES, stream: true, fake_tokens: 3 }),
      stream: true,
      requests: 2,
      warmup: 0,
      expectChunks: 4,
    }));
    assertEquals(short.errorSamples, ["stream had 3 content chunks, expected 4"]);
  }, { record: 0 });
});

Deno.test("load client: a slow answer past the timeout fails and the run still ends", async () => {
  await withFakeModel(async (fake) => {
    const r = await runLoad(load(fake.url, {
      body: JSON.stringify({ model: "m", messages: MESSAGES, fake_ttft_ms: 2000 }),
      concurrency: 1,
      requests: 1,
      warmup: 0,
      timeoutMs: 150,
    }));
    assertEquals([r.completed, r.errors], [0, 1]);
  }, { record: 0 });
});
