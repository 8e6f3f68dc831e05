/**
 * `flanctl lab trace` to a pod's IPv6 address in a dual-stack vxlan lab: the IPv6 walk goes through
 * flannel-v6.1, its NDP and FDB entries (to the peer's PublicIPv6) and the remote flannel-v6.1 to the
 * pod; a deleted NDP entry of the peer is found at the ndp hop.
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { sh } from "./netns.ts";
import { withLab } from "./lab_fixture.ts";
import { labTrace, SLOW } from "./trace_fixture.ts";

Deno.test({
  name: "trace (dual-stack vxlan lab): healthy path to a pod's IPv6 address, NDP entry deleted",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t6",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual", ...SLOW],
      undefined,
      async (s, name) => {
        const dst = s.pods[1].ipv6!;
        assert(dst && dst.includes(":"), JSON.stringify(s.pods));
        const t = await labTrace(name, "node1-pod1", dst);
        assert(t.ok, JSON.stringify(t, null, 2));
        assertEquals(
          t.hops.map((h) => `${h.node}:${h.step}`),
          [
            "node1-pod1:pod-route",
            "node1:veth",
            "node1:cni0-port",
            "node1:daemon",
            "node1:host-route",
            "node1:forward",
            "node1:masquerade",
            "node1:vxlan-device",
            "node1:ndp",
            "node1:fdb",
            "node1:underlay",
            "underlay:underlay-bridge",
            "node2:daemon",
            "node2:remote-vxlan",
            "node2:remote-route",
            "node2:remote-forward",
            "node2:cni0-port",
            "node2-pod1:pod",
          ],
        );
        const route = t.hops.find((h) => h.step === "host-route")!;
        assertStringIncludes(route.entry, "dev flannel-v6.1");
        assertStringIncludes(route.lease!, `PublicIPv6 ${s.nodes[1].publicIPv6}`);
        const fdb = t.hops.find((h) => h.step === "fdb")!;
        assertStringIncludes(fdb.entry, `dst ${s.nodes[1].publicIPv6}`);

        assertStringIncludes(t.hops.find((h) => h.step === "forward")!.entry, "ip6tables: FORWARD policy");

        // The peer's NDP entry deleted on node1.
        const gw = /via (\S+)/.exec(route.entry)![1];
        await sh("ip", "-n", s.nodes[0].netns, "-6", "neigh", "del", gw, "dev", "flannel-v6.1");
        const b = await labTrace(name, "node1-pod1", dst);
        assert(!b.ok && b.brokenAt !== undefined, JSON.stringify(b, null, 2));
        const h = b.hops[b.brokenAt];
        assertEquals([h.node, h.step], ["node1", "ndp"], JSON.stringify(b, null, 2));
        assertStringIncludes(h.entry, `no neighbour entry for ${gw} on flannel-v6.1`);
        assert(b.hops.slice(0, b.brokenAt).every((x) => x.ok));
        assert(b.why && b.why.length > 10);
      },
    );
  },
});

Deno.test({
  name: "trace (IPv6-only vxlan lab): pod → pod by name takes the IPv6 walk and is whole",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t7",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "ipv6"],
      undefined,
      async (s, name) => {
        const t = await labTrace(name, "node1-pod1", "node2-pod1");
        assert(t.ok, JSON.stringify(t, null, 2));
        assertEquals(t.hops.filter((h) => h.step === "ndp").length, 1);
        assertStringIncludes(t.hops.find((h) => h.step === "fdb")!.entry, `dst ${s.nodes[1].publicIPv6}`);
        assertEquals(t.hops.at(-1)!.step, "pod");
      },
    );
  },
});

Deno.test({
  name: "trace (dual-stack host-gw lab): a pod's IPv6 address is routed via the peer's PublicIPv6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "t8",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual", "--backend", "host-gw"],
      undefined,
      async (s, name) => {
        const t = await labTrace(name, "node1-pod1", s.pods[1].ipv6!);
        assert(t.ok, JSON.stringify(t, null, 2));
        const route = t.hops.find((h) => h.step === "host-route")!;
        assertStringIncludes(route.entry, `via ${s.nodes[1].publicIPv6} dev eth0`);
        assertEquals(t.hops.some((h) => h.step === "ndp" || h.step === "fdb"), false);
        assertEquals(t.hops.at(-1)!.step, "pod");
      },
    );
  },
});
