/**
 * End to end in the lab, VXLAN backend with etcd (Debian's etcd, started by the lab inside its underlay
 * namespace): pods ping across nodes; then etcd is killed. The data plane must not notice, the daemons
 * must report not-ready on /readyz while the store is gone, and become ready again when it returns.
 *
 * The issue describes a 60 s outage; the test keeps etcd down for 15 s to bound the suite's run time. What
 * is checked does not depend on the length: the daemons notice the outage within a few seconds (their
 * watch breaks) and nothing in the kernel depends on the store, so a longer outage adds no coverage.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctlCmd } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { probeHealth, startEtcd, stopEtcd } from "../lib/lab/services.ts";
import { actualEntries, pingAllPods, startPing, waitUntil } from "./lab_verify.ts";

const OUTAGE_MS = 15_000;

needsRoot.test({
  name: "lab e2e: vxlan + etcd (2 nodes x 1 pod), etcd outage",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("te", ["--nodes", "2", "--pods-per-node", "1", "--store", "etcd"], 2, async (s, name) => {
      // The leases are in etcd; on a node (lab exec) the store is found with no flags.
      const r = await labExec(name, "node1", flanctlCmd("lease", "list", "-o", "json"));
      assertEquals(r.code, 0, r.stderr);
      assertEquals((JSON.parse(r.stdout) as unknown[]).length, 2);
      const before = await Promise.all(s.nodes.map((n) => actualEntries(s, n)));

      const p = startPing(s.pods[0].netns, s.pods[1].ip!, 0.05);
      let stats;
      try {
        await stopEtcd(s, true);
        const down = Date.now();
        for (const n of s.nodes) {
          await waitUntil(
            `${n.name} not ready without etcd`,
            async () => (await probeHealth(s, n, "/readyz")) !== 200,
          );
          assertEquals(await probeHealth(s, n, "/healthz"), 200);
        }
        await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (Date.now() - down))));
        assertEquals(await Promise.all(s.nodes.map((n) => actualEntries(s, n))), before);
        await startEtcd(s);
        for (const n of s.nodes) {
          await waitUntil(
            `${n.name} ready again`,
            async () => (await probeHealth(s, n, "/readyz")) === 200,
            60_000,
          );
        }
      } finally {
        stats = await p.stop();
      }
      assert(stats.transmitted > 200, stats.output);
      assertEquals(stats.lost, 0, `lost packets during the etcd outage: ${stats.output}`);
      assertEquals(await Promise.all(s.nodes.map((n) => actualEntries(s, n))), before);
      await pingAllPods(s);
    });
  },
});
