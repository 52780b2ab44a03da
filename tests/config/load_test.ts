import { assert, assertEquals, assertMatch, assertThrows } from "../_assert.ts";
import { cpuUsage } from "node:process";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { configDigest, loadConfigText, parseConfigText } from "../../src/config/load.ts";

/** A provider manifest as the tests read it back. */
interface ManifestDoc {
  schema_version: number;
  kind: string;
  provider_id: string;
  issuer: string;
  auth: unknown[];
  endpoints: unknown[];
  models: { id: string; endpoint_ref: string; capabilities: Record<string, boolean> }[];
  extensions: unknown;
}

const env = (vars: Record<string, string> = {}) => (name: string) => vars[name];

function loadErrors(text: string, vars: Record<string, string> = {}): string[] {
  try {
    loadConfigText(text, { env: env(vars) });
  } catch (e) {
    if (e instanceof ConfigLoadError) return e.issues.map(formatIssue);
    throw e;
  }
  throw new Error("expected the config to fail");
}

const FULL_ID_A = "k_" + "a".repeat(40);
const FULL_ID_B = "k_" + "b".repeat(40);

Deno.test("every error names its path and line, all of them collected", () => {
  const text = [
    "nodes:", // 1
    "  - id: gpu-1", // 2
    "    url: http://gpu-1:8000", // 3
    "  - id: gpu-2", // 4
    "    url: http://gpu-2:8000", // 5
    "    engine: foo", // 6
    "  - id: gpu-3", // 7
    "    url: http://gpu-3:8000", // 8
    "    weight: heavy", // 9
    "pricing:", // 10
    "  gpt-4.1:", // 11
    "    input_per_million: -1", // 12
    "aliases:", // 13
    "  house:", // 14
    "    tiers: []", // 15
    "routing:", // 16
    "  wait_poll_ms: 0", // 17
    "registry:", // 18
    "  enabled: true", // 19
    "  secret: not-here", // 20
    "policies:", // 21
    "  standard: {deny_tags: [cloud]}", // 22
    "default_policy: nope", // 23
    "usage_store:", // 24
    "  backend: carrier-pigeon", // 25
  ].join("\n");
  const errors = loadErrors(text);
  assertEquals(errors.length, 10, errors.join("\n"));
  assertMatch(
    errors[0],
    /^nodes\[1\]\.engine \(line 6\): unknown engine 'foo' \(expected one of: .*vllm.*\)$/,
  );
  assertMatch(errors[1], /^nodes\[2\]\.weight \(line 9\): .*weight must be a number/);
  assertMatch(
    errors[2],
    /^pricing\["gpt-4\.1"\]\.input_per_million \(line 12\): input_per_million must be a number >= 0/,
  );
  assertMatch(errors[3], /^aliases\.house\.tiers \(line 15\): .*at least one tier/);
  assertEquals(errors[4], "routing.wait_poll_ms (line 17): must be >= 1 (got 0)");
  // The registry block: an unknown key, and still its other checks in the same run.
  assertMatch(
    errors[5],
    /^registry\.secret_env \(line 18\): required when the registry is enabled/,
  );
  assertMatch(errors[6], /^registry\.enabled \(line 19\): .*needs a credential/);
  assertEquals(errors[7], "registry.secret (line 20): unknown key");
  assertMatch(errors[8], /^default_policy \(line 23\): .*'nope'/);
  assertMatch(errors[9], /^usage_store\.backend \(line 25\): .*carrier-pigeon/);
});

Deno.test("a YAML syntax error names line and column", () => {
  const errors = loadErrors("nodes:\n  - id: a\n    url: [http://x\nrouting: {}\n");
  assert(errors.length >= 1);
  assertMatch(errors[0], /^line \d+, column \d+: /);
});

Deno.test("a duplicate YAML key is an error with its line", () => {
  const errors = loadErrors("routing:\n  wait_poll_ms: 5\n  wait_poll_ms: 6\n");
  assertMatch(errors[0], /^line 3, column \d+: .*(unique|duplicate)/i);
});

Deno.test("the document must be a mapping", () => {
  assertEquals(loadErrors("- a\n- b\n"), ["line 1: the config must be a mapping of sections"]);
});

Deno.test("an empty file is an empty config", () => {
  const loaded = loadConfigText("# nothing yet\n", { env: env() });
  assertEquals(loaded.config, {});
  assertEquals(loaded.nodes, undefined);
  assertEquals(loaded.manifests.size, 0);
});

