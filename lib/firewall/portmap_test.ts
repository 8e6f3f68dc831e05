import { assertEquals } from "../../tests/assert.ts";
import {
  containerChain,
  dnatChain,
  nftAddScript,
  nftDelScript,
  nftGcPlan,
  ownerChain,
  portLists,
  type PortMapSpec,
  sharedChains,
} from "./portmap.ts";

const SPEC: PortMapSpec = {
  network: "cbr0",
  containerId: "c1",
  family: 4,
  containerAddr: "10.244.1.5/24",
  mappings: [{ hostPort: 18080, containerPort: 8080, protocol: "tcp" }],
  snat: true,
  masqAll: false,
  markMasqBit: 13,
  conditions: [],
};

Deno.test("portmap rules: chain name hash, multiport split, masqAll and mark bits as the reference makes them", async () => {
  // The reference's name for ("cbr0", "c1") (seen in its iptables-save).
  assertEquals(await dnatChain("cbr0", "c1"), "CNI-DN-68f1f1eeb62cad3d0bdd5");
  const many = Array.from(
    { length: 16 },
    (_, i) => ({ hostPort: 100 + i, containerPort: 1, protocol: "udp" as const }),
  );
  assertEquals(portLists([...many, SPEC.mappings[0]]).map(([p, l]) => `${p} ${l.split(",").length}`), [
    "tcp 1",
    "udp 15",
    "udp 1",
  ]);
  // masqAll (reference >= 1.6): the hairpin mark matches every source, and there is no localhost rule.
  const all = containerChain({ ...SPEC, masqAll: true }, "X").rules;
  assertEquals(all, [
    "-p tcp -m tcp --dport 18080 -j CNI-HOSTPORT-SETMARK",
    "-p tcp -m tcp --dport 18080 -j DNAT --to-destination 10.244.1.5:8080",
  ]);
  assertEquals(
    nftAddScript({ ...SPEC, masqAll: true }).split("\n").filter((l) => l.includes("masquerade")),
    ['add rule ip cni_hostport masquerading ip saddr 0.0.0.0/0 ip daddr 10.244.1.5 masquerade comment "c1"'],
  );
  assertEquals(
    sharedChains({ ...SPEC, markMasqBit: 31 })[0].rules[0].endsWith("0x80000000/0x80000000"),
    true,
  );
  assertEquals(sharedChains({ ...SPEC, externalSetMarkChain: "KUBE-MARK-MASQ" }).map((c) => c.name), [
    "CNI-HOSTPORT-DNAT",
  ]);
  const v6 = containerChain({ ...SPEC, family: 6, containerAddr: "fd00::5/64" }, "X").rules;
  assertEquals(v6, [
    "-s fd00::/64 -p tcp -m tcp --dport 18080 -j CNI-HOSTPORT-SETMARK",
    "-p tcp -m tcp --dport 18080 -j DNAT --to-destination [fd00::5]:8080",
  ]);
  const rules = [
    { family: "ip", table: "cni_hostport", chain: "hostports", handle: 4, comment: "c1" },
    { family: "ip", table: "cni_hostport", chain: "hostports", handle: 5, comment: "c2" },
    { family: "ip", table: "cni_hostport", chain: "prerouting", handle: 6 },
  ];
  assertEquals(nftDelScript(rules, 4, "c1"), "delete rule ip cni_hostport hostports handle 4\n");
  assertEquals(nftDelScript(rules, 4, "c3"), null);
});

Deno.test("portmap nft GC plan: only this network's recorded stale containers; shared IDs keep their rules", () => {
  assertEquals(ownerChain("cbr0"), "network_cbr0");
  assertEquals(ownerChain("k8s-pod-network.v1"), "network_k8s-pod-network.v1");
  assertEquals(ownerChain(""), null);
  assertEquals(ownerChain("bad name"), null);
  assertEquals(ownerChain('x"; flush ruleset'), null);
  const rule = (chain: string, handle: number, comment?: string) => ({
    family: "ip",
    table: "cni_hostport",
    chain,
    handle,
    comment,
  });
  const rules = [
    rule("hostports", 1, "gone"),
    rule("masquerading", 2, "gone"),
    rule("hostports", 3, "kept"),
    rule("hostports", 4, "both"),
    rule("hostports", 5, "legacy"),
    rule("network_cbr0", 6, "gone"),
    rule("network_cbr0", 7, "kept"),
    rule("network_cbr0", 8, "both"),
    rule("network_other", 9, "both"),
    rule("prerouting", 10),
  ];
  const plan = nftGcPlan(rules, 4, "cbr0", new Set(["kept"]));
  assertEquals(plan.removed, ["gone"]);
  assertEquals(plan.shared, ["both"]);
  assertEquals(plan.script?.trim().split("\n"), [
    "delete rule ip cni_hostport hostports handle 1",
    "delete rule ip cni_hostport masquerading handle 2",
    "delete rule ip cni_hostport network_cbr0 handle 6",
    "delete rule ip cni_hostport network_cbr0 handle 8",
  ]);
  assertEquals(nftGcPlan(rules, 4, "cbr0", new Set(["kept", "gone", "both"])).script, null);
  assertEquals(nftGcPlan(rules, 4, "bad name", new Set()).script, null);
});
