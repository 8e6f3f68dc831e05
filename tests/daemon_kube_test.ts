/**
 * `flanctl daemon` with the kube-flannel DaemonSet's arguments (`--ip-masq --kube-subnet-mgr`, POD_NAME and
 * POD_NAMESPACE from the downward API) against the fake API server, which listens inside the test's underlay
 * namespace: the node name comes from the pod's spec.nodeName; NetworkUnavailable=False is patched only once
 * the VXLAN device, subnet.env and the masquerade rules exist (checked by the server while it answers the
 * patch), never with --set-node-network-unavailable=false; a node whose state file is gone keeps the VTEP MAC
 * published in its backend-data annotation. Both run under `--kube-annotation-prefix example.com/flannel`
 * (A from FLANNELD_KUBE_ANNOTATION_PREFIX, B from the flag); A's missing `--iface` falls through to
 * `--iface-can-reach`.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { nsRun, sh } from "./netns.ts";

// --kube-annotation-prefix (A from FLANNELD_KUBE_ANNOTATION_PREFIX, B from the flag), normalised as flanneld
// normalises it ("-" appended to a prefix with a slash).
const P = "example.com/flannel-";

needsRoot.test("daemon kube: DaemonSet args, node name from the pod, NetworkUnavailable after the data plane, MAC kept", async () => {
  const c = new DaemonCluster("10.95");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    api = new FakeApiServer({ hostname: "10.95.0.1", netns: c.underlay });
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    api.upsert("kn2", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
    api.pods.set("kube-flannel/kube-flannel-ds-aaaaa", { spec: { nodeName: "kn1" } });
    api.pods.set("kube-flannel/kube-flannel-ds-bbbbb", { spec: { nodeName: "kn2" } });
    // What the data plane looked like when each node's condition patch arrived.
    const atPatch = new Map<string, { device: boolean; subnetEnv: boolean; masq: boolean }>();
    const byNode = new Map([["kn1", a], ["kn2", b]]);
    api.onConditionPatch = async (node) => {
      const n = byNode.get(node)!;
      atPatch.set(node, {
        device: (await nsRun(n.ns, ["ip", "link", "show", "flannel.1"])).code === 0,
        subnetEnv: await Deno.stat(n.subnetFile).then(() => true, () => false),
        masq: (await nsRun(n.ns, ["iptables-save", "-t", "nat"])).stdout.includes("-A FLANNEL-POSTRTG"),
      });
    };
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(
      `${c.tmp}/kubeconfig`,
      kubeconfigYaml(api.url),
    );
    // kube-flannel.yml: args [--ip-masq, --kube-subnet-mgr]; env POD_NAME, POD_NAMESPACE, EVENT_QUEUE_DEPTH,
    // CONT_WHEN_CACHE_NOT_READY. Here plus the paths a test needs (kubeconfig instead of the service account).
    const args = (extra: string[] = []) => [
      "--ip-masq",
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      ...extra,
    ];
    const env = (pod: string) => ({
      POD_NAME: pod,
      POD_NAMESPACE: "kube-flannel",
      EVENT_QUEUE_DEPTH: "5000",
      CONT_WHEN_CACHE_NOT_READY: "false",
    });
    // A: an --iface that does not exist falls through to --iface-can-reach (the API server's address).
    const argsA = () => args(["--iface=nosuch0", "--iface-can-reach=10.95.0.1"]);
    const envA = { ...env("kube-flannel-ds-aaaaa"), FLANNELD_KUBE_ANNOTATION_PREFIX: "example.com/flannel" };
    c.start(a, argsA(), envA);
    // B: its kubeconfig names a wrong server; --kube-api-url overrides it (flanneld's flag).
    await Deno.writeTextFile(
      `${c.tmp}/kubeconfig-b`,
      (await Deno.readTextFile(`${c.tmp}/kubeconfig`)).replace(api.url, "http://10.95.0.1:1"),
    );
    c.start(
      b,
      [
        ...args(["--set-node-network-unavailable=false"]).filter((x) => !x.startsWith("--kubeconfig-file")),
        `--kubeconfig-file=${c.tmp}/kubeconfig-b`,
        `--kube-api-url=${api.url}`,
        "--kube-annotation-prefix=example.com/flannel",
      ],
      env("kube-flannel-ds-bbbbb"),
    );
    await c.waitReady(a);
    await c.waitReady(b);
    const why = () => `A:\n${a.log.join("\n")}\nB:\n${b.log.join("\n")}`;

    // The node name came from the pod: each daemon took its own node's podCIDR.
    assertEquals(await c.subnetOf(a), "10.244.1.0/24", why());
    assertEquals(await c.subnetOf(b), "10.244.2.0/24", why());
    const annA = api.nodes.get("kn1")!.metadata.annotations;
    assertEquals(annA[`${P}public-ip`], a.ip);
    assertEquals(
      Object.keys(annA).filter((k) => !k.startsWith(P)),
      [],
      "every annotation under --kube-annotation-prefix",
    );
    // Ready at all means the missing --iface fell through to --iface-can-reach (alone it is an exit 1).
    assertStringIncludes(a.log.find((l) => l.includes("using interface"))!, "iface=eth0");
    const macA = JSON.parse(annA[`${P}backend-data`]).VtepMAC;
    assertEquals(JSON.parse(await sh("ip", "-n", a.ns, "-j", "link", "show", "flannel.1"))[0].address, macA);

    // NetworkUnavailable=False on kn1 only, and only after device, subnet.env and rules were in place
    // (/readyz answers 200 as soon as those are in place, as flanneld's; the condition follows).
    await waitFor(
      () => `kn1's condition patch${why()}`,
      () => atPatch.has("kn1") && api!.nodes.get("kn1")!.status.conditions.length > 0,
    );
    await waitFor(
      "B listed its peers",
      async () => (await routes(b.ns)).some((r) => r.dst === "10.244.1.0/24"),
    );
    assertEquals(atPatch.get("kn1"), { device: true, subnetEnv: true, masq: true }, why());
    const cond = api.nodes.get("kn1")!.status.conditions;
    assertEquals(cond.map((x) => [x.type, x.status, x.reason]), [[
      "NetworkUnavailable",
      "False",
      "FlannelIsUp",
    ]]);
    assertEquals(atPatch.has("kn2"), false, "--set-node-network-unavailable=false");
    assertEquals(api.nodes.get("kn2")!.status.conditions, []);

    // The nodes program each other from the node annotations.
    await waitFor("A routes kn2", async () => (await routes(a.ns)).some((r) => r.dst === "10.244.2.0/24"));

    // A's disk is wiped (state file gone) and its device deleted: the restarted daemon keeps the MAC its
    // peers know from the backend-data annotation.
    assertEquals(await c.stop(a), 0);
    await Deno.remove(a.stateDir, { recursive: true });
    await sh("ip", "-n", a.ns, "link", "del", "flannel.1");
    c.start(a, argsA(), envA);
    await c.waitReady(a);
    const dev = JSON.parse(await sh("ip", "-n", a.ns, "-j", "link", "show", "flannel.1"))[0];
    assertEquals(dev.address, macA, why());
    assertEquals(JSON.parse(api.nodes.get("kn1")!.metadata.annotations[`${P}backend-data`]).VtepMAC, macA);
    assert(a.log.some((l) => l.includes("kube store") || l.includes("--kube-subnet-mgr is set")), why());
  } finally {
    await c.close();
    await api?.close();
  }
});
