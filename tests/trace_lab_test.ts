/**
 * `flanctl lab trace`: a healthy pod → pod path across nodes is whole in vxlan and host-gw; each induced
 * fault is found at the right hop with the right entry (and the doctor's why/fix); a pod → outside
 * address reports the masquerade decision without sending anything; the JSON view is exactly the
 * documented contract. The daemons' resyncs are slowed down so they do not repair the faults first.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, ipJson, sh } from "./netns.ts";
import { killLabProc, labExec, withLab, withNetConf } from "./lab_fixture.ts";
import { brokenAt, labTrace, podToPodSteps, SLOW, steps, type Trace, wholeTrace } from "./trace_fixture.ts";
import type { LabState } from "../lib/lab/types.ts";
import { nodeSubnet } from "../lib/lab/status.ts";

/** The host veth (on cni0) of a pod: the ifindex its eth0's iflink names. */
async function hostVeth(s: LabState, pod: string): Promise<string> {
  const p = s.pods.find((p) => p.name === pod)!;
  const n = s.nodes.find((n) => n.name === p.node)!;
  const [eth] = await ipJson<{ link_index: number }[]>(p.netns, "link", "show", "eth0");
  const links = await ipJson<{ ifindex: number; ifname: string }[]>(n.netns, "link", "show");
  return links.find((l) => l.ifindex === eth.link_index)!.ifname;
}

const CONTRACT_TOP = ["brokenAt", "dst", "fix", "hops", "ok", "src", "why"];
const CONTRACT_HOP = ["detail", "entry", "lease", "node", "ok", "step"];

function assertContract(t: Trace): void {
  for (const k of Object.keys(t)) assert(CONTRACT_TOP.includes(k), `unexpected key ${k}`);
  for (const k of ["ok", "src", "dst", "hops"]) assert(k in t, `missing key ${k}`);
  assertEquals(typeof t.ok, "boolean");
  for (const h of t.hops) {
    for (const k of Object.keys(h)) assert(CONTRACT_HOP.includes(k), `unexpected hop key ${k}`);
    for (const k of ["node", "step", "ok", "entry", "detail"]) assert(k in h, `hop lacks ${k}`);
  }
  if (t.ok) assertEquals([t.brokenAt, t.why, t.fix], [undefined, undefined, undefined]);
  else assert(typeof t.brokenAt === "number" && typeof t.why === "string" && Array.isArray(t.fix));
}

