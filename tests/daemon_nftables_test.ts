/**
 * `flanctl daemon` with net-conf `EnableNFTables: true`, in throwaway namespaces: flanneld's nft tables and
 * rules exactly, no FLANNEL line in iptables-save (left-over iptables chains removed), pod traffic across
 * nodes and masqueraded to the underlay, repair after `nft delete table`, a restart without packet loss;
 * `--ip-masq-fully-random-disable` (plain `masquerade`, kept by the repair); and the other way round: iptables
 * mode removes the flannel-ipv4/-ipv6 tables of a previous run.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, flannelNftListing, nftTable, waitFor } from "./daemon_fixture.ts";
import { nsRun, nsSh } from "./netns.ts";

const N = "10.244.0.0/16";
const NFT_CONF = JSON.stringify({ Network: N, Backend: { Type: "vxlan" }, EnableNFTables: true });
const IPT_CONF = JSON.stringify({ Network: N, Backend: { Type: "vxlan" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1", "--ip-masq"];

async function ping(fromNs: string, ip: string, count = 2): Promise<boolean> {
  const r = await nsRun(fromNs, ["ping", "-c", String(count), "-W", "1", "-i", "0.2", ip]);
  return r.code === 0;
}

const expectedV4 = (sub: string) => flannelNftListing("ip", N, sub);

needsRoot.test("daemon nftables: flannel's tables, no iptables rules, traffic, masquerade, repair, restart", async () => {
  const c = new DaemonCluster("10.98");
  try {
    await c.init(NFT_CONF);
    const a = await c.addNode(), b = await c.addNode();
    // A previous flanneld in iptables mode left its chains on A: nftables mode removes them.
    for (
      const args of [
        ["-t", "nat", "-N", "FLANNEL-POSTRTG"],
        [
          "-t",
          "nat",
          "-A",
          "POSTROUTING",
          "-m",
          "comment",
          "--comment",
          "flanneld masq",
          "-j",
          "FLANNEL-POSTRTG",
        ],
        ["-t", "nat", "-A", "FLANNEL-POSTRTG", "-j", "RETURN"],
        ["-t", "filter", "-N", "FLANNEL-FWD"],
        ["-t", "filter", "-A", "FORWARD", "-j", "FLANNEL-FWD"],
        ["-t", "nat", "-A", "POSTROUTING", "-s", "192.0.2.0/24", "-j", "ACCEPT"],
      ]
    ) await nsSh(a.ns, "iptables", ...args);
    c.start(a, FAST);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);

    assertEquals(await nftTable(a.ns, "ip", "flannel-ipv4"), expectedV4(subA), a.log.join("\n"));
    assertEquals(await nftTable(b.ns, "ip", "flannel-ipv4"), expectedV4(subB));
    assertEquals(await nftTable(a.ns, "ip6", "flannel-ipv6"), [
      "table ip6 flannel-ipv6 {",
      'comment "rules for flannel-ipv6"',
      "}",
    ]);
    const save = (await nsRun(a.ns, ["iptables-save"])).stdout;
    assert(!save.includes("FLANNEL"), `FLANNEL rules left in iptables:\n${save}`);
    assertStringIncludes(save, "-A POSTROUTING -s 192.0.2.0/24 -j ACCEPT", "others' rules stay");
    assert(a.log.some((l) => l.includes("removed the other mode's flannel rules")), a.log.join("\n"));

    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(c.explain("pod A → pod B"), () => ping(pa.ns, pb.ip, 1));
    assert(await ping(pb.ns, pa.ip), "pod B → pod A");
    // The underlay has no route to the pod network: a reply reaches the pod only when it was masqueraded.
    const gw = `${c.base}.0.1`;
    assert(await ping(pa.ns, gw), "pod A → underlay, masqueraded by flannel-ipv4 postrtg");

    // Repair: the table deleted by hand comes back within --iptables-resync.
    await nsSh(a.ns, "nft", "delete", "table", "ip", "flannel-ipv4");
    await waitFor("flannel-ipv4 restored", async () => {
      return JSON.stringify(await nftTable(a.ns, "ip", "flannel-ipv4")) === JSON.stringify(expectedV4(subA));
    });
    assert(a.log.some((l) => l.includes("nftables rules applied")), a.log.join("\n"));
    // A rule added to our chain is flushed away at the next resync.
    await nsSh(
      a.ns,
      "nft",
      "add",
      "rule",
      "ip",
      "flannel-ipv4",
      "postrtg",
      "ip",
      "saddr",
      "192.0.2.1",
      "return",
    );
    await waitFor("stray rule flushed", async () => {
      return JSON.stringify(await nftTable(a.ns, "ip", "flannel-ipv4")) === JSON.stringify(expectedV4(subA));
    });
    assert(await ping(pa.ns, gw), "masquerade after repair");

    // Restart without loss: 100 pps across a restart of A's daemon.
    const pinger = new Deno.Command("ip", {
      args: ["netns", "exec", pa.ns, "ping", "-i", "0.01", "-c", "300", "-W", "1", pb.ip],
      stdout: "piped",
      stderr: "piped",
    }).output();
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(await c.stop(a), 0);
    c.start(a, FAST);
    await c.waitReady(a);
    assertStringIncludes(new TextDecoder().decode((await pinger).stdout), "300 received, 0% packet loss");
    assertEquals(await nftTable(a.ns, "ip", "flannel-ipv4"), expectedV4(subA));
    assert(!(await nsRun(a.ns, ["iptables-save"])).stdout.includes("FLANNEL"));
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon iptables mode: removes flannel-ipv4/-ipv6 tables left by an nftables-mode run", async () => {
  const c = new DaemonCluster("10.97");
  try {
    await c.init(IPT_CONF);
    const a = await c.addNode();
    await nsSh(a.ns, "nft", "add", "table", "ip", "flannel-ipv4");
    await nsSh(a.ns, "nft", "add", "table", "ip6", "flannel-ipv6");
    await nsSh(a.ns, "nft", "add", "table", "ip", "other");
    c.start(a, FAST);
    await c.waitReady(a);
    assertEquals(await nftTable(a.ns, "ip", "flannel-ipv4"), null, a.log.join("\n"));
    assertEquals(await nftTable(a.ns, "ip6", "flannel-ipv6"), null);
    assert((await nftTable(a.ns, "ip", "other")) !== null, "other tables stay");
    const save = (await nsRun(a.ns, ["iptables-save", "-t", "nat"])).stdout;
    assertStringIncludes(save, '-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG');
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon nftables: --ip-masq-fully-random-disable masquerades without fully-random, also after repair", async () => {
  const c = new DaemonCluster("10.91");
  try {
    await c.init(NFT_CONF);
    const a = await c.addNode();
    c.start(a, [...FAST, "--ip-masq-fully-random-disable"]);
    await c.waitReady(a);
    const sub = await c.subnetOf(a);
    const plain = expectedV4(sub).map((l) => l.replace(" masquerade fully-random", " masquerade"));
    assert(plain.filter((l) => l.endsWith(" masquerade")).length === 2);
    assertEquals(await nftTable(a.ns, "ip", "flannel-ipv4"), plain, a.log.join("\n"));
    // The resync rebuilds the table from the same spec: still no fully-random.
    await nsSh(a.ns, "nft", "delete", "table", "ip", "flannel-ipv4");
    await waitFor("flannel-ipv4 rebuilt", async () => (await nftTable(a.ns, "ip", "flannel-ipv4")) !== null);
    await waitFor(
      () => `rebuilt table\n${a.log.join("\n")}`,
      async () => JSON.stringify(await nftTable(a.ns, "ip", "flannel-ipv4")) === JSON.stringify(plain),
    );
  } finally {
    await c.close();
  }
});
