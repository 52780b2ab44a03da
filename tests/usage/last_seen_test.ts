import { assertEquals } from "../_assert.ts";
import { LastSeen } from "../../src/usage/last_seen.ts";

Deno.test("last seen: the latest stamp per key; past the cap the key seen longest ago goes", () => {
  const seen = new LastSeen(2);
  seen.seen("k_a", "2026-12-04T00:00:01.000Z");
  seen.seen("k_a", "2026-12-04T00:00:02.000Z");
  seen.seen("k_b", "2026-12-04T00:00:03.000Z");
  seen.seen("k_a", "2026-12-04T00:00:04.000Z");
  seen.seen("k_a", "2026-12-04T00:00:05.000Z");
  // k_b is now the one seen longest ago: the third key pushes it out, not k_a.
  seen.seen("k_c", "2026-12-04T00:00:06.000Z");
  assertEquals(
    [seen.of("k_a"), seen.of("k_b"), seen.of("k_c")],
    ["2026-12-04T00:00:05.000Z", null, "2026-12-04T00:00:06.000Z"],
  );
  // The same for a key seen again right after another one.
  seen.seen("k_c", "2026-12-04T00:00:07.000Z");
  seen.seen("k_a", "2026-12-04T00:00:08.000Z");
  seen.seen("k_d", "2026-12-04T00:00:09.000Z");
  assertEquals(
    [seen.of("k_a"), seen.of("k_c"), seen.of("k_d")],
    ["2026-12-04T00:00:08.000Z", null, "2026-12-04T00:00:09.000Z"],
  );
});
