/**
 * Issue 37: doctor's forward-policy walks IPv6 pod traffic through the IPv6 rulesets with the packet-path
 * evaluator, as it does IPv4's: on a dual-stack lab node it is quiet when healthy; an ip6tables REJECT placed
 * before flannel's jump in FORWARD (IPv4 untouched) is critical, naming the back-end and the rule; the printed
 * fix, pasted, makes it ok again; so does vxlan-port for IPv6 VXLAN from the peer's PublicIPv6 dropped in
 * ip6tables INPUT. All in the lab's own namespaces.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, nsSh } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";

interface Report {
  checks: { id: string; severity: string; detail: string; fix?: string[] }[];
}

needsRoot.test({
  name: "doctor: IPv6 FORWARD and VXLAN INPUT walked (ip6tables REJECT/DROP named, fixes paste)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "d6f",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual"],
      undefined,
      async (s, name) => {
        const forward = async () => {
          const r = await labExec(
            name,
            "node1",
            flanctlCmd("doctor", "-o", "json", "--skip", "neigh-gc"),
          );
          return (JSON.parse(r.stdout) as Report).checks.filter((c) => c.id === "forward-policy");
        };
        const healthy = await forward();
        assertEquals(healthy.map((c) => c.severity), ["ok"], JSON.stringify(healthy));
        assertStringIncludes(healthy[0].detail, "; IPv6: pod ");
        assertStringIncludes(healthy[0].detail, "(cni0 → flannel-v6.1)");

        const n1 = s.nodes[0];
        await nsSh(n1.netns, "ip6tables", "-I", "FORWARD", "1", "-j", "REJECT");
        const broken = await forward();
        assertEquals(broken.map((c) => c.severity), ["critical"], JSON.stringify(broken));
        const f = broken[0];
        assertStringIncludes(f.detail, "(cni0 → flannel-v6.1)");
        assert(
          /dropped at FORWARD by ip6tables-(nft|legacy) filter FORWARD rule 1 REJECT: -A FORWARD -j REJECT/
            .test(f.detail),
          f.detail,
        );
        assert(f.fix?.length, JSON.stringify(f));
        for (const line of f.fix!) {
          assert(line.startsWith("ip6tables"), line);
          const r = await labExec(name, "node1", ["sh", "-c", line]);
          assertEquals(r.code, 0, `${line}: ${r.stderr}`);
        }
        assertEquals((await forward()).map((c) => c.severity), ["ok"]);

        // IPv6 VXLAN from the peer's PublicIPv6 dropped in INPUT (IPv4's untouched): vxlan-port names the rule.
        const port = async () => {
          const r = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json", "--skip", "neigh-gc"));
          return (JSON.parse(r.stdout) as Report).checks.filter((c) => c.id === "vxlan-port");
        };
        const open = await port();
        assertEquals(open.map((c) => c.severity), ["ok"], JSON.stringify(open));
        assertStringIncludes(
          open[0].detail,
          `; IPv6 VXLAN from ${s.nodes[1].publicIPv6} to UDP 8472: passes`,
        );
        await nsSh(n1.netns, "ip6tables", "-I", "INPUT", "1", "-p", "udp", "--dport", "8472", "-j", "DROP");
        const shut = await port();
        assertEquals(shut.map((c) => c.severity), ["critical"], JSON.stringify(shut));
        assert(
          /IPv6 VXLAN from \S+ to UDP 8472: dropped at INPUT by ip6tables-(nft|legacy) filter INPUT rule 1 DROP/
            .test(
              shut[0].detail,
            ),
          shut[0].detail,
        );
        assert(!shut[0].detail.includes("VXLAN from 192."), shut[0].detail);
        for (const line of shut[0].fix!) {
          assert(line.startsWith("ip6tables"), line);
          const r = await labExec(name, "node1", ["sh", "-c", line]);
          assertEquals(r.code, 0, `${line}: ${r.stderr}`);
        }
        assertEquals((await port()).map((c) => c.severity), ["ok"]);
      },
    );
  },
});
