/**
 * `skeid keyid [KEY ...]`: prints the customer key id (`k_` + 40 hex) of each customer key, one
 * a line, so a config can name a customer without holding the customer's key. With no
 * arguments the customer keys are read from stdin, one a line (empty lines skipped) — the way
 * to keep them out of the shell history and the process list.
 *
 * @module
 */
import { keyIdForKey } from "../core/customer_key_id.ts";

const HELP = `usage: skeid keyid [KEY ...]

Prints the customer key id of each customer KEY, one a line, in the order given. With no KEY,
reads customer keys from stdin, one a line (empty lines skipped): prefer that, so they stay out
of the shell history and the process list. The id is what a config's names: and keys:
sections use.
`;

/** Customer keys from a stream, one a line; a trailing CR is dropped, empty lines are skipped. */
export async function* readKeyLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let pending = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl).replace(/\r$/, "");
      pending = pending.slice(nl + 1);
      if (line.trim() !== "") yield line;
    }
  }
  const last = pending.replace(/\r$/, "");
  if (last.trim() !== "") yield last;
}

/** Runs the subcommand; answers the exit code. */
export async function run(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(HELP);
    return 0;
  }
  const keys = args[0] === "--" ? args.slice(1) : args;
  const out = (id: string) => console.log(id);
  if (keys.length > 0) {
    for (const key of keys) await out(await keyIdForKey(key));
    return 0;
  }
  if (Deno.stdin.isTerminal()) {
    console.error("skeid keyid: reading customer keys from stdin, one a line; end with Ctrl-D");
  }
  for await (const key of readKeyLines(Deno.stdin.readable)) await out(await keyIdForKey(key));
  return 0;
}
