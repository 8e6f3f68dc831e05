import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { Metrics } from "./metrics.ts";

Deno.test("metrics: last reconcile time, duration and repairs of that pass only", () => {
  const m = new Metrics();
  assertStringIncludes(m.render(), "\nflanctl_last_reconcile_timestamp_seconds 0\n");
  m.repairs += 3;
  m.observeReconcile(0.25);
  m.repairs += 2;
  m.observeReconcile(0.5);
  assertEquals([m.lastReconcileRepairs, m.lastReconcileSeconds], [2, 0.5]);
  const text = m.render();
  assertStringIncludes(text, "\nflanctl_last_reconcile_repairs 2\n");
  assertStringIncludes(text, "\nflanctl_last_reconcile_duration_seconds 0.5\n");
  const at = Number(/\nflanctl_last_reconcile_timestamp_seconds (\S+)\n/.exec(text)![1]);
  assert(Math.abs(at - Date.now() / 1000) < 60);
  assert(/\nprocess_start_time_seconds \d+/.test(text));
});
