import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { renderTrace, traceJson } from "./render.ts";
import type { TraceReport } from "./types.ts";

const broken: TraceReport = {
  ok: false,
  src: "node1-pod1",
  dst: "node2-pod1",
  hops: [
    {
      node: "node1-pod1",
      step: "pod-route",
      ok: true,
      entry: "default via 10.244.1.1 dev eth0",
      detail: "out",
    },
    {
      node: "node1",
      step: "arp",
      ok: false,
      entry: "no neighbour entry for 10.244.2.0 on flannel.1",
      detail: "dropped",
      lease: "10.244.2.0/24 → node2",
    },
  ],
  brokenAt: 1,
  why: "no ARP",
  fix: ["ip neigh replace …"],
  check: "peer-arp",
  probe: "no reply",
  devices: [{ netns: "n1", dev: "eth0", dir: "tx" }],
};

Deno.test("trace json contract: exactly ok, src, dst, hops{node,step,ok,entry,detail,lease?}, brokenAt?, why?, fix?", () => {
  const j = JSON.parse(JSON.stringify(traceJson(broken)));
  assertEquals(Object.keys(j), ["ok", "src", "dst", "hops", "brokenAt", "why", "fix"]);
  assertEquals(Object.keys(j.hops[0]), ["node", "step", "ok", "entry", "detail"]);
  assertEquals(Object.keys(j.hops[1]), ["node", "step", "ok", "entry", "detail", "lease"]);
  const whole = traceJson({ ...broken, ok: true, brokenAt: undefined, why: undefined, fix: undefined });
  assertEquals(Object.keys(JSON.parse(JSON.stringify(whole))), ["ok", "src", "dst", "hops"]);
});

Deno.test("trace table: verdict line, hops, why/fix of the broken hop, probe", () => {
  const t = renderTrace(broken);
  assertEquals(t.split("\n")[0], "TRACE node1-pod1 → node2-pod1: BROKEN at hop 2 (arp on node1)");
  assertStringIncludes(t, "FAIL  node1       arp");
  assertStringIncludes(t, "lease 10.244.2.0/24 → node2");
  assertStringIncludes(t, "why:  no ARP\nfix:  ip neigh replace …");
  assertStringIncludes(t, "probe: no reply");
});
