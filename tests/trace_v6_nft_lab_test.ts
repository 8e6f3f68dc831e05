/**
 * `flanctl lab trace` over IPv6 in nftables mode (dual-stack vxlan lab, `--net-conf` with EnableNFTables):
 * the IPv6 masquerade hop reads flannel's table ip6 flannel-ipv6 (not ip6tables); `--probe` to the pod's
 * IPv6 address sends one ping (an IPv6 destination is checked against the IPv6 network, not the IPv4 one)
 * and sees the reply on the destination pod's eth0; `nft delete table ip6 flannel-ipv6` on node1 is found
 * at node1's masquerade hop with the nft-rules why/fix.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertStringIncludes } from "./assert.ts";
import { flanctl, nsRun } from "./netns.ts";
import { DUAL_NFT_NETCONF, withLab, withNetConf } from "./lab_fixture.ts";
import { brokenAt, labTrace, podIPv6, SLOW, wholeTrace } from "./trace_fixture.ts";

needsRoot.test({
  name:
    "trace (dual-stack vxlan lab, nftables mode): IPv6 walk reads table ip6 flannel-ipv6; --probe over IPv6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withNetConf(DUAL_NFT_NETCONF, async (file) => {
      await withLab(
        "t6n",
        ["--nodes", "2", "--pods-per-node", "1", "--net-conf", file, ...SLOW],
        undefined,
        async (s, name) => {
          const dst = podIPv6(s, 1);
          const t = await wholeTrace(name, "node1-pod1", dst);
          const masq = t.hops.find((h) => h.step === "masquerade")!;
          assertStringIncludes(masq.entry, "nft: table ip6 flannel-ipv6 has flannel's rules");
          // --probe (table output; the JSON view is the contract, without the probe).
          const probe = await flanctl(["lab", "trace", "--name", name, "--probe", "node1-pod1", dst]);
          assertStringIncludes(
            probe.stdout,
            `probe: reply received; last seen rx on eth0 in ${s.pods[1].netns}`,
          );

          const n1 = s.nodes.find((n) => n.name === "node1")!;
          const del = await nsRun(n1.netns, ["nft", "delete", "table", "ip6", "flannel-ipv6"]);
          assert(del.code === 0, del.stderr);
          const b = await labTrace(name, "node1-pod1", dst);
          const h = brokenAt(
            b,
            "node1",
            "masquerade",
            "nft: EnableNFTables: table ip6 flannel-ipv6 does not exist",
          );
          assertStringIncludes(h.detail, "nftables mode: table ip6 flannel-ipv6");
        },
      );
    });
  },
});
