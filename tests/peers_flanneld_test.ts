/**
 * Mixed clusters with the real flanneld (v0.28.10 from the Go module proxy, built by `install.sh --dev`) over
 * one etcd: each backend (vxlan, host-gw, udp) programs the other daemon's node and pods ping both ways; a
 * node swapped flanctl → flanneld and another flanneld → flanctl under a running ping loses nothing (vxlan:
 * the kernel keeps forwarding while the daemon restarts); the udp rollback: without `flanctl reset` flanneld
 * gets flannel1 beside our persistent flannel0 (doctor names the leftover) and the node is cut off; after
 * `flanctl reset` flanneld opens flannel0 and the pods talk again.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, nsRun, sh } from "./netns.ts";
import { routes, type TestNode, waitFor } from "./daemon_fixture.ts";
import { addPod46, addV6Underlay, linkOf, MixedCluster, pingCount, waitPing } from "./peers_fixture.ts";
import { requirePeers } from "./peers.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

const HAVE = requirePeers(["flanneld", "etcd", "etcdctl"]);
const netconf = (type: string) => JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: type } });

for (const type of ["vxlan", "host-gw", "udp"]) {
  needsRoot.test({
    name: `mixed with flanneld over etcd (${type}): each programs the other, pods ping both ways`,
    ignore: !HAVE,
    async fn() {
      const c = new MixedCluster("10.71");
      try {
        const [a, b] = await c.initEtcd(netconf(type));
        c.startFlanctl(a);
        c.startFlanneld(b);
        await c.waitUp(a);
        await c.waitUp(b);
        const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
        assert(subA !== subB, `${subA} ${subB}`);
        await waitFor(
          c.explain(`A routes ${subB}`),
          async () => (await routes(a.ns)).some((r) => r.dst === subB),
        );
        // (flanneld's udp backend keeps its peers in its proxy: only the Network route goes via flannel0.)
        if (type !== "udp") {
          await waitFor(
            c.explain(`B routes ${subA}`),
            async () => (await routes(b.ns)).some((r) => r.dst === subA),
          );
        }
        const pa = await c.addPod(a), pb = await c.addPod(b);
        await waitPing(pa.ns, pb.ip, c.explain(`pod A → pod B (${type})`));
        assertEquals(await pingCount(pa.ns, pb.ip, 5), 5, "A → B");
        assertEquals(await pingCount(pb.ns, pa.ip, 5), 5, "B → A");
        // flanneld's lease and ours are the same shape for this backend.
        const leases = await c.etcdctl(
          "get",
          "--prefix",
          "/coreos.com/network/subnets/",
          "--print-value-only",
        );
        const vals = leases.stdout.trim().split("\n").map((l) => JSON.parse(l));
        assertEquals(vals.length, 2, leases.stdout);
        assertEquals(
          vals.map((v) => Object.keys(v).join(",")).sort()[0],
          vals.map((v) => Object.keys(v).join(",")).sort()[1],
          leases.stdout,
        );
        // flanctl reset after stopping A: its device, peer routes, rules and files go; the pod's route stays.
        // The stopped daemon's store is given: host-gw routes are flanctl's only via a lease's PublicIP.
        assertEquals(await c.stop(a), 0);
        const r = await flanctl(
          ["reset", "--subnet-file", a.subnetFile, "--state-dir", a.stateDir, "--etcd-endpoints", c.etcdUrl],
          { ns: a.ns },
        );
        assertEquals(r.code, 0, r.stdout + r.stderr);
        const left = (await routes(a.ns)).filter((x) =>
          x.dst.startsWith("10.244.") && (x.gateway || x.dev !== "vpod0")
        );
        assertEquals(left, [], r.stdout);
        assertEquals(await linkOf(a.ns, type === "udp" ? "flannel0" : "flannel.1"), null, r.stdout);
        assert(!(await nsRun(a.ns, ["iptables-save"])).stdout.includes("FLANNEL-"), r.stdout);
        assert(
          (await routes(a.ns)).some((x) => x.dst === pa.ip && x.dev === "vpod0"),
          "the pod's route stays",
        );
        assertEquals(await Deno.stat(a.subnetFile).then(() => true, () => false), false);
      } finally {
        await c.close();
      }
    },
  });
}

needsRoot.test({
  name: "mixed with flanneld (vxlan): swapping a node each way under a running ping loses nothing",
  ignore: !HAVE,
  async fn() {
    const c = new MixedCluster("10.72");
    try {
      const [a, b] = await c.initEtcd(netconf("vxlan"));
      c.startFlanctl(a);
      c.startFlanneld(b);
      await c.waitUp(a);
      await c.waitUp(b);
      const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
      const pa = await c.addPod(a), pb = await c.addPod(b);
      await waitPing(pa.ns, pb.ip, c.explain("pods ping"));
      // 300 pings 50 ms apart (15 s) while A goes flanctl → flanneld and B flanneld → flanctl.
      const loop = pingCount(pa.ns, pb.ip, 300, 0.05);
      await new Promise((r) => setTimeout(r, 500));
      assertEquals(await c.stop(a), 0);
      c.startFlanneld(a);
      await c.waitUp(a);
      await c.stop(b);
      c.startFlanctl(b);
      await c.waitUp(b);
      const got = await loop;
      assertEquals(got, 300, await c.explain(`swap lost ${300 - got} of 300`)());
      // Same subnets after the swap (flanneld took A's lease by its PublicIP; flanctl B's from subnet.env).
      assertEquals([await c.subnetOf(a), await c.subnetOf(b)], [subA, subB]);
      assertEquals(await pingCount(pb.ns, pa.ip, 5), 5);
    } finally {
      await c.close();
    }
  },
});

needsRoot.test({
  name: "udp rollback to flanneld: the leftover flannel0 is named by doctor; flanctl reset clears the way",
  ignore: !HAVE,
  async fn() {
    const c = new MixedCluster("10.73");
    try {
      const [a, b] = await c.initEtcd(netconf("udp"));
      c.startFlanctl(a);
      c.startFlanneld(b);
      await c.waitUp(a);
      await c.waitUp(b);
      const pa = await c.addPod(a), pb = await c.addPod(b);
      await waitPing(pa.ns, pb.ip, c.explain("udp pods ping"));
      assertEquals(await pingCount(pb.ns, pa.ip, 3), 3);

      // Roll back A without reset: our persistent flannel0 stays; flanneld opens flannel%d → flannel1.
      assertEquals(await c.stop(a), 0);
      assertEquals((await linkOf(a.ns, "flannel0"))?.linkinfo?.info_kind, "tun");
      c.startFlanneld(a);
      await c.waitUp(a);
      await waitFor(
        c.explain("flanneld on A opened flannel1"),
        async () => (await linkOf(a.ns, "flannel1")) !== null,
      );
      assertEquals(await pingCount(pa.ns, pb.ip, 3, 0.2), 0, "the node is cut off (the issue's failure)");
      const dr = await flanctl(
        ["doctor", "--subnet-file", a.subnetFile, "--etcd-endpoints", c.etcdUrl, "-o", "json"],
        { ns: a.ns },
      );
      const left = (JSON.parse(dr.stdout).checks as { id: FindingId; severity: string; detail: string }[])
        .find((x) => x.id === "udp-leftover");
      assertEquals(left?.severity, "critical", dr.stdout);
      assertStringIncludes(left!.detail, "flannel0: TUN device no process holds open, while flannel1 (pid");
      // reset refuses while a daemon runs here.
      const busy = await flanctl(["reset", "--subnet-file", a.subnetFile, "--state-dir", a.stateDir], {
        ns: a.ns,
      });
      assertEquals(busy.code, 1, busy.stdout);
      assertStringIncludes(busy.stderr, "stop it first");

      // The documented rollback: stop, reset, start flanneld.
      await c.stop(a);
      const r = await flanctl(
        ["reset", "--subnet-file", a.subnetFile, "--state-dir", a.stateDir, "-o", "json"],
        { ns: a.ns },
      );
      assertEquals(r.code, 0, r.stdout + r.stderr);
      const rep = JSON.parse(r.stdout) as { removed: string[]; failed: string[] };
      assert(rep.removed.includes("device flannel0"), r.stdout);
      assert(rep.removed.includes(`file ${a.subnetFile}`), r.stdout);
      assertEquals(await linkOf(a.ns, "flannel0"), null);
      const nat = await nsRun(a.ns, ["iptables-save", "-t", "nat"]);
      assert(!nat.stdout.includes("FLANNEL-POSTRTG"), nat.stdout);
      // Nothing left: a second reset has nothing to do.
      const again = await flanctl(["reset", "--subnet-file", a.subnetFile, "--state-dir", a.stateDir], {
        ns: a.ns,
      });
      assertEquals([again.code, again.stdout.trim()], [0, "nothing of flanctl's left to remove"]);

      c.startFlanneld(a);
      await c.waitUp(a);
      assertEquals((await linkOf(a.ns, "flannel0"))?.linkinfo?.info_kind, "tun");
      assertEquals(await linkOf(a.ns, "flannel1"), null);
      await waitPing(pa.ns, pb.ip, c.explain("udp pods ping after the rollback"));
      assertEquals(await pingCount(pb.ns, pa.ip, 3), 3);
    } finally {
      await c.close();
    }
  },
});

needsRoot.test({
  name: "mixed with flanneld over etcd (vxlan, dual stack): pods ping both ways in both families; the MTUs",
  ignore: !HAVE,
  async fn() {
    const c = new MixedCluster("10.74");
    try {
      const conf = JSON.stringify({
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00:244::/48",
        Backend: { Type: "vxlan" },
      });
      const [a, b] = await c.initEtcd(conf);
      await addV6Underlay(c);
      c.startFlanctl(a);
      c.startFlanneld(b);
      await c.waitUp(a);
      await c.waitUp(b);
      const pa = await addPod46(c, a), pb = await addPod46(c, b);
      await waitPing(pa.ns, pb.ip4, c.explain("dual stack: v4 pods ping"));
      await waitPing(pa.ns, pb.ip6, c.explain("dual stack: v6 pods ping"));
      for (const [from, to] of [[pa.ns, pb.ip4], [pb.ns, pa.ip4], [pa.ns, pb.ip6], [pb.ns, pa.ip6]]) {
        assertEquals(await pingCount(from, to, 3), 3, `${from} → ${to}`);
      }
      // The fact docs/ipv6.md states: flanneld's flannel-v6.1 gets underlay − 70 from the kernel too (1430),
      // but its subnet.env gives pods the IPv4 device's 1450; flanctl writes the smaller, 1430.
      const mtu = async (n: TestNode, dev: string) =>
        JSON.parse(await sh("ip", "-n", n.ns, "-j", "link", "show", dev))[0].mtu as number;
      assertEquals([await mtu(b, "flannel.1"), await mtu(b, "flannel-v6.1")], [1450, 1430]);
      assertEquals((await c.subnetEnv(b)).FLANNEL_MTU, "1450");
      assertEquals([await mtu(a, "flannel.1"), await mtu(a, "flannel-v6.1")], [1450, 1430]);
      assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1430");
    } finally {
      await c.close();
    }
  },
});
