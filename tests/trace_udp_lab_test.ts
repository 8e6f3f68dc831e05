/**
 * `flanctl lab trace` with the UDP backend: a healthy pod → pod path goes through flannel0 and the peer
 * table to the peer's PublicIP:8285, then the remote flannel0 and cni0; a deleted peer route via
 * flannel0 is found at the host route (the Network route still catches the packet, but disagrees with
 * the lease), and a killed remote daemon is found at the remote daemon with its flannel0 left ownerless.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { sh } from "./netns.ts";
import { killLabProc, withLab } from "./lab_fixture.ts";
import { brokenAt, labTrace, podToPodSteps, SLOW, steps, wholeTrace } from "./trace_fixture.ts";
import { nodeSubnet } from "../lib/lab/status.ts";

needsRoot.test({
  name:
    "trace (udp lab): healthy path via flannel0, peer route deleted, INPUT drops 8285, remote daemon killed",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "tq",
      ["--nodes", "2", "--pods-per-node", "1", "--backend", "udp", ...SLOW],
      undefined,
      async (s, name) => {
        const n1 = s.nodes[0].netns;
        const peerSub = nodeSubnet(s.nodes[1])!;
        const healthy = await wholeTrace(name, "node1-pod1", "node2-pod1");
        assertEquals(
          steps(healthy),
          podToPodSteps(["udp-device", "udp-peer"], ["remote-udp-port", "remote-udp-device"]),
        );
        const route = healthy.hops.find((h) => h.step === "host-route")!;
        const peerGw = peerSub.split("/")[0];
        assertEquals(route.entry, `${peerSub} via ${peerGw} dev flannel0 onlink table main`);
        const dev = healthy.hops.find((h) => h.step === "udp-device")!;
        assertStringIncludes(dev.entry, "flannel0 tun up mtu");
        assertStringIncludes(dev.detail, "held by pid");
        const peer = healthy.hops.find((h) => h.step === "udp-peer")!;
        assertStringIncludes(peer.entry, `${peerSub} → ${s.nodes[1].publicIP}:8285`);
        assertEquals(
          healthy.hops.find((h) => h.step === "remote-route")!.detail.includes("from flannel0"),
          true,
        );

        // The peer route via flannel0 deleted: the Network route still takes the packet into flannel0, but
        // the host route disagrees with the lease.
        await sh("ip", "-n", n1, "route", "del", peerSub, "dev", "flannel0");
        let h = brokenAt(
          await labTrace(name, "node1-pod1", "node2-pod1"),
          "node1",
          "host-route",
          "dev flannel0",
        );
        assertStringIncludes(h.detail, `expected ${peerSub} via ${peerGw} dev flannel0 onlink`);
        await sh("ip", "-n", n1, "route", "add", peerSub, "via", peerGw, "dev", "flannel0", "onlink");
        await wholeTrace(name, "node1-pod1", "node2-pod1"); // repaired: whole again

        // INPUT on node2 drops the UDP port: found at the remote udp-port hop with the doctor's fix.
        const n2 = s.nodes[1].netns;
        const dropInput = (op: "-I" | "-D") =>
          sh(
            "ip",
            "netns",
            "exec",
            n2,
            "iptables",
            op,
            "INPUT",
            "-p",
            "udp",
            "--dport",
            "8285",
            "-j",
            "DROP",
          );
        await dropInput("-I");
        h = brokenAt(
          await labTrace(name, "node1-pod1", "node2-pod1"),
          "node2",
          "remote-udp-port",
          "dropped at INPUT by iptables-nft filter INPUT rule 1 DROP",
        );
        await dropInput("-D");
        await wholeTrace(name, "node1-pod1", "node2-pod1"); // INPUT repaired

        // The remote daemon killed: flannel0 (persistent) stays, but nobody reads it.
        const d2 = await killLabProc(s, "daemon node2");
        const t = await labTrace(name, "node1-pod1", "node2-pod1");
        brokenAt(t, "node2", "daemon", `daemon pid ${d2}`);
        h = t.hops.find((x) => x.step === "remote-udp-device")!;
        assertEquals(h.ok, false, JSON.stringify(t, null, 2));
        assertStringIncludes(h.detail, "no process holds flannel0 open");
      },
    );
  },
});
