/**
 * The portmap plugin side by side with the reference (REF_DIR's portmap: v1.10.0 from install.sh --dev, else
 * Debian's /usr/lib/cni/portmap; iptables mode): the
 * same iptables-save (normalised) and result JSON for the same config and prevResult, ADD by one and DEL
 * by the other, DEL without a netns, CHECK, GC; the nftables backend; bad port mappings → CNI error with
 * nothing installed; UDP conntrack entries cleared on DEL. Each case runs in namespaces of its own.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { cni, cniOk } from "./cni_helpers.ts";
import { nsRun, withNetns } from "./netns.ts";
import { inNetns } from "../lib/sys/netns.ts";
import { deleteConntrack } from "../lib/netlink/conntrack.ts";

const PREV4 = {
  cniVersion: "1.0.0",
  interfaces: [
    { name: "cni0", mac: "aa:bb:cc:dd:ee:01" },
    { name: "eth0", mac: "aa:bb:cc:dd:ee:02", sandbox: "/var/run/netns/pod" },
  ],
  ips: [{ interface: 1, address: "10.244.1.5/24", gateway: "10.244.1.1" }],
};
const PREV46 = {
  ...PREV4,
  ips: [...PREV4.ips, { interface: 1, address: "fd00:10:0:1::5/64", gateway: "fd00:10:0:1::1" }],
};

function conf(extra: Record<string, unknown>, mappings: unknown[], prev: unknown = PREV4) {
  return {
    cniVersion: "1.0.0",
    name: "cbr0",
    type: "portmap",
    capabilities: { portMappings: true },
    ...extra,
    runtimeConfig: { portMappings: mappings },
    prevResult: prev,
  };
}

const BASIC = [
  { hostPort: 18080, containerPort: 8080, protocol: "tcp" },
  { hostPort: 18081, containerPort: 81, protocol: "udp", hostIP: "10.1.1.1" },
  { hostPort: 18082, containerPort: 82, protocol: "tcp" },
];
const MANY = Array.from(
  { length: 20 },
  (_, i) => ({ hostPort: 20000 + i, containerPort: 80 + i, protocol: "tcp" }),
);

/** iptables-save of the nat table without comments and counters, sorted (chain order differs by tool). */
async function natRules(ns: string, v6 = false): Promise<string[]> {
  const out = (await nsRun(ns, [v6 ? "ip6tables-save" : "iptables-save", "-t", "nat"])).stdout;
  return out.split("\n").filter((l) => l && !l.startsWith("#")).map((l) => l.replace(/\[\d+:\d+\]/, ""))
    .sort();
}

/** The CNI rules (any chain named CNI-*, or jumping to one). */
async function cniRules(ns: string, v6 = false): Promise<string[]> {
  return (await natRules(ns, v6)).filter((l) => l.includes("CNI-"));
}

const CASES: [string, Record<string, unknown>, unknown[], unknown][] = [
  ["basic with hostIP", {}, BASIC, PREV4],
  ["snat off", { snat: false }, BASIC, PREV4],
  ["markMasqBit 5", { markMasqBit: 5 }, BASIC, PREV4],
  ["externalSetMarkChain", { externalSetMarkChain: "KUBE-MARK-MASQ" }, BASIC, PREV4],
  ["20 ports (multiport split)", {}, MANY, PREV4],
  [
    "conditionsV4/V6",
    { conditionsV4: ["-s", "192.0.2.0/24"], conditionsV6: ["!", "-s", "2001:db8::/64"] },
    BASIC,
    PREV46,
  ],
  [
    "dual stack",
    {},
    [...BASIC, { hostPort: 18083, containerPort: 83, protocol: "tcp", hostIP: "::1" }],
    PREV46,
  ],
];

