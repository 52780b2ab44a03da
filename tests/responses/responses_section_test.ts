/**
 * The `responses` config section (ADR 0028) and a node's `responses: native`: defaults, every bad
 * value named by its path, and `responses.store` refused unless the usage store is sqlite or
 * postgresql.
 */
import { assertEquals, assertStringIncludes, assertThrows } from "../_assert.ts";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { loadConfigText } from "../../src/config/load.ts";

const env = (vars: Record<string, string> = {}) => (name: string) => vars[name];

/** The issues a config that must fail is refused with, formatted as `skeid check` prints them. */
function loadErrors(text: string, vars: Record<string, string> = {}): string[] {
  const err = assertThrows(() => loadConfigText(text, { env: env(vars) }), ConfigLoadError);
  return err.issues.map(formatIssue);
}

const SQLITE = "usage_store: {backend: sqlite, sqlite_path: /var/lib/skeid/usage.sqlite}\n";

Deno.test("config responses: defaults when absent; the section's values when given", () => {
  assertEquals(loadConfigText("nodes: []\n", { env: env() }).responses, {
    store: false,
    ttl_s: 86400,
    max_per_key: 1000,
    max_response_bytes: 16 * 1024 * 1024,
    max_bytes_per_key: 256 * 1024 * 1024,
  });
  const loaded = loadConfigText(
    SQLITE + "responses: {store: true, ttl_s: 600, max_per_key: 5, max_response_bytes: 1000, " +
      "max_bytes_per_key: 5000}\n",
    { env: env() },
  );
  assertEquals(loaded.responses, {
    store: true,
    ttl_s: 600,
    max_per_key: 5,
    max_response_bytes: 1000,
    max_bytes_per_key: 5000,
  });
});

Deno.test("config responses: the byte caps are whole numbers, one response within a key's", () => {
  const errors = loadErrors(
    SQLITE + "responses: {max_response_bytes: -1, max_bytes_per_key: 1e3x}\n",
  ).join("\n");
  assertStringIncludes(errors, "responses.max_response_bytes (line 2): must be a whole number");
  assertStringIncludes(errors, "responses.max_bytes_per_key (line 2): must be a whole number");
  assertEquals(
    loadErrors(SQLITE + "responses: {max_response_bytes: 2000, max_bytes_per_key: 1000}\n"),
    [
      "responses.max_response_bytes (line 2): must not be over max_bytes_per_key (1000): a " +
      "key could never keep such a response",
    ],
  );
});

Deno.test("config responses: bad values and unknown keys are named by path", () => {
  const errors = loadErrors(
    SQLITE + "responses: {store: yes please, ttl_s: 0, max_per_key: 1.5, keep: 3}\n",
  );
  const joined = errors.join("\n");
  assertStringIncludes(joined, "responses.store (line 2): must be true or false");
  assertStringIncludes(joined, "responses.ttl_s (line 2): must be a whole number of at least 1");
  assertStringIncludes(joined, "responses.max_per_key (line 2): must be a whole number");
  assertStringIncludes(joined, "responses.keep (line 2): unknown key");
  assertEquals(loadErrors("responses: [1]\n"), [
    "responses (line 1): must be a mapping (store, ttl_s, max_per_key, max_response_bytes, " +
    "max_bytes_per_key)",
  ]);
});

Deno.test("config responses: store with a jsonlog usage store fails the load, naming the path", () => {
  const errors = loadErrors(
    "usage_store: {backend: jsonlog, path: /var/log/skeid/}\nresponses:\n  store: true\n",
  );
  assertEquals(errors.length, 1, errors.join("\n"));
  assertStringIncludes(errors[0], "responses.store (line 3)");
  assertStringIncludes(errors[0], "usage_store.backend is jsonlog");
});

Deno.test("config responses: store without any usage store fails; SKEID_USAGE_DB counts as sqlite", () => {
  const errors = loadErrors("responses: {store: true}\n");
  assertStringIncludes(errors.join("\n"), "responses.store (line 1): keeping responses needs");
  const loaded = loadConfigText("responses: {store: true}\n", {
    env: env({ SKEID_USAGE_DB: "/var/lib/skeid/usage.sqlite" }),
  });
  assertEquals(loaded.responses.store, true);
});

Deno.test("config nodes: responses: native is kept; any other value is named by path", () => {
  const loaded = loadConfigText(
    "nodes:\n  - {id: a, url: 'http://127.0.0.1:1', responses: native}\n" +
      "  - {id: b, url: 'http://127.0.0.1:2'}\n",
    { env: env() },
  );
  assertEquals(loaded.nodes?.map((n) => n.responses), ["native", undefined]);
  const errors = loadErrors("nodes:\n  - {id: a, url: 'http://127.0.0.1:1', responses: chat}\n");
  assertEquals(errors, [
    "nodes[0].responses (line 2): responses must be 'native' (or absent: the chat wire)",
  ]);
});