Deno.test("unknown top-level keys are ignored and do not change the digest", () => {
  const a = loadConfigText("routing: {wait_poll_ms: 5}\n", { env: env() });
  const b = loadConfigText("routing: {wait_poll_ms: 5}\nfrobnicate: [1, 2]\n", { env: env() });
  assertEquals(b.config, a.config);
  assertEquals(a.digest, b.digest);
});

Deno.test("the digest ignores key order and comments, and sees a changed value", () => {
  const a = parseConfigText("routing:\n  wait_poll_ms: 5\n  frontend_count: 2\n").digest;
  const b = parseConfigText("# hi\nrouting: {frontend_count: 2, wait_poll_ms: 5} # x\n").digest;
  const c = parseConfigText("routing: {frontend_count: 3, wait_poll_ms: 5}\n").digest;
  assertEquals(a, b);
  assert(a !== c);
  assertEquals(configDigest(undefined), configDigest({}));
});

Deno.test("nodes without id or url are skipped with a warning naming nodes[i]", () => {
  const loaded = loadConfigText(
    "nodes:\n  - id: a\n    url: http://a:1\n  - url: http://b:1\n  - id: c\n",
    { env: env() },
  );
  assertEquals(loaded.nodes!.map((n) => n.id), ["a"]);
  assertEquals(loaded.warnings.map(formatIssue), [
    "nodes[1] (line 4): skipped: a node needs both id and url",
    "nodes[2] (line 5): skipped: a node needs both id and url",
  ]);
});

Deno.test("a node entry that is not a mapping is an error", () => {
  assertEquals(loadErrors("nodes:\n  - just-a-string\n"), [
    "nodes[0] (line 2): must be a mapping (a node needs at least id and url)",
  ]);
});

Deno.test("duplicate node ids: the later entry wins, with a warning", () => {
  const loaded = loadConfigText(
    "nodes:\n  - {id: a, url: 'http://one:1'}\n  - {id: b, url: 'http://b:1'}\n" +
      "  - {id: a, url: 'http://two:1'}\n",
    { env: env() },
  );
  assertEquals(loaded.nodes!.length, 2);
  assertEquals(loaded.nodes!.find((n) => n.id === "a")!.url, "http://two:1/v1");
  assertEquals(loaded.nodeSpecs!.length, 2);
  assertEquals(loaded.warnings.length, 1);
  assertMatch(
    formatIssue(loaded.warnings[0]),
    /^nodes\[2\]\.id \(line 4\): duplicate node id 'a' \(also nodes\[0\]\); the later entry wins$/,
  );
});

Deno.test("node defaults come from the core's normalizeNode", () => {
  const loaded = loadConfigText("nodes:\n  - {id: a, url: 'http://a:1', tags: 'Local, GB10'}\n", {
    env: env(),
  });
  const n = loaded.nodes![0];
  assertEquals(n.engine, "openaibase");
  assertEquals(n.url, "http://a:1/v1");
  assertEquals(n.tags, ["local", "gb10"]);
  assertEquals(n.weight, 1);
});

Deno.test("the registry capacity probe block refuses unknown keys and needs its variables", () => {
  const errors = loadErrors([
    "nodes:",
    "  - id: skeid-b",
    "    url: http://skeid-b:8090/v1",
    "    capacity:",
    "      probe: registry",
    "      secret: written-in-the-file",
    "      url: ftp://nope",
    "      interval_ms: 0",
  ].join("\n"));
  assert(
    errors.some((e) => /^nodes\[0\]\.capacity\.secret \(line 6\): unknown key/.test(e)),
    errors.join("\n"),
  );
  assert(errors.some((e) => /^nodes\[0\]\.capacity \(line 4\): .*needs secret_env/.test(e)));
  assert(
    errors.some((e) => /^nodes\[0\]\.capacity \(line 4\): .*read_key_env or admin_key_env/.test(e)),
  );
  assert(
    errors.some((e) => /^nodes\[0\]\.capacity\.url \(line 7\): must be an http\(s\) URL/.test(e)),
  );
  assertEquals(
    errors.filter((e) => /^nodes\[0\]\.capacity\.interval_ms \(line 8\)/.test(e)).length,
    1,
  );
});

