/**
 * `flanctl daemon` with the VXLAN backend, in throwaway namespaces: subnet.env, the flannel.1 device,
 * the per-peer ARP/FDB/route triplets, pod traffic, flannel's masquerade lines, health/metrics, repair of
 * hand-deleted entries and of the device, peers joining and leaving, and a restart without packet loss.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, fdbs, neighs, routes, type TestNode, waitFor } from "./daemon_fixture.ts";
import { ipJson, nsRun, sh } from "./netns.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { IPNet } from "../lib/base/cidr.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

interface VxlanLink {
  ifname: string;
  mtu: number;
  address: string;
  operstate: string;
  flags: string[];
  linkinfo: {
    info_kind: string;
    info_data: { id: number; local?: string; link?: string; port: number; learning?: boolean };
  };
}

async function vtep(ns: string): Promise<VxlanLink> {
  return (await ipJson<VxlanLink[]>(ns, "-d", "link", "show", "flannel.1"))[0];
}

/** True when `n` holds the vxlan triplet for peer `p` (subnet, VTEP MAC, public IP). */
async function hasTriplet(n: TestNode, subnet: string, mac: string, publicIP: string): Promise<boolean> {
  const gw = subnet.split("/")[0];
  const r = (await routes(n.ns)).find((x) => x.dst === subnet);
  const a = (await neighs(n.ns, "flannel.1")).find((x) => x.dst === gw);
  const f = (await fdbs(n.ns, "flannel.1")).find((x) => x.mac === mac && x.dst === publicIP);
  return !!r && r.gateway === gw && r.dev === "flannel.1" && r.flags.includes("onlink") &&
    !!a && a.lladdr === mac && a.state.includes("PERMANENT") &&
    !!f && f.state === "permanent";
}

async function noEntries(n: TestNode, subnet: string, mac: string): Promise<boolean> {
  const gw = subnet.split("/")[0];
  return !(await routes(n.ns)).some((x) => x.dst === subnet) &&
    !(await neighs(n.ns, "flannel.1")).some((x) => x.dst === gw) &&
    !(await fdbs(n.ns, "flannel.1")).some((x) => x.mac === mac);
}

/** `tx-checksum-ip-generic` of flannel.1 in `ns` as `ethtool -k` prints it ("on"/"off"). */
async function txCsum(ns: string): Promise<string> {
  const out = (await nsRun(ns, ["ethtool", "-k", "flannel.1"])).stdout;
  return /tx-checksum-ip-generic:\s+(on|off)/.exec(out)?.[1] ?? `not shown:\n${out}`;
}

async function ping(fromNs: string, ip: string, count = 2): Promise<boolean> {
  const r = await nsRun(fromNs, ["ping", "-c", String(count), "-W", "1", "-i", "0.2", ip]);
  return r.code === 0;
}

/** Two nodes on the vxlan network, both daemons started with FAST resyncs and ready. */
async function readyPair(c: DaemonCluster) {
  await c.init(NETCONF);
  const a = await c.addNode(), b = await c.addNode();
  c.start(a, FAST);
  c.start(b, FAST);
  await c.waitReady(a);
  await c.waitReady(b);
  return [a, b];
}

