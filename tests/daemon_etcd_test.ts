/**
 * `flanctl daemon` on the etcd v3 store (etcd started by the test inside the underlay namespace): peers
 * programmed, and while etcd is down /readyz answers 503, pod traffic keeps flowing, and readiness returns
 * when etcd is back.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, spawnEtcd, waitFor } from "./daemon_fixture.ts";
import { nsRun } from "./netns.ts";

needsRoot.test("daemon etcd: serves peers, not ready while etcd is down, data plane unaffected, recovers", async () => {
  const c = new DaemonCluster();
  let etcd: Deno.ChildProcess | null = null;
  const url = "http://10.99.0.1:2379";
  const startEtcd = () => {
    etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url);
  };
  const stopEtcd = async () => {
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    etcd = null;
  };
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    startEtcd();
    const conf = JSON.stringify({ Network: "10.247.0.0/16", Backend: { Type: "vxlan" } });
    await waitFor(
      "etcd up",
      async () =>
        (await nsRun(c.underlay, ["etcdctl", "--endpoints", url, "put", "/coreos.com/network/config", conf]))
          .code === 0,
    );
    const flags = ["--etcd-endpoints", url, "--resync-interval", "1"];
    c.start(a, flags);
    c.start(b, flags);
    await c.waitReady(a);
    await c.waitReady(b);
    const subB = await c.subnetOf(b);
    const lease = await nsRun(c.underlay, [
      "etcdctl",
      "--endpoints",
      url,
      "get",
      `/coreos.com/network/subnets/${subB.replace("/", "-")}`,
      "--print-value-only",
    ]);
    assertEquals(JSON.parse(lease.stdout).PublicIP, b.ip);
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(
      "pods ping",
      async () => (await nsRun(pa.ns, ["ping", "-c", "1", "-W", "1", pb.ip])).code === 0,
    );

    await stopEtcd();
    await waitFor("readyz 503 while etcd is down", async () => (await c.http(a, "/readyz"))[0] === 503);
    const [, why] = await c.http(a, "/readyz");
    assertStringIncludes(why, "store is unreachable");
    const [, m] = await c.http(a, "/metrics");
    assertStringIncludes(m, "\nflanctl_store_up 0\n");
    const r = await nsRun(pa.ns, ["ping", "-c", "20", "-i", "0.05", "-W", "1", pb.ip]);
    assertStringIncludes(r.stdout, "20 received", "data plane unaffected while etcd is down");

    startEtcd();
    await c.waitReady(a);
    assert(a.log.some((l) => l.includes("lease store reachable again")), a.log.join("\n"));
  } finally {
    await stopEtcd();
    await c.close();
  }
});
