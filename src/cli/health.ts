/**
 * `skeid health [--url URL] [--timeout-ms N]`: asks a running gateway's `/health` and exits 0
 * when it answers 200 with `status: "ok"`, 1 otherwise — the container's HEALTHCHECK and a
 * probe for scripts, without curl in the image.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { errorChain, errorMessage } from "../error_message.ts";
import { isJsonObject, parseJson } from "../core/json.ts";

/** Where `skeid health` asks by default: the container's and the unit's listen address. */
export const DEFAULT_HEALTH_URL = "http://127.0.0.1:8090/health";

/** Runs the subcommand; answers the exit code. */
export async function run(args: string[]): Promise<number> {
  let values;
  try {
    values = parseArgs({
      args,
      options: {
        url: { type: "string" },
        "timeout-ms": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (err) {
    console.error(`skeid health: ${errorMessage(err)}`);
    return 2;
  }
  if (values.help) {
    console.log(
      "usage: skeid health [--url URL] [--timeout-ms N]   (default " +
        `${DEFAULT_HEALTH_URL}, 3000 ms)`,
    );
    return 0;
  }
  const url = healthUrl(values.url ?? DEFAULT_HEALTH_URL);
  const timeoutMs = Number(values["timeout-ms"] ?? "3000");
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    console.error(`skeid health: --timeout-ms must be a positive number`);
    return 2;
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    const parsed = parseJson(text);
    const status = isJsonObject(parsed) ? parsed.status : undefined;
    if (res.status === 200 && status === "ok") {
      console.log(`skeid health: ok (${url})`);
      return 0;
    }
    console.error(`skeid health: ${url} answered ${res.status}: ${text.slice(0, 200)}`);
    return 1;
  } catch (err) {
    console.error(`skeid health: ${url}: ${errorChain(err)}`);
    return 1;
  }
}

/** The `/health` URL of a gateway given by its base URL (`http://host:port`) or by that URL. */
export function healthUrl(given: string): string {
  try {
    const u = new URL(given);
    if (u.pathname === "/" || u.pathname === "") u.pathname = "/health";
    return u.href;
  } catch {
    return given;
  }
}
