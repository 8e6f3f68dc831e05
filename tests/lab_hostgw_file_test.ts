/**
 * End to end in the lab, host-gw backend with the file store and a 10 s lease TTL: pods ping across nodes,
 * TCP crosses nodes, each node routes every peer subnet via the peer's public IP; live daemons keep their
 * leases through several TTLs; a crashed node's lease expires and every peer removes its route; `lab
 * down` leaves nothing (and is idempotent).
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { flanctl, run } from "./netns.ts";
import { labDown, withLab } from "./lab_fixture.ts";
import { stopDaemon } from "../lib/lab/services.ts";
import { pingAllPods, tcpAcross, waitEntries } from "./lab_verify.ts";

const TTL_S = 10;

needsRoot.test({
  name: "lab e2e: host-gw + file store (3 nodes x 1 pod), lease expiry",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const up = ["--nodes", "3", "--pods-per-node", "1", "--backend", "host-gw", "--lease-ttl", String(TTL_S)];
    const name = await withLab("th", up, 6, async (s) => {
      for (const n of s.nodes) await waitEntries(s, n, s.nodes.filter((x) => x !== n));
      // host-gw makes no VXLAN device.
      for (const n of s.nodes) {
        const r = await run(["ip", "-n", n.netns, "link", "show", "flannel.1"]);
        assertEquals(r.code !== 0, true, `${n.name} has flannel.1`);
      }
      assertEquals(await pingAllPods(s), 6);
      await tcpAcross(s, "node2-pod1", "node1-pod1");

      // node3 crashes: its lease is no longer renewed and expires within one TTL; the peers drop its route.
      const [n1, n2, n3] = s.nodes;
      await stopDaemon(s, n3, true);
      const crashed = Date.now();
      await waitEntries(s, n1, [n2], (TTL_S + 20) * 1000);
      await waitEntries(s, n2, [n1], (TTL_S + 20) * 1000);
      // The survivors renewed their own leases throughout (more than two TTLs by now or soon).
      await new Promise((r) => setTimeout(r, Math.max(0, 2 * TTL_S * 1000 - (Date.now() - crashed))));
      await waitEntries(s, n1, [n2], 1000);
      const leases = await flanctl(["lease", "list", "-o", "json", ...s.storeFlags]);
      assertEquals(
        (JSON.parse(leases.stdout) as { publicIP: string }[]).map((l) => l.publicIP).sort(),
        [n1.publicIP, n2.publicIP].sort(),
      );
      await tcpAcross(s, "node1-pod1", "node2-pod1");
    });
    // Idempotent: a second down on a removed lab succeeds.
    assertEquals((await labDown(name)).code, 0);
  },
});
