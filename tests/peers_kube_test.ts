/**
 * Kube mode against a REAL kube-apiserver (v1.37.2 from the Go module proxy, built by `install.sh --dev`) with
 * etcd and kube-controller-manager (`--allocate-node-cidrs`: podCIDRs come from Kubernetes), in the test's
 * underlay namespace; the daemons authenticate as deploy/kube-flanctl.yml's ServiceAccount under its RBAC
 * (Node,RBAC authorization, NodeRestriction). Checked: the annotations and NetworkUnavailable, peers and pod
 * pings, a rotated token picked up, a deleted Node removed from the peers, a 410 re-list after etcd
 * compaction, the missing-node and RBAC-denied start-up paths, and a mixed cluster with the real flanneld over
 * the API swapped each way. The fake API server (tests/kube_fake_api.ts) stays for faults a real one cannot
 * produce on demand.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertNotEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, runDaemonOnce, type TestNode, waitFor } from "./daemon_fixture.ts";
import { KubeControlPlane } from "./kube_cluster.ts";
import { ROOT, sh } from "./netns.ts";
import { requirePeers } from "./peers.ts";
import { addPod46, addV6Underlay, MixedCluster, pingCount, waitPing } from "./peers_fixture.ts";

const HAVE = requirePeers(["kube-apiserver", "kube-controller-manager", "kubectl", "etcd", "etcdctl"]);
const HAVE_FLANNELD = HAVE && requirePeers(["flanneld"]);
const P = "flannel.alpha.coreos.com/";
const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } });

/** The control plane in `c`'s underlay (on its bridge address), the manifest applied, `nodes` created. */
async function controlPlane(
  c: DaemonCluster,
  nodes: string[],
  apiserverArgs: string[] = [],
  netconf = NETCONF,
) {
  const cp = await KubeControlPlane.start({
    netns: c.underlay,
    address: `${c.base}.0.1`,
    clusterCidr: "10.244.0.0/16",
    apiserverArgs,
    dir: `${c.tmp}/kube`,
  });
  await cp.kubectlOk("apply", "-f", `${ROOT}deploy/kube-flanctl.yml`);
  for (const n of nodes) await cp.upsertNode(n);
  for (const n of nodes) {
    await waitFor(
      () => `podCIDR of ${n}\n${cp.logTail("kube-controller-manager")}`,
      async () => (await cp.node(n))?.spec.podCIDR,
      60_000,
    );
  }
  await Deno.writeTextFile(`${c.tmp}/net-conf.json`, netconf);
  return cp;
}

/** The daemon's kube arguments (the DaemonSet's, with a kubeconfig instead of the in-cluster account). */
const kubeArgs = (c: DaemonCluster, kubeconfig: string) => [
  "--ip-masq",
  "--kube-subnet-mgr",
  `--kubeconfig-file=${kubeconfig}`,
  `--net-config-path=${c.tmp}/net-conf.json`,
  "--resync-interval",
  "1",
];

/** A kubeconfig for the manifest's ServiceAccount, its token in `file` (bound to Secret `secret`). */
async function saKubeconfig(cp: KubeControlPlane, dir: string, secret: string): Promise<string> {
  await cp.kubectlOk("create", "secret", "generic", secret, "-n", "kube-flannel");
  await Deno.writeTextFile(`${dir}/token`, await cp.token("kube-flannel", "flannel", secret));
  await Deno.writeTextFile(`${dir}/sa.kubeconfig`, cp.kubeconfig({ tokenFile: `${dir}/token` }));
  return `${dir}/sa.kubeconfig`;
}

async function vtepMac(n: TestNode): Promise<string> {
  return JSON.parse(await sh("ip", "-n", n.ns, "-j", "link", "show", "flannel.1"))[0].address;
}

