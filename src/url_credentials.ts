/**
 * Credentials in a node URL (`http://user:password@host/v1`): the node gets them, as
 * `Authorization: Basic`, and nothing else ever shows them — the URL sent upstream, usage events
 * (`route_url`), logs and admin answers carry the URL without its user info.
 *
 * @module
 */

/** Where the user info of `url` ends (its `@`), or -1 when it has none. */
function userInfoEnd(url: string): number {
  const at = url.indexOf("@");
  if (at < 0) return -1;
  const scheme = url.indexOf("://");
  if (scheme < 0) return -1;
  let end = url.length;
  for (const c of ["/", "?", "#"]) {
    const i = url.indexOf(c, scheme + 3);
    if (i >= 0 && i < end) end = i;
  }
  return url.lastIndexOf("@", end - 1) > scheme ? url.lastIndexOf("@", end - 1) : -1;
}

/** `url` without its user info (`http://user:pw@host/v1` → `http://host/v1`); others unchanged. */
export function withoutCredentials(url: string): string {
  const at = userInfoEnd(url);
  if (at < 0) return url;
  const start = url.indexOf("://") + 3;
  return url.slice(0, start) + url.slice(at + 1);
}

/** The `Authorization: Basic …` value of `url`'s user info, or undefined when it has none. */
export function basicAuthorization(url: string): string | undefined {
  const at = userInfoEnd(url);
  if (at < 0) return undefined;
  const info = url.slice(url.indexOf("://") + 3, at);
  const colon = info.indexOf(":");
  const user = colon < 0 ? info : info.slice(0, colon);
  const password = colon < 0 ? "" : info.slice(colon + 1);
  const text = `${decode(user)}:${decode(password)}`;
  let binary = "";
  for (const b of new TextEncoder().encode(text)) binary += String.fromCharCode(b);
  return `Basic ${btoa(binary)}`;
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** A node (or anything with a `url`) as admin answers show it: the URL without credentials. */
export function withPublicUrl<T extends { url: string }>(node: T): T {
  const url = withoutCredentials(node.url);
  return url === node.url ? node : { ...node, url };
}