Deno.test("a complete registry probe block loads", () => {
  const loaded = loadConfigText(
    [
      "nodes:",
      "  - id: skeid-b",
      "    url: http://skeid-b:8090/v1",
      "    capacity: {type: Registry, secret_env: S, read_key_env: R, tags: [local], max_skew_s: 5}",
    ].join("\n"),
    { env: env() },
  );
  assertEquals(loaded.nodes![0].capacity?.probe, "registry");
});

Deno.test("routing values are validated and become the patch", () => {
  const loaded = loadConfigText(
    "routing:\n  wait_timeout_ms: 100\n  wait_poll_ms: '7'\n  trust_key_id_header: yes\n" +
      "  frontend_count: 2\n  require_known_keys: on\n  max_body_bytes: 1024\n  max_attempts: 2\n" +
      "  max_retry_after_ms: 5000\n  wait_typo: 1\n",
    { env: env() },
  );
  assertEquals(loaded.routing, {
    wait_timeout_ms: 100,
    wait_poll_ms: 7,
    trust_key_id_header: true,
    frontend_count: 2,
    require_known_keys: true,
    max_body_bytes: 1024,
    max_attempts: 2,
    max_retry_after_ms: 5000,
  });
  assertMatch(
    formatIssue(loaded.warnings[0]),
    /^routing\.wait_typo \(line 10\): unknown routing key/,
  );
  const errors = loadErrors(
    "routing:\n  frontend_count: 0\n  max_body_bytes: 0\n  max_attempts: 1.5\n" +
      "  trust_key_id_header: maybe\n  wait_timeout_ms: -1\n  max_retry_after_ms: -5\n",
  );
  assertEquals(errors, [
    "routing.frontend_count (line 2): must be >= 1 (got 0)",
    "routing.max_body_bytes (line 3): must be > 0 (got 0)",
    "routing.max_attempts (line 4): must be an integer (got 1.5)",
    "routing.trust_key_id_header (line 5): must be true or false (got text)",
    "routing.wait_timeout_ms (line 6): must be >= 0 (got -1)",
    "routing.max_retry_after_ms (line 7): must be >= 0 (got -5)",
  ]);
});

Deno.test("policy errors carry the config path and line", () => {
  const errors = loadErrors(
    "policies:\n  standard: {}\nnames:\n  alice: " + FULL_ID_A + "\nkeys:\n  alice:\n" +
      "    policy: gold\n",
  );
  assertEquals(errors.length, 1);
  assertEquals(errors, [
    "keys.alice.policy (line 7): key 'alice' references undefined policy 'gold'",
  ]);
});

Deno.test("every policy and keys error is listed at once, with its path and line", () => {
  const errors = loadErrors(
    [
      "policies:", // 1
      "  standard:", // 2
      "    budget: { usd: 5, period: yearly }", // 3
      "    limits: { rpm: -3, rps: 4 }", // 4
      "    share: { wieght: 2, weight: 0, max_queued: -1 }", // 5
      "  other:", // 6
      "    limits: { rpm: -3 }", // 7
      "default_policy: gold", // 8
      "names:", // 9
      `  alice: ${FULL_ID_A}`, // 10
      "keys:", // 11
      "  alice: { policy: nope }", // 12
      `  ${FULL_ID_B}: { policy: other, share: { weight: -1 } }`, // 13
      "nodes:", // 14
      "  - { id: a, url: 'http://127.0.0.1:1', engine: bogus }", // 15
      "  - { id: b, url: 'http://127.0.0.1:2', engine: bogus2 }", // 16
      "",
    ].join("\n"),
  );
  const at = errors.map((e) => e.replace(/\): .*$/, ")"));
  assertEquals(at, [
    "policies.standard.budget.period (line 3)",
    "policies.standard.limits.rps (line 4)",
    "policies.standard.limits.rpm (line 4)",
    "policies.standard.share.wieght (line 5)",
    "policies.standard.share.weight (line 5)",
    "policies.standard.share.max_queued (line 5)",
    "policies.other.limits.rpm (line 7)",
    "default_policy (line 8)",
    "keys.alice.policy (line 12)",
    `keys.${FULL_ID_B}.share.weight (line 13)`,
    "nodes[0].engine (line 15)",
    "nodes[1].engine (line 16)",
  ]);
  assertEquals(
    errors[1],
    "policies.standard.limits.rps (line 4): unknown field (known: rpm, tpm, max_inflight)",
  );
  assertEquals(errors[4], "policies.standard.share.weight (line 5): must be a number > 0 (got 0)");
});

