/**
 * `flanctl daemon` with IPv6: dual stack and IPv6-only, vxlan and host-gw, in throwaway namespaces whose
 * underlay has ULA addresses (fc00::/7) next to the IPv4 ones. Checks subnet.env, the flannel-v6.1 device
 * (MTU, local, accept_ra), the per-peer NDP/FDB/route entries equal to the leases, pod↔pod ping and TCP over
 * both families, ip6tables lines, repair of hand-deleted v6 entries, a restart under a 100 pps ping6 that
 * loses nothing, and bad input (IPv6Network missing, --public-ipv6 not on the host) with nothing made.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import {
  DaemonCluster,
  fdbs,
  flannelNftListing,
  neighs,
  nftTable,
  type TestNode,
  waitFor,
} from "./daemon_fixture.ts";
import { flanctl, ipJson, nsRun, nsSh, sh } from "./netns.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { IPNet } from "../lib/base/cidr.ts";
import type { Lease } from "../lib/store/types.ts";

const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];
const V6BASE = "fc00:98";

const netconf = (type: string, fam: "dual" | "ipv6", extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    ...extra,
    ...(fam === "dual" ? { Network: "10.244.0.0/16" } : { EnableIPv4: false }),
    EnableIPv6: true,
    IPv6Network: "fc00:244::/48",
    Backend: { Type: type },
  });

/** Adds the IPv6 underlay to the cluster (bridge br0 gets ::1) and to every node (::<10+i>). */
async function addV6Underlay(c: DaemonCluster): Promise<void> {
  await sh("ip", "-n", c.underlay, "addr", "add", `${V6BASE}::1/64`, "dev", "br0", "nodad");
  await nsSh(c.underlay, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
  for (const [i, n] of c.nodes.entries()) {
    await sh("ip", "-n", n.ns, "addr", "add", `${v6Of(i)}/64`, "dev", "eth0", "nodad");
    await sh("ip", "-n", n.ns, "-6", "route", "add", "default", "via", `${V6BASE}::1`);
    await nsSh(n.ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
  }
}

/** The underlay IPv6 address of the i-th node (0-based). */
const v6Of = (i: number) => `${V6BASE}::${(11 + i).toString(16)}`;

/** Two nodes (IPv4 + IPv6 underlay), config written; daemons not started. */
async function pair(
  c: DaemonCluster,
  type: string,
  fam: "dual" | "ipv6",
  extra: Record<string, unknown> = {},
): Promise<TestNode[]> {
  await c.init(netconf(type, fam, extra));
  const a = await c.addNode(), b = await c.addNode();
  await addV6Underlay(c);
  return [a, b];
}

/** The node's leases as the store holds them. */
async function leases(c: DaemonCluster): Promise<Lease[]> {
  const s = new FileStore({ dir: c.storeDir });
  try {
    return (await s.listLeases()).leases;
  } finally {
    await s.close();
  }
}

/** The IPv6 subnet of `n` from its subnet.env. */
async function subnet6(c: DaemonCluster, n: TestNode): Promise<IPNet> {
  return IPNet.parse((await c.subnetEnv(n)).FLANNEL_IPV6_SUBNET);
}

/**
 * A pod on node `n`: eth0 with the node subnet's .2 (IPv4, dual only) and ::2 (IPv6), attached by veth to
 * the node side holding .1 / ::1 as gateways.
 */
async function addPod(c: DaemonCluster, n: TestNode, fam: "dual" | "ipv6") {
  const ns = await c.fx.add("p");
  const dev = `vp${c.fx.names.length}`;
  await sh("ip", "-n", n.ns, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns);
  await sh("ip", "-n", n.ns, "link", "set", dev, "up");
  await sh("ip", "-n", ns, "link", "set", "eth0", "up");
  let ip4: string | null = null;
  if (fam === "dual") {
    const s4 = IPNet.parse(await c.subnetOf(n));
    ip4 = s4.nth(2).toString();
    const gw = s4.nth(1).toString();
    await sh("ip", "-n", n.ns, "addr", "add", `${gw}/32`, "dev", dev);
    await sh("ip", "-n", n.ns, "route", "add", `${ip4}/32`, "dev", dev);
    await sh("ip", "-n", ns, "addr", "add", `${ip4}/32`, "dev", "eth0");
    await sh("ip", "-n", ns, "route", "add", `${gw}/32`, "dev", "eth0");
    await sh("ip", "-n", ns, "route", "add", "default", "via", gw, "dev", "eth0");
  }
  const s6 = await subnet6(c, n);
  const ip6 = s6.nth(2).toString();
  const gw6 = s6.nth(1).toString();
  await sh("ip", "-n", n.ns, "addr", "add", `${gw6}/128`, "dev", dev, "nodad");
  await sh("ip", "-n", n.ns, "-6", "route", "add", `${ip6}/128`, "dev", dev);
  await sh("ip", "-n", ns, "addr", "add", `${ip6}/128`, "dev", "eth0", "nodad");
  await sh("ip", "-n", ns, "-6", "route", "add", `${gw6}/128`, "dev", "eth0");
  await sh("ip", "-n", ns, "-6", "route", "add", "default", "via", gw6, "dev", "eth0");
  return { ns, ip4, ip6 };
}

async function ping(fromNs: string, ip: string, count = 2): Promise<boolean> {
  const r = await nsRun(fromNs, ["ping", "-c", String(count), "-W", "1", "-i", "0.2", ip]);
  return r.code === 0;
}

/** A TCP round trip from `a` to `b` (nc listener in b): true when b received the line. */
async function tcp(aNs: string, bNs: string, bIp: string): Promise<boolean> {
  const port = String(5100 + Math.floor(Math.random() * 800));
  const ln = new Deno.Command("ip", {
    args: ["netns", "exec", bNs, "timeout", "60", "nc", "-l", ...(bIp.includes(":") ? ["-6"] : []), port],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    await waitFor(
      "listener",
      async () => (await nsRun(bNs, ["ss", "-ltn"])).stdout.includes(`:${port}`),
    );
    const r = await nsRun(aNs, ["timeout", "5", "nc", "-N", "-w", "3", bIp, port], { stdin: "hello-tcp\n" });
    const out = new TextDecoder().decode((await ln.output()).stdout);
    return r.code === 0 && out.includes("hello-tcp");
  } finally {
    try {
      ln.kill("SIGKILL");
    } catch { /* ended */ }
  }
}

interface V6Entry {
  dst: string;
  gateway?: string;
  dev: string;
  flags: string[];
}

function routes6(ns: string): Promise<V6Entry[]> {
  return ipJson<V6Entry[]>(ns, "-6", "route", "show");
}

/** True when `n` holds exactly the vxlan v6 triplet for peer lease `p`. */
async function hasV6Triplet(n: TestNode, p: Lease): Promise<boolean> {
  const sn = p.ipv6Subnet!;
  const gw = sn.ip.toString();
  const mac = (p.attrs.BackendV6Data as { VtepMAC: string }).VtepMAC;
  const r = (await routes6(n.ns)).find((x) => x.dst === sn.toString());
  const a = (await neighs(n.ns, "flannel-v6.1")).find((x) => x.dst === gw);
  const f = (await fdbs(n.ns, "flannel-v6.1")).find((x) => x.mac === mac && x.dst === p.attrs.PublicIPv6);
  return !!r && r.gateway === gw && r.dev === "flannel-v6.1" && r.flags.includes("onlink") &&
    !!a && a.lladdr === mac && a.state.includes("PERMANENT") && !!f && f.state === "permanent";
}

interface LinkD {
  mtu: number;
  address: string;
  linkinfo: { info_kind: string; info_data: { id: number; local?: string; local6?: string } };
}

needsRoot.test("daemon dual stack vxlan: flannel-v6.1, v6 triplets, pods over v4+v6, ip6tables, repair, restart", async () => {
  const c = new DaemonCluster("10.97");
  try {
    const [a, b] = await pair(c, "vxlan", "dual");
    c.start(a, [...FAST, "--ip-masq"]);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);

    // subnet.env: flanneld's four network lines in its order; the MTU fits the IPv6 device (1500 − 70).
    const env = (await Deno.readTextFile(a.subnetFile)).trim().split("\n").map((l) => l.split("=")[0]);
    assertEquals(env, [
      "FLANNEL_NETWORK",
      "FLANNEL_SUBNET",
      "FLANNEL_IPV6_NETWORK",
      "FLANNEL_IPV6_SUBNET",
      "FLANNEL_MTU",
      "FLANNEL_IPMASQ",
    ]);
    assertEquals((await c.subnetEnv(a)).FLANNEL_IPV6_NETWORK, "fc00:244::/48");
    assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1430");

    // Both devices; the IPv6 one over the IPv6 underlay with its own MAC and accept_ra 0.
    const d4 = (await ipJson<LinkD[]>(a.ns, "-d", "link", "show", "flannel.1"))[0];
    const d6 = (await ipJson<LinkD[]>(a.ns, "-d", "link", "show", "flannel-v6.1"))[0];
    assertEquals([d4.mtu, d6.mtu], [1450, 1430]);
    assertEquals([d6.linkinfo.info_kind, d6.linkinfo.info_data.id, d6.linkinfo.info_data.local6], [
      "vxlan",
      1,
      v6Of(0),
    ]);
    assert(d4.address !== d6.address, "each device has its own VTEP MAC");
    assertEquals((await nsSh(a.ns, "sysctl", "-n", "net.ipv6.conf.flannel-v6/1.accept_ra")).trim(), "0");
    const s6a = await subnet6(c, a);
    const addrs = await ipJson<{ addr_info: { local: string; prefixlen: number; scope: string }[] }[]>(
      a.ns,
      "-6",
      "addr",
      "show",
      "dev",
      "flannel-v6.1",
    );
    assert(
      addrs[0].addr_info.some((x) => x.local === s6a.ip.toString() && x.prefixlen === 128),
      JSON.stringify(addrs),
    );

    // The leases: dual-stack keys, PublicIPv6, BackendV6Data with the v6 device's MAC.
    const ls = await leases(c);
    assertEquals(ls.length, 2);
    const la = ls.find((l) => l.attrs.PublicIP === a.ip)!, lb = ls.find((l) => l.attrs.PublicIP === b.ip)!;
    assertEquals(la.attrs.PublicIPv6, v6Of(0));
    assertEquals(la.attrs.BackendV6Data, { VNI: 1, VtepMAC: d6.address });
    assertEquals(la.attrs.BackendData, { VNI: 1, VtepMAC: d4.address });
    assertEquals(String(la.ipv6Subnet), s6a.toString());
    const keys = [...Deno.readDirSync(`${c.storeDir}/subnets`)].map((e) => e.name).sort();
    assertEquals(keys, ls.map((l) => `${l.subnet!.toKey()}&${l.ipv6Subnet!.toKey()}`).sort());

    // Kernel entries equal the leases, both families.
    await waitFor("v6 triplets", async () => (await hasV6Triplet(a, lb)) && (await hasV6Triplet(b, la)));

    // Pods reach each other over both families, ping and TCP.
    const pa = await addPod(c, a, "dual"), pb = await addPod(c, b, "dual");
    await waitFor(c.explain("v4 ping"), () => ping(pa.ns, pb.ip4!));
    await waitFor(c.explain("v6 ping a→b"), () => ping(pa.ns, pb.ip6));
    await waitFor(c.explain("v6 ping b→a"), () => ping(pb.ns, pa.ip6));
    assert(await tcp(pa.ns, pb.ns, pb.ip6), "TCP over IPv6");
    assert(await tcp(pb.ns, pa.ns, pa.ip4!), "TCP over IPv4");

    // ip6tables: flannel's IPv6 masquerade lines (ff00::/8) and forward rules.
    const nat6 = await nsSh(a.ns, "ip6tables-save", "-t", "nat");
    const cm = `-m comment --comment "flanneld masq"`;
    assertStringIncludes(nat6, `-A POSTROUTING ${cm} -j FLANNEL-POSTRTG`);
    const N6 = "fc00:244::/48";
    assertEquals(nat6.split("\n").filter((l) => l.startsWith("-A FLANNEL-POSTRTG")), [
      `-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 ${cm} -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${s6a} -d ${N6} ${cm} -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${N6} -d ${s6a} ${cm} -j RETURN`,
      `-A FLANNEL-POSTRTG ! -s ${N6} -d ${s6a} ${cm} -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${N6} ! -d ff00::/8 ${cm} -j MASQUERADE --random-fully`,
      `-A FLANNEL-POSTRTG ! -s ${N6} -d ${N6} ${cm} -j MASQUERADE --random-fully`,
    ]);
    // The IPv4 chain beside it holds the IPv4 lines only.
    const nat4 = await nsSh(a.ns, "iptables-save", "-t", "nat");
    assert(!/-A FLANNEL-POSTRTG .*:/.test(nat4), nat4);
    assertStringIncludes(nat4, `-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 ${cm}`);
    const fwd6 = await nsSh(a.ns, "ip6tables-save", "-t", "filter");
    assertStringIncludes(
      fwd6,
      `-A FLANNEL-FWD -s fc00:244::/48 -m comment --comment "flanneld forward" -j ACCEPT`,
    );
    // …resynced: a deleted chain rule comes back.
    await nsSh(a.ns, "ip6tables", "-t", "nat", "-F", "FLANNEL-POSTRTG");
    await waitFor(
      "ip6tables resync",
      async () => (await nsSh(a.ns, "ip6tables-save", "-t", "nat")).includes("! -d ff00::/8"),
    );

    // The resyncs so far reused both devices (an existing compatible IPv6 device is never recreated).
    assert(!a.log.some((l) => l.includes("recreated")), a.log.join("\n"));

    // Hand-deleted v6 route, NDP entry and FDB entry are repaired by the resync.
    const sb6 = lb.ipv6Subnet!;
    const macB6 = (lb.attrs.BackendV6Data as { VtepMAC: string }).VtepMAC;
    await sh("ip", "-n", a.ns, "-6", "route", "del", sb6.toString());
    await sh("ip", "-n", a.ns, "-6", "neigh", "del", sb6.ip.toString(), "dev", "flannel-v6.1");
    await nsSh(a.ns, "bridge", "fdb", "del", macB6, "dev", "flannel-v6.1", "dst", v6Of(1));
    await waitFor("v6 entries repaired", () => hasV6Triplet(a, lb));
    // The IPv6 device deleted under the daemon is recreated.
    await sh("ip", "-n", a.ns, "link", "del", "flannel-v6.1");
    await waitFor("flannel-v6.1 recreated", () => hasV6Triplet(a, lb));
    await waitFor(c.explain("v6 ping after repair"), () => ping(pa.ns, pb.ip6));

    // Restart node A's daemon under a 100 pps ping6: nothing is lost (kernel state stays in place).
    const flood = new Deno.Command("ip", {
      args: ["netns", "exec", pa.ns, "ping", "-6", "-i", "0.01", "-c", "400", "-W", "1", pb.ip6],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await new Promise((r) => setTimeout(r, 500));
    assertEquals(await c.stop(a), 0);
    c.start(a, [...FAST, "--ip-masq"]);
    await c.waitReady(a);
    const out = new TextDecoder().decode((await flood.output()).stdout);
    const m = /(\d+) packets transmitted, (\d+) received/.exec(out);
    assert(m && m[1] === "400" && m[2] === "400", `ping6 across the restart lost packets:\n${out}`);
    // Same subnets and MACs after the restart.
    const after = (await leases(c)).find((l) => l.attrs.PublicIP === a.ip)!;
    assertEquals([String(after.ipv6Subnet), after.attrs.BackendV6Data], [
      String(la.ipv6Subnet),
      la.attrs.BackendV6Data,
    ]);

    // A peer leaving removes its v6 entries.
    assertEquals(await c.stop(b), 0);
    const s = new FileStore({ dir: c.storeDir });
    await s.revokeLease(lb.subnet!);
    await s.close();
    await waitFor(
      "v6 entries removed",
      async () => !(await routes6(a.ns)).some((x) => x.dst === sb6.toString()),
    );
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon dual stack nftables: flannel-ipv6 masquerades our IPv6 subnet, no ip6tables rules, repair", async () => {
  const c = new DaemonCluster("10.95");
  try {
    const [a, b] = await pair(c, "vxlan", "dual", { EnableNFTables: true });
    // An iptables-mode run left its IPv6 chain and jump on A: nftables mode removes them.
    await nsSh(a.ns, "ip6tables", "-t", "nat", "-N", "FLANNEL-POSTRTG");
    const jump = ["-m", "comment", "--comment", "flanneld masq", "-j", "FLANNEL-POSTRTG"];
    await nsSh(a.ns, "ip6tables", "-t", "nat", "-A", "POSTROUTING", ...jump);
    c.start(a, [...FAST, "--ip-masq"]);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const s6a = await subnet6(c, a);
    const N6 = "fc00:244::/48";
    const want6 = flannelNftListing("ip6", N6, s6a.toString());
    assertEquals(await nftTable(a.ns, "ip6", "flannel-ipv6"), want6, a.log.join("\n"));
    assertStringIncludes(
      (await nftTable(a.ns, "ip", "flannel-ipv4"))!.join("\n"),
      `ip saddr ${await c.subnetOf(a)} ip daddr 10.244.0.0/16 return`,
    );
    for (const save of ["iptables-save", "ip6tables-save"]) {
      const out = await nsSh(a.ns, save);
      assert(!out.includes("FLANNEL"), `${save} holds flannel rules in nftables mode:\n${out}`);
    }

    // Pod traffic over IPv6, and to the underlay: it has no route to the pod network, so a reply comes
    // back only when flannel-ipv6 masqueraded the request.
    const pa = await addPod(c, a, "dual"), pb = await addPod(c, b, "dual");
    await waitFor(c.explain("v6 ping a→b"), () => ping(pa.ns, pb.ip6));
    assert(await ping(pa.ns, `${V6BASE}::1`), "pod A → IPv6 underlay, masqueraded");

    // Repair: the IPv6 table deleted by hand comes back as it was.
    await nsSh(a.ns, "nft", "delete", "table", "ip6", "flannel-ipv6");
    await waitFor(
      "flannel-ipv6 restored",
      async () => JSON.stringify(await nftTable(a.ns, "ip6", "flannel-ipv6")) === JSON.stringify(want6),
    );
    assert(await ping(pa.ns, `${V6BASE}::1`), "masquerade after repair");
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon IPv6-only vxlan: flanneld's IPv6-only lease and subnet.env, no IPv4 device, pods over v6", async () => {
  const c = new DaemonCluster("10.96");
  try {
    const [a, b] = await pair(c, "vxlan", "ipv6");
    c.start(a, [...FAST, "--ip-masq"]);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const env = await Deno.readTextFile(a.subnetFile);
    const s6a = await subnet6(c, a);
    assertEquals(
      env,
      `FLANNEL_IPV6_NETWORK=fc00:244::/48\nFLANNEL_IPV6_SUBNET=${s6a.nth(1)}/64\nFLANNEL_MTU=1430\n` +
        `FLANNEL_IPMASQ=true\n`,
    );
    const links = await ipJson<{ ifname: string }[]>(a.ns, "link", "show");
    assert(!links.some((l) => l.ifname === "flannel.1"), "no IPv4 VXLAN device");
    const mac = (await ipJson<LinkD[]>(a.ns, "-d", "link", "show", "flannel-v6.1"))[0].address;
    // The lease as flanneld writes it: key 0.0.0.0-0&…, PublicIP 0.0.0.0, no BackendData.
    const file = `${c.storeDir}/subnets/0.0.0.0-0&${s6a.toKey()}`;
    const lease = JSON.stringify(JSON.parse(await Deno.readTextFile(file)).lease);
    assertEquals(
      lease,
      `{"PublicIP":"0.0.0.0","PublicIPv6":"${
        v6Of(0)
      }","BackendType":"vxlan","BackendV6Data":{"VNI":1,"VtepMAC":"${mac}"}}`,
    );
    const ls = await leases(c);
    const lb = ls.find((l) => l.attrs.PublicIPv6 === v6Of(1))!;
    await waitFor("v6 triplet", () => hasV6Triplet(a, lb));
    // `flanctl inspect` names the IPv6 subnet each flannel-v6.1 NDP and FDB entry serves.
    const ins = await flanctl(["inspect", "all", "--netns", a.ns]);
    assertEquals(ins.code, 0, ins.stderr);
    const gw6 = lb.ipv6Subnet!.ip.toString(), mac6 = (lb.attrs.BackendV6Data as { VtepMAC: string }).VtepMAC;
    const neighRow = ins.stdout.split("\n").find((l) =>
      l.startsWith(`${gw6} `) && l.includes("flannel-v6.1")
    );
    assert(neighRow?.trim().endsWith(String(lb.ipv6Subnet)), `NDP row: ${neighRow}\n${ins.stdout}`);
    const fdbRow = ins.stdout.split("\n").find((l) => l.startsWith(mac6) && l.includes(v6Of(1)));
    assert(fdbRow?.trim().endsWith(String(lb.ipv6Subnet)), `FDB row: ${fdbRow}\n${ins.stdout}`);
    assertEquals(
      await nsSh(a.ns, "iptables-save", "-t", "nat").then((t) => t.includes("FLANNEL-POSTRTG")),
      false,
    );
    assertStringIncludes(await nsSh(a.ns, "ip6tables-save", "-t", "nat"), "! -d ff00::/8");
    const pa = await addPod(c, a, "ipv6"), pb = await addPod(c, b, "ipv6");
    await waitFor(c.explain("v6 ping"), () => ping(pa.ns, pb.ip6));
    assert(await tcp(pa.ns, pb.ns, pb.ip6), "TCP over IPv6");
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon dual stack host-gw: v4 and v6 routes via the peer's public addresses", async () => {
  const c = new DaemonCluster("10.95");
  try {
    const [a, b] = await pair(c, "host-gw", "dual");
    c.start(a, FAST);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const ls = await leases(c);
    const lb = ls.find((l) => l.attrs.PublicIP === b.ip)!;
    assertEquals([lb.attrs.PublicIPv6, lb.attrs.BackendData, lb.attrs.BackendV6Data], [
      v6Of(1),
      undefined,
      undefined,
    ]);
    await waitFor("v6 host-gw route", async () => {
      const r = (await routes6(a.ns)).find((x) => x.dst === String(lb.ipv6Subnet));
      return r && r.gateway === v6Of(1) && r.dev === "eth0";
    });
    assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1500");
    const pa = await addPod(c, a, "dual"), pb = await addPod(c, b, "dual");
    await waitFor(c.explain("v4 ping"), () => ping(pa.ns, pb.ip4!));
    await waitFor(c.explain("v6 ping"), () => ping(pa.ns, pb.ip6));
    assert(await tcp(pa.ns, pb.ns, pb.ip6), "TCP over IPv6");
    // A hand-deleted v6 route comes back.
    await sh("ip", "-n", a.ns, "-6", "route", "del", String(lb.ipv6Subnet));
    await waitFor(
      "v6 route repaired",
      async () => (await routes6(a.ns)).some((x) => x.dst === String(lb.ipv6Subnet)),
    );
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon IPv6 bad input: IPv6Network missing, --public-ipv6 not on the host, v4 overlay on a v6-only underlay", async () => {
  const c = new DaemonCluster("10.94");
  try {
    const [a] = await pair(c, "vxlan", "dual");
    const run = async (extra: string[]) => {
      const p = c.start(a, extra);
      const st = await p.status;
      a.proc = null;
      await a.logDone; // stderr read to its end
      return { code: st.code, log: a.log.join("\n") };
    };
    const nothingMade = async () => {
      const links = await ipJson<{ ifname: string }[]>(a.ns, "link", "show");
      assertEquals(links.filter((l) => l.ifname.startsWith("flannel")).map((l) => l.ifname), []);
      assertEquals(await Deno.stat(a.subnetFile).then(() => true, () => false), false, "no subnet.env");
      // A store that never took a lease may not even have its subnets/ directory (readers make nothing).
      const leases = await Array.fromAsync(Deno.readDir(`${c.storeDir}/subnets`)).catch((e) => {
        if (e instanceof Deno.errors.NotFound) return [];
        throw e;
      });
      assertEquals(leases.length, 0, "no lease");
    };
    // --public-ipv6 that no interface of this host has.
    let r = await run(["--public-ipv6", "fc00:dead::1"]);
    assert(r.code !== 0, r.log);
    assertStringIncludes(r.log, "--public-ipv6");
    assertStringIncludes(r.log, "fc00:dead::1 is not an address of this host");
    await nothingMade();
    // Not an IPv6 address at all.
    r = await run(["--public-ipv6", "10.1.2.3"]);
    assert(r.code !== 0, r.log);
    assertStringIncludes(r.log, "--public-ipv6: '10.1.2.3' is not an IPv6 address");
    await nothingMade();
    // EnableIPv6 without IPv6Network.
    await Deno.writeTextFile(
      `${c.storeDir}/config`,
      JSON.stringify({ Network: "10.244.0.0/16", EnableIPv6: true }),
    );
    r = await run([]);
    assert(r.code !== 0, r.log);
    assertStringIncludes(r.log, "IPv6Network");
    await nothingMade();
    // IPv6SubnetLen out of range.
    await Deno.writeTextFile(
      `${c.storeDir}/config`,
      JSON.stringify({
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00:244::/48",
        IPv6SubnetLen: 127,
      }),
    );
    r = await run([]);
    assert(r.code !== 0, r.log);
    assertStringIncludes(r.log, "IPv6SubnetLen");
    await nothingMade();
    // A dual-stack (IPv4 overlay) network on a node whose underlay has IPv6 only: refused, as flanneld.
    await Deno.writeTextFile(`${c.storeDir}/config`, netconf("vxlan", "dual"));
    await sh("ip", "-n", a.ns, "-4", "addr", "flush", "dev", "eth0");
    r = await run(["--iface", "eth0"]);
    assert(r.code !== 0, r.log);
    assertStringIncludes(r.log, "no usable IPv4 address");
    await nothingMade();
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon dual stack vxlan: a lease written by flanneld is programmed in both families; one without IPv6 data is skipped for IPv6 only", async () => {
  const c = new DaemonCluster("10.93");
  try {
    const [a] = await pair(c, "vxlan", "dual");
    // flanneld's dual-stack value (Go json.Marshal of LeaseAttrs) for a node we do not run, in the file
    // store's shape, announced by bumping the store's sequence number.
    const put = async (key: string, value: string) => {
      const seqFile = `${c.storeDir}/seq`;
      const seq = Number(await Deno.readTextFile(seqFile).catch(() => "0")) + 1;
      await Deno.mkdir(`${c.storeDir}/subnets`, { recursive: true });
      await Deno.writeTextFile(
        `${c.storeDir}/subnets/${key}`,
        `{"lease":${value},"expiration":null,"seq":${seq}}\n`,
      );
      await Deno.writeTextFile(seqFile, `${seq}\n`);
    };
    await put(
      "10.244.200.0-24&fc00:244:0:c8::-64",
      `{"PublicIP":"10.93.0.99","PublicIPv6":"fc00:98::99","BackendType":"vxlan",` +
        `"BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:99"},"BackendV6Data":{"VNI":1,"VtepMAC":"0e:00:00:00:06:99"}}`,
    );
    await put(
      "10.244.201.0-24&fc00:244:0:c9::-64",
      `{"PublicIP":"10.93.0.98","PublicIPv6":null,"BackendType":"vxlan",` +
        `"BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:98"}}`,
    );
    c.start(a, FAST);
    await c.waitReady(a);
    const ls = await leases(c);
    const foreign = ls.find((l) => l.attrs.PublicIP === "10.93.0.99")!;
    await waitFor("v6 triplet of the flanneld lease", () => hasV6Triplet(a, foreign));
    await waitFor("v4 routes of both", async () => {
      const r4 = await ipJson<V6Entry[]>(a.ns, "-4", "route", "show");
      return r4.some((r) => r.dst === "10.244.200.0/24") && r4.some((r) => r.dst === "10.244.201.0/24");
    });
    // The lease without PublicIPv6 gets no IPv6 entries, and the daemon says why.
    assert(
      !(await routes6(a.ns)).some((r) => r.dst === "fc00:244:0:c9::/64"),
      "no v6 route without PublicIPv6",
    );
    await waitFor(
      "skip reason logged",
      () =>
        a.log.some((l) =>
          l.includes("skipping peer") && l.includes("fc00:244:0:c9::/64") && l.includes("no PublicIPv6")
        ),
    );
  } finally {
    await c.close();
  }
});
