import { basicAuthorization, withoutCredentials } from "../../src/url_credentials.ts";
import { assertEquals } from "../_assert.ts";

Deno.test("url credentials: removed from the URL, kept as Basic auth", () => {
  assertEquals(withoutCredentials("http://u:p@h:1/v1"), "http://h:1/v1");
  assertEquals(
    withoutCredentials("http://h:1/v1?x=a@b"),
    "http://h:1/v1?x=a@b",
    "@ after the host",
  );
  assertEquals(withoutCredentials("https://a@b:c@h/v1"), "https://h/v1");
  assertEquals(basicAuthorization("http://u:p%3Aq@h/v1"), `Basic ${btoa("u:p:q")}`);
  assertEquals(basicAuthorization("http://token@h/v1"), `Basic ${btoa("token:")}`);
  assertEquals(basicAuthorization("http://h/v1"), undefined);
});
