import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { run } from "../../src/cli/check.ts";
import { type CliRun, runCli } from "../_helpers/cli.ts";
import { tempDir } from "../_helpers/temp.ts";

const EXAMPLE = new URL("../../config.example.yaml", import.meta.url);
const MAIN = new URL("../../src/main.ts", import.meta.url);

/** Runs `skeid check` in-process with captured output. */
function check(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return runCli(run, args, env);
}

/** 1-based line of the first line of `text` containing `needle`. */
function lineOf(text: string, needle: string): number {
  const i = text.split("\n").findIndex((l) => l.includes(needle));
  if (i < 0) throw new Error(`not in text: ${needle}`);
  return i + 1;
}

Deno.test("config.example.yaml passes skeid check", async () => {
  const r = await check(["--config", EXAMPLE.pathname]);
  assertEquals(r.err, []);
  assertEquals(r.code, 0);
  assertMatch(
    r.out[0],
    /^ok: .*config\.example\.yaml \(4 nodes, 2 aliases, 3 prices, 2 policies, 3 keys, 2 names, usage store jsonlog, admin off \(admin\.api_key_env names SKEID_ADMIN_API_KEY, which is unset or empty\), registry off, manifest on \(1 key\)\)$/,
  );
});

Deno.test("config.example.yaml holds no secret, only variable names", async () => {
  const text = await Deno.readTextFile(EXAMPLE);
  assert(!/^\s*(api_key|admin_api_key|password|secret):/m.test(text), "no key written inline");
  assertMatch(text, /api_key_env: SKEID_ADMIN_API_KEY/);
  assertMatch(text, /secret_env: SKEID_REGISTRY_SECRET/);
});

Deno.test("a broken copy of the example lists each error with its path and line", async () => {
  const good = await Deno.readTextFile(EXAMPLE);
  const broken = good
    .replace("engine: sglang", "engine: openai-compatible")
    .replace("max_conns: 64", "max_conns: lots")
    .replace("output_per_million: 0.79", "output_per_million: -0.79")
    .replace("wait_poll_ms: 25", "wait_poll_ms: 0")
    .replace("error_window_s: 60", "error_window_s: 60\n  secret: hunter2")
    .replace("tool_choice_auto: true", "tool_choice_auto: true, telepathy: true")
    .replace("default_policy: standard", "default_policy: platinum")
    .replace("backend: jsonlog", "backend: papyrus");
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/broken.yaml`;
  try {
    await Deno.writeTextFile(path, broken);
    const r = await check(["--config", path]);
    assertEquals(r.code, 1);
    assertEquals(r.out, []);
    assertEquals(r.err[0], `skeid check: ${path}: 8 errors`);
    const expected = [
      `error: nodes[1].engine (line ${
        lineOf(broken, "openai-compatible")
      }): unknown engine 'openai-compatible' (expected one of: `,
      `error: nodes[3].max_conns (line ${lineOf(broken, "max_conns: lots")}): `,
      `error: pricing["llama-3.3-70b-versatile"].output_per_million (line ${
        lineOf(broken, "-0.79")
      }): output_per_million must be a number >= 0`,
      `error: default_policy (line ${lineOf(broken, "default_policy:")}): `,
      `error: routing.wait_poll_ms (line ${lineOf(broken, "wait_poll_ms: 0")}): must be >= 1`,
      `error: registry.secret (line ${lineOf(broken, "secret: hunter2")}): unknown key`,
      `error: manifest.capabilities.house-model.telepathy (line ${
        lineOf(broken, "telepathy")
      }): unknown capability 'telepathy'`,
      `error: usage_store.backend (line ${lineOf(broken, "papyrus")}): `,
    ];
    const lines = r.err.slice(1);
    assertEquals(lines.length, expected.length, lines.join("\n"));
    for (const [i, prefix] of expected.entries()) {
      assert(lines[i].startsWith(prefix), `expected ${prefix}\n     got ${lines[i]}`);
    }
    assert(
      !r.err.join("\n").includes("hunter2"),
      "a value written where a secret went is not echoed",
    );
  } finally {
    await cleanup();
  }
});

Deno.test("check: a keys entry that is neither a name nor a key id is an error", async () => {
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/keys.yaml`;
  try {
    // `alice` with no names: entry would be the literal id `alice`, which no customer key has.
    await Deno.writeTextFile(
      path,
      "policies:\n  standard: {}\nkeys:\n  alice: {policy: standard}\n",
    );
    const r = await check(["--config", path]);
    assertEquals(r.code, 1);
    assertEquals(r.err, [
      `skeid check: ${path}: 1 error`,
      "error: keys.alice (line 4): key 'alice' is neither a name in names: nor a customer key id " +
      "(k_ followed by 40 hex digits, as `skeid keyid` prints it)",
    ]);
  } finally {
    await cleanup();
  }
});

Deno.test("check prints skipped-entry and worker-share warnings and still passes", async () => {
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/warn.yaml`;
  try {
    await Deno.writeTextFile(
      path,
      "routing: {frontend_count: 4}\nnodes:\n  - {id: a, url: 'http://a:1', max_conns: 2}\n" +
        "  - {url: 'http://b:1'}\n",
    );
    const r = await check(["--config", path]);
    assertEquals(r.code, 0);
    assertMatch(r.out[0], /^ok: .*\(1 node, /);
    assertEquals(r.out[1], "warning: nodes[1] (line 4): skipped: a node needs both id and url");
    assertEquals(r.out.length, 3, r.out.join("\n"));
    assertMatch(r.out[2], /^warning: .*'a'.*2/);
  } finally {
    await cleanup();
  }
});

Deno.test("check: a missing file exits 2 with a clear message; no --config exits 2", async () => {
  const r = await check(["--config", "/nonexistent/skeid.yaml"]);
  assertEquals(r.code, 2);
  assertEquals(r.err, ["skeid check: config file not found: /nonexistent/skeid.yaml"]);
  const none = await check([]);
  assertEquals(none.code, 2);
  assertMatch(none.err[0], /--config FILE is required/);
});

Deno.test("check: the registry's secret variable is read as serve would read it", async () => {
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/reg.yaml`;
  try {
    await Deno.writeTextFile(
      path,
      "admin: {api_key_env: ADM}\nregistry: {enabled: true, secret_env: REG}\n",
    );
    const fails = await check(["--config", path], { ADM: "a" });
    assertEquals(fails.code, 1);
    assertMatch(fails.err[1], /^error: registry\.secret_env \(line 2\): variable REG is empty/);
    const passes = await check(["--config", path], { ADM: "a", REG: "r".repeat(32) });
    assertEquals(passes.code, 0);
    assertMatch(passes.out[0], /admin on \(admin\.api_key_env\), registry on/);
  } finally {
    await cleanup();
  }
});

Deno.test("skeid check runs as a subcommand of the CLI", async () => {
  const cmd = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--allow-read",
      "--allow-env",
      "--allow-sys=hostname",
      MAIN.pathname,
      "check",
      "--config",
      EXAMPLE.pathname,
    ],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  });
  const { code, stdout, stderr } = await cmd.output();
  const out = new TextDecoder().decode(stdout);
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  assertMatch(out, /^ok: .*config\.example\.yaml \(4 nodes/);
  const missing = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--allow-read",
      "--allow-env",
      MAIN.pathname,
      "check",
      "--config",
      "/nope.yaml",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(missing.code, 2);
});

