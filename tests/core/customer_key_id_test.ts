import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";

const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");
const root = new URL("../../", import.meta.url).pathname;

Deno.test("key id: k_ + the full SHA-1 hex of the key, different per key", async () => {
  const alice = await keyIdForKey("sk-alice-secret");
  assert.equal(alice, `k_${sha1("sk-alice-secret")}`);
  assert.match(alice, /^k_[0-9a-f]{40}$/);
  assert.notEqual(await keyIdForKey("sk-bob-secret"), alice);
  assert.equal(await keyIdForKey("sk-ümlaut"), `k_${sha1("sk-ümlaut")}`, "UTF-8 bytes hashed");
});

/** Runs `skeid keyid` as a user would, optionally feeding stdin. */
async function skeidKeyid(args: string[], stdin?: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "src/main.ts", "keyid", ...args],
    cwd: root,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const { code, stdout, stderr } = await child.output();
  return {
    code,
    stdout: new TextDecoder().decode(stdout),
    stderr: new TextDecoder().decode(stderr),
  };
}

Deno.test("skeid keyid KEY... prints one id a line", async () => {
  const r = await skeidKeyid(["sk-alice-secret", "sk-bob-secret"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `k_${sha1("sk-alice-secret")}\nk_${sha1("sk-bob-secret")}\n`);
});

Deno.test("skeid keyid with no arguments reads customer keys from stdin, skipping empty lines", async () => {
  const r = await skeidKeyid([], "sk-alice-secret\n\n   \r\nsk-bob-secret\r\nsk-carol");
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    [sha1("sk-alice-secret"), sha1("sk-bob-secret"), sha1("sk-carol")].map((h) => `k_${h}\n`)
      .join(""),
  );
  assert.ok(!r.stdout.includes("sk-"), "keys are never echoed");
});
