/** The route request writer's checks (no socket; the kernel's answers are tested as root in tests/). */
import { assertEquals, assertThrows } from "../../../tests/assert.ts";
import { ParseError } from "../../base/errors.ts";
import { MsgWriter } from "./msg.ts";
import { putRoute } from "./encode.ts";
import type { RouteSpec } from "../types.ts";

/** Writes a route from raw text (what reaches the writer at run time, whatever the types say). */
const put = (spec: Record<string, unknown>) => {
  const w = new MsgWriter(16);
  putRoute(w, spec as unknown as RouteSpec, false, (ref) => Number(ref), 1, 0, () => "op");
  return w;
};

Deno.test("route requests: a metric past u32 is refused, not written as another", () => {
  // Found by encode_prop_test.ts: RTA_PRIORITY is a u32, and a metric of 2^32 (a CNI route's priority
  // can be any integer) was written as 0.
  assertThrows(() => put({ dst: "10.0.0.0/24", metric: 2 ** 32 }), ParseError, "metric");
  assertEquals(put({ dst: "10.0.0.0/24", metric: 2 ** 32 - 1 }).count, 1);
});

Deno.test("route requests: a source address of the other family is refused, as libnl did", () => {
  // Found by encode_prop_test.ts: {"dst":"0.0.0.0/0","src":"::"} went out as an IPv4 route with a 16-byte
  // RTA_PREFSRC (libnl's rtnl_route_set_pref_src refused it: NLE_AF_MISMATCH; the kernel refuses it too).
  assertThrows(() => put({ dst: "0.0.0.0/0", src: "::" }), ParseError, "src");
  assertThrows(() => put({ dst: "fc00::/64", src: "10.0.0.1" }), ParseError, "src");
  assertEquals(put({ dst: "10.0.0.0/24", src: "10.0.0.1" }).count, 1);
  // "default" with only a source takes the source's family, as `ip route add default src …` does.
  assertEquals(put({ dst: "default", src: "fc00::1", dev: 2 }).buf[16], 10);
});