needsRoot.test({
  name:
    "kube mode on a real kube-apiserver: RBAC of the manifest, annotations, condition, peers, rotation, delete",
  ignore: !HAVE,
  async fn() {
    const c = new DaemonCluster("10.81");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode(), b = await c.addNode();
      // Watches end after 15–30 s: the token rotation is seen by a re-watch within the test's time.
      cp = await controlPlane(c, ["kn1", "kn2"], ["--min-request-timeout=15"]);
      const kc = await saKubeconfig(cp, c.tmp, "tok1");
      c.start(a, kubeArgs(c, kc), { NODE_NAME: "kn1" });
      c.start(b, kubeArgs(c, kc), { NODE_NAME: "kn2" });
      await c.waitReady(a, 90_000);
      await c.waitReady(b, 90_000);
      const why = () =>
        `A:\n${a.log.join("\n")}\nB:\n${b.log.join("\n")}\n${cp!.logTail("kube-apiserver", 10)}`;

      // Annotations as flanneld writes them, on the Node the controller manager gave a podCIDR.
      const n1 = (await cp.node("kn1"))!;
      const ann = n1.metadata.annotations!;
      assertEquals(ann[`${P}public-ip`], a.ip, why());
      assertEquals(ann[`${P}backend-type`], "vxlan");
      assertEquals(ann[`${P}kube-subnet-manager`], "true");
      assertEquals(JSON.parse(ann[`${P}backend-data`]), { VNI: 1, VtepMAC: await vtepMac(a) });
      assertEquals(await c.subnetOf(a), n1.spec.podCIDR);
      // NetworkUnavailable=False once the data plane is up.
      await waitFor(why, async () => {
        const cond = (await cp!.node("kn1"))!.status?.conditions?.find((x) =>
          x.type === "NetworkUnavailable"
        );
        return cond?.status === "False" && cond.reason === "FlannelIsUp";
      });
      // Peers and pods.
      const sub2 = (await cp.node("kn2"))!.spec.podCIDR!;
      await waitFor(why, async () => (await routes(a.ns)).some((r) => r.dst === sub2));
      const pa = await c.addPod(a), pb = await c.addPod(b);
      await waitPing(pa.ns, pb.ip, c.explain("pods ping over the API-programmed vxlan"));
      assertEquals(await pingCount(pb.ns, pa.ip, 3), 3);

      // The token is rotated (a new one in the file, the old one revoked by deleting its Secret): the next
      // requests use the new one. A node that joins afterwards is programmed.
      await cp.kubectlOk("create", "secret", "generic", "tok2", "-n", "kube-flannel");
      await Deno.writeTextFile(`${c.tmp}/token.new`, await cp.token("kube-flannel", "flannel", "tok2"));
      await Deno.rename(`${c.tmp}/token.new`, `${c.tmp}/token`);
      await cp.kubectlOk("delete", "secret", "tok1", "-n", "kube-flannel");
      // Past the open watch's end (15–30 s): what follows reaches the daemon through a new request.
      await new Promise((r) => setTimeout(r, 31_000));
      await cp.upsertNode("kn3", [], {
        [`${P}public-ip`]: `${c.base}.0.99`,
        [`${P}backend-type`]: "vxlan",
        [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: "0e:00:00:00:00:99" }),
        [`${P}kube-subnet-manager`]: "true",
      });
      const sub3 = await waitFor("kn3's podCIDR", async () => (await cp!.node("kn3"))?.spec.podCIDR, 60_000);
      await waitFor(why, async () => (await routes(a.ns)).some((r) => r.dst === sub3), 90_000);
      // (A 401 with the old token may be logged once, between revocation and the file's new token.)
      assertEquals(a.log.filter((l) => l.includes("401")).length <= 1, true, why());

      // A deleted Node leaves every peer.
      await cp.kubectlOk("delete", "node", "kn2");
      await waitFor(why, async () => !(await routes(a.ns)).some((r) => r.dst === sub2), 60_000);
      assert((await c.http(a, "/readyz"))[0] === 200, why());
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});

needsRoot.test({
  name: "kube mode on a real kube-apiserver: a watch older than etcd's compaction gets 410 and re-lists",
  ignore: !HAVE,
  async fn() {
    const c = new DaemonCluster("10.82");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode();
      // No watch cache: watches go to etcd, whose compaction makes an old resourceVersion 410 Gone.
      cp = await controlPlane(c, ["kn1"], ["--min-request-timeout=15", "--watch-cache=false"]);
      const kc = await saKubeconfig(cp, c.tmp, "tok1");
      c.start(a, kubeArgs(c, kc), { NODE_NAME: "kn1" });
      await c.waitReady(a, 90_000);
      const why = () => `A:\n${a.log.join("\n")}\n${cp!.logTail("kube-apiserver", 15)}`;
      // Freeze the daemon past its watch's end (15–30 s), change the Nodes, compact etcd, thaw.
      const pid = a.proc!.pid;
      Deno.kill(pid, "SIGSTOP");
      try {
        await new Promise((r) => setTimeout(r, 32_000));
        await cp.upsertNode("kn2", [], {
          [`${P}public-ip`]: `${c.base}.0.98`,
          [`${P}backend-type`]: "vxlan",
          [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: "0e:00:00:00:00:98" }),
          [`${P}kube-subnet-manager`]: "true",
        });
        await waitFor("kn2's podCIDR", async () => (await cp!.node("kn2"))?.spec.podCIDR, 60_000);
        const st = await cp.kubectl("get", "--raw", "/api/v1/nodes?limit=1");
        assertEquals(st.code, 0, st.stderr);
        const url = "http://127.0.0.1:2379";
        const rev = JSON.parse(
          await sh(
            "ip",
            "netns",
            "exec",
            c.underlay,
            "etcdctl",
            "--endpoints",
            url,
            "endpoint",
            "status",
            "-w",
            "json",
          ),
        )[0].Status.header.revision;
        await sh("ip", "netns", "exec", c.underlay, "etcdctl", "--endpoints", url, "compact", String(rev));
      } finally {
        Deno.kill(pid, "SIGCONT");
      }
      const sub2 = (await cp.node("kn2"))!.spec.podCIDR!;
      await waitFor(why, async () => (await routes(a.ns)).some((r) => r.dst === sub2), 60_000);
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});