needsRoot.test("daemon vxlan: subnet.env, flannel.1, triplets, pod ping, masq rules, readyz/metrics", async () => {
  const c = new DaemonCluster();
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode();
    c.start(a, [...FAST, "--ip-masq", "--vxlan-tx-checksum-offload=false"]);
    // B keeps the kernel's TX checksum offload (the flag), A switches it off (the default).
    c.start(b, FAST); // offload "auto": the public IP is the interface's own, so the kernel's "on" is kept
    await c.waitReady(a);
    await c.waitReady(b);

    const envA = await c.subnetEnv(a);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    assertEquals(envA.FLANNEL_NETWORK, "10.244.0.0/16");
    assertEquals(envA.FLANNEL_SUBNET, subA.replace(/\.0\/24$/, ".1/24"));
    assertEquals(envA.FLANNEL_MTU, "1450");
    assertEquals(envA.FLANNEL_IPMASQ, "true");
    assertEquals((await c.subnetEnv(b)).FLANNEL_IPMASQ, "false");

    const la = await vtep(a.ns), lb = await vtep(b.ns);
    assertEquals(la.linkinfo.info_kind, "vxlan");
    assertEquals(la.linkinfo.info_data.id, 1);
    assertEquals(la.linkinfo.info_data.port, 8472);
    assertEquals(la.linkinfo.info_data.local, a.ip);
    assertEquals(la.linkinfo.info_data.link, "eth0");
    assert(!la.linkinfo.info_data.learning, "learning must be off");
    assertEquals(la.mtu, 1450);
    assert(la.flags.includes("UP"));
    assertEquals(
      parseInt(la.address.slice(0, 2), 16) & 3,
      2,
      "VTEP MAC must be unicast, locally administered",
    );
    assertEquals((await Deno.readTextFile(`${a.stateDir}/flannel.1.mac`)).trim(), la.address);
    const addrs = await ipJson<{ addr_info: { local: string; prefixlen: number }[] }[]>(
      a.ns,
      "-4",
      "addr",
      "show",
      "flannel.1",
    );
    assertEquals(addrs[0].addr_info.map((x) => `${x.local}/${x.prefixlen}`), [subA.replace("/24", "/32")]);

    // The lease in the store carries flannel's BackendData.
    const lease = JSON.parse(await Deno.readTextFile(`${c.storeDir}/subnets/${subA.replace("/", "-")}`));
    assertEquals(lease.lease.BackendType, "vxlan");
    assertEquals(lease.lease.BackendData, { VNI: 1, VtepMAC: la.address });
    assertEquals(lease.lease.PublicIP, a.ip);

    await waitFor("triplet for B on A", () => hasTriplet(a, subB, lb.address, b.ip));
    await waitFor("triplet for A on B", () => hasTriplet(b, subA, la.address, a.ip));
    const pa = await c.addPod(a), pb = await c.addPod(b);
    assert(await ping(pa.ns, pb.ip), "pod A → pod B over vxlan");
    assert(await ping(pb.ns, pa.ip), "pod B → pod A over vxlan");

    // TX checksum offload (flannel #1279): off on A (started with =false) after start, switched off again at
    // the next resync when someone turns it on; B (default auto, no NAT) keeps the kernel's "on".
    assertEquals(await txCsum(a.ns), "off", a.log.join("\n"));
    assertEquals(await txCsum(b.ns), "on", b.log.join("\n"));
    // (The daemon may repair it before we can look, resync being 1 s: its log proves it did.)
    const repairs = () => a.log.filter((l) => l.includes("tx checksum offload off")).length;
    const before = repairs();
    await sh("ip", "netns", "exec", a.ns, "ethtool", "-K", "flannel.1", "tx-checksum-ip-generic", "on");
    await waitFor(
      "tx checksum offload off again on A",
      async () => repairs() > before && (await txCsum(a.ns)) === "off",
    );
    assertEquals(await txCsum(b.ns), "on");
    assert(await ping(pa.ns, pb.ip), "pod A → pod B with offload off on A");
    assert(await ping(pb.ns, pa.ip), "pod B → pod A with offload off on A");

    const save = (await nsRun(a.ns, ["iptables-save"])).stdout.split("\n");
    const N = "10.244.0.0/16";
    const expected = [
      `-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`,
      `-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 -m comment --comment "flanneld masq" -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${subA} -d ${N} -m comment --comment "flanneld masq" -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${N} -d ${subA} -m comment --comment "flanneld masq" -j RETURN`,
      `-A FLANNEL-POSTRTG ! -s ${N} -d ${subA} -m comment --comment "flanneld masq" -j RETURN`,
      `-A FLANNEL-POSTRTG -s ${N} ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`,
      `-A FLANNEL-POSTRTG ! -s ${N} -d ${N} -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`,
      `-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD`,
      `-A FLANNEL-FWD -s ${N} -m comment --comment "flanneld forward" -j ACCEPT`,
      `-A FLANNEL-FWD -d ${N} -m comment --comment "flanneld forward" -j ACCEPT`,
    ];
    // iptables-save prints *filter before *nat; compare as sets of lines (order within a chain is checked below).
    assertEquals(save.filter((l) => l.includes("flanneld")).sort(), [...expected].sort());
    const chain = save.filter((l) => l.startsWith("-A FLANNEL-POSTRTG"));
    assertEquals(chain, expected.filter((l) => l.startsWith("-A FLANNEL-POSTRTG")));
    // Rules deleted by hand come back within --iptables-resync; others' rules are left alone.
    await sh("ip", "netns", "exec", a.ns, "iptables", "-t", "nat", "-F", "FLANNEL-POSTRTG");
    await sh(
      "ip",
      "netns",
      "exec",
      a.ns,
      "iptables",
      "-t",
      "nat",
      "-A",
      "POSTROUTING",
      "-s",
      "192.0.2.0/24",
      "-j",
      "ACCEPT",
    );
    await waitFor("masq rules restored", async () => {
      const s = (await nsRun(a.ns, ["iptables-save"])).stdout.split("\n");
      return JSON.stringify(s.filter((l) => l.includes("flanneld")).sort()) ===
          JSON.stringify([...expected].sort()) &&
        s.includes("-A POSTROUTING -s 192.0.2.0/24 -j ACCEPT");
    });

    const [hs] = await c.http(a, "/healthz");
    assertEquals(hs, 200);
    const [rs, rbody] = await c.http(a, "/readyz");
    assertEquals(rs, 200, rbody);
    const [ms, metrics] = await c.http(a, "/metrics");
    assertEquals(ms, 200);
    assertStringIncludes(metrics, "\nflanctl_peers 1\n");
    assertStringIncludes(metrics, "\nflanctl_leases 2\n");
    assertStringIncludes(metrics, "\nflanctl_store_up 1\n");
    assert(/\nflanctl_rule_resyncs_total [2-9]/.test(metrics), "rule resync counted");
    assert(/\nflanctl_reconcile_runs_total [1-9]/.test(metrics));
    assertStringIncludes(metrics, "flanctl_reconcile_duration_seconds_count");
    assert(a.log.some((l) => /level=info msg="lease acquired"/.test(l)), a.log.join("\n"));
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon vxlan: repairs hand-deleted entries and device; peers join and leave", async () => {
  const c = new DaemonCluster();
  try {
    const [a, b] = await readyPair(c);
    const subB = await c.subnetOf(b);
    const gwB = subB.split("/")[0];
    const macA = (await vtep(a.ns)).address, macB = (await vtep(b.ns)).address;
    await waitFor("triplet", () => hasTriplet(a, subB, macB, b.ip));

    await sh("ip", "-n", a.ns, "route", "del", subB);
    await waitFor("route repaired", () => hasTriplet(a, subB, macB, b.ip));
    await sh("ip", "-n", a.ns, "neigh", "del", gwB, "dev", "flannel.1");
    await waitFor("ARP entry repaired", () => hasTriplet(a, subB, macB, b.ip));
    await sh("ip", "netns", "exec", a.ns, "bridge", "fdb", "del", macB, "dev", "flannel.1", "dst", b.ip);
    await waitFor("FDB entry repaired", () => hasTriplet(a, subB, macB, b.ip));
    // A stale entry of ours (no lease wants it) is removed.
    await sh(
      "ip",
      "-n",
      a.ns,
      "route",
      "add",
      "10.244.250.0/24",
      "via",
      "10.244.250.0",
      "dev",
      "flannel.1",
      "onlink",
    );
    await waitFor(
      "stale route removed",
      async () => !(await routes(a.ns)).some((r) => r.dst === "10.244.250.0/24"),
    );

    await sh("ip", "-n", a.ns, "link", "del", "flannel.1");
    await waitFor("device recreated with entries", () => hasTriplet(a, subB, macB, b.ip));
    assertEquals((await vtep(a.ns)).address, macA, "the VTEP MAC survives recreation");
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(c.explain("pods ping after repair"), () => ping(pa.ns, pb.ip, 1));
    assert(a.log.some((l) => l.includes("repaired peer entries")), a.log.join("\n"));

    // A new node joins: the others learn it.
    const n3 = await c.addNode();
    c.start(n3, FAST);
    await c.waitReady(n3);
    const sub3 = await c.subnetOf(n3);
    const mac3 = (await vtep(n3.ns)).address;
    await waitFor("A learns node 3", () => hasTriplet(a, sub3, mac3, n3.ip));
    await waitFor("B learns node 3", () => hasTriplet(b, sub3, mac3, n3.ip));
    const subA = await c.subnetOf(a);
    await waitFor("node 3 learns A", () => hasTriplet(n3, subA, macA, a.ip));

    // Node 3 stops (its lease stays), then its lease is revoked: every peer removes its entries.
    assertEquals(await c.stop(n3), 0);
    assert(await hasTriplet(a, sub3, mac3, n3.ip), "a stopped daemon's lease stays");
    await new FileStore({ dir: c.storeDir }).revokeLease(IPNet.parse(sub3));
    await waitFor("A forgets node 3", () => noEntries(a, sub3, mac3));
    await waitFor("B forgets node 3", () => noEntries(b, sub3, mac3));
    assert(await hasTriplet(a, subB, macB, b.ip), "other peers untouched");

    // A node with a 5 s lease TTL renews it while running (half-way: a renewal may come 2.5 s late before
    // the lease lapses); killed, its lease expires and peers forget it.
    const n4 = await c.addNode();
    c.start(n4, [...FAST, "--lease-ttl", "5"]);
    await c.waitReady(n4);
    const sub4 = await c.subnetOf(n4);
    const mac4 = (await vtep(n4.ns)).address;
    await waitFor("A learns node 4", () => hasTriplet(a, sub4, mac4, n4.ip));
    await new Promise((r) => setTimeout(r, 6000));
    assert(await hasTriplet(a, sub4, mac4, n4.ip), "a renewed lease outlives its TTL");
    assert(n4.log.some((l) => l.includes("lease renewed")), n4.log.join("\n"));
    await c.stop(n4, "SIGKILL");
    await waitFor("A forgets node 4 after its lease expired", () => noEntries(a, sub4, mac4));
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon vxlan: restart keeps entries and loses no packets; own lease revoked → exit", async () => {
  const c = new DaemonCluster();
  try {
    const [a, b] = await readyPair(c);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    const macA = (await vtep(a.ns)).address, macB = (await vtep(b.ns)).address;
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(c.explain("pods ping"), () => ping(pa.ns, pb.ip, 1));

    // 100 pps across a restart of A's daemon.
    const pinger = new Deno.Command("ip", {
      args: ["netns", "exec", pa.ns, "ping", "-i", "0.01", "-c", "400", "-W", "1", pb.ip],
      stdout: "piped",
      stderr: "piped",
    }).output();
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(await c.stop(a), 0, "SIGTERM is a clean stop");
    assert(await hasTriplet(a, subB, macB, b.ip), "entries stay while the daemon is down");
    c.start(a, FAST);
    await c.waitReady(a);
    const out = new TextDecoder().decode((await pinger).stdout);
    assertStringIncludes(out, "400 received, 0% packet loss");
    assertEquals(await c.subnetOf(a), subA, "same subnet after restart");
    assertEquals((await vtep(a.ns)).address, macA, "same VTEP MAC after restart");
    assert(
      !a.log.some((l) => l.includes("repaired peer entries") || l.includes("removed stale")),
      a.log.join("\n"),
    );

    // Our own lease is revoked in the store: as flanneld, the daemon says so and exits non-zero (its
    // supervisor restarts it); kernel state stays, so pods keep talking until the restart acquires anew.
    await new FileStore({ dir: c.storeDir }).revokeLease(IPNet.parse(subA));
    const code = (await a.proc!.status).code;
    assertEquals(code, 3, a.log.join("\n"));
    assert(
      a.log.some((l) => l.includes("level=error") && l.includes("lease has been revoked")),
      a.log.join("\n"),
    );
    assert(await hasTriplet(a, subB, macB, b.ip), "entries stay after the exit");
    c.start(a, FAST);
    await c.waitReady(a);
    assertEquals(await c.subnetOf(a), subA, "restarted: its previous subnet (subnet.env) was free again");
    await waitFor("B keeps A's entries", () => hasTriplet(b, subA, macA, a.ip));
    assert(await ping(pb.ns, pa.ip, 1));
  } finally {
    await c.close();
  }
});
