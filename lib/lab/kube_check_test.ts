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

const T6 = T.map((t, i) => ({ ...t, ip6: `fd00:10:96::${i + 1}`, podIP6: `fc00:244:0:${i}::5` }));

Deno.test("kube check: dual stack asks every pod and Service over IPv6 too, by name through AAAA", () => {
  // deno-lint-ignore no-explicit-any
  const svc = (checkObjects(2, true) as any).items[2].spec;
  assertEquals(svc.ipFamilyPolicy, "RequireDualStack");
  assertEquals(svc.ipFamilies, ["IPv4", "IPv6"]);
  // deno-lint-ignore no-explicit-any
  assertEquals((checkObjects(2) as any).items[2].spec.ipFamilyPolicy, undefined);
  const s = probeScript(T6);
  assertStringIncludes(s, "nslookup -type=aaaa");
  assertStringIncludes(s, "probe pod6 check-node2 8080 fc00:244:0:1::5\n");
  assertStringIncludes(s, "probe vip6 check-node2 80 fd00:10:96::2\n");
  assertStringIncludes(s, "probe name6 check-node2 80 =check-node2.flanctl-check.svc.cluster.local\n");
  assert(!probeScript(T).includes("probe pod6"), "no IPv6 probe in an IPv4 lab");

  const out = [
    "dns kubernetes.default ok 10.96.0.1",
    ...T6.flatMap((t) => [
      `pod ${t.name} ok ${t.name} ${t.podIP}`,
      `vip ${t.name} ok ${t.name} ${t.ip}`,
      `name ${t.name} ok ${t.name} ${t.ip}`,
      `pod6 ${t.name} ok ${t.name} ${t.podIP6}`,
      `vip6 ${t.name} ok ${t.name} ${t.ip6}`,
      `name6 ${t.name} ok ${t.name} ${t.ip6}`,
    ]),
  ].join("\n");
  const p = parseProbes("node1", out, T6);
  assertEquals(p.length, 13);
  assertEquals(p.every((x) => x.ok), true);
  assertEquals(
    formatKubeCheck(p)[0],
    "services and DNS from every node's pods: all ok (DNS 1/1, pod 2/2, ClusterIP 2/2, by name 2/2; " +
      "IPv6: pod 2/2, ClusterIP 2/2, by name (AAAA) 2/2)",
  );
  // The AAAA answer resolving to the IPv4 ClusterIP, or the wrong pod answering over IPv6: failures.
  const bad = parseProbes(
    "node1",
    out.replace(
      "name6 check-node1 ok check-node1 fd00:10:96::1",
      "name6 check-node1 ok check-node1 10.96.1.1",
    )
      .replace("pod6 check-node2 ok check-node2", "pod6 check-node2 ok check-node1"),
    T6,
  );
  assertEquals(bad.filter((x) => !x.ok).map((x) => x.what), ["name6 check-node1", "pod6 check-node2"]);
  // A Service the API gave no IPv6 ClusterIP: its IPv6 probes fail, saying so.
  const no6 = parseProbes("node1", out, [T6[0], { ...T6[1], ip6: "" }]);
  const failed = no6.filter((x) => !x.ok);
  assertEquals(failed.map((x) => x.what), ["vip6 check-node2", "name6 check-node2"]);
  assertEquals(failed[0].detail, "no IPv6 address from the API");
});