needsRoot.test({
  name:
    "kube mode on a real kube-apiserver: a missing Node and an RBAC that denies nodes/status fail clearly",
  ignore: !HAVE,
  async fn() {
    const c = new DaemonCluster("10.83");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode();
      cp = await controlPlane(c, ["kn1"]);
      const kc = await saKubeconfig(cp, c.tmp, "tok1");
      // A Node that does not exist: the daemon exits non-zero naming it (flanneld waits 30 s, then exits 1).
      // The node's own subnet file and state dir (c.daemonArgs), never the host's /run/flannel.
      const missing = await runDaemonOnce(
        a.ns,
        c.daemonArgs(a, kubeArgs(c, kc)),
        { NODE_NAME: "nosuch" },
        90_000,
      );
      assertNotEquals(missing.code, 0, missing.stderr);
      assertStringIncludes(missing.stderr, "nosuch");

      // An account whose role lacks nodes/status: publishing the annotations is forbidden, and said so.
      await cp.kubectlOk("create", "serviceaccount", "weak", "-n", "kube-flannel");
      await cp.kubectlOk("create", "clusterrole", "weak", "--verb=get,list,watch", "--resource=nodes,pods");
      await cp.kubectlOk(
        "create",
        "clusterrolebinding",
        "weak",
        "--clusterrole=weak",
        "--serviceaccount=kube-flannel:weak",
      );
      await Deno.writeTextFile(`${c.tmp}/weak.token`, await cp.token("kube-flannel", "weak"));
      await Deno.writeTextFile(
        `${c.tmp}/weak.kubeconfig`,
        cp.kubeconfig({ tokenFile: `${c.tmp}/weak.token` }),
      );
      c.start(a, kubeArgs(c, `${c.tmp}/weak.kubeconfig`), { NODE_NAME: "kn1" });
      await waitFor(
        () => `the 403 named\n${a.log.join("\n")}`,
        () => a.log.some((l) => /forbidden|403/i.test(l) && l.includes("nodes")),
        45_000,
      );
      assertNotEquals((await c.http(a, "/readyz"))[0], 200, "not ready without its annotations");
      assertEquals((await cp.node("kn1"))!.metadata.annotations?.[`${P}public-ip`], undefined);
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});

needsRoot.test({
  name: "mixed with flanneld over the real API (vxlan): pods ping both ways, a swap each way loses nothing",
  ignore: !HAVE_FLANNELD,
  async fn() {
    const c = new MixedCluster("10.84");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode(), b = await c.addNode();
      cp = await controlPlane(c, ["kn1", "kn2"]);
      const kc = await saKubeconfig(cp, c.tmp, "tok1");
      const flanneldArgs = [
        "--kube-subnet-mgr",
        `--kubeconfig-file=${kc}`,
        `--net-config-path=${c.tmp}/net-conf.json`,
      ];
      const startFlanctl = (n: TestNode, node: string) => {
        c.start(n, kubeArgs(c, kc), { NODE_NAME: node });
        c.runs.set(n, "flanctl");
      };
      // flanneld with the DaemonSet's arguments (NODE_NAME as its downward API would give it).
      const startFlanneld = (n: TestNode, node: string) =>
        c.startFlanneld(n, flanneldArgs, { NODE_NAME: node });
      startFlanctl(a, "kn1");
      startFlanneld(b, "kn2");
      await c.waitUp(a, 90_000);
      await c.waitUp(b, 90_000);
      const pa = await c.addPod(a), pb = await c.addPod(b);
      await waitPing(pa.ns, pb.ip, c.explain("pods ping (flanctl ↔ flanneld over the API)"), 60_000);
      assertEquals(await pingCount(pb.ns, pa.ip, 3), 3);
      // Annotations from both daemons have the same keys.
      const keys = async (n: string) =>
        Object.keys((await cp!.node(n))!.metadata.annotations ?? {}).filter((k) => k.startsWith(P)).sort();
      assertEquals(await keys("kn1"), await keys("kn2"));
      // Swap under a running ping: A flanctl → flanneld, B flanneld → flanctl.
      const loop = pingCount(pa.ns, pb.ip, 300, 0.05);
      await new Promise((r) => setTimeout(r, 500));
      await c.stop(a);
      startFlanneld(a, "kn1");
      await c.waitUp(a, 90_000);
      await c.stop(b);
      startFlanctl(b, "kn2");
      await c.waitUp(b, 90_000);
      const got = await loop;
      assertEquals(got, 300, await c.explain(`swap lost ${300 - got} of 300`)());
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});

for (const type of ["host-gw", "udp"]) {
  needsRoot.test({
    name: `mixed with flanneld over the real API (${type}): each programs the other, pods ping both ways`,
    ignore: !HAVE_FLANNELD,
    async fn() {
      const c = new MixedCluster(type === "udp" ? "10.85" : "10.86");
      let cp: KubeControlPlane | null = null;
      try {
        await c.init();
        const a = await c.addNode(), b = await c.addNode();
        const conf = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: type } });
        cp = await controlPlane(c, ["kn1", "kn2"], [], conf);
        const kc = await saKubeconfig(cp, c.tmp, "tok1");
        c.start(a, kubeArgs(c, kc), { NODE_NAME: "kn1" });
        c.runs.set(a, "flanctl");
        c.startFlanneld(b, [
          "--kube-subnet-mgr",
          `--kubeconfig-file=${kc}`,
          `--net-config-path=${c.tmp}/net-conf.json`,
        ], {
          NODE_NAME: "kn2",
        });
        await c.waitUp(a, 90_000);
        await c.waitUp(b, 90_000);
        const pa = await c.addPod(a), pb = await c.addPod(b);
        await waitPing(
          pa.ns,
          pb.ip,
          c.explain(`pods ping (${type}, flanctl ↔ flanneld over the API)`),
          60_000,
        );
        assertEquals(await pingCount(pa.ns, pb.ip, 3), 3);
        assertEquals(await pingCount(pb.ns, pa.ip, 3), 3);
        assertEquals(
          (await cp.node("kn2"))!.metadata.annotations?.[`${P}backend-type`],
          (await cp.node("kn1"))!.metadata.annotations?.[`${P}backend-type`],
        );
      } finally {
        await c.close();
        await cp?.stop();
      }
    },
  });
}