Deno.test("policies resolve through the core's buildPolicySet", () => {
  const loaded = loadConfigText(
    [
      "policies:",
      "  standard: {deny_tags: [cloud]}",
      "  burstable: {}",
      "default_policy: standard",
      "names:",
      `  alice: ${FULL_ID_A}`,
      "keys:",
      "  alice: burstable",
    ].join("\n"),
    { env: env() },
  );
  const set = loaded.policySet!;
  assertEquals(set.keyNames.get("alice"), FULL_ID_A);
  assertEquals(set.defaultPolicy?.deny_tags, ["cloud"]);
  assertEquals(set.keyPolicies.get(FULL_ID_A)?.deny_tags, []);
});

Deno.test("usage_db_path alone is a sqlite store; usage_store errors carry its path", () => {
  const loaded = loadConfigText("usage_db_path: /tmp/skeid-test-usage.db\n", { env: env() });
  assertEquals(loaded.usageStore?.origin, "usage_db_path");
  assertEquals(loaded.usageStore?.normalized.backend, "sqlite");
  const errors = loadErrors("usage_store:\n  backend: sqlite\n");
  assertEquals(errors.length, 1);
  assertMatch(errors[0], /^usage_store\.sqlite_path \(line 1\): .*sqlite_path/);
});

Deno.test("a usage store password from password_env never appears in the loaded config", () => {
  const loaded = loadConfigText(
    "usage_store:\n  backend: postgresql\n  host: db\n  password_env: PGPW\n",
    { env: env({ PGPW: "hunter2-secret" }) },
  );
  assert(!JSON.stringify(loaded.config).includes("hunter2-secret"));
  assert(!JSON.stringify(loaded.usageStore).includes("hunter2-secret"));
});

// ---- registry ----

const SECRET = "s".repeat(32);

Deno.test("registry: enabled needs secret_env with at least 32 bytes", () => {
  assertEquals(loadErrors("admin_api_key: adm\nregistry: {enabled: true}\n"), [
    "registry.secret_env (line 2): required when the registry is enabled (the variable holding the signing secret)",
  ]);
  const short = loadErrors(
    "admin_api_key: adm\nregistry:\n  enabled: true\n  secret_env: REG_SECRET\n",
    { REG_SECRET: "short" },
  );
  assertEquals(short.length, 1);
  assertMatch(
    short[0],
    /^registry\.secret_env \(line 4\): variable REG_SECRET is shorter than 32 bytes/,
  );
  assert(!short[0].includes("short;"), "the secret's value is never printed");
  const unset = loadErrors("admin_api_key: adm\nregistry: {enabled: true, secret_env: NOPE}\n");
  assertMatch(unset[0], /variable NOPE is empty or unset/);
});

Deno.test("registry: a credential is required, and a named read key must not be empty", () => {
  const noCred = loadErrors("registry: {enabled: true, secret_env: REG}\n", { REG: SECRET });
  assertEquals(noCred.length, 1);
  assertMatch(noCred[0], /an admin API key or registry\.read_key_env/);
  const emptyRead = loadErrors(
    "registry: {enabled: true, secret_env: REG, read_key_env: READ}\n",
    { REG: SECRET, READ: "" },
  );
  assertMatch(emptyRead[0], /^registry\.read_key_env \(line 1\): variable READ is empty or unset/);
  // SKEID_ADMIN_API_KEY counts as the admin key when the config names none.
  const viaEnv = loadConfigText("registry: {enabled: true, secret_env: REG}\n", {
    env: env({ REG: SECRET, SKEID_ADMIN_API_KEY: "adm" }),
    hostname: () => "box-1",
  });
  assertEquals(viaEnv.registry?.instanceId, "box-1");
  assertEquals(viaEnv.registry?.ttlS, 10);
  assertEquals(viaEnv.registry?.errorWindowS, 60);
  // And so does an explicit key.
  const viaExplicit = loadConfigText("registry: {enabled: true, secret_env: REG}\n", {
    env: env({ REG: SECRET }),
    explicitAdminKey: "cli-key",
  });
  assert(viaExplicit.registry);
});

