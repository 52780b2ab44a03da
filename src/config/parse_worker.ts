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
  policyDigest,
  type Prebuilt,
  sectionInput,
  topLevelDigests,
} from "./load.ts";
import { loadPolicies } from "./sections.ts";
import { type ParsedYaml, parseYaml } from "./yaml.ts";
import { errorMessage } from "../error_message.ts";
import type { ParseReply, ParseRequest } from "./parser.ts";
import { isJsonObject } from "../core/json.ts";

const scope = self as unknown as {
  onmessage: ((e: MessageEvent<ParseRequest>) => void) | null;
  postMessage(message: ParseReply): void;
};

let last: ParsedYaml | undefined;

scope.onmessage = (e) => {
  const msg = e.data;
  if (msg.kind === "lines") {
    scope.postMessage({
      id: msg.id,
      kind: "lines",
      lines: msg.segments.map((s: PathSegment[]) => last?.lineOf(s) ?? null),
    });
    return;
  }
  try {
    last = undefined;
    const parsed = parseYaml(msg.text, msg.source);
    last = parsed;
    const prebuilt: Prebuilt = {
      digest: configDigest(parsed.value),
      topLevelDigests: topLevelDigests(parsed.value),
    };
    let value = parsed.value;
    let keysJson: string | undefined;
    if (isJsonObject(value)) {
      const root = value;
      const { input } = sectionInput(root, () => undefined);
      const policies = loadPolicies(input);
      if (policies.value && policies.issues.every((i) => i.warning)) {
        prebuilt.policy = { set: policies.value, digest: policyDigest(root) };
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
    scope.postMessage({ id: msg.id, kind: "parsed", value, prebuilt, keysJson });
  } catch (err) {
    const issues = err instanceof ConfigLoadError
      ? err.issues
      : [{ path: "", message: errorMessage(err) }];
    scope.postMessage({ id: msg.id, kind: "failed", issues });
  }
};