needsRoot.test({
  name: "mixed with flanneld over the real API (vxlan, dual stack): pods ping both ways in both families",
  ignore: !HAVE_FLANNELD,
  async fn() {
    const c = new MixedCluster("10.87");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode(), b = await c.addNode();
      await addV6Underlay(c, "fc00:87");
      // Dual-stack podCIDRs set on the Nodes (no controller manager: it would need a dual-stack cluster CIDR).
      cp = await KubeControlPlane.start({
        netns: c.underlay,
        address: `${c.base}.0.1`,
        dir: `${c.tmp}/kube`,
      });
      await cp.kubectlOk("apply", "-f", `${ROOT}deploy/kube-flanctl.yml`);
      await cp.upsertNode("kn1", ["10.244.1.0/24", "fc00:244:0:1::/64"]);
      await cp.upsertNode("kn2", ["10.244.2.0/24", "fc00:244:0:2::/64"]);
      await Deno.writeTextFile(
        `${c.tmp}/net-conf.json`,
        JSON.stringify({
          Network: "10.244.0.0/16",
          EnableIPv6: true,
          IPv6Network: "fc00:244::/48",
          Backend: { Type: "vxlan" },
        }),
      );
      const kc = await saKubeconfig(cp, c.tmp, "tok1");
      c.start(a, kubeArgs(c, kc), { NODE_NAME: "kn1" });
      c.runs.set(a, "flanctl");
      c.startFlanneld(b, [
        "--kube-subnet-mgr",
        `--kubeconfig-file=${kc}`,
        `--net-config-path=${c.tmp}/net-conf.json`,
      ], {
        NODE_NAME: "kn2",
      });
      await c.waitUp(a, 90_000);
      await c.waitUp(b, 90_000);
      const pa = await addPod46(c, a), pb = await addPod46(c, b);
      await waitPing(pa.ns, pb.ip4, c.explain("dual stack over the API: v4 pods ping"), 60_000);
      await waitPing(pa.ns, pb.ip6, c.explain("dual stack over the API: v6 pods ping"), 60_000);
      for (const [from, to] of [[pa.ns, pb.ip4], [pb.ns, pa.ip4], [pa.ns, pb.ip6], [pb.ns, pa.ip6]]) {
        assertEquals(await pingCount(from, to, 3), 3, `${from} → ${to}`);
      }
      // Both publish the IPv6 annotations flanneld reads.
      for (const n of ["kn1", "kn2"]) {
        const ann: Record<string, string> = (await cp.node(n))!.metadata.annotations!;
        assert(ann[`${P}public-ipv6`]?.startsWith("fc00:87::"), JSON.stringify(ann));
        assertEquals(typeof JSON.parse(ann[`${P}backend-v6-data`]).VtepMAC, "string");
      }
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});
