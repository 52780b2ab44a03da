import { assertEquals, assertMatch } from "../_assert.ts";

const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

/** Starts `skeid fake-model` with `args` as a child process, stdout and stderr piped. */
function spawnFakeModel(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-env",
      MAIN,
      "fake-model",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Reads stdout until the first line, within `ms`. */
async function firstLine(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  ms: number,
): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no line within ${ms} ms: ${text}`)), ms);
  });
  try {
    for (let i = 0; i < 1000 && !text.includes("\n"); i++) {
      const { done, value } = await Promise.race([reader.read(), timeout]);
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
  }
  return text.split("\n")[0];
}

Deno.test("skeid fake-model prints its URL, serves, and exits 0 on SIGTERM", async () => {
  const child = spawnFakeModel(["--listen", "127.0.0.1:0", "--tokens", "2"]);
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.getReader();
  try {
    const url = await firstLine(reader, 30_000);
    assertMatch(url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const res = await fetch(`${url}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [] }),
    });
    assertEquals((await res.json()).choices[0].message.content, "tök0 tök1");
  } finally {
    child.kill("SIGTERM");
    await reader.cancel();
  }
  const status = await child.status;
  assertEquals({ code: status.code, stderr: await stderr }, { code: 0, stderr: "" });
});

Deno.test("skeid fake-model rejects a bad option with exit 2", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-net=127.0.0.1",
      MAIN,
      "fake-model",
      "--tokens",
      "lots",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(out.code, 2);
  assertMatch(new TextDecoder().decode(out.stderr), /--tokens: expected a non-negative number/);
});

Deno.test("skeid fake-model --nodes 2 --sim serves two simulated nodes, one URL a line", async () => {
  const child = spawnFakeModel([
    "--listen",
    "127.0.0.1:0",
    "--nodes",
    "2",
    "--sim",
    "--itl-ms",
    "0",
  ]);
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.getReader();
  try {
    const decoder = new TextDecoder();
    let text = "";
    for (let i = 0; i < 100 && text.split("\n").length < 3; i++) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const urls = text.split("\n").slice(0, 2);
    for (const url of urls) assertMatch(url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    assertEquals(new Set(urls).size, 2);
    const messages = [{ role: "user", content: "a b c d e f g h i j k l m n o p q" }];
    for (const url of urls) {
      for (const expected of [0, 16]) {
        const res = await fetch(`${url}/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", messages }),
        });
        // Each node has its own cache: the second request on each finds the first's block.
        assertEquals((await res.json()).usage.prompt_tokens_details.cached_tokens, expected);
      }
    }
  } finally {
    child.kill("SIGTERM");
    await reader.cancel();
  }
  const status = await child.status;
  assertEquals({ code: status.code, stderr: await stderr }, { code: 0, stderr: "" });
});
