/**
 * The worker that parses a large config off the serving path: YAML text → plain data, its
 * digest and the policy set (the costly parts of a `keys:` section of tens of thousands of
 * entries), so a reload never holds the event loop that answers requests. It keeps the last
 * document to answer the source lines of the issues the main thread finds afterwards.
 *
 * @module
 */
import { ConfigLoadError, type PathSegment } from "./errors.ts";
import {
  configDigest,
  policyDigest as digestOfPolicies,
  type Prebuilt,
  sectionInput,
  topLevelDigests,
} from "./load.ts";
import { loadPolicies } from "./sections.ts";
import { policyTransfer } from "./policy_transfer.ts";
import { type ParsedYaml, parseYaml } from "./yaml.ts";
import { errorMessage } from "../error_message.ts";
import type { ParseReply, ParseRequest } from "./parser.ts";
import { isJsonObject } from "../core/json.ts";

const scope = self as unknown as {
  onmessage: ((e: MessageEvent<ParseRequest>) => void) | null;
  postMessage(message: ParseReply): void;
};

let last: ParsedYaml | undefined;

/**
 * What is left to send of the last parse: one reply goes each time the serving thread asks for
 * the next, so it rebuilds one bounded piece a turn of its event loop (policy_transfer.ts).
 */
let outbox: { id: number; replies: ParseReply[] } | undefined;

function sendNext(id: number): void {
  if (outbox?.id !== id) return;
  const reply = outbox.replies.shift();
  if (outbox.replies.length === 0) outbox = undefined;
  if (reply) scope.postMessage(reply);
}

scope.onmessage = (e) => {
  const msg = e.data;
  if (msg.kind === "next") {
    sendNext(msg.id);
    return;
  }
  if (msg.kind === "lines") {
    scope.postMessage({
      id: msg.id,
      kind: "lines",
      lines: msg.segments.map((s: PathSegment[]) => last?.lineOf(s) ?? null),
    });
    return;
  }
  outbox = { id: msg.id, replies: parseReplies(msg.id, msg.text, msg.source) };
  sendNext(msg.id);
};

/** The replies to one parse request: the policy set's head and pieces, then the result. */
function parseReplies(id: number, text: string, source: string | undefined): ParseReply[] {
  const replies: ParseReply[] = [];
  try {
    last = undefined;
    const parsed = parseYaml(text, source);
    last = parsed;
    const prebuilt: Omit<Prebuilt, "policy"> = {
      digest: configDigest(parsed.value),
      topLevelDigests: topLevelDigests(parsed.value),
    };
    let value = parsed.value;
    let keysJson: string | undefined;
    let policyDigest: string | undefined;
    if (isJsonObject(value)) {
      const root = value;
      const { input } = sectionInput(root, () => undefined);
      const policies = loadPolicies(input);
      if (policies.value && policies.issues.every((i) => i.warning)) {
        const { head, pieces } = policyTransfer(policies.value);
        replies.push({ id, kind: "policy_head", head });
        for (const piece of pieces) replies.push({ id, kind: "policy_piece", piece });
        policyDigest = digestOfPolicies(root);
        // The policy set is built from `keys`; nothing else on the main thread reads it but a
        // manifest. Sent as one string (a copy, not tens of thousands of objects to rebuild
        // there), and parsed there only if something asks.
        const manifest = isJsonObject(root.manifest) && root.manifest.enabled !== undefined &&
          root.manifest.enabled !== false && root.manifest.enabled !== null;
        if (isJsonObject(root.keys) && !manifest) {
          keysJson = JSON.stringify(root.keys);
          value = { ...root, keys: {} };
        }
      }
    }
    replies.push({ id, kind: "parsed", value, prebuilt, policyDigest, keysJson });
  } catch (err) {
    const issues = err instanceof ConfigLoadError
      ? err.issues
      : [{ path: "", message: errorMessage(err) }];
    return [{ id, kind: "failed", issues }];
  }
  return replies;
}