needsRoot.test({
  name: "trace (vxlan lab): healthy path, masquerade decision, then each fault at its hop",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("tt", ["--nodes", "2", "--pods-per-node", "1", ...SLOW], undefined, async (s, name) => {
      const n1 = s.nodes[0].netns;
      const peerSub = nodeSubnet(s.nodes[1])!;
      const peerGw = peerSub.split("/")[0];
      const healthy = await wholeTrace(name, "node1-pod1", "node2-pod1");
      assertContract(healthy);
      assertEquals(
        steps(healthy),
        podToPodSteps(["vxlan-device", "arp", "fdb"], ["remote-input", "remote-vxlan"]),
      );
      // The forward hops walk the traced packet itself (an ICMP echo, as --probe sends) through FORWARD.
      const [ip1, ip2] = [s.pods[0].ip!, s.pods[1].ip!];
      assertStringIncludes(
        healthy.hops.find((h) => h.step === "forward")!.entry,
        `ICMP echo ${ip1} → ${ip2} (cni0 → flannel.1): passes the firewall`,
      );
      assertStringIncludes(
        healthy.hops.find((h) => h.step === "remote-forward")!.entry,
        `ICMP echo ${ip1} → ${ip2} (flannel.1 → cni0): passes the firewall`,
      );
      const route = healthy.hops.find((h) => h.step === "host-route")!;
      assertEquals(route.entry, `${peerSub} via ${peerGw} dev flannel.1 onlink table main`);
      assertStringIncludes(healthy.hops[2].entry, "port state forwarding hairpin on; cni0 up");
      assertStringIncludes(route.lease!, `${peerSub} → node2, PublicIP ${s.nodes[1].publicIP}`);
      const mac = /VtepMAC (\S+)/.exec(route.lease!)![1];

      // --probe: one ping along the path, seen last on the destination pod's eth0.
      const probe = await flanctl(["lab", "trace", "--name", name, "--probe", "node1-pod1", "node2-pod1"]);
      assertStringIncludes(probe.stdout, `probe: reply received; last seen rx on eth0 in ${s.pods[1].netns}`);

      // Outside the pod network: the masquerade decision, nothing sent (--probe refuses).
      const out = await labTrace(name, "node1-pod1", "198.51.100.7", "--probe");
      assert(out.ok);
      const masq = out.hops.find((h) => h.step === "masquerade")!;
      assertStringIncludes(masq.entry, "-j MASQUERADE");
      assertStringIncludes(masq.detail, `source NATed to ${s.nodes[0].publicIP}`);
      assertEquals(out.hops.at(-1)!.step, "egress");
      const outTable = await flanctl([
        "lab",
        "trace",
        "--name",
        name,
        "--probe",
        "node1-pod1",
        "198.51.100.7",
      ]);
      assertStringIncludes(outTable.stdout, "probe: not sent: 198.51.100.7 is outside the pod network");
      const inside = healthy.hops.find((h) => h.step === "masquerade")!;
      assertStringIncludes(inside.entry, "-j RETURN");
      assertStringIncludes(inside.detail, "not NATed");

      // Peer route deleted: the kernel's lookup falls through to the default route.
      await sh("ip", "-n", n1, "route", "del", peerSub);
      let h = brokenAt(
        await labTrace(name, "node1-pod1", "node2-pod1"),
        "node1",
        "host-route",
        "default via",
      );
      assertStringIncludes(h.detail, `expected ${peerSub} via ${peerGw} dev flannel.1 onlink`);
      await sh("ip", "-n", n1, "route", "replace", peerSub, "via", peerGw, "dev", "flannel.1", "onlink");

      // ARP entry deleted.
      await sh("ip", "-n", n1, "neigh", "del", peerGw, "dev", "flannel.1");
      let t = await labTrace(name, "node1-pod1", "node2-pod1");
      h = brokenAt(t, "node1", "arp", `no neighbour entry for ${peerGw}`);
      const lost = await flanctl(["lab", "trace", "--name", name, "--probe", "node1-pod1", "node2-pod1"]);
      assertStringIncludes(
        lost.stdout,
        `probe: no reply; last seen rx on ${await hostVeth(s, "node1-pod1")} in ${n1}`,
      );
      assertStringIncludes(t.fix!.join("\n"), `ip neigh replace ${peerGw} lladdr ${mac} dev flannel.1`);
      await sh(
        "ip",
        "-n",
        n1,
        "neigh",
        "replace",
        peerGw,
        "lladdr",
        mac,
        "dev",
        "flannel.1",
        "nud",
        "permanent",
      );

      // FDB entry pointing to the wrong IP.
      const fdbTo = (dst: string) =>
        sh("bridge", "-n", n1, "fdb", "replace", mac, "dev", "flannel.1", "dst", dst, "self", "permanent");
      const wrong = s.nodes[1].publicIP.replace(/\.\d+$/, ".99");
      await fdbTo(wrong);
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      h = brokenAt(t, "node1", "fdb", `dst ${wrong}`);
      assertStringIncludes(h.detail, `lease PublicIP ${s.nodes[1].publicIP}`);
      await fdbTo(s.nodes[1].publicIP);

      // The cni0 port of the pod's veth down.
      const veth = await hostVeth(s, "node1-pod1");
      await sh("ip", "-n", n1, "link", "set", veth, "down");
      h = brokenAt(await labTrace(name, "node1-pod1", "node2-pod1"), "node1", "cni0-port", `${veth} DOWN`);
      assertStringIncludes(h.entry, "port state disabled");
      await sh("ip", "-n", n1, "link", "set", veth, "up");

      // FORWARD policy DROP without accept rules.
      await sh("ip", "netns", "exec", n1, "iptables", "-P", "FORWARD", "DROP");
      await sh("ip", "netns", "exec", n1, "iptables", "-F", "FLANNEL-FWD");
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      brokenAt(t, "node1", "forward", "dropped at FORWARD by iptables-nft filter FORWARD policy DROP");
      assertStringIncludes(t.fix!.join("\n"), `ip netns exec ${n1} iptables -I FORWARD 1 -s `);
      await sh("ip", "netns", "exec", n1, "iptables", "-P", "FORWARD", "ACCEPT");

      // A REJECT before the jump to FLANNEL-FWD (RHEL's iptables-services default): the rule is named.
      await sh("ip", "netns", "exec", n1, "iptables", "-I", "FORWARD", "1", "-j", "REJECT");
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      brokenAt(t, "node1", "forward", "iptables-nft filter FORWARD rule 1 REJECT: -A FORWARD -j REJECT");
      await sh("ip", "netns", "exec", n1, "iptables", "-D", "FORWARD", "1");

      // The remote node's INPUT rejects UDP: the VXLAN datagram is dropped before flannel.1, by that rule.
      const n2 = s.nodes[1].netns;
      await sh("ip", "netns", "exec", n2, "iptables", "-I", "INPUT", "1", "-p", "udp", "-j", "REJECT");
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      brokenAt(
        t,
        "node2",
        "remote-input",
        "dropped by iptables-nft filter INPUT rule 1 REJECT: -A INPUT -p udp -j REJECT",
      );
      assertStringIncludes(t.fix!.join("\n"), `ip netns exec ${n2} iptables -I INPUT 1 -p udp --dport 8472 `);
      await sh("ip", "netns", "exec", n2, "iptables", "-D", "INPUT", "1");

      // Strict rp_filter on cni0 while the pod's address is routed back another way: the kernel's input
      // lookup refuses the packet (EXDEV on older kernels, EINVAL since 6.x): an rp_filter verdict, not "no route".
      const podIP = s.pods[0].ip!;
      await sh("ip", "netns", "exec", n1, "sysctl", "-qw", "net.ipv4.conf.cni0.rp_filter=1");
      await sh("ip", "-n", n1, "route", "add", `${podIP}/32`, "dev", "eth0");
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      h = brokenAt(t, "node1", "host-route", "route lookup failed");
      assertStringIncludes(
        h.detail,
        `rp_filter (cni0 rp_filter=1) drops the packet: ${podIP} is not routed back via cni0`,
      );
      assertStringIncludes(t.fix!.join("\n"), "net.ipv4.conf.cni0.rp_filter=2");
      await sh("ip", "-n", n1, "route", "del", `${podIP}/32`, "dev", "eth0");
      await sh("ip", "netns", "exec", n1, "sysctl", "-qw", "net.ipv4.conf.cni0.rp_filter=0");

      // MTU mismatch: the pod's eth0 larger than flannel.1 (the kernel refuses flannel.1 > eth0 - 50).
      const pod1 = s.pods[0].netns;
      await sh("ip", "-n", pod1, "link", "set", "eth0", "mtu", "1500");
      h = brokenAt(await labTrace(name, "node1-pod1", "node2-pod1"), "node1", "vxlan-device", "pod mtu 1500");
      assertStringIncludes(h.detail, "pod MTU 1500 > flannel.1 MTU 1450");
      await sh("ip", "-n", pod1, "link", "set", "eth0", "mtu", "1450");
      assert((await labTrace(name, "node1-pod1", "node2-pod1")).ok, "repaired path is whole again");

      // The peer's port on the lab's underlay bridge down.
      const port = s.nodes[1].underlayVeth;
      await sh("ip", "-n", s.underlay.netns, "link", "set", port, "down");
      h = brokenAt(
        await labTrace(name, "node1-pod1", "node2-pod1"),
        "underlay",
        "underlay-bridge",
        `${port} (node2) DOWN`,
      );
      await sh("ip", "-n", s.underlay.netns, "link", "set", port, "up");

      // The remote node's daemon dead.
      const d2 = await killLabProc(s, "daemon node2");
      t = await labTrace(name, "node1-pod1", "node2-pod1");
      brokenAt(t, "node2", "daemon", `daemon pid ${d2}`);
      assertEquals(t.hops.at(-1)!.step, "pod", "the rest of the path is still walked");
      assertEquals(t.hops.filter((h) => !h.ok).length, 1);

      // flannel.1 down on node1 (the kernel drops its routes with it).
      await sh("ip", "-n", n1, "link", "set", "flannel.1", "down");
      h = brokenAt(
        await labTrace(name, "node1-pod1", "node2-pod1"),
        "node1",
        "vxlan-device",
        "flannel.1 DOWN",
      );
      assertStringIncludes(h.detail, "flannel.1 is down");
    });
  },
});

