/**
 * `flanctl daemon --kube-subnet-mgr` with the extension and alloc backends against the fake API server: the
 * node annotations flanneld's kube subnet manager writes for them (backend-type, backend-data the
 * PreStartupCommand's output as a JSON string; alloc: backend-type "" and backend-data null), and each
 * node's SubnetAddCommand fires for the other Node with its backend-data on stdin.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { DaemonCluster, type TestNode, waitFor } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { events, extensionConf } from "./alloc_ext_fixture.ts";

const P = "flannel.alpha.coreos.com/";

/** Two nodes kn1/kn2 (10.244.1.0/24, 10.244.2.0/24) running `netConf` over the fake API server. */
async function kubeCluster(c: DaemonCluster, netConf: (dir: string) => Promise<Record<string, unknown>>) {
  await c.init();
  const a = await c.addNode(), b = await c.addNode();
  const api = new FakeApiServer({ hostname: `${c.base}.0.1`, netns: c.underlay });
  api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
  api.upsert("kn2", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
  api.pods.set("kube-flannel/ds-a", { spec: { nodeName: "kn1" } });
  api.pods.set("kube-flannel/ds-b", { spec: { nodeName: "kn2" } });
  await Deno.writeTextFile(`${c.tmp}/net-conf.json`, JSON.stringify(await netConf(c.tmp)));
  await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(api.url));
  const args = [
    "--kube-subnet-mgr",
    `--kubeconfig-file=${c.tmp}/kubeconfig`,
    `--net-config-path=${c.tmp}/net-conf.json`,
  ];
  for (const [n, pod] of [[a, "ds-a"], [b, "ds-b"]] as [TestNode, string][]) {
    c.start(n, args, { POD_NAME: pod, POD_NAMESPACE: "kube-flannel", EXT_NODE: n.name, OUT_DIR: n.dir });
  }
  try {
    for (const n of [a, b]) await c.waitReady(n);
  } catch (e) {
    await api.close();
    throw e;
  }
  return { a, b, api };
}

needsRoot.test("daemon kube extension: flanneld's annotations; each node's SubnetAddCommand for the other", async () => {
  const c = new DaemonCluster("10.94");
  let api: FakeApiServer | null = null;
  try {
    const k = await kubeCluster(c, (dir) => extensionConf(dir, "10.244.0.0/16"));
    api = k.api;
    const ann = api.nodes.get("kn1")!.metadata.annotations;
    assertEquals(
      [ann[`${P}backend-type`], ann[`${P}backend-data`], ann[`${P}public-ip`]],
      ["extension", '"data of node1"', k.a.ip],
    );
    await waitFor(
      c.explain("node1's add for kn2"),
      async () => (await events(k.a)).includes(`add|10.244.2.0/24|${k.b.ip}|data of node2`),
    );
    await waitFor(
      c.explain("node2's add for kn1"),
      async () => (await events(k.b)).includes(`add|10.244.1.0/24|${k.a.ip}|data of node1`),
    );
  } finally {
    await c.close();
    await api?.close();
  }
});

needsRoot.test("daemon kube alloc: flanneld's annotations (backend-type empty, backend-data null)", async () => {
  const c = new DaemonCluster("10.93");
  let api: FakeApiServer | null = null;
  try {
    const k = await kubeCluster(
      c,
      () => Promise.resolve({ Network: "10.244.0.0/16", Backend: { Type: "alloc" } }),
    );
    api = k.api;
    const ann = api.nodes.get("kn2")!.metadata.annotations;
    assertEquals(
      [ann[`${P}backend-type`], ann[`${P}backend-data`], ann[`${P}public-ip`]],
      ["", "null", k.b.ip],
    );
    assertEquals((await c.subnetEnv(k.b)).FLANNEL_SUBNET, "10.244.2.1/24");
  } finally {
    await c.close();
    await api?.close();
  }
});
