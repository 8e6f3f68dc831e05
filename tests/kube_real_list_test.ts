/**
 * The kube client against a real kube-apiserver (tests/kube_cluster.ts; binaries from `install.sh --dev`): the
 * first list `limit=500&resourceVersion=0` is answered whole by the watch cache (one request for 600 Nodes,
 * no `continue`), a consistent `limit=500` list is paged, a re-list from the last resourceVersion is one
 * request, the watch's query (bookmarks, timeoutSeconds) is accepted and ended by the server at its timeout,
 * and managedFields name the client `flanctl` (the User-Agent's command), not `Deno`.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster } from "./daemon_fixture.ts";
import { KubeControlPlane } from "./kube_cluster.ts";
import { ROOT } from "./netns.ts";
import { requirePeers } from "./peers.ts";

const HAVE = requirePeers(["kube-apiserver", "kubectl", "etcd"]);

/** Runs in the API server's namespace (the test's own process is not there). */
const CHILD = `
import { KubeClient, loadKubeconfig } from "${ROOT}lib/store/kube/kube_client.ts";
import { listNodesPaged } from "${ROOT}lib/store/kube/kube_node.ts";
const c = new KubeClient(await loadKubeconfig(Deno.args[0]));
const N = 600, out = {};
for (let i = 0; i < N; i += 20) {
  await Promise.all(Array.from({ length: Math.min(20, N - i) }, (_, k) => c.request("POST", "/api/v1/nodes", {
    apiVersion: "v1", kind: "Node", metadata: { name: "n-" + String(i + k).padStart(4, "0") },
    spec: { podCIDR: "10." + (100 + ((i + k) >> 8)) + "." + ((i + k) & 255) + ".0/24" },
  })));
}
const pages = async (q) => { let n = 0; const top = await c.list("/api/v1/nodes?" + q, () => n++); return [n, !!top.metadata.continue]; };
// The watch cache catches up with etcd asynchronously (587 of 600 once under load): ask until it has them all.
let wc = await pages("limit=500&resourceVersion=0");
for (let t = 0; wc[0] < N && t < 100; t++) { await new Promise((r) => setTimeout(r, 100)); wc = await pages("limit=500&resourceVersion=0"); }
out.watchCache = wc;
out.consistent = await pages("limit=500");
let r = c.requests;
const l = await listNodesPaged(c, "flannel.alpha.coreos.com/");
out.first = [l.nodes.length, c.requests - r, l.paginated];
r = c.requests;
const l2 = await listNodesPaged(c, "flannel.alpha.coreos.com/", { rv: l.rv, paginated: l.paginated });
out.relist = [l2.nodes.length, c.requests - r];
const t0 = Date.now();
for await (const _ of c.watch("/api/v1/nodes?allowWatchBookmarks=true&resourceVersion=" + l.rv + "&timeoutSeconds=2&watch=true", new AbortController().signal, 20000)) { /* bookmarks */ }
out.watchMs = Date.now() - t0;
await c.request("PATCH", "/api/v1/nodes/n-0000/status", { metadata: { annotations: { "flannel.alpha.coreos.com/public-ip": "10.9.9.9" } } }, "application/strategic-merge-patch+json");
const n = await c.request("GET", "/api/v1/nodes/n-0000");
out.managers = [...new Set(n.metadata.managedFields.map((m) => m.manager))];
c.close();
console.log(JSON.stringify(out));
`;

needsRoot.test({
  name:
    "kube client vs kube-apiserver: client-go's list and watch queries, one request per list, manager flanctl",
  ignore: !HAVE,
  async fn() {
    const c = new DaemonCluster("10.81");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      await c.addNode();
      cp = await KubeControlPlane.start({ netns: c.underlay, address: "10.81.0.1", dir: `${c.tmp}/kube` });
      await Deno.writeTextFile(`${c.tmp}/admin.kubeconfig`, cp.kubeconfig({ admin: true }));
      await Deno.writeTextFile(`${c.tmp}/child.ts`, CHILD);
      const o = await new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          c.underlay,
          Deno.execPath(),
          "run",
          "-A",
          "--no-check",
          "--config",
          `${ROOT}deno.json`,
          `${c.tmp}/child.ts`,
          `${c.tmp}/admin.kubeconfig`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(o.stderr);
      assert(o.success, err);
      const r = JSON.parse(new TextDecoder().decode(o.stdout).trim().split("\n").at(-1)!);
      assertEquals(r.watchCache, [600, false], "limit=500&resourceVersion=0: the watch cache's whole list");
      assertEquals(r.consistent, [500, true], "limit=500 without resourceVersion: paged");
      assertEquals(r.first, [600, 1, false]);
      assertEquals(r.relist, [600, 1]);
      assert(r.watchMs >= 1500 && r.watchMs < 15_000, `the server ended the watch after ${r.watchMs} ms`);
      assertEquals(r.managers, ["flanctl"]);
    } finally {
      await cp?.stop();
      await c.close();
    }
  },
});
