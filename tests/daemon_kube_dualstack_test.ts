/**
 * `flanctl daemon --kube-subnet-mgr` with a dual-stack net-conf.json against the fake API server: each node
 * has podCIDRs of both families; the daemon publishes public-ip/backend-data and public-ipv6/backend-v6-data,
 * programs its peer in both families (flannel.1 and flannel-v6.1: route, neighbour, FDB entry to the peer's
 * public IP of that family), and a node whose state file is gone keeps both VTEP MACs from its own
 * backend-data and backend-v6-data annotations. IPv6-only vxlan: the annotations flanneld writes (no backend-data,
 * no public-ip), the peer programmed on flannel-v6.1, the MAC kept from backend-v6-data.
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { DaemonCluster, fdbs, neighs, type TestNode, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { ipJson, nsSh, sh } from "./netns.ts";

const P = "flannel.alpha.coreos.com/";
const V6BASE = "fc00:92";
const v6Of = (i: number) => `${V6BASE}::${(11 + i).toString(16)}`;

const macOf = async (n: TestNode, dev: string) =>
  (await ipJson<{ address: string }[]>(n.ns, "link", "show", dev))[0].address;
const routes6 = (n: TestNode) => ipJson<{ dst: string; dev: string }[]>(n.ns, "-6", "route", "show");
const routes4 = (n: TestNode) => ipJson<{ dst: string; dev: string }[]>(n.ns, "route", "show");

needsRoot.test("daemon kube dual stack: both families published, peer programmed in both, both MACs kept", async () => {
  const c = new DaemonCluster("10.92");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    await sh("ip", "-n", c.underlay, "addr", "add", `${V6BASE}::1/64`, "dev", "br0", "nodad");
    for (const [i, n] of [a, b].entries()) {
      await sh("ip", "-n", n.ns, "addr", "add", `${v6Of(i)}/64`, "dev", "eth0", "nodad");
      await nsSh(n.ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
    }
    api = new FakeApiServer({ hostname: "10.92.0.1", netns: c.underlay });
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24", "fc00:244:0:1::/64"] });
    api.upsert("kn2", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24", "fc00:244:0:2::/64"] });
    api.pods.set("kube-flannel/ds-a", { spec: { nodeName: "kn1" } });
    api.pods.set("kube-flannel/ds-b", { spec: { nodeName: "kn2" } });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00:244::/48",
        Backend: { Type: "vxlan" },
      }),
    );
    await Deno.writeTextFile(
      `${c.tmp}/kubeconfig`,
      kubeconfigYaml(api.url),
    );
    const args = [
      "--ip-masq",
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      "--iface=eth0",
    ];
    const env = (pod: string) => ({ POD_NAME: pod, POD_NAMESPACE: "kube-flannel" });
    c.start(a, args, env("ds-a"));
    c.start(b, args, env("ds-b"));
    await c.waitReady(a);
    await c.waitReady(b);
    const why = () => `A:\n${a.log.join("\n")}\nB:\n${b.log.join("\n")}`;

    // subnet.env has both families from the podCIDRs.
    const envA = await c.subnetEnv(a);
    assertEquals(
      [envA.FLANNEL_SUBNET, envA.FLANNEL_IPV6_SUBNET],
      ["10.244.1.1/24", "fc00:244:0:1::1/64"],
      why(),
    );

    // Annotations of both families, with the MACs of the two devices.
    const ann = api.nodes.get("kn1")!.metadata.annotations;
    assertEquals(ann[`${P}public-ip`], a.ip, why());
    assertEquals(ann[`${P}public-ipv6`], v6Of(0), why());
    const mac4 = JSON.parse(ann[`${P}backend-data`]).VtepMAC;
    const mac6 = JSON.parse(ann[`${P}backend-v6-data`]).VtepMAC;
    assertEquals(await macOf(a, "flannel.1"), mac4);
    assertEquals(await macOf(a, "flannel-v6.1"), mac6);
    const annB = api.nodes.get("kn2")!.metadata.annotations;
    const macB4 = JSON.parse(annB[`${P}backend-data`]).VtepMAC;
    const macB6 = JSON.parse(annB[`${P}backend-v6-data`]).VtepMAC;

    // A programs kn2 in both families: route via the device, neighbour = B's MAC of that family, FDB entry
    // to B's public IP of that family.
    await waitFor(
      () => `A routes kn2 in both families${why()}`,
      async () =>
        (await routes4(a)).some((r) => r.dst === "10.244.2.0/24" && r.dev === "flannel.1") &&
        (await routes6(a)).some((r) => r.dst === "fc00:244:0:2::/64" && r.dev === "flannel-v6.1"),
    );
    assertEquals((await neighs(a.ns, "flannel.1")).map((n) => [n.dst, n.lladdr]), [["10.244.2.0", macB4]]);
    assertEquals((await neighs(a.ns, "flannel-v6.1")).map((n) => [n.dst, n.lladdr]), [[
      "fc00:244:0:2::",
      macB6,
    ]]);
    assertEquals(
      (await fdbs(a.ns, "flannel.1")).filter((f) => f.mac === macB4).map((f) => f.dst),
      [b.ip],
    );
    assertEquals(
      (await fdbs(a.ns, "flannel-v6.1")).filter((f) => f.mac === macB6).map((f) => f.dst),
      [v6Of(1)],
    );

    // A's disk is wiped and both devices deleted: the restarted daemon keeps both MACs its peers know.
    assertEquals(await c.stop(a), 0);
    await Deno.remove(a.stateDir, { recursive: true });
    await sh("ip", "-n", a.ns, "link", "del", "flannel.1");
    await sh("ip", "-n", a.ns, "link", "del", "flannel-v6.1");
    c.start(a, args, env("ds-a"));
    await c.waitReady(a);
    assertEquals(await macOf(a, "flannel.1"), mac4, why());
    assertEquals(await macOf(a, "flannel-v6.1"), mac6, why());
    const after = api.nodes.get("kn1")!.metadata.annotations;
    assertEquals(JSON.parse(after[`${P}backend-v6-data`]).VtepMAC, mac6);
  } finally {
    await c.close();
    await api?.close();
  }
});

needsRoot.test("daemon kube IPv6-only vxlan: flanneld's annotations (no backend-data/public-ip), peer programmed, MAC kept", async () => {
  const c = new DaemonCluster("10.90");
  let api: FakeApiServer | null = null;
  const V6 = "fc00:90";
  const ip6 = (i: number) => `${V6}::${(11 + i).toString(16)}`;
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    await sh("ip", "-n", c.underlay, "addr", "add", `${V6}::1/64`, "dev", "br0", "nodad");
    for (const [i, n] of [a, b].entries()) {
      await sh("ip", "-n", n.ns, "addr", "add", `${ip6(i)}/64`, "dev", "eth0", "nodad");
      await nsSh(n.ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
    }
    api = new FakeApiServer({ hostname: "10.90.0.1", netns: c.underlay });
    api.upsert("kn1", { podCIDR: "fc00:244:0:1::/64", podCIDRs: ["fc00:244:0:1::/64"] });
    api.upsert("kn2", { podCIDR: "fc00:244:0:2::/64", podCIDRs: ["fc00:244:0:2::/64"] });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({
        EnableIPv4: false,
        EnableIPv6: true,
        IPv6Network: "fc00:244::/48",
        Backend: { Type: "vxlan" },
      }),
    );
    await Deno.writeTextFile(
      `${c.tmp}/kubeconfig`,
      kubeconfigYaml(api.url),
    );
    const args = (node: string) => [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      "--iface=eth0",
      `--node-name=${node}`,
    ];
    c.start(a, args("kn1"));
    c.start(b, args("kn2"));
    await c.waitReady(a);
    await c.waitReady(b);
    const why = () => `A:\n${a.log.join("\n")}\nB:\n${b.log.join("\n")}`;
    const ann = api.nodes.get("kn1")!.metadata.annotations;
    const mac6 = JSON.parse(ann[`${P}backend-v6-data`] ?? "null")?.VtepMAC;
    assertEquals(ann, {
      [`${P}backend-type`]: "vxlan",
      [`${P}kube-subnet-manager`]: "true",
      [`${P}backend-v6-data`]: JSON.stringify({ VNI: 1, VtepMAC: mac6 }),
      [`${P}public-ipv6`]: ip6(0),
    }, why());
    assertEquals(await macOf(a, "flannel-v6.1"), mac6);
    await waitFor(
      () => `A routes kn2${why()}`,
      async () => (await routes6(a)).some((r) => r.dst === "fc00:244:0:2::/64" && r.dev === "flannel-v6.1"),
    );
    const macB = JSON.parse(api.nodes.get("kn2")!.metadata.annotations[`${P}backend-v6-data`]).VtepMAC;
    assertEquals((await fdbs(a.ns, "flannel-v6.1")).filter((f) => f.mac === macB).map((f) => f.dst), [
      ip6(1),
    ]);

    assertEquals(await c.stop(a), 0);
    await Deno.remove(a.stateDir, { recursive: true });
    await sh("ip", "-n", a.ns, "link", "del", "flannel-v6.1");
    c.start(a, args("kn1"));
    await c.waitReady(a);
    assertEquals(await macOf(a, "flannel-v6.1"), mac6, why());
  } finally {
    await c.close();
    await api?.close();
  }
});
