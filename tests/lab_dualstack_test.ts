/**
 * End to end in the lab with IPv6: `lab up --ip-family dual` and `--ip-family ipv6`, vxlan and host-gw
 * (file store). Every pod reaches every pod on other nodes over each family (ping and TCP); the kernel's
 * entries equal the leases for both families; hand-deleted IPv6 route/NDP/FDB entries are repaired; a
 * daemon restart under a 100 pps ping6 loses nothing; `lab status` shows both addresses; `lab down`
 * leaves nothing behind.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, nsSh } from "./netns.ts";
import { withLab } from "./lab_fixture.ts";
import type { LabState, LabStatusJson, NodeState } from "../lib/lab/types.ts";
import { pingAllPods, restartUnderPing, tcpAcross, waitEntries } from "./lab_verify.ts";
import { actualEntries6, pingAllPods6, tcpAcross6, V6_DEV, waitEntries6 } from "./lab_verify6.ts";
import { nodeSubnet6 } from "../lib/lab/status.ts";
import { IPNet } from "../lib/base/cidr.ts";

const others = (s: LabState, n: NodeState) => s.nodes.filter((x) => x !== n);

for (const backend of ["vxlan", "host-gw"] as const) {
  for (const family of ["dual", "ipv6"] as const) {
    needsRoot.test({
      name: `lab e2e: ${backend} --ip-family ${family} (3 nodes x 1 pod)`,
      sanitizeOps: false,
      sanitizeResources: false,
      async fn(t) {
        const fam = ["--backend", backend, "--ip-family", family];
        // 3 nodes x 1 pod: each pod pings the 2 other nodes' pods over each family it has.
        const pings = family === "dual" ? 12 : 6;
        await withLab("t6", ["--nodes", "3", "--pods-per-node", "1", ...fam], pings, async (s, name) => {
          const node = (x: string) => s.nodes.find((n) => n.name === x)!;

          await t.step("lab status shows both families' addresses and subnets", async () => {
            const r = await flanctl(["lab", "status", "--name", name, "-o", "json"]);
            assertEquals(r.code, 0, r.stderr);
            const st = JSON.parse(r.stdout) as LabStatusJson;
            for (const n of st.nodes) {
              assert(n.publicIPv6?.startsWith("fc00:1ab:"), `public IPv6 ${n.publicIPv6}`);
              assert(
                n.subnetIPv6 && IPNet.parse("fc00:244::/48").contains(IPNet.parse(n.subnetIPv6)),
                n.subnetIPv6!,
              );
              assertEquals(n.subnet === null, family === "ipv6", `IPv4 subnet ${n.subnet}`);
            }
            for (const p of st.pods) {
              const sn6 = IPNet.parse(st.nodes.find((n) => n.name === p.node)!.subnetIPv6!);
              assert(p.ipv6 && sn6.contains(IPNet.parse(`${p.ipv6}/128`)), `${p.ipv6} in ${sn6}`);
              assertEquals(p.ip === null, family === "ipv6", `pod IPv4 ${p.ip}`);
            }
            const table = await flanctl(["lab", "status", "--name", name]);
            assertStringIncludes(table.stdout, st.nodes[0].publicIPv6!);
            assertStringIncludes(table.stdout, st.pods[0].ipv6!);
          });

          await t.step("pods reach every other node's pod over each family, ping and TCP", async () => {
            await pingAllPods6(s);
            await tcpAcross6(s, "node1-pod1", "node3-pod1");
            if (family === "dual") {
              await pingAllPods(s);
              await tcpAcross(s, "node3-pod1", "node2-pod1");
            }
          });

          await t.step("kernel entries equal the leases, both families", async () => {
            for (const n of s.nodes) {
              await waitEntries6(s, n, others(s, n));
              if (family === "dual") await waitEntries(s, n, others(s, n));
            }
            if (family === "ipv6") {
              const links = await nsSh(node("node1").netns, "ip", "-br", "link");
              assert(!links.includes("flannel.1"), "no IPv4 VXLAN device in an IPv6-only lab");
            }
          });

          await t.step("hand-deleted IPv6 route, NDP and FDB entries are repaired", async () => {
            const n1 = node("node1"), n2 = node("node2"), n3 = node("node3");
            const sub2 = nodeSubnet6(n2)!, sub3 = nodeSubnet6(n3)!;
            await nsSh(n1.netns, "ip", "-6", "route", "del", sub2);
            if (backend === "vxlan") {
              await nsSh(
                n1.netns,
                "ip",
                "-6",
                "neigh",
                "del",
                IPNet.parse(sub3).ip.toString(),
                "dev",
                V6_DEV,
              );
              const mac2 = (await nsSh(n2.netns, "cat", `/sys/class/net/${V6_DEV}/address`)).trim();
              await nsSh(n1.netns, "bridge", "fdb", "del", mac2, "dev", V6_DEV, "dst", n2.publicIPv6!);
            }
            await waitEntries6(s, n1, others(s, n1));
            await pingAllPods6(s);
          });

          await t.step("daemon restart under a 100 pps ping6 loses nothing", async () => {
            const dst = s.pods.find((p) => p.node === "node2")!.ipv6!;
            const src = s.pods.find((p) => p.node === "node1")!.netns;
            await restartUnderPing(
              s,
              [node("node1"), node("node2")],
              src,
              dst,
              () => actualEntries6(s, node("node1")),
            );
          });
        });
      },
    });
  }
}
