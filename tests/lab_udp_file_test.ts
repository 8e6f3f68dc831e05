/**
 * End to end in the lab, UDP backend with the file store (3 nodes x 1 pod): every pod reaches every pod
 * on the other nodes (ping, TCP), every node holds flannel0 (a TUN) and a route per peer via it, and a
 * daemon restart under a 100 pps cross-node ping costs only the packets of the gap (printed: docs/udp.md's
 * number), after which traffic flows again with the same kernel state.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctlCmd, ipJson } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { loadState } from "../lib/lab/state.ts";
import { actualEntries, pingAllPods, startPing, tcpAcross, waitEntries, waitUntil } from "./lab_verify.ts";
import { ping } from "../lib/lab/check.ts";
import { startDaemon, stopDaemon, waitDaemonReady } from "../lib/lab/services.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

needsRoot.test({
  name: "lab e2e: udp + file store (3 nodes x 1 pod), restart gap",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab("tu", ["--nodes", "3", "--pods-per-node", "1", "--backend", "udp"], 6, async (s0, name) => {
      let s = s0;
      for (const n of s.nodes) await waitEntries(s, n, s.nodes.filter((x) => x !== n));
      for (const n of s.nodes) {
        const l = (await ipJson<{ linkinfo?: { info_kind: string }; mtu: number }[]>(
          n.netns,
          "-d",
          "link",
          "show",
          "flannel0",
        ))[0];
        assertEquals(l.linkinfo?.info_kind, "tun", n.name);
      }
      assertEquals(await pingAllPods(s), 6);
      await tcpAcross(s, "node1-pod1", "node2-pod1");
      await tcpAcross(s, "node3-pod1", "node1-pod1");

      const node = (name: string) => s.nodes.find((n) => n.name === name)!;
      const dst = s.pods.find((p) => p.name === "node2-pod1")!.ip!;
      const src = s.pods.find((p) => p.name === "node1-pod1")!.netns;
      const before = await actualEntries(s, node("node2"));
      const p = startPing(src, dst, 0.01);
      let res;
      try {
        await waitUntil("ping running", async () => await ping(src, dst, 1));
        await stopDaemon(s, node("node2"));
        await startDaemon(s, node("node2"));
        await waitDaemonReady(s, node("node2"));
        s = loadState(s.name);
        await waitUntil("traffic flows again", async () => await ping(src, dst, 1));
        await new Promise((r) => setTimeout(r, 1000));
      } finally {
        res = await p.stop();
      }
      assert(res.transmitted >= 50, `too few packets: ${res.output}`);
      console.log(
        `udp restart gap at 100 pps: ${res.lost} of ${res.transmitted} packets lost`,
      );
      assertEquals(await actualEntries(s, node("node2")), before);
      assertEquals(await pingAllPods(s), 6);

      // doctor: flannel0 and the port are fine while the daemon runs; a TUN without its daemon is critical.
      type Rep = { checks: { id: FindingId; severity: string; detail: string }[] };
      const doctor = async (n: string) =>
        (JSON.parse((await labExec(name, n, flanctlCmd("doctor", "-o", "json"))).stdout) as Rep).checks;
      const live = await doctor("node2");
      // The backend's own routes (the Network via flannel0, our /32 on it) are no overlap to delete.
      for (const id of ["udp-device", "udp-port", "pod-network-routes"]) {
        assertEquals(live.find((c) => c.id === id)?.severity, "ok", JSON.stringify(live));
      }
      const fixes = live.flatMap((c) => (c as { fix?: string[] }).fix ?? []);
      assert(!fixes.some((f) => f.includes("route del") && f.includes("flannel0")), fixes.join("\n"));
      await stopDaemon(s, node("node2"));
      const dead = (await doctor("node2")).find((c) => c.id === "udp-device")!;
      assertEquals(dead.severity, "critical");
      assert(dead.detail.includes("no process holds flannel0"), dead.detail);
      await startDaemon(s, node("node2"));
      await waitDaemonReady(s, node("node2"));
    });
  },
});