Deno.test("check --workers N: workers share max_conns, only frontends split it (ADR 0025)", async () => {
  const tmp = await tempDir();
  try {
    const node = "nodes:\n  - id: gpu-1\n    url: http://127.0.0.1:1\n    max_conns: 2\n";
    await Deno.writeTextFile(`${tmp.dir}/w.yaml`, node);
    const workers = await check(["--config", `${tmp.dir}/w.yaml`, "--workers", "4"]);
    assertEquals(workers.code, 0);
    assertEquals(workers.out.filter((l) => l.startsWith("warning:")), [], "4 workers: no warning");
    await Deno.writeTextFile(`${tmp.dir}/f.yaml`, `routing:\n  frontend_count: 4\n${node}`);
    const frontends = await check(["--config", `${tmp.dir}/f.yaml`, "--workers", "4"]);
    const warnings = frontends.out.filter((l) => l.startsWith("warning:"));
    assertEquals(warnings.length, 1, "4 frontends: one warning");
    assertMatch(warnings[0], /gpu-1.*4 frontends.*fewer frontends or raise max_conns/);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("check: an unknown pick or a load bound of 1 or less fails with its path and line", async () => {
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/picks.yaml`;
  try {
    await Deno.writeTextFile(
      path,
      [
        "nodes:",
        "  - {id: a, url: 'http://a:8000/v1', model: m}",
        "aliases:",
        "  chat:",
        "    tiers:",
        "      - {model: m, pick: sticky}",
        "routing:",
        "  pick: random",
        "  affinity_bound: 1",
        "",
      ].join("\n"),
    );
    const r = await check(["--config", path]);
    assertEquals(r.code, 1);
    assertEquals(r.err, [
      `skeid check: ${path}: 3 errors`,
      "error: aliases.chat.tiers[0].pick (line 6): must be one of round_robin, least_loaded, affinity",
      "error: routing.pick (line 8): must be one of: round_robin, least_loaded, affinity (got text)",
      "error: routing.affinity_bound (line 9): must be > 1 (got 1)",
    ]);
  } finally {
    await cleanup();
  }
});

Deno.test("check: the three picks and a bound above 1 pass", async () => {
  const { dir, cleanup } = await tempDir("skeid-check-");
  const path = `${dir}/picks-ok.yaml`;
  try {
    await Deno.writeTextFile(
      path,
      "nodes:\n  - {id: a, url: 'http://a:8000/v1', model: m}\naliases:\n  chat:\n" +
        "    tiers:\n      - {model: m, pick: affinity}\n      - {model: m, pick: least_loaded}\n" +
        "routing:\n  pick: round_robin\n  affinity_bound: 1.5\n  prefix_index_blocks: 200000\n",
    );
    const r = await check(["--config", path]);
    assertEquals(r.err, []);
    assertEquals(r.code, 0);
  } finally {
    await cleanup();
  }
});
