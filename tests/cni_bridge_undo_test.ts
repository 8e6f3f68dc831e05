/**
 * The bridge plugin's ADD failing late — after the veth pair exists and IPAM has allocated — leaves nothing
 * half-made: no veth in the node or the pod, no host-local allocation, no masquerade chain. Two late
 * failures: an address the pod's kernel refuses (IPv6 disabled in the pod netns), and the masquerade step
 * (iptables-restore not on PATH). A successful ADD before each makes the shared state (bridge, gateway
 * addresses) that a failed ADD rightly keeps.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cni, cniOk, listFiles, tempDir } from "./cni_helpers.ts";
import { ipJson, linkNames, nsSh, withNetns } from "./netns.ts";

type J = Record<string, unknown>;

function conf(dataDir: string, ipMasq: boolean): J {
  return {
    cniVersion: "1.0.0",
    name: "undo-net",
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ipMasq,
    ipam: {
      type: "host-local",
      dataDir,
      ranges: [[{ subnet: "10.253.1.0/24" }], [{ subnet: "fd00:253:1::/64" }]],
    },
  };
}

/** What a failed ADD must not change: links of node and pod, node addresses, IPAM files, nat rules. */
async function snapshot(node: string, pod: string, dataDir: string) {
  return {
    node: (await linkNames(node)).sort(),
    pod: (await linkNames(pod)).sort(),
    // Addresses without DAD's `tentative` flag: whether an IPv6 address is still tentative (about a second
    // after it was added) depends on timing, not on the plugin.
    addrs: (await ipJson<J[]>(node, "addr")).map((l) =>
      JSON.stringify((l.addr_info as J[]).map(({ tentative: _, ...a }) => a))
    ).sort(),
    files: listFiles(dataDir),
    nat: (await nsSh(node, "iptables-save", "-t", "nat")).split("\n").filter((l) => l.startsWith("-A")),
  };
}

needsRoot.test("bridge ADD: a late failure (address refused, masquerade failing) undoes veth, IPAM and chain", () =>
  withNetns(async (fx) => {
    const node = await fx.add("bun"), ok = await fx.add("bup"), pod = await fx.add("bup");
    const d = tempDir();
    try {
      const dir = `${d.path}/ipam`;
      const call = (netns: string, id: string, ipMasq: boolean, env?: Record<string, string>, extra?: J) => ({
        plugin: "bridge",
        command: "ADD",
        node,
        netns,
        containerId: id,
        conf: { ...conf(dir, ipMasq), ...extra },
        env,
      });
      // A pod that works: the bridge, its gateway addresses and ip_forward exist from here on.
      const first = await cniOk(call(ok, "good", true));
      assertEquals((first?.ips as J[]).length, 2);
      const before = await snapshot(node, pod, dir);
      assert(before.nat.some((l) => l.includes("CNI-")), "the first pod has its chain");

      // 1. The pod's kernel refuses IPv6 addresses: the container step fails after veth and IPAM.
      await nsSh(
        pod,
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
      );
      let r = await cni(call(pod, "refused", true));
      assertEquals(r.code, 1, r.stdout + r.stderr);
      assertEquals(r.json?.code, 103, r.stdout);
      assertStringIncludes(String(r.json?.msg), "configure container interface");
      assertEquals(await snapshot(node, pod, dir), before, "nothing of the failed ADD is left");
      await nsSh(
        pod,
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=0",
        "net.ipv6.conf.default.disable_ipv6=0",
      );

      // 2. The masquerade step (the last kernel step) fails: iptables-restore is not on the plugin's PATH.
      // The backend is named: by default a node without the iptables tools masquerades with nftables.
      r = await cni(call(pod, "nomasq", true, { PATH: `${d.path}/empty` }, { ipMasqBackend: "iptables" }));
      assertEquals(r.code, 1, r.stdout + r.stderr);
      assertStringIncludes(`${r.json?.msg} ${r.json?.details}`, "iptables");
      assertEquals(await snapshot(node, pod, dir), before, "nothing of the failed ADD is left");

      // The same ADD with a working PATH succeeds: the failures above were the injected ones.
      await cniOk(call(pod, "nomasq", true));
      assertEquals((await snapshot(node, pod, dir)).pod.includes("eth0"), true);
    } finally {
      d.cleanup();
    }
  }));
