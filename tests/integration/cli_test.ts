import { deepStrictEqual, match, ok, strictEqual, throws } from "node:assert/strict";
import { endChild } from "../_helpers/cli.ts";
import { fileURLToPath } from "node:url";
import { parseListen } from "../../src/cli/serve.ts";

const launcher = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

Deno.test("cli: parseListen", () => {
  deepStrictEqual(parseListen("127.0.0.1:8090"), { hostname: "127.0.0.1", port: 8090 });
  deepStrictEqual(parseListen("[::1]:0"), { hostname: "::1", port: 0 });
  deepStrictEqual(parseListen(":9000"), { hostname: "0.0.0.0", port: 9000 });
  throws(() => parseListen("localhost"), /HOST:PORT/);
  throws(() => parseListen("a:70000"), /port/);
});

Deno.test("cli: serve --help lists every option and the signals", async () => {
  const out = await new Deno.Command(launcher, {
    args: ["serve", "--help"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  strictEqual(out.code, 0);
  const text = new TextDecoder().decode(out.stdout);
  for (const part of ["--config FILE", "--listen HOST:PORT", "--admin-api-key", "--workers N"]) {
    ok(text.includes(part), part);
  }
  match(text, /SIGTERM or SIGINT/);
  match(text, /SIGHUP reloads the config/);
  match(text, /default 127\.0\.0\.1:8090/);
});

Deno.test("cli: serve exits non-zero with every config error, its path and line", async () => {
  const dir = await Deno.makeTempDir({ prefix: "skeid-cli-" });
  try {
    await Deno.writeTextFile(
      `${dir}/bad.yaml`,
      "nodes:\n  - id: a\n    url: http://127.0.0.1:1\n    engine: openai-compatible\n",
    );
    const out = await new Deno.Command(launcher, {
      args: ["serve", "--config", `${dir}/bad.yaml`, "--listen", "127.0.0.1:0"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    strictEqual(out.code, 1);
    const err = new TextDecoder().decode(out.stderr);
    match(err, /nodes\[0\]\.engine \(line 4\): unknown engine 'openai-compatible'/);
    const missing = await new Deno.Command(launcher, {
      args: ["serve", "--config", `${dir}/nope.yaml`, "--listen", "127.0.0.1:0"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    strictEqual(missing.code, 1);
    match(new TextDecoder().decode(missing.stderr), /nope\.yaml/);
    const badListen = await new Deno.Command(launcher, {
      args: ["serve", "--listen", "nowhere"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    strictEqual(badListen.code, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: serve --workers 4 prints address, config and the shared max_conns; SIGINT exits 0", async () => {
  const dir = await Deno.makeTempDir({ prefix: "skeid-cli-" });
  const child = new Deno.Command(launcher, {
    args: ["serve", "--config", `${dir}/ok.yaml`, "--listen", "127.0.0.1:0", "--workers", "4"],
    stdout: "piped",
    stderr: "piped",
  });
  await Deno.writeTextFile(
    `${dir}/ok.yaml`,
    "nodes:\n  - id: gpu-1\n    url: http://127.0.0.1:1\n    max_conns: 2\n" +
      "admin: { api_key_env: SKEID_TEST_UNSET_ADMIN_KEY }\n",
  );
  const proc = child.spawn();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(proc.stderr).text();
  let text = "";
  try {
    const end = Date.now() + 30_000;
    while (!/the admin API is off/.test(text) && Date.now() < end) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    match(text, /listening on http:\/\/127\.0\.0\.1:\d+/);
    match(text, new RegExp(`config ${dir}/ok\\.yaml`));
    // The 4 workers share gpu-1's max_conns 2 (ADR 0025): nothing to split, nothing to warn.
    match(text, /--workers 4: 4 workers share each node's max_conns/);
    strictEqual(/fewer workers/.test(text), false, "no worker-share warning");
    match(text, /warning: no usage_store configured: usage events are not recorded/);
    match(
      text,
      /warning: the admin API is off: admin\.api_key_env names SKEID_TEST_UNSET_ADMIN_KEY, which is unset or empty/,
    );
    const base = text.match(/http:\/\/127\.0\.0\.1:\d+/)![0];
    const health = await fetch(`${base}/health`);
    strictEqual(health.status, 200);
    await health.body?.cancel();
    // A second gateway on the group's address: refused before it opens anything, whether it has
    // workers (which listen with reusePort, and could otherwise join the port) or not.
    const port = base.split(":").at(-1)!;
    await Deno.writeTextFile(
      `${dir}/second.yaml`,
      `usage_store: { backend: sqlite, sqlite_path: ${dir}/second.sqlite }\n`,
    );
    for (const workers of ["2", "1"]) {
      const second = await new Deno.Command(launcher, {
        args: ["serve", "--config", `${dir}/second.yaml`, "--listen", `127.0.0.1:${port}`].concat(
          ["--workers", workers],
        ),
        stdout: "piped",
        stderr: "piped",
        // One that joined the port would serve on: ended here, it fails the test below.
        signal: AbortSignal.timeout(20_000),
      }).output();
      strictEqual(second.code, 1, `--workers ${workers} on a taken port exits 1`);
      match(
        new TextDecoder().decode(second.stderr),
        new RegExp(
          `skeid serve: 127\\.0\\.0\\.1:${port} is taken \\(another process listens there\\)`,
        ),
      );
      strictEqual(new TextDecoder().decode(second.stdout), "", "it never said it listens");
    }
    strictEqual(
      await Deno.stat(`${dir}/second.sqlite`).then(() => true, () => false),
      false,
      "the refused gateways opened no usage store",
    );
    // A forwarded request (its node refuses: 502) makes a usage event the ledger must drop.
    const forwarded = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [] }),
    });
    strictEqual(forwarded.status, 502);
    await forwarded.body?.cancel();
    proc.kill("SIGINT");
    const status = await proc.status;
    strictEqual(status.code, 0);
    const logged = await stderr;
    strictEqual(
      (logged.match(/usage_store_not_configured/g) ?? []).length,
      1,
      "one warning at start, none again for the dropped event",
    );
    ok(true);
  } finally {
    await endChild(proc);
    await reader.cancel().catch(() => {});
    await stderr.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
