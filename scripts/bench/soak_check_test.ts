import { assert, assertEquals, assertThrows } from "../../tests/_assert.ts";
import {
  type EventRef,
  parseEventLines,
  parseNodeInflight,
  reconcile,
  reconciliationProblems,
  type SentRequest,
} from "./soak_check.ts";

const answered = (id: string, status = 200): SentRequest => ({ id, status, completed: true });
const event = (event_id: string, request_id: string, status_code = 200): EventRef => ({
  event_id,
  request_id,
  status_code,
});

Deno.test("reconcile: one event per answered request holds", () => {
  const r = reconcile(
    [answered("a"), answered("b", 400), { id: "c", status: null, completed: false }],
    [event("e1", "a"), event("e2", "b", 400)],
  );
  assertEquals(r.answered, 2, "answered");
  assertEquals(r.events, 2, "events");
  assertEquals(reconciliationProblems(r), [], "no problems");
});

Deno.test("reconcile: an answered request without an event is missing", () => {
  const r = reconcile([answered("a"), answered("b")], [event("e1", "a")]);
  assertEquals(r.missingCount, 1, "missing count");
  assertEquals(r.missing, ["b"], "missing ids");
  assertEquals(reconciliationProblems(r).length, 1, "one problem");
});

Deno.test("reconcile: two events for one request and a repeated event id are both found", () => {
  const r = reconcile([answered("a")], [event("e1", "a"), event("e1", "a")]);
  assertEquals(r.duplicatedCount, 1, "request with two events");
  assertEquals(r.duplicateEventIdCount, 1, "repeated event id");
  assertEquals(reconciliationProblems(r).length, 2, "two problems");
});

Deno.test("reconcile: an event for a request never sent is unknown", () => {
  const r = reconcile([answered("a")], [event("e1", "a"), event("e2", "zzz")]);
  assertEquals(r.unknownCount, 1, "unknown count");
  assertEquals(r.unknown, ["zzz"], "unknown ids");
});

Deno.test("reconcile: a request aborted before its head may have one event, not two", () => {
  const headless: SentRequest = { id: "a", status: null, completed: false };
  const one = reconcile([headless], [event("e1", "a", 499)]);
  assertEquals(one.headlessWithEvent, 1, "counted");
  assertEquals(reconciliationProblems(one), [], "allowed");
  const none = reconcile([headless], []);
  assertEquals(reconciliationProblems(none), [], "none is allowed too");
  const two = reconcile([headless], [event("e1", "a", 499), event("e2", "a", 499)]);
  assertEquals(two.duplicatedCount, 1, "two events are a duplicate");
});

Deno.test("reconcile: a completed request whose event has another status is a mismatch", () => {
  const r = reconcile([answered("a", 200)], [event("e1", "a", 502)]);
  assertEquals(r.statusMismatchCount, 1, "mismatch");
  // An answer aborted mid-body may be billed with another status.
  const aborted = reconcile([{ id: "a", status: 200, completed: false }], [event("e1", "a", 499)]);
  assertEquals(aborted.statusMismatchCount, 0, "aborted mid-body is not compared");
});

Deno.test("parseEventLines reads jsonlog lines and names a bad line", () => {
  const text = '{"id":"x","event_id":"e1","request_id":"a","status_code":200}\n\n' +
    '{"event_id":"e2","request_id":"b","status_code":499}\n';
  assertEquals(parseEventLines(text), [event("e1", "a"), event("e2", "b", 499)], "events");
  assertThrows(() => parseEventLines('{"event_id":"e1"}\n'), Error, "line 1");
  assertThrows(() => parseEventLines("ok\n{"), Error, "line 1: not JSON");
});

Deno.test("parseNodeInflight reads skeid_node_inflight per node", () => {
  const text = [
    "# HELP skeid_node_inflight Requests in flight.",
    "# TYPE skeid_node_inflight gauge",
    'skeid_node_inflight{node="fake-1"} 0',
    'skeid_node_inflight{node="fake-2"} 3',
    'skeid_node_inflight_other{node="fake-3"} 9',
    'skeid_node_healthy{node="fake-1"} 1',
  ].join("\n");
  const m = parseNodeInflight(text);
  assertEquals([...m], [["fake-1", 0], ["fake-2", 3]], "per node");
  assertThrows(() => parseNodeInflight("skeid_node_healthy 1\n"), Error, "skeid_node_inflight");
  assert(parseNodeInflight("# TYPE skeid_node_inflight gauge\n").size === 0, "no nodes");
});