needsRoot.test("cni portmap (iptables): same rules and result as the reference", async () => {
  await withNetns(async (fx) => {
    for (const [label, extra, maps, prev] of CASES) {
      const ours = await fx.add("po"), ref = await fx.add("pr");
      if (extra.externalSetMarkChain) {
        for (const ns of [ours, ref]) await nsRun(ns, ["iptables", "-t", "nat", "-N", "KUBE-MARK-MASQ"]);
      }
      const c = conf(extra, maps, prev);
      const a = await cniOk({
        plugin: "portmap",
        command: "ADD",
        node: ours,
        containerId: "c1",
        netns: "pod",
        conf: c,
      });
      const b = await cniOk({
        plugin: "portmap",
        command: "ADD",
        node: ref,
        containerId: "c1",
        netns: "pod",
        conf: c,
        ref: true,
      });
      assertEquals(a, b, `${label}: result JSON`);
      const r4 = await cniRules(ref);
      assert(r4.length > 0, `${label}: the reference installed rules`);
      assertEquals(await cniRules(ours), r4, `${label}: iptables-save`);
      assertEquals(await cniRules(ours, true), await cniRules(ref, true), `${label}: ip6tables-save`);
      // A second ADD (runtime retry) leaves the same rules.
      await cniOk({
        plugin: "portmap",
        command: "ADD",
        node: ours,
        containerId: "c1",
        netns: "pod",
        conf: c,
      });
      assertEquals(await cniRules(ours), r4, `${label}: ADD twice`);
    }
  });
});

needsRoot.test("cni portmap (iptables): ADD with ours, DEL with theirs and back; CHECK; DEL without netns; GC", async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("px");
    const c = conf({}, BASIC);
    const shared = (rules: string[]) => rules.filter((l) => !/CNI-DN-/.test(l));
    const base = async () => {
      await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "keep", netns: "pod", conf: c });
      return await cniRules(node);
    };
    const withKeep = await base();
    // Ours → theirs.
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "c1", netns: "pod", conf: c });
    // (Debian's 1.1.1 CHECK also demands an IPv6 chain for an IPv4-only container, so only ours CHECKs.)
    await cniOk({ plugin: "portmap", command: "CHECK", node, containerId: "c1", netns: "pod", conf: c });
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c1", conf: c, ref: true });
    assertEquals(await cniRules(node), withKeep, "reference DEL removes what our ADD made");
    // Theirs → ours (DEL without a netns).
    await cniOk({
      plugin: "portmap",
      command: "ADD",
      node,
      containerId: "c2",
      netns: "pod",
      conf: c,
      ref: true,
    });
    await cniOk({ plugin: "portmap", command: "CHECK", node, containerId: "c2", netns: "pod", conf: c });
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c2", conf: c });
    assertEquals(await cniRules(node), withKeep, "our DEL removes what the reference ADD made");
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c2", conf: c }); // idempotent

    // CHECK notices a rule deleted by hand.
    await cniOk({ plugin: "portmap", command: "CHECK", node, containerId: "keep", netns: "pod", conf: c });
    const dn = withKeep.find((l) => l.startsWith(":CNI-DN-"))!.slice(1).split(" ")[0];
    await nsRun(node, [
      "iptables",
      "-t",
      "nat",
      "-D",
      dn,
      "-p",
      "tcp",
      "-m",
      "tcp",
      "--dport",
      "18082",
      "-j",
      "DNAT",
      "--to-destination",
      "10.244.1.5:82",
    ]);
    const chk = await cni({
      plugin: "portmap",
      command: "CHECK",
      node,
      containerId: "keep",
      netns: "pod",
      conf: c,
    });
    assertEquals(chk.code, 1);
    assertEquals(chk.json?.code, 105, chk.stdout);
    assertStringIncludes(String(chk.json?.details), "--dport 18082");

    // GC: containers not in the valid list lose their chains; others' networks are untouched.
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "gone", netns: "pod", conf: c });
    const other = { ...conf({}, BASIC), name: "othernet" };
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "gone", netns: "pod", conf: other });
    const gcConf = {
      cniVersion: "1.1.0",
      name: "cbr0",
      type: "portmap",
      "cni.dev/valid-attachments": [{ containerID: "keep", ifname: "eth0" }],
    };
    await cniOk({ plugin: "portmap", command: "GC", node, conf: gcConf });
    const after = await cniRules(node);
    const chains = after.filter((l) => l.startsWith(":CNI-DN-"));
    assertEquals(chains.length, 2, after.join("\n")); // keep (cbr0) and gone (othernet)
    assert(after.some((l) => l.includes('id: \\"keep\\"')));
    assert(after.some((l) => l.includes('name: \\"othernet\\" id: \\"gone\\"')));
    assert(!after.some((l) => l.includes('name: \\"cbr0\\" id: \\"gone\\"')));
    assertEquals(shared(after).length, shared(withKeep).length);
  });
});

