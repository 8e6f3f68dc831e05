/**
 * End to end in the lab, VXLAN backend with the file store: the full set of checks — pod-to-pod pings and
 * TCP across nodes, kernel state per peer, daemon restart under a 100 pps ping without loss, repair of
 * hand-deleted entries and device, lease revocation, a node joining, `lab status`/`lab exec`, and a
 * `lab down` that leaves nothing behind.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, ipJson, nsSh } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { loadState } from "../lib/lab/state.ts";
import { nodeSubnet } from "../lib/lab/status.ts";
import type { LabState, LabStatusJson, NodeState } from "../lib/lab/types.ts";
import { actualEntries, pingAllPods, restartUnderPing, tcpAcross, waitEntries } from "./lab_verify.ts";
import { ping } from "../lib/lab/check.ts";
import { stopDaemon } from "../lib/lab/services.ts";

needsRoot.test({
  name: "lab e2e: vxlan + file store (3 nodes x 2 pods)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await withLab("tv", ["--nodes", "3", "--pods-per-node", "2"], 12, async (state, name) => {
      let s: LabState = state;
      const node = (x: string) => s.nodes.find((n) => n.name === x)!;
      const others = (n: NodeState) => s.nodes.filter((x) => x !== n);

      await t.step("lab status -o json has the documented shape", async () => {
        const r = await flanctl(["lab", "status", "--name", name, "-o", "json"]);
        assertEquals(r.code, 0, r.stderr);
        const st = JSON.parse(r.stdout) as LabStatusJson;
        assertEquals(Object.keys(st).sort(), ["nodes", "pods"]);
        assertEquals(st.nodes.length, 3);
        assertEquals(st.pods.length, 6);
        for (const n of st.nodes) {
          assertEquals(Object.keys(n), ["name", "netns", "publicIP", "subnet", "daemon"]);
          assertEquals(n.daemon, { pid: node(n.name).daemonPid!, state: "running" });
          assert(/^10\.244\.\d+\.0\/24$/.test(n.subnet ?? ""), `subnet ${n.subnet}`);
        }
        for (const p of st.pods) {
          assertEquals(Object.keys(p), ["name", "node", "netns", "ip"]);
          const subnet = st.nodes.find((n) => n.name === p.node)!.subnet!;
          assert(p.ip?.startsWith(subnet.split(".").slice(0, 3).join(".") + "."), `${p.ip} in ${subnet}`);
        }
        assertEquals(new Set(st.nodes.map((n) => n.subnet)).size, 3);
      });

      await t.step(
        "lab exec shows the node's own subnet.env at the default path, exit code passes",
        async () => {
          for (const n of s.nodes) {
            const r = await labExec(name, n.name, ["cat", "/run/flannel/subnet.env"]);
            assertEquals(r.code, 0, r.stderr);
            assertEquals(r.stdout, Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`));
          }
          // The lab's file store is /var/lib/flanctl on a node: `flanctl lease list` needs no flags.
          const l = await labExec(name, "node2", flanctlCmd("lease", "list", "-o", "json"));
          assertEquals(l.code, 0, l.stderr);
          const ips = (JSON.parse(l.stdout) as { publicIP: string }[]).map((x) => x.publicIP).sort();
          assertEquals(ips, s.nodes.map((n) => n.publicIP).sort());
          const r = await labExec(name, "node1-pod1", ["sh", "-c", "ip -4 -o addr show eth0; exit 3"]);
          assertEquals(r.code, 3);
          assertStringIncludes(r.stdout, s.pods.find((p) => p.name === "node1-pod1")!.ip!);
          // Nothing was mounted in the root mount namespace.
          const mounts = Deno.readTextFileSync("/proc/self/mountinfo");
          assert(!mounts.includes(s.dir), "lab dir mounted in the root mount namespace");
        },
      );

      await t.step("every pod pings every pod on other nodes; TCP crosses nodes", async () => {
        await pingAllPods(s);
        await tcpAcross(s, "node1-pod1", "node3-pod2");
      });

      await t.step("kernel state on every node equals the expected entries for every peer", async () => {
        for (const n of s.nodes) await waitEntries(s, n, others(n));
      });

      await t.step("daemon restart under a 100 pps cross-node ping loses nothing", async () => {
        const dst = s.pods.find((p) => p.name === "node2-pod1")!.ip!;
        const nodes = [node("node1"), node("node2")];
        await restartUnderPing(s, nodes, s.pods[0].netns, dst, () => actualEntries(s, node("node1")));
      });

      await t.step(
        "hand-deleted route, ARP, FDB entry and flannel.1 are repaired; pings resume",
        async () => {
          s = loadState(name);
          const n1 = node("node1");
          const n2 = node("node2");
          const n3 = node("node3");
          const sub2 = (await actualEntries(s, n1)).find((l) =>
            l.startsWith("route") && l.includes(sub(n2))
          )!;
          assert(sub2, "route to node2 present");
          const vtep3 =
            (await ipJson<{ address: string }[]>(n3.netns, "link", "show", "flannel.1"))[0].address;
          const mac2 =
            (await ipJson<{ address: string }[]>(n2.netns, "link", "show", "flannel.1"))[0].address;
          await nsSh(n1.netns, "ip", "route", "del", sub(n2));
          await nsSh(n1.netns, "ip", "neigh", "del", sub(n3).split("/")[0], "dev", "flannel.1");
          await nsSh(n1.netns, "bridge", "fdb", "del", mac2, "dev", "flannel.1", "dst", n2.publicIP);
          assert(vtep3.length === 17);
          await waitEntries(s, n1, others(n1));
          await nsSh(n1.netns, "ip", "link", "del", "flannel.1");
          await waitEntries(s, n1, others(n1));
          await pingAllPods(s);
        },
      );

      await t.step(
        "a revoked lease removes the node's entries on every peer; a new node is learned",
        async () => {
          const n3 = node("node3");
          await stopDaemon(s, n3);
          const r = await flanctl(["lease", "revoke", sub(n3), ...s.storeFlags]);
          assertEquals(r.code, 0, r.stderr);
          for (const n of [node("node1"), node("node2")]) {
            await waitEntries(s, n, others(n).filter((x) => x !== n3));
          }
          const add = await flanctl(["lab", "add-node", "--name", name, "--pods", "1"]);
          assertEquals(add.code, 0, `${add.stdout}\n${add.stderr}`);
          s = loadState(name);
          const n4 = node("node4");
          const live = s.nodes.filter((x) => x.name !== "node3");
          for (const n of live) await waitEntries(s, n, live.filter((x) => x !== n));
          const p4 = s.pods.find((p) => p.node === "node4")!;
          for (const p of s.pods.filter((p) => p.node !== "node4" && p.node !== "node3")) {
            assert(await ping(p.netns, p4.ip!), `${p.name} -> ${p4.name}`);
          }
          assert(n4.publicIP !== n3.publicIP && n4.publicIP !== node("node2").publicIP);
        },
      );
    });
  },
});

/** The node's subnet ("10.244.2.0/24") from its subnet.env. */
function sub(n: NodeState): string {
  const subnet = nodeSubnet(n);
  if (!subnet) throw new Error(`${n.name} has no subnet.env`);
  return subnet;
}