needsRoot.test({
  name: "trace (host-gw lab): healthy pod → pod path via the peer's PublicIP",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "tg",
      ["--nodes", "2", "--pods-per-node", "1", "--backend", "host-gw"],
      undefined,
      async (s, name) => {
        const t = await wholeTrace(name, "node1-pod1", "node2-pod1");
        assertContract(t);
        const route = t.hops.find((h) => h.step === "host-route")!;
        assertEquals(route.entry, `${nodeSubnet(s.nodes[1])} via ${s.nodes[1].publicIP} dev eth0 table main`);
        assertEquals(t.hops.some((h) => h.step === "arp" || h.step === "fdb"), false);
        assertEquals(t.hops.at(-1)!.step, "pod");
        // From node1's own stack (its eth0 address) to a pod on node2: flannel masquerades it.
        const fromNode = await wholeTrace(name, "node1", "node2-pod1");
        const m = fromNode.hops.find((h) => h.step === "masquerade")!;
        assertStringIncludes(m.entry, "! -s 10.244.0.0/16 -d 10.244.0.0/16");
        assertStringIncludes(m.detail, `source NATed to ${s.nodes[0].publicIP}`);

        // On the node itself (`lab exec node1 flanctl trace`): this node's hops, the remote one named by its lease.
        const [p1, p2] = [s.pods[0].ip!, s.pods[1].ip!];
        const local = await labExec(name, "node1", flanctlCmd("trace", "-o", "json", "--from", p1, p2));
        assertEquals(local.code, 0, local.stdout + local.stderr);
        const lt = JSON.parse(local.stdout) as Trace;
        assertContract(lt);
        assertEquals([lt.ok, lt.src, lt.dst], [true, s.pods[0].netns, p2]);
        const last = lt.hops.at(-1)!;
        assertEquals([last.step, last.node], ["remote", s.nodes[1].publicIP]);
        // The human table: verdict line first.
        const table = await flanctl(["lab", "trace", "--name", name, "node1-pod1", "node2-pod1"]);
        assertEquals(table.code, 0);
        assert(table.stdout.startsWith("TRACE node1-pod1 → node2-pod1: OK"), table.stdout);
      },
    );
  },
});

needsRoot.test({
  name: "trace (vxlan lab in nftables mode): healthy, the masquerade hop defers to flannel's nft table",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const conf = { Network: "10.244.0.0/16", EnableNFTables: true, Backend: { Type: "vxlan" } };
    await withNetConf(conf, async (file) => {
      await withLab(
        "tn",
        ["--nodes", "2", "--pods-per-node", "1", "--net-conf", file],
        undefined,
        async (_s, name) => {
          const t = await wholeTrace(name, "node1-pod1", "node2-pod1");
          assertContract(t);
          const m = t.hops.find((h) => h.step === "masquerade")!;
          assertStringIncludes(m.entry, "table ip flannel-ipv4 has flannel's rules");
          assertStringIncludes(m.detail, "nftables mode");
        },
      );
    });
  },
});