needsRoot.test("cni portmap: bad port mappings are CNI errors and install nothing", async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("pb");
    const bad: [string, unknown[], string][] = [
      ["port 0", [{ hostPort: 0, containerPort: 80, protocol: "tcp" }], "hostPort"],
      ["port > 65535", [{ hostPort: 8080, containerPort: 65536, protocol: "tcp" }], "containerPort"],
      ["unknown protocol", [{ hostPort: 8080, containerPort: 80, protocol: "icmp" }], "protocol"],
      ["hostIP of the wrong family", [{
        hostPort: 8080,
        containerPort: 80,
        protocol: "tcp",
        hostIP: "fd00::1",
      }], "hostIP"],
      [
        "hostIP not an address",
        [{ hostPort: 8080, containerPort: 80, protocol: "tcp", hostIP: "node1" }],
        "hostIP",
      ],
    ];
    for (const backend of ["iptables", "nftables"]) {
      for (const [label, maps, field] of bad) {
        // A good mapping first: nothing of it may be installed either.
        const c = conf({ backend }, [{ hostPort: 9090, containerPort: 90, protocol: "tcp" }, ...maps]);
        const r = await cni({
          plugin: "portmap",
          command: "ADD",
          node,
          containerId: "c1",
          netns: "pod",
          conf: c,
        });
        assertEquals(r.code, 1, `${backend} ${label}: ${r.stdout}`);
        assertEquals(r.json?.code, 7, `${backend} ${label}: ${r.stdout}`);
        assertStringIncludes(String(r.json?.details), field);
        assertEquals(await cniRules(node), [], `${backend} ${label}: no iptables rule`);
        assertEquals((await nsRun(node, ["nft", "list", "tables"])).stdout.includes("cni_hostport"), false);
      }
    }
    const noPrev = await cni({
      plugin: "portmap",
      command: "ADD",
      node,
      containerId: "c1",
      netns: "pod",
      conf: { ...conf({}, BASIC), prevResult: undefined },
    });
    assertEquals(noPrev.json?.msg, "must be called as chained plugin", noPrev.stdout);
  });
});

needsRoot.test("cni portmap (nftables): cni_hostport rules per container; CHECK; DEL removes only this container's", async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("pn");
    const c1 = conf({ backend: "nftables" }, BASIC, PREV46);
    const prev2 = { ...PREV4, ips: [{ interface: 1, address: "10.244.1.6/24", gateway: "10.244.1.1" }] };
    const c2 = conf({ backend: "nftables" }, BASIC, prev2);
    const r = await cniOk({
      plugin: "portmap",
      command: "ADD",
      node,
      containerId: "c1",
      netns: "pod",
      conf: c1,
    });
    assertEquals(r?.ips, PREV46.ips);
    const list = async (fam: string) =>
      (await nsRun(node, ["nft", "list", "table", fam, "cni_hostport"])).stdout.split("\n").map((l) =>
        l.trim()
      );
    // conditionsV4/V6 (nft syntax) go before the local-address match of the entry rules, as the reference's.
    const cc = conf({ backend: "nftables", conditionsV4: ["ip", "saddr", "192.0.2.0/24"] }, BASIC, PREV4);
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "cc", netns: "pod", conf: cc });
    const withCond = await list("ip");
    for (const chain of ["prerouting", "output"]) {
      const i = withCond.indexOf(`chain ${chain} {`);
      assertEquals(withCond[i + 2], "ip saddr 192.0.2.0/24 fib daddr type local jump hostports_all", chain);
    }
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "cc", conf: cc });
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "c2", netns: "pod", conf: c2 });
    const v4 = await list("ip");
    for (
      const l of [
        'tcp dport 18080 dnat to 10.244.1.5:8080 comment "c1"',
        'ip daddr 10.1.1.1 udp dport 18081 dnat to 10.244.1.5:81 comment "c1"',
        'ip saddr 10.244.1.5 ip daddr 10.244.1.5 masquerade comment "c1"',
        'ip saddr 127.0.0.1 ip daddr 10.244.1.5 masquerade comment "c1"',
        'tcp dport 18080 dnat to 10.244.1.6:8080 comment "c2"',
        "fib daddr type local jump hostports_all",
      ]
    ) assert(v4.includes(l), `${l}\n${v4.join("\n")}`);
    const v6 = await list("ip6");
    assert(v6.includes('tcp dport 18080 dnat to [fd00:10:0:1::5]:8080 comment "c1"'), v6.join("\n"));
    assert(!v6.some((l) => l.includes("10.1.1.1")), "the IPv4 hostIP mapping is not in ip6");
    assertEquals(await cniRules(node), [], "no iptables rules in nftables mode");
    await cniOk({ plugin: "portmap", command: "CHECK", node, containerId: "c1", netns: "pod", conf: c1 });
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c1", conf: c1 });
    const after = await list("ip");
    assert(!after.some((l) => l.includes('"c1"')), after.join("\n"));
    // 3 mappings + 2 masquerade rules + the record in network_cbr0 (for GC: cni_portmap_nft_gc_test.ts).
    assertEquals(after.filter((l) => l.includes('"c2"')).length, 6);
    assert(!(await list("ip6")).some((l) => l.includes('"c1"')));
    const chk = await cni({
      plugin: "portmap",
      command: "CHECK",
      node,
      containerId: "c1",
      netns: "pod",
      conf: c1,
    });
    assertEquals(chk.json?.code, 105, chk.stdout);
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c2", conf: c2 });
    assert(!(await list("ip")).some((l) => /comment "c\d"/.test(l)), "DEL leaves no container rule");
  });
});

