import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { Logger } from "../base/log.ts";
import { Metrics } from "./metrics.ts";
import { Readiness } from "./readiness.ts";

Deno.test("readiness: flanctl_ready is what notReady() says when rendered, with no event in between", () => {
  const m = new Metrics();
  const r = new Readiness(m, new Logger({ sink: () => {}, time: false }));
  assertStringIncludes(m.render(), "\nflanctl_ready 0\n", "subnet.env not written yet");
  r.subnetEnvWritten();
  r.rulesInPlace();
  let expired = false;
  r.leaseInvalid = () => (expired ? "the lease expired" : null);
  assertEquals(r.notReady(), null);
  assertStringIncludes(m.render(), "\nflanctl_ready 1\n");
  // Time passes and the lease expires: nothing tells the readiness, /readyz and the metric agree anyway.
  expired = true;
  assertEquals(r.notReady(), "the lease expired");
  assertStringIncludes(m.render(), "\nflanctl_ready 0\n");
  r.setStoreUp(false, "etcd down");
  expired = false;
  assertStringIncludes(m.render(), "\nflanctl_ready 0\n", "store down");
  assertStringIncludes(m.render(), "\nflanctl_store_up 0\n");
});
