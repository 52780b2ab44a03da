import { assert, assertEquals, assertRejects } from "../_assert.ts";
import { ConfigParser, WORKER_THRESHOLD } from "../../src/config/parser.ts";
import { ConfigLoadError, formatIssue, formatPath } from "../../src/config/errors.ts";
import { buildConfig, loadConfigText, locateIssues } from "../../src/config/load.ts";

/** A config longer than the worker threshold: `n` keys on a policy, then `tail`. */
function large(tail = ""): string {
  const lines = ["policies:", "  standard: {models: [m], deny_tags: [cloud]}", "keys:"];
  let i = 0;
  while (lines.join("\n").length < WORKER_THRESHOLD + 1000) {
    lines.push(`  k_${(i++).toString(16).padStart(40, "0")}: standard`);
  }
  return lines.join("\n") + "\n" + tail;
}

Deno.test("parser: a large config parsed in the worker loads as it does inline", async () => {
  const text = large();
  const parser = new ConfigParser();
  try {
    const parsed = await parser.parse(text, "big.yaml");
    const env = () => undefined;
    const built = buildConfig(parsed.value, { env }, parsed.prebuilt);
    const lines = await parsed.linesOf(built.issues.map((i) => i.segments));
    const loaded = locateIssues(built, "big.yaml", (s) => lines.get(formatPath(s)));
    parsed.restore(loaded.config);
    const inline = loadConfigText(text, { env });
    assertEquals(loaded.digest, inline.digest);
    assertEquals(loaded.sections, inline.sections);
    assertEquals(loaded.policySet?.knownKeyIds.size, inline.policySet?.knownKeyIds.size);
    const policy = loaded.policySet?.policies.get("standard");
    assert(policy !== undefined && Object.isFrozen(policy), "the policy is frozen again");
    assertEquals(policy.deny_tags, ["cloud"]);
    assertEquals(
      Object.keys(loaded.config.keys ?? {}).length,
      inline.policySet?.knownKeyIds.size,
      "config.keys is read back on demand",
    );
  } finally {
    parser.close();
  }
});

Deno.test("parser: errors of a large config keep their lines (syntax and section errors)", async () => {
  const parser = new ConfigParser();
  try {
    const syntax = large("routing: [unclosed\n");
    const e = await assertRejects(() => parser.parse(syntax, "big.yaml"), ConfigLoadError);
    assert(e.issues[0].line !== undefined, "a syntax error names its line");

    const text = large("nodes:\n  - {id: a, url: 'http://a', engine: nope}\n");
    const parsed = await parser.parse(text, "big.yaml");
    const built = buildConfig(parsed.value, { env: () => undefined }, parsed.prebuilt);
    const lines = await parsed.linesOf(built.issues.map((i) => i.segments));
    let message = "";
    try {
      locateIssues(built, "big.yaml", (s) => lines.get(formatPath(s)));
    } catch (err) {
      if (err instanceof ConfigLoadError) message = formatIssue(err.issues[0]);
    }
    const line = text.split("\n").length - 1;
    assert(message.startsWith(`nodes[0].engine (line ${line}):`), message);
  } finally {
    parser.close();
  }
});
