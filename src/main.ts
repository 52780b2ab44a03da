/**
 * The `skeid` command line: serve | demo | keyid | key | usage | check | health | fake-model |
 * version.
 *
 * @module
 */
import { VERSION } from "./version.ts";

/** A subcommand: takes its arguments, answers an exit code. */
type Command = (args: string[]) => Promise<number>;

const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  serve: { summary: "run the gateway", load: async () => (await import("./cli/serve.ts")).run },
  demo: {
    summary: "gateway + built-in fake model + SQLite usage, no setup",
    load: async () => (await import("./cli/demo.ts")).run,
  },
  keyid: {
    summary: "print the customer key id of each key (stdin when none given)",
    load: async () => (await import("./cli/keyid.ts")).run,
  },
  key: {
    summary: "create, list, rotate or revoke issued keys of a running gateway",
    load: async () => (await import("./cli/key.ts")).run,
  },
  usage: { summary: "usage report", load: async () => (await import("./cli/usage.ts")).run },
  check: {
    summary: "validate a config file",
    load: async () => (await import("./cli/check.ts")).run,
  },
  health: {
    summary: "ask a running gateway's /health (exit 0 when ok)",
    load: async () => (await import("./cli/health.ts")).run,
  },
  "fake-model": {
    summary: "a deterministic OpenAI-compatible fake model server",
    load: async () => (await import("./cli/fake_model.ts")).run,
  },
  version: {
    summary: "print the version",
    load: () =>
      Promise.resolve(() => {
        console.log(`skeid ${VERSION}`);
        return Promise.resolve(0);
      }),
  },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(11)} ${c.summary}`);
  return `usage: skeid <command> [options]\n\ncommands:\n${lines.join("\n")}\n`;
}

/** Runs the CLI with `args`; answers the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version") return main(["version"]);
  const command = COMMANDS[name];
  if (!command) {
    console.error(`skeid: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  return await (await command.load())(rest);
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
