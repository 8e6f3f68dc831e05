/**
 * The ops tools need no store flag on a node: the daemon records its store (kind, how to reach it, the kube
 * node name; never a token or password) in its state file, and `status`, `doctor`, `trace` and `lease` use
 * it when no flag chooses a store. Before, on a healthy kube-mode node `doctor` read the file store
 * (CRITICAL "no lease in the store"), `status` assumed etcd (UNREACHABLE, 0 leases) and named the host.
 * Kube mode against the fake API server (the real one: tests/peers_kube_test.ts); the recorded store of a
 * pod's daemon (in-cluster account) read on the host.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml, TOKEN } from "./kube_fake_api.ts";
import { flanctl, withNetns } from "./netns.ts";
import type { StatusJson } from "../lib/status/status.ts";
import type { LeaseJson } from "../lib/store/types.ts";
import type { CheckId, FindingId } from "../lib/doctor/mod.ts";

interface DoctorJsonView {
  summary: { exitCode: number };
  checks: { id: FindingId; severity: string; detail: string }[];
}

needsRoot.test("ops tools without store flags use the kube store the daemon records, and name the node", async () => {
  const c = new DaemonCluster("10.93");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    api = new FakeApiServer({ hostname: "10.93.0.1", netns: c.underlay });
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    api.upsert("kn2", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
    api.pods.set("kube-flannel/kube-flannel-ds-aaaaa", { spec: { nodeName: "kn1" } });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(api.url));
    const args = [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
    ];
    // A finds its node through the pod (the DaemonSet's downward API), B through NODE_NAME.
    c.start(a, args, { POD_NAME: "kube-flannel-ds-aaaaa", POD_NAMESPACE: "kube-flannel" });
    c.start(b, args, { NODE_NAME: "kn2" });
    await c.waitReady(a);
    await c.waitReady(b);
    await waitFor("A routes kn2", async () => (await routes(a.ns)).some((r) => r.dst === "10.244.2.0/24"));
    const why = () => `A:\n${a.log.join("\n")}`;

    // The state file: the store and the node, never the token.
    const stateText = await Deno.readTextFile(`${a.dir}/flanctl.json`);
    assert(!stateText.includes(TOKEN), stateText);
    const state = JSON.parse(stateText);
    assertEquals(state.nodeName, "kn1");
    assertEquals(state.store, {
      kind: "kube",
      kubeAnnotationPrefix: "flannel.alpha.coreos.com",
      kubeconfigFile: `${c.tmp}/kubeconfig`,
      nodeName: "kn1",
      netConfigPath: `${c.tmp}/net-conf.json`,
    });
    // The first programming of the peers is not a repair.
    assert(!a.log.some((l) => l.includes("repaired peer entries")), why());

    // status: the node's Kubernetes name, the kube store reached, kn2 counted and programmed.
    const st = await flanctl(["status", "--subnet-file", a.subnetFile, "-o", "json"], { ns: a.ns });
    assertEquals(st.code, 0, st.stderr + st.stdout);
    const sj = JSON.parse(st.stdout) as StatusJson;
    assertEquals(sj.node, "kn1");
    assertEquals(sj.store, { kind: "kube", reachable: true, daemonSeesStore: true, error: null });
    assertEquals([sj.lease.subnet, sj.peers.leases, sj.peers.programmed, sj.peers.missing], [
      "10.244.1.0/24",
      1,
      1,
      [],
    ]);

    // doctor: reads the kube store; the own lease is found and worded as a Node's, peers are not stale.
    const dr = await flanctl(["doctor", "--subnet-file", a.subnetFile, "-o", "json"], { ns: a.ns });
    const dj = JSON.parse(dr.stdout) as DoctorJsonView;
    const check = (id: CheckId) => dj.checks.find((x) => x.id === id);
    assertEquals(check("store")?.severity, "ok", dr.stdout);
    assertEquals(check("lease-own")?.severity, "ok", dr.stdout);
    assertStringIncludes(check("lease-expiry")!.detail, "node kn1's podCIDR");
    assert(!check("lease-expiry")!.detail.includes("reservation"), dr.stdout);
    assert(!dr.stdout.includes("no lease in the store"), dr.stdout);
    assertEquals(check("peer-entries")?.severity, "ok", dr.stdout);

    // lease list: the recorded store (next to FLANNELD_SUBNET_FILE), with the node names.
    const ll = await flanctl(["lease", "list", "-o", "json"], {
      ns: a.ns,
      env: { FLANNELD_SUBNET_FILE: a.subnetFile },
    });
    assertEquals(ll.code, 0, ll.stderr);
    const rows = JSON.parse(ll.stdout) as LeaseJson[];
    assertEquals(rows.map((r) => [r.node, r.subnet, r.expiration]), [
      ["kn1", "10.244.1.0/24", null],
      ["kn2", "10.244.2.0/24", null],
    ]);

    // trace: B's pod subnet through kn2's lease, from the kube store.
    const tr = await flanctl(["trace", "10.244.2.1", "--subnet-file", a.subnetFile, "-o", "json"], {
      ns: a.ns,
    });
    assert(!/etcd/i.test(tr.stdout + tr.stderr), tr.stdout + tr.stderr);
    assertStringIncludes(tr.stdout, b.ip);

    // A store flag still wins: the file store given explicitly is what status reads.
    const st2 = await flanctl(
      ["status", "--subnet-file", a.subnetFile, "--store-dir", c.storeDir, "-o", "json"],
      { ns: a.ns },
    );
    assertEquals((JSON.parse(st2.stdout) as StatusJson).store.kind, "file");
  } finally {
    await c.close();
    await api?.close();
  }
});

needsRoot.test("ops tools on the host of a pod's daemon: the recorded in-cluster store is named, with the fix", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("rs");
    const dir = Deno.makeTempDirSync({ prefix: "flanctl-recorded-" });
    try {
      // What the DaemonSet's daemon writes to /run/flannel (a hostPath): in-cluster, no kubeconfig.
      Deno.writeTextFileSync(
        `${dir}/flanctl.json`,
        JSON.stringify({
          pid: 999999,
          procStart: 1,
          startedAt: new Date().toISOString(),
          version: "0.1.0",
          health: null,
          subnetFile: `${dir}/subnet.env`,
          pidNs: "pid:[1]",
          nodeName: "worker-7",
          store: { kind: "kube", nodeName: "worker-7", netConfigPath: "/etc/kube-flannel/net-conf.json" },
        }),
      );
      const env = { KUBERNETES_SERVICE_HOST: "", KUBERNETES_SERVICE_PORT: "" };
      const st = await flanctl(["status", "--subnet-file", `${dir}/subnet.env`, "-o", "json"], { ns, env });
      const sj = JSON.parse(st.stdout) as StatusJson;
      assertEquals(sj.node, "worker-7");
      assertEquals(sj.store.kind, "kube");
      assertEquals(sj.store.reachable, false);
      assertStringIncludes(sj.store.error!, `${dir}/flanctl.json`);
      assertStringIncludes(sj.store.error!, "--kubeconfig-file");
      // doctor: the kube store unreachable from here (a warning naming the fix), its lease checks "unknown",
      // never the file store's CRITICAL "no lease in the store".
      const dr = await flanctl(["doctor", "--subnet-file", `${dir}/subnet.env`, "-o", "json"], { ns, env });
      const dj = JSON.parse(dr.stdout) as DoctorJsonView;
      const store = dj.checks.find((x) => x.id === "store")!;
      assertEquals(store.severity, "warning", dr.stdout);
      assertStringIncludes(store.detail, "kube store");
      assertStringIncludes(store.detail, "--kubeconfig-file");
      assertEquals(dj.checks.find((x) => x.id === "lease-own")?.severity, "unknown", dr.stdout);
      assert(!dr.stdout.includes("no lease in the store"), dr.stdout);
      // lease: the same store, and the same hint.
      const ll = await flanctl(["lease", "list"], {
        ns,
        env: { ...env, FLANNELD_SUBNET_FILE: `${dir}/subnet.env` },
      });
      assertEquals(ll.code, 1, ll.stderr);
      assertStringIncludes(ll.stderr, "kube store");
      assertStringIncludes(ll.stderr, "--kubeconfig-file");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
});
