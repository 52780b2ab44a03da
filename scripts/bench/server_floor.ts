/**
 * `deno task bench:floor [--connections N] [--out FILE]`: what an idle keep-alive client
 * connection costs in resident memory under the runtime's own server (`Deno.serve`) and under a
 * plain loop over `Deno.listen` (`scripts/bench/floor_server.ts`), each on a fresh process pinned
 * to CPU 0 with the clients on CPU 1, measured as `deno task bench --memory` measures Skeid
 * (one answered request per connection, then silence; RSS after 30 s idle). It says how low a
 * gateway on each kind of server can go (ADR 0041): the issue's 150 MB for 10,000 connections
 * is below `Deno.serve`'s own figure.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { holdIdle, type IdleFigures } from "./memory.ts";
import { canPin, type Child, loadAverage, machine, spawnChild } from "./procs.ts";

const FLOOR_SERVER = new URL("./floor_server.ts", import.meta.url).pathname;
const KINDS = ["serve", "listen"] as const;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    connections: { type: "string", default: "10000" },
    out: { type: "string", default: "docs/bench/server-floor.md" },
  },
});
const connections = Number(values.connections);
if (!Number.isInteger(connections) || connections <= 0 || connections > 20_000) {
  console.error("bench:floor: --connections must be a whole number from 1 to 20000");
  Deno.exit(2);
}

const deno = Deno.execPath();
const pin = await canPin();
const figures: Record<string, IdleFigures | string> = {};
for (const kind of KINDS) {
  const children: Child[] = [];
  const server = spawnChild(`floor server (${kind})`, deno, [
    "run",
    "--quiet",
    "--no-prompt",
    "--allow-net=127.0.0.1",
    FLOOR_SERVER,
    "--kind",
    kind,
  ], { cpu: pin ? 0 : undefined });
  children.push(server);
  try {
    const url = (await server.firstLine(20_000)).trim();
    figures[kind] = await holdIdle({
      deno,
      url,
      pid: server.pid,
      connections,
      cpu: pin ? 1 : undefined,
      children,
    });
  } catch (err) {
    figures[kind] = err instanceof Error ? err.message : String(err);
  } finally {
    for (const c of children.reverse()) await c.stop();
  }
  console.error(`bench:floor: ${kind}: ${JSON.stringify(figures[kind])}`);
}

const rows = KINDS.map((kind) => {
  const f = figures[kind];
  const name = kind === "serve" ? "`Deno.serve`" : "a loop over `Deno.listen`";
  if (typeof f === "string") return `| ${name} | not measured: ${f} | | | |`;
  const perKb = f.open > 0 ? ((f.heldMb - f.beforeMb) * 1024) / f.open : 0;
  return `| ${name} | ${f.beforeMb.toFixed(0)} MB | ${f.heldMb.toFixed(0)} MB | ${
    perKb.toFixed(1)
  } KB | ${f.open} open, ${f.failed} failed |`;
});
const text = [
  "# The server's own floor: idle connections",
  "",
  `- date: ${new Date().toISOString()}`,
  `- machine: ${await machine()}; load average at the end ${await loadAverage()}`,
  "- command: `deno task bench:floor`",
  `- ${connections.toLocaleString("en-US")} keep-alive connections, each sends one non-streamed ` +
  "chat completion, reads the answer and stays open and silent; held = RSS after 30 s idle; " +
  "each server a fresh process answering one fixed JSON body (`scripts/bench/floor_server.ts`)",
  "",
  "| server | RSS before | RSS held | per connection | connections |",
  "| --- | --- | --- | --- | --- |",
  ...rows,
  "",
].join("\n");
await Deno.writeTextFile(values.out!, text);
console.log(text);
