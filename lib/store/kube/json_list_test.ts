/** Regression tests of the list scanner found by json_list_prop_test.ts (the broad tests: tests/store_json_list_test.ts). */
import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { ResponseTooLargeError } from "../limits.ts";
import { JsonListScanner } from "./json_list.ts";

Deno.test("list scanner: an item over the item cap is refused when its end is in the same chunk", () => {
  // The shrunk counterexample (seed -350291004): an apiserver-style item followed by another in one chunk
  // was handed out by the fast path whatever its size; only an item spanning chunks met the cap.
  const body = '{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"0"},"items":[' +
    '{"metadata":{},"spec":[],"status":{"":1.96546575974e-313,"        ":-1000000000}},' +
    '{"metadata":"\\"\\"","spec":[],"status":"\\""}]}';
  const items: unknown[] = [];
  const s = new JsonListScanner({ maxBodyBytes: 1e9, maxItemBytes: 80, maxItems: 2, what: "list" }, (x) => {
    items.push(x);
  });
  const e = assertThrows(() => {
    s.push(body);
    s.finish();
  }, ResponseTooLargeError);
  assertEquals([(e as ResponseTooLargeError).cap, items.length], ["event", 0]);
});

Deno.test("list scanner: items within the caps are read when one without a marker after it ends the fast path", () => {
  // The shrunk counterexample (json_list_prop_test.ts, "a list within them reads as without them"): the
  // first item is followed by a string, so the first marker found is inside the third item's spec, and the
  // candidate from the first item to it (over the cap, over three items) was refused as one item too large.
  const body = '{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"0"},"items":[' +
    '{"metadata":"\\"","spec":[],"status":"\\""},"",' +
    '{"metadata":[{"\\"\\"":"\\"\\""}],"spec":[{"metadata":"\\"\\""},{"metadata":""}],"status":"\\""}]}';
  const items: unknown[] = [];
  const s = new JsonListScanner({ maxBodyBytes: 1e9, maxItemBytes: 89, maxItems: 3, what: "list" }, (x) => {
    items.push(x);
  });
  s.push(body);
  s.finish();
  assertEquals(items, JSON.parse(body).items);
});
