/**
 * The bridge's `"ipMasqBackend": "nftables"` beside the reference v1.10 (tests/cni_helpers.ts REF_DIR), each
 * in its own node namespace: the same `inet cni_plugins_masquerade` table and no iptables chain; DEL by the
 * reference removes the rules ours made and the other way round; CHECK finds a missing rule; GC removes the
 * rules of attachments that are gone; an unknown backend fails before any change.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cni, cniOk, refSpeaks11, requireRefPlugins, sideBySide, tempDir } from "./cni_helpers.ts";
import { nsRun, nsSh, withNetns } from "./netns.ts";

// Debian's 1.1.1 predates ipMasqBackend: only the pinned v1.10 build is compared with.
const HAVE_REF = requireRefPlugins(["bridge", "host-local"]) && await refSpeaks11();

type J = Record<string, unknown>;

function conf(dataDir: string, backend: unknown = "nftables", version = "1.1.0"): J {
  return {
    cniVersion: version,
    name: "nft-net",
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ipMasq: true,
    ipMasqBackend: backend,
    ipam: {
      type: "host-local",
      dataDir,
      ranges: [[{ subnet: "10.97.1.0/24" }], [{ subnet: "fd97:1::/64" }]],
    },
  };
}

/** The masquerade table as nft prints it (no handles), or "" when there is none. */
async function masqTable(ns: string): Promise<string> {
  const r = await nsRun(ns, ["nft", "list", "table", "inet", "cni_plugins_masquerade"]);
  return r.code === 0 ? r.stdout : "";
}

/** The rules of chain masq_checks, one line each. */
async function checks(ns: string): Promise<string[]> {
  const r = await nsRun(ns, ["nft", "list", "chain", "inet", "cni_plugins_masquerade", "masq_checks"]);
  return r.code === 0
    ? r.stdout.split("\n").map((l) => l.trim()).filter((l) => / saddr .* masquerade /.test(l))
    : [];
}

/** The CNI chains iptables and ip6tables hold. */
async function iptChains(ns: string): Promise<string[]> {
  const out: string[] = [];
  for (const tool of ["iptables-save", "ip6tables-save"]) {
    out.push(...(await nsSh(ns, tool, "-t", "nat")).split("\n").filter((l) => l.includes("CNI-")));
  }
  return out;
}

needsRoot.test({
  name: "cni bridge ipMasqBackend nftables: the reference's table and rules, each DEL removes the other's",
  ignore: !HAVE_REF,
  fn: () =>
    sideBySide("bn", async ({ node: nodeA, pod: podA, dir: dirA }, { node: nodeB, pod: podB, dir: dirB }) => {
      const call = { plugin: "bridge", containerId: "nft1", ifname: "eth0" };
      const A = { ...call, node: nodeA, netns: podA, conf: conf(dirA) };
      const B = { ...call, node: nodeB, netns: podB, conf: conf(dirB), ref: true };
      const ours = await cniOk({ ...A, command: "ADD" });
      await cniOk({ ...B, command: "ADD" });
      const table = await masqTable(nodeA);
      assertEquals(table, await masqTable(nodeB), "the same table, chains, rules and comments");
      assertEquals((await checks(nodeA)).length, 2, table);
      assertStringIncludes(table, "ip saddr 10.97.1.2 ip daddr != 10.97.1.0/24 masquerade");
      assertStringIncludes(table, "ip6 saddr fd97:1::2 ip6 daddr != fd97:1::/64 masquerade");
      assertStringIncludes(table, "net: nft-net, if: eth0, id: nft1");
      assertEquals(await iptChains(nodeA), [], "no iptables chain with the nftables backend");

      // CHECK: the rules are there; without them, CHECK says so.
      const chk = { ...A, command: "CHECK", conf: { ...conf(dirA), prevResult: ours } };
      assertEquals((await cni(chk)).code, 0);
      await nsSh(nodeA, "nft", "flush", "chain", "inet", "cni_plugins_masquerade", "masq_checks");
      const bad = await cni(chk);
      assertEquals(bad.json?.code, 105, bad.stdout);
      assertStringIncludes(bad.stdout, "masquerade rule for 10.97.1.2 missing");

      // Ours made the rules, the reference's DEL removes them (in A, the reference's binary, our rules).
      await cniOk({ ...A, command: "ADD", containerId: "nft2", ifname: "eth1" });
      assertEquals((await checks(nodeA)).length, 2);
      await cniOk({ ...A, command: "DEL", containerId: "nft2", ifname: "eth1", ref: true });
      assertEquals(await checks(nodeA), [], "the reference's DEL found our rules");
      // The reference made them, ours removes them.
      await cniOk({ ...B, command: "DEL", ref: false });
      assertEquals(await checks(nodeB), [], "our DEL found the reference's rules");
      await cniOk({ ...A, command: "DEL" });
    }),
});

needsRoot.test("cni bridge ipMasqBackend nftables: GC removes gone attachments' rules; DEL without netns", () =>
  withNetns(async (fx) => {
    const node = await fx.add("bgn"), pod1 = await fx.add("bg1"), pod2 = await fx.add("bg2");
    const d = tempDir();
    try {
      const call = { plugin: "bridge", node, ifname: "eth0", conf: conf(d.path) };
      await cniOk({ ...call, command: "ADD", containerId: "keep", netns: pod1 });
      await cniOk({ ...call, command: "ADD", containerId: "gone", netns: pod2 });
      assertEquals((await checks(node)).length, 4);
      await cniOk({
        ...call,
        command: "GC",
        conf: { ...conf(d.path), "cni.dev/valid-attachments": [{ containerID: "keep", ifname: "eth0" }] },
      });
      const left = await checks(node);
      assertEquals(left.length, 2, left.join("\n"));
      assert(left.every((l) => l.includes("id: keep")), left.join("\n"));
      // DEL without the netns still finds the rules (by the attachment's tag, not by its addresses).
      await cniOk({ ...call, command: "DEL", containerId: "keep" });
      assertEquals(await checks(node), []);
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test("cni bridge ipMasqBackend: another name fails ADD before any change; a number is a bad config", () =>
  withNetns(async (fx) => {
    const node = await fx.add("bun"), pod = await fx.add("bup");
    const d = tempDir();
    try {
      const call = { plugin: "bridge", command: "ADD", node, netns: pod, containerId: "u1", ifname: "eth0" };
      const r = await cni({ ...call, conf: conf(d.path, "ebtables") });
      assertEquals(r.json?.code, 7, r.stdout);
      assertStringIncludes(r.stdout, 'unknown ipmasq backend \\"ebtables\\"');
      const n = await cni({ ...call, conf: conf(d.path, 3) });
      assertEquals(n.json?.code, 7, n.stdout);
      assertEquals(await nsSh(node, "ip", "-o", "link", "show", "type", "veth"), "");
      assertEquals(await masqTable(node), "");
      assertEquals(await iptChains(node), []);
    } finally {
      d.cleanup();
    }
  }));
