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
