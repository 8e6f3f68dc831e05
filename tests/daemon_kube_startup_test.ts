/**
 * Kube-mode start-up failures, as flanneld (issue 28 item 5): our Node missing → polled every 3 s for the
 * start-up wait (flanneld: 30 s; FLANCTL_KUBE_START_WAIT_SECONDS=3 here) and then exit 1; POD_NAME naming a
 * missing pod or one without nodeName → exit 1 at once, the log naming the step ("finding our node's
 * name"); RBAC refusing nodes/status → retried for the wait, then exit 1 naming the grant. Before: the
 * missing node exited at once, the pod cases retried for ever as "reading our node's annotations", the RBAC
 * case retried for ever.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, runDaemonOnce } from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";

/** The daemon's "start-up failed" line. */
function failLine(stderr: string): string {
  const l = stderr.split("\n").find((x) => x.includes(`msg="daemon start-up failed"`));
  assert(l, `no start-up failure logged:\n${stderr}`);
  return l;
}

needsRoot.test("daemon kube start-up: missing node, missing pod, pod without nodeName, RBAC denying nodes/status", async () => {
  const c = new DaemonCluster("10.83");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode();
    api = new FakeApiServer({ hostname: "10.83.0.1", netns: c.underlay });
    const srv = api;
    srv.pods.set("kube-flannel/unscheduled", { spec: {} });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(srv.url));
    const args = c.daemonArgs(a, [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
    ]);
    const run = async (env: Record<string, string>) => {
      const t0 = Date.now();
      const r = await runDaemonOnce(a.ns, args, { FLANCTL_KUBE_START_WAIT_SECONDS: "3", ...env }, 60_000);
      return { ...r, ms: Date.now() - t0 };
    };

    // Our Node missing: waited for (3 s here, 30 s by default), then exit 1.
    let r = await run({ NODE_NAME: "kn1" });
    assertEquals(r.code, 1, r.stderr);
    assert(r.ms >= 3000, `gave up after ${r.ms} ms`);
    assertStringIncludes(
      r.stderr,
      `not found in the Kubernetes API yet; waiting up to 3s (as flanneld)`,
    );
    assertStringIncludes(failLine(r.stderr), `node \\"kn1\\" not found in the Kubernetes API after 3s`);
    assert(srv.requests.filter((q) => q.url === "/api/v1/nodes/kn1").length >= 2);

    // POD_NAME naming a missing pod: exit 1 at once, in the step that finds the node's name.
    const before = srv.requests.length;
    r = await run({ POD_NAMESPACE: "kube-flannel", POD_NAME: "gone" });
    assertEquals(r.code, 1, r.stderr);
    let line = failLine(r.stderr);
    assertStringIncludes(line, "step=preflight");
    assertStringIncludes(line, "finding our node's name: error retrieving pod spec for 'kube-flannel/gone'");
    assert(!r.stderr.includes("retrying"), r.stderr);
    assertEquals(srv.requests.slice(before).filter((q) => q.url.includes("/pods/")).length, 1);

    // A pod without nodeName: the same.
    r = await run({ POD_NAMESPACE: "kube-flannel", POD_NAME: "unscheduled" });
    assertEquals(r.code, 1, r.stderr);
    line = failLine(r.stderr);
    assertStringIncludes(line, "node name not present in pod spec 'kube-flannel/unscheduled'");

    // RBAC refusing the status patch: retried for the wait, then exit 1 naming the grant.
    srv.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    srv.intercept = (req, u) =>
      req.method === "PATCH" && u.pathname.endsWith("/status")
        ? Response.json(
          {
            kind: "Status",
            code: 403,
            reason: "Forbidden",
            message: `nodes "kn1" is forbidden: cannot patch`,
          },
          { status: 403 },
        )
        : null;
    r = await run({ NODE_NAME: "kn1" });
    assertEquals(r.code, 1, r.stderr);
    assert(r.ms >= 3000, `gave up after ${r.ms} ms`);
    line = failLine(r.stderr);
    assertStringIncludes(line, "step=lease");
    assertStringIncludes(line, "still refused after 3s");
    assertStringIncludes(line, "grant patch on nodes/status");
  } finally {
    await c.close();
    await api?.close();
  }
});
