/**
 * `skeid key create|list|rotate|revoke`: issued keys (ADR 0029) through the admin API of a
 * running gateway, for scripts. The admin key comes from the environment (`SKEID_ADMIN_API_KEY`,
 * or the variable `--admin-key-env` names), never from the command line, where `ps` would show
 * it. `create` and `rotate` print the new key alone on standard output (the only time it is
 * shown); `--json` prints the whole answer.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { errorChain, errorMessage } from "../error_message.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";
import { type CliIo, consoleIo } from "./io.ts";

const HELP = `usage: skeid key <create|list|rotate|revoke> [options]

  create [--name N] [--policy P] [--limits JSON] [--budget JSON] [--share JSON]
         [--expires-at ISO] [--metadata JSON]      prints the new key (shown once)
  list   [--name N] [--policy P] [--state active|expired|revoked] [--kind config|issued]
                                                   one line per key: id, kind, state, name, policy
  rotate ID [--grace-s SECONDS]                    prints the new key; the old one stays valid
                                                   for the grace window (default 86400, 0: none)
  revoke ID                                        refused from the next request on

options:
  --url URL             the gateway (default http://127.0.0.1:8090)
  --admin-key-env NAME  the variable holding the admin key (default SKEID_ADMIN_API_KEY)
  --json                print the API's answer as JSON
  -h, --help            this help
`;

/** Where `skeid key` asks by default: the unit's and the container's listen address. */
export const DEFAULT_URL = "http://127.0.0.1:8090";

/** A usage error (exit 2). */
class UsageError extends Error {}

/** A JSON flag's value as an object, or a usage error naming the flag. */
function jsonFlag(flag: string, text: string | undefined): JsonObject | undefined {
  if (text === undefined) return undefined;
  const v = parseJson(text);
  if (!isJsonObject(v)) throw new UsageError(`--${flag} must be a JSON object`);
  return v;
}

/** The method, path and body of the subcommand. */
function requestOf(
  sub: string,
  positionals: string[],
  v: Record<string, string | boolean | undefined>,
): { method: string; path: string; body?: JsonObject } {
  const str = (name: string) => typeof v[name] === "string" ? v[name] as string : undefined;
  const id = () => {
    const given = positionals[0];
    if (given === undefined) throw new UsageError(`${sub} needs the key's public id`);
    return encodeURIComponent(given);
  };
  switch (sub) {
    case "create": {
      const body: JsonObject = {};
      if (str("name") !== undefined) body.name = str("name");
      if (str("policy") !== undefined) body.policy = str("policy");
      if (str("expires-at") !== undefined) body.expires_at = str("expires-at");
      for (const flag of ["limits", "budget", "share", "metadata"]) {
        const value = jsonFlag(flag, str(flag));
        if (value !== undefined) body[flag] = value;
      }
      return { method: "POST", path: "/skeid/keys", body };
    }
    case "list": {
      const q = new URLSearchParams();
      for (const name of ["name", "policy", "state", "kind"]) {
        if (str(name) !== undefined) q.set(name, str(name)!);
      }
      return { method: "GET", path: `/skeid/keys?${q}` };
    }
    case "rotate": {
      const grace = str("grace-s");
      const body: JsonObject = {};
      if (grace !== undefined) {
        const n = Number(grace);
        if (!Number.isInteger(n) || n < 0) {
          throw new UsageError("--grace-s must be a whole number of seconds >= 0");
        }
        body.grace_s = n;
      }
      return { method: "POST", path: `/skeid/keys/${id()}/rotate`, body };
    }
    case "revoke":
      return { method: "DELETE", path: `/skeid/keys/${id()}` };
    default:
      throw new UsageError(`unknown subcommand '${sub}' (create, list, rotate, revoke)`);
  }
}

/** One listing line. */
function line(k: JsonObject): string {
  return [k.id, k.kind, k.state, k.name ?? "", k.policy ?? ""].map(String).join("\t");
}

/** Runs the subcommand; answers the exit code. */
export async function run(
  args: string[],
  io: CliIo = consoleIo,
  fetcher: typeof fetch = fetch,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        url: { type: "string" },
        "admin-key-env": { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        name: { type: "string" },
        policy: { type: "string" },
        limits: { type: "string" },
        budget: { type: "string" },
        share: { type: "string" },
        metadata: { type: "string" },
        "expires-at": { type: "string" },
        state: { type: "string" },
        kind: { type: "string" },
        "grace-s": { type: "string" },
      },
    });
  } catch (err) {
    io.err(`skeid key: ${errorMessage(err)}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [sub, ...rest] = positionals;
  if (values.help || sub === undefined) {
    io.out(HELP);
    return sub === undefined && !values.help ? 2 : 0;
  }
  let request;
  try {
    request = requestOf(sub, rest, values);
  } catch (err) {
    io.err(`skeid key: ${errorMessage(err)}`);
    return 2;
  }
  const keyEnv = values["admin-key-env"] ?? "SKEID_ADMIN_API_KEY";
  const adminKey = io.env(keyEnv) ?? "";
  if (adminKey === "") {
    io.err(`skeid key: set the admin key in ${keyEnv}`);
    return 2;
  }
  const base = (values.url ?? DEFAULT_URL).replace(/\/+$/, "");
  const call = async (path: string): Promise<JsonObject> => {
    let res: Response;
    try {
      res = await fetcher(`${base}${path}`, {
        method: request.method,
        headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/json" },
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
      });
    } catch (err) {
      // The gateway is not there (refused, no route): say where it was looked for, and why.
      throw new Error(`${request.method} ${base}${path}: ${errorChain(err)}`);
    }
    const text = await res.text();
    const answer = parseJson(text);
    if (res.status !== 200 || !isJsonObject(answer)) {
      const why = isJsonObject(answer) && typeof answer.error === "string"
        ? answer.error
        : text.slice(0, 200);
      throw new Error(`${request.method} ${path}: ${res.status}: ${why}`);
    }
    return answer;
  };
  try {
    if (sub === "list") {
      // Every page, in order: a script gets the whole listing.
      const keys: JsonObject[] = [];
      let after: string | null = null;
      do {
        const sep = request.path.endsWith("?") ? "" : "&";
        const page = await call(
          after === null ? request.path : `${request.path}${sep}after=${encodeURIComponent(after)}`,
        );
        keys.push(...(page.keys as JsonObject[]));
        after = typeof page.next_after === "string" ? page.next_after : null;
      } while (after !== null);
      if (values.json) io.out(JSON.stringify({ keys }, null, 2));
      // Nothing on stdout for no keys (a script counting lines counts none); a person is told.
      else if (keys.length === 0) io.err("skeid key: no keys match");
      else io.out(keys.map(line).join("\n"));
      return 0;
    }
    const answer = await call(request.path);
    if (values.json) io.out(JSON.stringify(answer, null, 2));
    else if (typeof answer.key === "string") io.out(answer.key);
    else io.out(line(answer));
    return 0;
  } catch (err) {
    io.err(`skeid key: ${errorMessage(err)}`);
    return 1;
  }
}
