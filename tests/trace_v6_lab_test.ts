/**
 * `flanctl lab trace` to a pod's IPv6 address in a dual-stack vxlan lab: the IPv6 walk goes through
 * flannel-v6.1, its NDP and FDB entries (to the peer's PublicIPv6) and the remote flannel-v6.1 to the
 * pod; a deleted NDP entry of the peer is found at the ndp hop.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { sh } from "./netns.ts";
import { withLab } from "./lab_fixture.ts";
import { brokenAt, labTrace, podIPv6, podToPodSteps, SLOW, steps, wholeTrace } from "./trace_fixture.ts";

needsRoot.test({
  name: "trace (dual-stack vxlan lab): healthy path to a pod's IPv6 address, NDP entry deleted",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t6",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual", ...SLOW],
      undefined,
      async (s, name) => {
        const dst = podIPv6(s, 1);
        const t = await wholeTrace(name, "node1-pod1", dst);
        assertEquals(steps(t), podToPodSteps(["vxlan-device", "ndp", "fdb"], ["remote-vxlan"]));
        const route = t.hops.find((h) => h.step === "host-route")!;
        assertStringIncludes(route.entry, "dev flannel-v6.1");
        assertStringIncludes(route.lease!, `PublicIPv6 ${s.nodes[1].publicIPv6}`);
        const fdb = t.hops.find((h) => h.step === "fdb")!;
        assertStringIncludes(fdb.entry, `dst ${s.nodes[1].publicIPv6}`);

        // FORWARD walked for the traced ICMPv6 echo itself (ip6tables and the native tables).
        assertStringIncludes(
          t.hops.find((h) => h.step === "forward")!.entry,
          `→ ${dst} (cni0 → flannel-v6.1): passes the firewall`,
        );
        assertStringIncludes(
          t.hops.find((h) => h.step === "remote-forward")!.entry,
          `→ ${dst} (flannel-v6.1 → cni0): passes the firewall`,
        );
        // An ip6tables REJECT in FORWARD breaks the walk at that hop, naming the rule; the fix accepts IPv6.
        const n1 = s.nodes[0].netns;
        await sh("ip", "netns", "exec", n1, "ip6tables", "-I", "FORWARD", "1", "-j", "REJECT");
        const rej = await labTrace(name, "node1-pod1", dst);
        brokenAt(rej, "node1", "forward", "ip6tables-nft filter FORWARD rule 1 REJECT: -A FORWARD -j REJECT");
        assertStringIncludes(rej.fix!.join("\n"), `ip netns exec ${n1} ip6tables -I FORWARD 1 -s `);
        await sh("ip", "netns", "exec", n1, "ip6tables", "-D", "FORWARD", "1");

        // The masquerade hop walks ip6tables' nat table for this packet: flannel's pod ↔ pod RETURN decides.
        const masq = t.hops.find((h) => h.step === "masquerade")!;
        assertStringIncludes(masq.entry, "-A FLANNEL-POSTRTG -s ");
        assertStringIncludes(masq.entry, "-j RETURN");
        assertStringIncludes(masq.detail, "not NATed");
        // A rule masquerading the pod's IPv6 traffic ahead of flannel's breaks the walk there.
        const src6 = podIPv6(s, 0);
        const nat = ["ip", "netns", "exec", n1, "ip6tables", "-t", "nat"];
        await sh(...nat, "-I", "POSTROUTING", "1", "-s", `${src6}/128`, "-j", "MASQUERADE");
        const natted = await labTrace(name, "node1-pod1", dst);
        brokenAt(natted, "node1", "masquerade", `-A POSTROUTING -s ${src6}/128 -j MASQUERADE`);
        await sh(...nat, "-D", "POSTROUTING", "1");

        // The peer's NDP entry deleted on node1.
        const gw = /via (\S+)/.exec(route.entry)![1];
        await sh("ip", "-n", s.nodes[0].netns, "-6", "neigh", "del", gw, "dev", "flannel-v6.1");
        brokenAt(
          await labTrace(name, "node1-pod1", dst),
          "node1",
          "ndp",
          `no neighbour entry for ${gw} on flannel-v6.1`,
        );
      },
    );
  },
});

needsRoot.test({
  name: "trace (IPv6-only vxlan lab): pod → pod by name takes the IPv6 walk and is whole",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t7",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "ipv6"],
      undefined,
      async (s, name) => {
        const t = await wholeTrace(name, "node1-pod1", "node2-pod1");
        assertEquals(t.hops.filter((h) => h.step === "ndp").length, 1);
        assertStringIncludes(t.hops.find((h) => h.step === "fdb")!.entry, `dst ${s.nodes[1].publicIPv6}`);
        assertEquals(t.hops.at(-1)!.step, "pod");
      },
    );
  },
});

needsRoot.test({
  name: "trace (dual-stack host-gw lab): a pod's IPv6 address is routed via the peer's PublicIPv6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t8",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual", "--backend", "host-gw"],
      undefined,
      async (s, name) => {
        const t = await wholeTrace(name, "node1-pod1", podIPv6(s, 1));
        const route = t.hops.find((h) => h.step === "host-route")!;
        assertStringIncludes(route.entry, `via ${s.nodes[1].publicIPv6} dev eth0`);
        assertEquals(t.hops.some((h) => h.step === "ndp" || h.step === "fdb"), false);
        assertEquals(t.hops.at(-1)!.step, "pod");
      },
    );
  },
});
