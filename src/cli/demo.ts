/**
 * `skeid demo [--listen HOST:PORT]`: a gateway in front of a built-in fake model, with an alias
 * (`demo` → the fake model), prices and a SQLite usage store in a temp directory — nothing to set
 * up. Prints the address, a streaming curl line, and the operator's console with a sign-in key
 * made for this run (the demo's admin key, never written to its config file); runs until
 * SIGINT/SIGTERM.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { startFakeModel } from "../fake/model.ts";
import { DEFAULT_LISTEN, parseListen } from "./serve.ts";
import { startServer } from "../server.ts";
import { errorMessage } from "../error_message.ts";
import { addressTaken } from "./address.ts";

/** The demo's config for a fake model at `fakeUrl`, usage in `dir`. */
export function demoConfig(fakeUrl: string, dir: string): Record<string, unknown> {
  return {
    nodes: [{
      id: "fake-1",
      url: fakeUrl,
      model: "fake-model",
      engine: "vllm",
      max_conns: 32,
      tags: ["local"],
    }],
    aliases: { demo: { tiers: [{ tags: ["local"], model: "fake-model", wait_ms: 500 }] } },
    pricing: { "fake-model": { input_per_million: 0.15, output_per_million: 0.6 } },
    usage_store: { backend: "sqlite", path: `${dir}/usage.sqlite` },
  };
}

/** A fresh admin key for one demo run: 24 random bytes, base64url. */
export function demoAdminKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
}

/** The lines that point an operator at the console of a gateway at `base`. */
export function consoleLines(base: string, adminKey: string): string[] {
  return [
    `skeid demo: console at ${base}/skeid/ui`,
    `skeid demo: sign in with the admin key ${adminKey}`,
  ];
}

/** Runs the subcommand; answers the exit code. */
export async function run(args: string[]): Promise<number> {
  let listenText: string;
  try {
    const { values } = parseArgs({
      args,
      options: { listen: { type: "string", short: "l" }, help: { type: "boolean", short: "h" } },
    });
    if (values.help) {
      console.log("usage: skeid demo [--listen HOST:PORT]");
      return 0;
    }
    listenText = values.listen ?? DEFAULT_LISTEN;
  } catch (err) {
    console.error(`skeid demo: ${errorMessage(err)}`);
    return 2;
  }
  let listen;
  try {
    listen = parseListen(listenText);
  } catch (err) {
    console.error(`skeid demo: ${(err as Error).message}`);
    return 2;
  }

  const dir = await Deno.makeTempDir({ prefix: "skeid-demo-" });
  const fake = startFakeModel({ ttftMs: 50, itlMs: 20, tokens: 24 });
  await fake.ready;
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, stringify(demoConfig(fake.url, dir)));
  const adminKey = demoAdminKey();
  let running;
  try {
    running = await startServer({
      hostname: listen.hostname,
      port: listen.port,
      configPath,
      explicitAdminKey: adminKey,
    });
  } catch (err) {
    const inUse = err instanceof Deno.errors.AddrInUse
      ? ` (${addressTaken(listen.hostname, listen.port)})`
      : "";
    console.error(`skeid demo: ${errorMessage(err)}${inUse}`);
    await fake.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    return 1;
  }
  const host = running.addr.hostname.includes(":")
    ? `[${running.addr.hostname}]`
    : running.addr.hostname;
  const base = `http://${host}:${running.addr.port}`;
  console.log(`skeid demo: gateway on ${base}, fake model on ${fake.url}`);
  console.log(`skeid demo: config ${configPath}, usage in ${dir}/usage.sqlite`);
  console.log("try:");
  console.log(
    `  curl -N ${base}/v1/chat/completions -H 'content-type: application/json' ` +
      `-d '{"model":"demo","stream":true,"messages":[{"role":"user","content":"hello"}]}'`,
  );
  console.log(`  ./scripts/skeid usage --db ${dir}/usage.sqlite`);
  for (const line of consoleLines(base, adminKey)) console.log(line);

  const stopped = Promise.withResolvers<void>();
  const onSignal = () => stopped.resolve();
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  await Promise.race([stopped.promise, running.finished]);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
  await running.stop(5000);
  await fake.close();
  console.log(`skeid demo: stopped; usage kept in ${dir}/usage.sqlite`);
  return 0;
}