needsRoot.test("cni portmap: DEL clears UDP conntrack entries of the mapped host ports (ctnetlink)", async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("pc");
    const c = conf({}, [{ hostPort: 18081, containerPort: 81, protocol: "udp" }]);
    await cniOk({ plugin: "portmap", command: "ADD", node, containerId: "c1", netns: "pod", conf: c });
    const entry = ["-p", "udp", "-s", "192.0.2.7", "-d", "192.0.2.8", "--sport", "5000"];
    const ins = (dport: string) =>
      nsRun(node, ["conntrack", "-I", ...entry, "--dport", dport, "-t", "60", "-u", "SEEN_REPLY"]);
    assertEquals((await ins("18081")).code, 0);
    assertEquals((await ins("18090")).code, 0);
    const count = async (dport: string) =>
      (await nsRun(node, ["conntrack", "-L", "-p", "udp", "--orig-port-dst", dport])).stdout.split("\n")
        .filter((l) => l.includes(`dport=${dport}`)).length;
    assertEquals(await count("18081"), 1);
    const del = await cni({ plugin: "portmap", command: "DEL", node, containerId: "c1", conf: c });
    assertEquals(del.code, 0, del.stdout);
    assertEquals(del.stderr.includes("ctnetlink delete"), false, `netlink path, no fallback: ${del.stderr}`);
    assertEquals(await count("18081"), 0, "the mapped port's entry is gone");
    assertEquals(await count("18090"), 1, "other entries stay");
    // The netlink layer directly: only UDP entries to the port, only of the family asked for.
    assertEquals((await ins("18090")).code, 1, "(already there)");
    const tcp = ["-p", "tcp", "-s", "192.0.2.7", "-d", "192.0.2.8", "--sport", "5000", "--dport", "18090"];
    assertEquals(
      (await nsRun(node, ["conntrack", "-I", ...tcp, "-t", "60", "--state", "ESTABLISHED"])).code,
      0,
    );
    assertEquals(
      inNetns({ name: node }, () => deleteConntrack({ family: 6, protocol: 17, dstPort: 18090 })),
      0,
    );
    assertEquals(
      inNetns({ name: node }, () => deleteConntrack({ family: 4, protocol: 17, dstPort: 18090 })),
      1,
    );
    assertEquals(await count("18090"), 0);
    const tcpLeft = (await nsRun(node, ["conntrack", "-L", "-p", "tcp"])).stdout;
    assertStringIncludes(tcpLeft, "dport=18090", "the TCP entry stays");
  });
});

needsRoot.test("cni portmap (nftables): a container ID over 128 bytes (nft's comment limit) is error 4, nothing installed", async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("pl");
    const c = conf({ backend: "nftables" }, BASIC);
    const r = await cni({
      plugin: "portmap",
      command: "ADD",
      node,
      containerId: "c".repeat(129),
      netns: "pod",
      conf: c,
    });
    assertEquals(r.json?.code, 4, r.stdout);
    assertStringIncludes(String(r.json?.details), "at most 128");
    assertEquals(
      (await nsRun(node, ["nft", "list", "table", "ip", "cni_hostport"])).code,
      1,
      "no table made",
    );
    // 128 bytes is fine.
    await cniOk({
      plugin: "portmap",
      command: "ADD",
      node,
      containerId: "c".repeat(128),
      netns: "pod",
      conf: c,
    });
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c".repeat(128), conf: c });
  });
});