Deno.test("registry settings hold the secret in memory but never print it", () => {
  const loaded = loadConfigText(
    "registry:\n  enabled: true\n  secret_env: REG\n  read_key_env: READ\n  ttl_s: 5\n" +
      "  instance_id: skeid-b\n  error_window_s: 30\n",
    { env: env({ REG: SECRET, READ: "reader-token" }) },
  );
  const r = loaded.registry!;
  assertEquals(r.secret, SECRET);
  assertEquals(r.readKey, "reader-token");
  assertEquals([r.ttlS, r.instanceId, r.errorWindowS], [5, "skeid-b", 30]);
  const printed = JSON.stringify(r) + JSON.stringify({ ...r }) + Deno.inspect(r);
  assert(!printed.includes(SECRET) && !printed.includes("reader-token"), printed);
  assert(!JSON.stringify(loaded.config).includes(SECRET));
});

Deno.test("registry: absent or disabled is off", () => {
  assertEquals(loadConfigText("registry: {enabled: false}\n", { env: env() }).registry, undefined);
  assertEquals(loadConfigText("{}\n", { env: env() }).registry, undefined);
});

// ---- manifest ----

const MANIFEST_BASE = [
  "nodes:",
  "  - {id: local-1, url: 'http://l:1', model: qwen3-32b, tags: [local]}",
  "  - {id: cloud-1, url: 'http://c:1', model: llama-70b, tags: [cloud]}",
  "aliases:",
  "  house-model:",
  "    - {tags: [local], model: qwen3-32b}",
  "    - {tags: [cloud], model: llama-70b}",
  "policies:",
  "  standard: {deny_tags: [cloud]}",
  "  burstable: {}",
  "default_policy: standard",
  "names:",
  `  alice: ${FULL_ID_A}`,
  `  bob: ${FULL_ID_B}`,
].join("\n") + "\n";

Deno.test("manifest: enabled without public_url, unknown face, unknown or uncarried capability", () => {
  const errors = loadErrors(
    MANIFEST_BASE +
      "manifest:\n  enabled: true\n  faces: [openai, grpc]\n  capabilities:\n" +
      "    qwen3-32b: {telepathy: true, thinking_budget: true}\n",
  );
  assert(
    errors.some((e) => /^manifest\.public_url \(line \d+\): required/.test(e)),
    errors.join("\n"),
  );
  assert(errors.some((e) => /^manifest\.faces\[1\] \(line \d+\): unknown face 'grpc'/.test(e)));
  assert(
    errors.some((e) =>
      /^manifest\.capabilities\.qwen3-32b\.telepathy \(line \d+\): unknown capability/.test(e)
    ),
  );
  assert(
    errors.some((e) =>
      /^manifest\.capabilities\.qwen3-32b\.thinking_budget \(line \d+\): .*carried by no published face/
        .test(e)
    ),
  );
});

Deno.test("manifest: a capability only another face carries fails when that face is not published", () => {
  const errors = loadErrors(
    MANIFEST_BASE + "manifest:\n  enabled: true\n  public_url: https://llm.example.com\n" +
      "  faces: [ollama]\n  capabilities:\n    qwen3-32b: {reasoning_effort: true}\n",
  );
  assertEquals(errors.length, 1);
  assertMatch(errors[0], /reasoning_effort.*carried by no published face \(ollama\)/);
});

Deno.test("manifest: a key granted a model its policy cannot reach fails the load", () => {
  const errors = loadErrors(
    MANIFEST_BASE + "manifest: {enabled: true, public_url: 'https://llm.example.com'}\n" +
      "keys:\n  alice:\n    models: [house-model]\n    manifest: {models: [house-model, qwen3-32b]}\n" +
      "  bob:\n    manifest: {models: [llama-70b]}\n",
  );
  assertEquals(errors.length, 2, errors.join("\n"));
  assertMatch(
    errors[0],
    /^keys\.alice\.manifest\.models\[1\] \(line \d+\): model 'qwen3-32b' cannot be reached by this key: its policy does not grant it$/,
  );
  assertMatch(
    errors[1],
    /^keys\.bob\.manifest\.models\[0\] \(line \d+\): model 'llama-70b' .*denies/,
  );
});

