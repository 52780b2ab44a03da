import { assertEquals, assertThrows } from "../../tests/_assert.ts";
import { gatewayFlags, parseFlagList } from "./gateway_flags.ts";

Deno.test("gateway flags: the list of scripts/flags, comments and blank lines left out", () => {
  const text = [
    "# a comment",
    "SKEID_DENO_FLAGS=(",
    "  --allow-net # why",
    "",
    "  --v8-flags=--a,--b",
    ")",
    "echo --not-this",
  ].join("\n");
  assertEquals(parseFlagList(text), ["--allow-net", "--v8-flags=--a,--b"]);
});

Deno.test("gateway flags: a file without the list, or with a word that is not a flag, fails", () => {
  assertThrows(() => parseFlagList("echo hi\n"), Error, "no SKEID_DENO_FLAGS");
  assertThrows(() => parseFlagList("SKEID_DENO_FLAGS=(\n  net\n)\n"), Error, "'net' is not a flag");
});

Deno.test("gateway flags: the repository's own list reads and grants the network", async () => {
  const flags = await gatewayFlags(new URL("../..", import.meta.url).pathname.replace(/\/$/, ""));
  assertEquals(flags.includes("--allow-net"), true);
});
