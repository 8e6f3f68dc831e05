import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { checkObjects, formatKubeCheck, parseProbes, probeScript } from "./kube_check.ts";

const T = [
  { name: "check-node1", ip: "10.96.1.1", podIP: "10.244.0.5" },
  { name: "check-node2", ip: "10.96.2.2", podIP: "10.244.1.5" },
];

Deno.test("kube check: one pinned pod and one Service per node", () => {
  // deno-lint-ignore no-explicit-any
  const items = (checkObjects(2) as any).items;
  assertEquals(items.map((o: { kind: string }) => o.kind), ["Namespace", "Pod", "Service", "Pod", "Service"]);
  assertEquals(items[3].spec.nodeName, "node2");
  assertEquals(items[4].spec.selector, items[3].metadata.labels);
});

Deno.test("kube check: every probe from a pod, by address, ClusterIP and name", () => {
  const s = probeScript(T);
  assertStringIncludes(s, "resolve kubernetes.default.svc.cluster.local");
  assertStringIncludes(s, "probe pod check-node2 8080 10.244.1.5\n");
  assertStringIncludes(s, "probe vip check-node2 80 10.96.2.2\n");
  assertStringIncludes(s, "probe name check-node2 80 -check-node2.flanctl-check.svc.cluster.local\n");
  assert(!s.includes("wget"), "busybox's static wget crashes without NSS libraries");
});

Deno.test("kube check: a probe passes only with the right answer; a missing line fails", () => {
  const out = [
    "dns kubernetes.default ok 10.96.0.1",
    "pod check-node1 ok check-node1 10.244.0.5",
    "vip check-node1 ok check-node1 10.96.1.1",
    "name check-node1 ok check-node1 10.96.1.1",
    "pod check-node2 ok check-node2 10.244.1.5",
    "vip check-node2 ok check-node1 10.96.2.2", // the wrong backend answered
    "name check-node2 fail name not resolved\x1b[31m",
  ].join("\n");
  const p = parseProbes("node1", out, T);
  assertEquals(p.length, 7);
  assertEquals(p.filter((x) => x.ok).map((x) => x.what), [
    "dns kubernetes.default",
    "pod check-node1",
    "vip check-node1",
    "name check-node1",
    "pod check-node2",
  ]);
  const name2 = p.find((x) => x.what === "name check-node2")!;
  assert(!name2.detail.includes("\x1b"), "control characters are not printed");
  assertEquals(parseProbes("node1", "dns kubernetes.default ok 10.96.0.10", T)[0].ok, false);
  assertEquals(parseProbes("node1", "", T).every((x) => !x.ok && x.detail === "no answer"), true);
  const lines = formatKubeCheck(p);
  assertStringIncludes(lines[0], "2 failed (DNS 1/1, pod 2/2, ClusterIP 1/2, by name 1/2)");
  assertStringIncludes(lines[1], "FAIL node1 -> vip check-node2: check-node1 10.96.2.2");
  // By name, but resolved to another address than the Service's: a failure.
  const wrongIP = parseProbes("node1", "name check-node1 ok check-node1 10.96.9.9", T);
  assertEquals(wrongIP.find((x) => x.what === "name check-node1")!.ok, false);
  assertEquals(
    formatKubeCheck(parseProbes("n", out.replace("vip check-node2 ok check-node1", ""), T)).length,
    3,
  );
});