Deno.test("manifest: built per key id as canonical JSON, capabilities cut per face", () => {
  const loaded = loadConfigText(
    MANIFEST_BASE +
      "manifest:\n  enabled: true\n  public_url: https://llm.example.com/\n  provider_id: example-llm\n" +
      "  capabilities:\n    house-model: {tools_native: true, parallel_tool_use: true, streaming: false}\n" +
      "keys:\n  alice:\n    policy: burstable\n    manifest: {models: [qwen3-32b, house-model]}\n" +
      "  bob: burstable\n",
    { env: env() },
  );
  assertEquals([...loaded.manifests.keys()], [FULL_ID_A]);
  const json = loaded.manifests.get(FULL_ID_A)!;
  const doc = JSON.parse(json) as ManifestDoc;
  assertEquals(json, JSON.stringify(sortDeep(doc)), "keys are sorted");
  assertEquals(doc.schema_version, 1);
  assertEquals(doc.kind, "langertha-provider");
  assertEquals(doc.provider_id, "example-llm");
  assertEquals(doc.issuer, "https://llm.example.com");
  assertEquals(doc.auth, [{ id: "api_key", type: "api_key" }]);
  assertEquals(doc.endpoints, [
    {
      auth_ref: "api_key",
      base_url: "https://llm.example.com/v1",
      dialect: "openai-chat",
      id: "openai",
    },
    {
      auth_ref: "api_key",
      base_url: "https://llm.example.com",
      dialect: "anthropic-compat",
      id: "anthropic",
    },
    { auth_ref: "api_key", base_url: "https://llm.example.com", dialect: "ollama", id: "ollama" },
  ]);
  assertEquals(doc.models.length, 6, "two models on three faces");
  const cap = (model: string, face: string) =>
    Object.keys(
      doc.models.find((m) => m.id === model && m.endpoint_ref === face)!.capabilities,
    );
  assertEquals(cap("house-model", "openai"), ["chat", "parallel_tool_use", "tools_native"]);
  assertEquals(
    cap("house-model", "ollama"),
    ["chat", "tools_native"],
    "ollama carries no parallel calls",
  );
  assertEquals(cap("qwen3-32b", "anthropic"), ["chat", "streaming"]);
  assertEquals(doc.extensions, {});
});

Deno.test("manifest: disabled or absent publishes nothing", () => {
  const loaded = loadConfigText(
    MANIFEST_BASE + "manifest: {enabled: false}\nkeys:\n  alice: {manifest: {models: [nope]}}\n",
    { env: env() },
  );
  assertEquals(loaded.manifest, undefined);
  assertEquals(loaded.manifests.size, 0);
});

Deno.test("manifest: provider_id must match the manifest's pattern", () => {
  const errors = loadErrors(
    "manifest: {enabled: true, public_url: 'https://x.example', provider_id: 'Not OK'}\n",
  );
  assertEquals(errors, [
    "manifest.provider_id (line 1): must match [a-z0-9][a-z0-9._-]* (at most 128 characters) (got text)",
  ]);
});

Deno.test("loading never mutates or keeps secrets from the environment in the config", () => {
  const loaded = loadConfigText("admin:\n  api_key_env: ADM\n", {
    env: env({ ADM: "adm-secret" }),
  });
  assertEquals(loaded.adminKey, { key: "adm-secret", source: "admin.api_key_env" });
  assert(!JSON.stringify(loaded.config).includes("adm-secret"));
});

Deno.test("ConfigLoadError's message lists every issue under a heading", () => {
  const e = assertThrows(
    () =>
      loadConfigText("routing: {wait_poll_ms: 0, frontend_count: 0}\n", {
        env: env(),
        source: "x.yaml",
      }),
    ConfigLoadError,
  );
  assertEquals(
    e.message,
    "config x.yaml: 2 errors\n  routing.wait_poll_ms (line 1): must be >= 1 (got 0)\n" +
      "  routing.frontend_count (line 1): must be >= 1 (got 0)",
  );
});

function sortDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortDeep);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.keys(v).sort().map((k) => [k, sortDeep((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

Deno.test("a node whose api_key_env names an unset variable is warned about", () => {
  const text = "nodes:\n  - {id: groq-1, url: 'https://g:1', api_key_env: GROQ_KEY}\n" +
    "  - {id: groq-2, url: 'https://g:2', api_key_env: GROQ_KEY, api_key_ref: secret/groq}\n";
  const unset = loadConfigText(text, { env: env() });
  assertEquals(unset.warnings.map(formatIssue), [
    "nodes[0].api_key_env (line 2): variable GROQ_KEY is not set: node 'groq-1' has no upstream " +
    "key and is skipped by requests until it has one",
  ]);
  assertEquals(loadConfigText(text, { env: env({ GROQ_KEY: "k" }) }).warnings, []);
});

Deno.test("a keys section of 20k entries loads in linear time (well under 3 s)", () => {
  // The YAML library's duplicate-key check was quadratic: 20k keys took about 10 s.
  const lines = ["policies:", "  standard:", "    models: [m]", "keys:"];
  for (let i = 0; i < 20_000; i++) {
    lines.push(`  k_${i.toString(16).padStart(40, "0")}: standard`);
  }
  // CPU time, not wall time: the machine running the tests may be shared.
  const started = cpuUsage();
  const loaded = loadConfigText(lines.join("\n") + "\n", { env: env() });
  const used = cpuUsage(started);
  const elapsedMs = (used.user + used.system) / 1000;
  assertEquals(loaded.policySet?.knownKeyIds.size, 20_000);
  assert(elapsedMs < 3000, `20k keys took ${Math.round(elapsedMs)} ms of CPU`);
});

Deno.test("a duplicate key deep in a large mapping is still found, with its line", () => {
  const lines = ["keys:"];
  for (let i = 0; i < 1000; i++) lines.push(`  k_${i.toString(16).padStart(40, "0")}: standard`);
  lines.push(`  k_${(7).toString(16).padStart(40, "0")}: standard`);
  const errors = loadErrors(lines.join("\n") + "\n");
  assertEquals(errors.length, 1);
  assertMatch(errors[0], /^line 1002, column 3: .*unique/i);
});

Deno.test("a price of 1e400 (quoted or not) is refused naming its path", () => {
  const errors = loadErrors(
    'pricing:\n  m:\n    input_per_million: 1e400\n  n:\n    output_per_million: "1e400"\n',
  );
  assertEquals(errors.length, 2);
  assertMatch(errors[0], /^pricing\.m\.input_per_million \(line 3\): .*must be a number >= 0/);
  assertMatch(errors[1], /^pricing\.n\.output_per_million \(line 5\): .*must be a number >= 0/);
});

Deno.test("routing.max_reserve_tokens: a whole number of tokens, at least 1", () => {
  const loaded = loadConfigText("routing:\n  max_reserve_tokens: 8192\n", { env: env() });
  assertEquals(loaded.routing, { max_reserve_tokens: 8192 });
  assertEquals(
    loadErrors(
      "routing:\n  max_reserve_tokens: 0\n",
    ).concat(loadErrors("routing:\n  max_reserve_tokens: 1.5\n")).concat(
      loadErrors("routing:\n  max_reserve_tokens: 1e18\n"),
    ),
    [
      "routing.max_reserve_tokens (line 2): must be >= 1 (got 0)",
      "routing.max_reserve_tokens (line 2): must be an integer (got 1.5)",
      "routing.max_reserve_tokens (line 2): must be <= 9007199254740991 (got 1000000000000000000)",
    ],
  );
});

Deno.test("a node's bad fields are all listed at once, each at its line", () => {
  const errors = loadErrors(
    [
      "nodes:",
      "  - id: a",
      "    url: http://127.0.0.1:9/v1",
      "    max_conns: lots",
      "    healthy: maybe",
      "    engine: foo",
      "    weight: x",
      "  - id: b",
      "    url: http://127.0.0.1:9/v1",
      "    tags: { not: a list }",
    ].join("\n"),
  );
  assertEquals(errors.map((e) => e.split(":")[0]), [
    "nodes[0].max_conns (line 4)",
    "nodes[0].healthy (line 5)",
    "nodes[0].engine (line 6)",
    "nodes[0].weight (line 7)",
    "nodes[1].tags (line 10)",
  ]);
});

Deno.test("a node key Skeid does not read is a warning naming the known ones", () => {
  const loaded = loadConfigText(
    "nodes:\n  - id: a\n    url: http://127.0.0.1:9/v1\n    mdoel: qwen\n    max_conns: 2\n",
    { env: env() },
  );
  assertEquals(loaded.nodes?.map((n) => [n.model, n.max_conns]), [["", 2]]);
  assertEquals(loaded.warnings.map(formatIssue), [
    "nodes[0].mdoel (line 4): unknown node key, ignored (known: id, url, model, engine, weight, " +
    "max_conns, healthy, tags, metadata, api_key_ref, api_key_env, forward_key_id, capacity, " +
    "responses)",
  ]);
});
