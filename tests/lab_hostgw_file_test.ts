/**
 * End to end in the lab, host-gw backend with the file store: pods ping across nodes, TCP crosses nodes,
 * each node routes every peer subnet via the peer's public IP, and `lab down` leaves nothing.
 */
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, run } from "./netns.ts";
import { loadState } from "../lib/lab/state.ts";
import { labRoot } from "../lib/lab/paths.ts";
import { labLeftovers, pingAllPods, tcpAcross, waitEntries } from "../lib/lab/verify.ts";

Deno.test({
  name: "lab e2e: host-gw + file store (2 nodes x 2 pods)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const name = `th${crypto.randomUUID().slice(0, 6)}`;
    const dir = `${labRoot()}/${name}`;
    try {
      const up = await flanctl([
        "lab",
        "up",
        "--name",
        name,
        "--nodes",
        "2",
        "--pods-per-node",
        "2",
        "--backend",
        "host-gw",
      ]);
      assertEquals(up.code, 0, `lab up failed:\n${up.stdout}\n${up.stderr}`);
      assertStringIncludes(up.stdout, "all 4 ok");
      const s = loadState(name);
      for (const n of s.nodes) await waitEntries(s, n, s.nodes.filter((x) => x !== n), 10_000);
      // host-gw makes no VXLAN device.
      for (const n of s.nodes) {
        const r = await run(["ip", "-n", n.netns, "link", "show", "flannel.1"]);
        assertEquals(r.code !== 0, true, `${n.name} has flannel.1`);
      }
      assertEquals(await pingAllPods(s), 8);
      await tcpAcross(s, "node2-pod2", "node1-pod1");
    } finally {
      const d = await run(flanctlCmd("lab", "down", "--name", name));
      assertEquals(d.code, 0, d.stderr);
    }
    assertEquals(await labLeftovers(name, dir), []);
    // Idempotent: a second down on a removed lab succeeds.
    assertEquals((await run(flanctlCmd("lab", "down", "--name", name))).code, 0);
  },
});
