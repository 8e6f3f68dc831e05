/**
 * Hostile peers (issue 30, HIGH): whatever a peer's lease or Node says, nothing is programmed for a lease
 * that fails the checks of lib/reconcile/peer_guard.ts — no route, no ARP entry, no FDB entry — and
 * `flanctl_rejected_peers_total{reason}` counts it. Written by the fake API server (kube mode), by a raw
 * etcd writer (etcdctl) and into the file store's directory: subnets of the whole Network, a /23, a /25
 * inside our subnet, a second lease for a peer's subnet (the older wins), PublicIPs 0.0.0.0, 127.0.0.1,
 * 224.0.0.1 and 255.255.255.255, VtepMACs ff:ff:ff:ff:ff:ff and 00:00:00:00:00:00, a Node without the
 * kube-subnet-manager annotation, IPv6 halves with a /48, ::1, ff02::1, fe80::1 or a zero VtepMAC (vxlan
 * with DirectRouting), a whole-Network lease on the udp backend; and a writer claiming our own subnet with
 * its PublicIP: our lease is written back at once, the other node's FDB keeps pointing at us, the pods keep
 * pinging and doctor names the claimant.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import {
  DaemonCluster,
  fdbs,
  metric,
  neighs,
  routes,
  spawnEtcd,
  type TestNode,
  waitFor,
} from "./daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { flanctl, ipJson, nsRun, nsSh, ROOT, sh } from "./netns.ts";
import { KubeControlPlane } from "./kube_cluster.ts";
import { requirePeers } from "./peers.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

const P = "flannel.alpha.coreos.com/";
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

/** `net`'s routes, neighbours and FDB entries of the overlay: what a peer could have made us program. */
async function peerEntries(
  n: TestNode,
  net: string,
): Promise<{ routes: string[]; neigh: string[]; fdb: string[] }> {
  const prefix = net.split(".").slice(0, 2).join(".") + ".";
  const hasDev = (await nsRun(n.ns, ["ip", "link", "show", "flannel.1"])).code === 0;
  return {
    routes: (await routes(n.ns)).filter((r) => r.dst.startsWith(prefix) && r.gateway).map((r) =>
      `${r.dst} via ${r.gateway} dev ${r.dev}`
    ).sort(),
    neigh: hasDev
      ? (await neighs(n.ns, "flannel.1")).filter((x) => x.state.includes("PERMANENT")).map((x) =>
        `${x.dst} ${x.lladdr}`
      ).sort()
      : [],
    fdb: hasDev
      ? (await fdbs(n.ns, "flannel.1")).filter((f) => f.dst).map((f) => `${f.mac} ${f.dst}`).sort()
      : [],
  };
}

/** The node's /metrics body. */
async function metrics(c: DaemonCluster, n: TestNode): Promise<string> {
  const [code, body] = await c.http(n, "/metrics");
  assertEquals(code, 200);
  return body;
}

const rejected = (body: string, reason: string) =>
  metric(body, `flanctl_rejected_peers_total{reason="${reason}"}`);

needsRoot.test("hostile peers, kube: Nodes with bad podCIDRs, addresses or MACs, unannotated, duplicate or claiming ours program nothing", async () => {
  const c = new DaemonCluster("10.95");
  let api: FakeApiServer | null = null;
  try {
    await c.init();
    const a = await c.addNode();
    api = new FakeApiServer({ hostname: "10.95.0.1", netns: c.underlay });
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    await Deno.writeTextFile(
      `${c.tmp}/net-conf.json`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
    );
    await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(api.url));
    c.start(a, [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      ...FAST,
    ], { NODE_NAME: "kn1" });
    await c.waitReady(a);
    const before = await metrics(c, a);
    assertEquals(rejected(before, "public_ip"), 0);

    const node = (
      name: string,
      cidr: string,
      ip: string,
      mac: string,
      opts: { managed?: boolean; created?: string } = {},
    ) =>
      api!.upsert(name, { podCIDR: cidr, podCIDRs: [cidr] }, {
        [`${P}backend-type`]: "vxlan",
        [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: mac }),
        [`${P}public-ip`]: ip,
        ...(opts.managed === false ? {} : { [`${P}kube-subnet-manager`]: "true" }),
      }, opts.created);
    // Good peers: g1 (older) and g2 claim one subnet; g3 alone.
    node("g1", "10.244.20.0/24", "10.95.0.120", "0e:00:00:00:00:20", { created: "2026-01-01T00:00:00Z" });
    node("g2", "10.244.20.0/24", "10.95.0.121", "0e:00:00:00:00:21", { created: "2026-06-01T00:00:00Z" });
    node("g3", "10.244.21.0/24", "10.95.0.122", "0e:00:00:00:00:22");
    // Hostile ones.
    node("h-whole", "10.244.0.0/16", "10.95.0.130", "0e:00:00:00:00:30");
    node("h-23", "10.244.4.0/23", "10.95.0.131", "0e:00:00:00:00:31");
    node("h-25", "10.244.1.128/25", "10.95.0.132", "0e:00:00:00:00:32");
    node("h-ip0", "10.244.10.0/24", "0.0.0.0", "0e:00:00:00:00:40");
    node("h-ip127", "10.244.11.0/24", "127.0.0.1", "0e:00:00:00:00:41");
    node("h-ip224", "10.244.12.0/24", "224.0.0.1", "0e:00:00:00:00:42");
    node("h-ip255", "10.244.13.0/24", "255.255.255.255", "0e:00:00:00:00:43");
    node("h-macff", "10.244.14.0/24", "10.95.0.144", "ff:ff:ff:ff:ff:ff");
    node("h-mac00", "10.244.15.0/24", "10.95.0.145", "00:00:00:00:00:00");
    node("h-unmanaged", "10.244.16.0/24", "10.95.0.146", "0e:00:00:00:00:46", { managed: false });
    node("h-ours", "10.244.1.0/24", "10.95.0.147", "0e:00:00:00:00:47");

    const want = {
      routes: [
        "10.244.20.0/24 via 10.244.20.0 dev flannel.1",
        "10.244.21.0/24 via 10.244.21.0 dev flannel.1",
      ],
      neigh: ["10.244.20.0 0e:00:00:00:00:20", "10.244.21.0 0e:00:00:00:00:22"],
      fdb: ["0e:00:00:00:00:20 10.95.0.120", "0e:00:00:00:00:22 10.95.0.122"],
    };
    await waitFor(
      c.explain("only g1 and g3 programmed"),
      async () => JSON.stringify(await peerEntries(a, "10.244.0.0")) === JSON.stringify(want),
    );
    // Several full passes later still nothing else.
    await new Promise((r) => setTimeout(r, 2500));
    assertEquals(await peerEntries(a, "10.244.0.0"), want, await c.state());
    const m = await metrics(c, a);
    assertEquals(rejected(m, "subnet_length"), 3, m);
    assertEquals(rejected(m, "public_ip"), 4, m);
    assertEquals(rejected(m, "vtep_mac"), 2, m);
    assertEquals(rejected(m, "own_subnet"), 1, m);
    assertEquals(rejected(m, "conflict"), 1, m);
    assertEquals(metric(m, "flanctl_own_subnet_claims_total"), 1, m);
    assert(m.includes('flanctl_own_subnet_last_claim_timestamp_seconds{public_ip="10.95.0.147"}'), m);
    assert(
      !a.log.some((l) => l.includes("h-unmanaged")),
      "a Node without kube-subnet-manager is not a lease",
    );
    assert(a.log.some((l) => l.includes("level=error") && l.includes("claims our subnet")), a.log.join("\n"));
    const warned = a.log.filter((l) => l.includes("skipping peer") && l.includes("level=warn"));
    assertEquals(warned.length, 11, warned.join("\n")); // one per refused lease

    // g1 goes: g2 takes its subnet over.
    api.remove("g1");
    await waitFor(
      c.explain("g2 programmed after g1 left"),
      async () => (await peerEntries(a, "10.244.0.0")).fdb.includes("0e:00:00:00:00:21 10.95.0.121"),
    );

    // Someone rewrites OUR Node's annotations with their address: we patch ours back at once.
    const ann = api.nodes.get("kn1")!.metadata.annotations;
    api.upsert("kn1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] }, {
      ...ann,
      [`${P}public-ip`]: "10.95.0.150",
    });
    await waitFor(
      c.explain("our public-ip annotation written back"),
      () => api!.nodes.get("kn1")!.metadata.annotations[`${P}public-ip`] === a.ip,
    );
    const m2 = await metrics(c, a);
    assert(metric(m2, "flanctl_own_lease_rewrites_total") >= 1, m2);
    assert(m2.includes('flanctl_own_subnet_last_claim_timestamp_seconds{public_ip="10.95.0.150"}'), m2);
  } finally {
    await c.close();
    await api?.close();
  }
});

needsRoot.test("hostile peers, etcd: bad leases program nothing; a claim of our subnet is written back, node2 keeps pointing at us", async () => {
  const c = new DaemonCluster("10.94");
  let etcd: Deno.ChildProcess | null = null;
  const url = "http://10.94.0.1:2379";
  const ctl = (...args: string[]) => nsRun(c.underlay, ["etcdctl", "--endpoints", url, ...args]);
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url);
    const conf = JSON.stringify({ Network: "10.247.0.0/16", Backend: { Type: "vxlan" } });
    await waitFor("etcd up", async () => (await ctl("put", "/coreos.com/network/config", conf)).code === 0);
    const flags = ["--etcd-endpoints", url, ...FAST];
    c.start(a, flags);
    await c.waitReady(a);
    c.start(b, flags);
    await c.waitReady(b);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    const keyA = `/coreos.com/network/subnets/${subA.replace("/", "-")}`;
    const get = async (key: string) => JSON.parse((await ctl("get", key, "--print-value-only")).stdout);
    const macA = (await get(keyA)).BackendData.VtepMAC as string;
    const pa = await c.addPod(a), pb = await c.addPod(b);
    const ping = async (n = 1) =>
      (await nsRun(pa.ns, ["ping", "-c", String(n), "-W", "1", pb.ip])).code === 0;
    await waitFor(c.explain("pods ping"), () => ping());
    const good = await peerEntries(b, "10.247.0.0");
    assertEquals(good.fdb, [`${macA} ${a.ip}`]);

    const lease = (ip: string, mac: string) =>
      JSON.stringify({
        PublicIP: ip,
        PublicIPv6: null,
        BackendType: "vxlan",
        BackendData: { VNI: 1, VtepMAC: mac },
      });
    const put = async (key: string, value: string) =>
      assertEquals((await ctl("put", `/coreos.com/network/subnets/${key}`, value)).code, 0);
    const aNet = subA.split("/")[0];
    await put("10.247.0.0-16", lease("10.94.0.130", "0e:00:00:00:00:30"));
    await put("10.247.200.0-23", lease("10.94.0.131", "0e:00:00:00:00:31"));
    await put(`${aNet.replace(/\.0$/, ".128")}-25`, lease("10.94.0.132", "0e:00:00:00:00:32"));
    await put("10.247.210.0-24", lease("0.0.0.0", "0e:00:00:00:00:40"));
    await put("10.247.211.0-24", lease("127.0.0.1", "0e:00:00:00:00:41"));
    await put("10.247.212.0-24", lease("224.0.0.1", "0e:00:00:00:00:42"));
    await put("10.247.213.0-24", lease("255.255.255.255", "0e:00:00:00:00:43"));
    await put("10.247.214.0-24", lease("10.94.0.144", "ff:ff:ff:ff:ff:ff"));
    await put("10.247.215.0-24", lease("10.94.0.145", "00:00:00:00:00:00"));
    // A second lease (dual-stack key form) for A's subnet: A's own, older lease is the peer.
    await put(`${subA.replace("/", "-")}&fc00::-64`, lease("10.94.0.146", "0e:00:00:00:00:46"));
    await new Promise((r) => setTimeout(r, 2500));
    assertEquals(await peerEntries(b, "10.247.0.0"), good, await c.state());
    const m = await metrics(c, b);
    assertEquals(rejected(m, "subnet_length"), 3, m);
    assertEquals(rejected(m, "public_ip"), 4, m);
    assertEquals(rejected(m, "vtep_mac"), 2, m);
    assertEquals(rejected(m, "conflict"), 1, m);
    // On A the second lease claims its own subnet: refused and said loudly.
    const mA = await metrics(c, a);
    assertEquals(rejected(mA, "own_subnet"), 1, mA); // the second lease (the /25 inside it: subnet_length)
    assertEquals(rejected(mA, "subnet_length"), 3, mA);
    assert(metric(mA, "flanctl_own_subnet_claims_total") >= 1, mA);

    // A writer overwrites A's own lease with its PublicIP and MAC: A writes it back at once.
    await put(subA.replace("/", "-"), lease("10.94.0.177", "0e:00:00:00:00:77"));
    await waitFor(c.explain("A's lease written back"), async () => (await get(keyA)).PublicIP === a.ip);
    await waitFor(
      c.explain("B's FDB points at A"),
      async () =>
        JSON.stringify((await peerEntries(b, "10.247.0.0")).fdb) === JSON.stringify([`${macA} ${a.ip}`]),
    );
    assert(await ping(5), "pods keep pinging");
    const m2 = await metrics(c, a);
    assert(metric(m2, "flanctl_own_lease_rewrites_total") >= 1, m2);
    assert(m2.includes('flanctl_own_subnet_last_claim_timestamp_seconds{public_ip="10.94.0.177"}'), m2);
    assert(
      a.log.some((l) => l.includes("level=error") && l.includes("our lease was overwritten")),
      a.log.join("\n"),
    );
    // doctor names the claimant (from the daemon's /metrics).
    const doc = await flanctl([
      "doctor",
      "--subnet-file",
      a.subnetFile,
      "--etcd-endpoints",
      url,
      "-o",
      "json",
    ], {
      ns: a.ns,
    });
    const own = (JSON.parse(doc.stdout) as { checks: { id: FindingId; severity: string; detail: string }[] })
      .checks
      .find((f) => f.id === "lease-own");
    assertEquals(own?.severity, "warning", doc.stdout);
    assert(own!.detail.includes("PublicIP 10.94.0.177 claimed this subnet"), own!.detail);
    assertEquals(subB, await c.subnetOf(b));
  } finally {
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    await c.close();
  }
});

needsRoot.test("hostile peers, file store + host-gw: a whole-Network lease on the segment and a /25 in ours are not routed; our record is written back", async () => {
  const c = new DaemonCluster("10.92");
  try {
    await c.init(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "host-gw" } }));
    const a = await c.addNode();
    c.start(a, FAST);
    await c.waitReady(a);
    const subA = await c.subnetOf(a);
    const put = (key: string, value: string) => putFile(c, key, value);
    const lease = (ip: string) => JSON.stringify({ PublicIP: ip, PublicIPv6: null, BackendType: "host-gw" });
    // Both on A's own segment, so host-gw could reach them directly: only the checks keep them out.
    await put("10.244.0.0-16", lease("10.92.0.50"));
    await put(`${subA.split("/")[0].replace(/\.0$/, ".128")}-25`, lease("10.92.0.51"));
    await put("10.244.99.0-24", lease("10.92.0.52")); // a good one, to know the events arrived
    await waitFor(
      c.explain("the good lease routed"),
      async () => (await routes(a.ns)).some((r) => r.dst === "10.244.99.0/24" && r.gateway === "10.92.0.52"),
    );
    await new Promise((r) => setTimeout(r, 2000));
    assertEquals((await peerEntries(a, "10.244.0.0")).routes, ["10.244.99.0/24 via 10.92.0.52 dev eth0"]);
    assertEquals(rejected(await metrics(c, a), "subnet_length"), 2);
    // Our record rewritten by someone else: A puts its own back.
    await put(subA.replace("/", "-"), lease("10.92.0.53"));
    await waitFor(c.explain("our lease file written back"), async () => {
      const t = await Deno.readTextFile(`${c.storeDir}/subnets/${subA.replace("/", "-")}`);
      return JSON.parse(t).lease.PublicIP === a.ip;
    });
  } finally {
    await c.close();
  }
});

/** Writes lease file `key` into the cluster's file store and announces it (as a foreign writer would). */
async function putFile(c: DaemonCluster, key: string, value: string): Promise<void> {
  await Deno.mkdir(`${c.storeDir}/subnets`, { recursive: true });
  await Deno.mkdir(`${c.storeDir}/tmp`, { recursive: true });
  // As the file store writes (lib/store/file/file.ts): under the exclusive flock of .lock, the lease renamed
  // into place from tmp/, then seq bumped the same way. Without the lock a daemon renewing its own lease
  // between our read and write of seq gave two changes one number, and its watch skipped ours; without the
  // rename it could read a half-written lease.
  const lock = await Deno.open(`${c.storeDir}/.lock`, { read: true, write: true, create: true });
  try {
    await lock.lock(true);
    const seqFile = `${c.storeDir}/seq`;
    const seq = Number(await Deno.readTextFile(seqFile).catch(() => "0")) + 1;
    const tmp = `${c.storeDir}/tmp/test-${key}`;
    await Deno.writeTextFile(tmp, `{"lease":${value},"expiration":null,"seq":${seq}}\n`);
    await Deno.rename(tmp, `${c.storeDir}/subnets/${key}`);
    await Deno.writeTextFile(`${tmp}.seq`, `${seq}\n`);
    await Deno.rename(`${tmp}.seq`, seqFile);
  } finally {
    lock.close();
  }
}

needsRoot.test("hostile peers, dual stack vxlan with DirectRouting: each family refuses what is bad for it", async () => {
  const c = new DaemonCluster("10.91");
  try {
    await c.init(JSON.stringify({
      Network: "10.244.0.0/16",
      EnableIPv6: true,
      IPv6Network: "fc00:244::/48",
      Backend: { Type: "vxlan", DirectRouting: true },
    }));
    const a = await c.addNode();
    await sh("ip", "-n", c.underlay, "addr", "add", "fc00:91::1/64", "dev", "br0", "nodad");
    await nsSh(c.underlay, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
    await sh("ip", "-n", a.ns, "addr", "add", "fc00:91::11/64", "dev", "eth0", "nodad");
    await sh("ip", "-n", a.ns, "-6", "route", "add", "default", "via", "fc00:91::1");
    await nsSh(a.ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
    const mac = (n: number) => `0e:00:00:00:00:${n.toString(16).padStart(2, "0")}`;
    const lease = (ip: string, ip6: string, m4 = mac(1), m6 = mac(2)) =>
      JSON.stringify({
        PublicIP: ip,
        PublicIPv6: ip6,
        BackendType: "vxlan",
        BackendData: { VNI: 1, VtepMAC: m4 },
        BackendV6Data: { VNI: 1, VtepMAC: m6 },
      });
    c.start(a, FAST);
    await waitFor(c.explain("A ready"), async () => (await c.http(a, "/readyz"))[0] === 200);
    // Six subnets of each family that are not A's own (A's are drawn at random).
    const own4 = Number((await c.subnetOf(a)).split(".")[2]);
    const own6 = (await c.subnetEnv(a)).FLANNEL_IPV6_SUBNET;
    const picks = [...Array(12).keys()].map((k) => 99 + k).filter((k) =>
      k !== own4 && !own6.startsWith(`fc00:244:0:${k.toString(16)}::`)
    ).slice(0, 6);
    const key = (k: number) => `10.244.${k}.0-24&fc00:244:0:${k.toString(16)}::-64`;
    await putFile(c, key(picks[0]), lease(`10.91.0.${picks[0]}`, `fc00:91::${picks[0]}`));
    await putFile(c, `10.244.${picks[1]}.0-24&fc00:244::-48`, lease(`10.91.0.${picks[1]}`, "fc00:91::51")); // v6: whole network
    await putFile(c, key(picks[2]), lease(`10.91.0.${picks[2]}`, "::1"));
    await putFile(c, key(picks[3]), lease(`10.91.0.${picks[3]}`, "ff02::1"));
    await putFile(c, key(picks[4]), lease(`10.91.0.${picks[4]}`, "fe80::1"));
    await putFile(
      c,
      key(picks[5]),
      lease(`10.91.0.${picks[5]}`, `fc00:91::${picks[5]}`, mac(3), "00:00:00:00:00:00"),
    );
    // On A's segment, so DirectRouting alone would route the whole Network to it.
    await putFile(c, "10.244.0.0-16", lease("10.91.0.250", "fc00:91::250"));
    const v4 = async () =>
      (await routes(a.ns)).filter((r) => r.dst.startsWith("10.244.") && r.gateway).map((r) =>
        `${r.dst} via ${r.gateway} dev ${r.dev}`
      ).sort();
    const v6 = async () =>
      (await ipJson<{ dst: string; gateway?: string; dev: string }[]>(a.ns, "-6", "route", "show"))
        .filter((r) => r.dst.startsWith("fc00:244") && r.gateway).map((r) =>
          `${r.dst} via ${r.gateway} dev ${r.dev}`
        )
        .sort();
    const want4 = picks.map((k) => `10.244.${k}.0/24 via 10.91.0.${k} dev eth0`).sort();
    const want6 = [`fc00:244:0:${picks[0].toString(16)}::/64 via fc00:91::${picks[0]} dev eth0`];
    await waitFor(
      c.explain("IPv4 routes of the six leases with a good IPv4 half"),
      async () => JSON.stringify(await v4()) === JSON.stringify(want4),
    );
    await waitFor(
      c.explain("one IPv6 route"),
      async () => JSON.stringify(await v6()) === JSON.stringify(want6),
    );
    await new Promise((r) => setTimeout(r, 2000));
    assertEquals(await v4(), want4);
    assertEquals(await v6(), want6);
    const m = await metrics(c, a);
    assertEquals(rejected(m, "subnet_length"), 2, m); // 10.244.0.0/16 and fc00:244::/48
    assertEquals(rejected(m, "public_ip"), 3, m); // ::1, ff02::1, fe80::1
    assertEquals(rejected(m, "vtep_mac"), 1, m); // the zero IPv6 VtepMAC, though DirectRouting needs none
  } finally {
    await c.close();
  }
});

needsRoot.test("hostile peers, udp: a whole-Network lease gets no route and no slot in the data path's table", async () => {
  const c = new DaemonCluster("10.89");
  try {
    await c.init(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } }));
    const a = await c.addNode();
    c.start(a, FAST);
    await c.waitReady(a);
    const lease = (ip: string) => JSON.stringify({ PublicIP: ip, PublicIPv6: null });
    await putFile(c, "10.244.0.0-16", lease("10.89.0.50"));
    await putFile(c, "10.244.99.0-24", lease("255.255.255.255"));
    await putFile(c, "10.244.98.0-24", lease("10.89.0.51"));
    await waitFor(
      c.explain("the good lease routed via flannel0"),
      async () => (await routes(a.ns)).some((r) => r.dst === "10.244.98.0/24" && r.dev === "flannel0"),
    );
    await new Promise((r) => setTimeout(r, 2000));
    assertEquals(
      (await routes(a.ns)).filter((r) => r.dst.startsWith("10.244.") && r.gateway).map((r) => r.dst),
      ["10.244.98.0/24"],
    );
    const m = await metrics(c, a);
    assertEquals(metric(m, "flanctl_udp_peers"), 1, m);
    assertEquals(rejected(m, "subnet_length"), 1, m);
    assertEquals(rejected(m, "public_ip"), 1, m);
  } finally {
    await c.close();
  }
});

needsRoot.test({
  name:
    "hostile peers, real kube-apiserver: refused Nodes program nothing; our overwritten annotation is patched back",
  ignore: !requirePeers(["kube-apiserver", "kube-controller-manager", "kubectl", "etcd", "etcdctl"]),
  async fn() {
    const c = new DaemonCluster("10.88");
    let cp: KubeControlPlane | null = null;
    try {
      await c.init();
      const a = await c.addNode();
      cp = await KubeControlPlane.start({
        netns: c.underlay,
        address: `${c.base}.0.1`,
        clusterCidr: "10.244.0.0/16",
        dir: `${c.tmp}/kube`,
      });
      await cp.kubectlOk("apply", "-f", `${ROOT}deploy/kube-flanctl.yml`);
      await cp.upsertNode("kn1");
      const own = await waitFor("kn1's podCIDR", async () => (await cp!.node("kn1"))?.spec.podCIDR, 60_000);
      await Deno.writeTextFile(
        `${c.tmp}/net-conf.json`,
        JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
      );
      await cp.kubectlOk("create", "secret", "generic", "tok", "-n", "kube-flannel");
      await Deno.writeTextFile(`${c.tmp}/token`, await cp.token("kube-flannel", "flannel", "tok"));
      await Deno.writeTextFile(`${c.tmp}/sa.kubeconfig`, cp.kubeconfig({ tokenFile: `${c.tmp}/token` }));
      c.start(a, [
        "--kube-subnet-mgr",
        `--kubeconfig-file=${c.tmp}/sa.kubeconfig`,
        `--net-config-path=${c.tmp}/net-conf.json`,
        ...FAST,
      ], { NODE_NAME: "kn1" });
      await c.waitReady(a, 90_000);
      const ann = (ip: string, mac: string, managed = true) => ({
        [`${P}public-ip`]: ip,
        [`${P}backend-type`]: "vxlan",
        [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: mac }),
        ...(managed ? { [`${P}kube-subnet-manager`]: "true" } : {}),
      });
      const free = [50, 51, 52, 53, 54].map((k) => `10.244.${k}.0/24`).filter((s) => s !== own);
      await cp.upsertNode("h-whole", ["10.244.0.0/16"], ann("10.88.0.130", "0e:00:00:00:00:30"));
      await cp.upsertNode("h-lo", [free[0]], ann("127.0.0.1", "0e:00:00:00:00:31"));
      await cp.upsertNode("h-mac", [free[1]], ann("10.88.0.132", "ff:ff:ff:ff:ff:ff"));
      await cp.upsertNode("h-unmanaged", [free[2]], ann("10.88.0.133", "0e:00:00:00:00:33", false));
      // Its podCIDR given too: h-whole's /16 leaves the controller manager no free CIDR to allocate.
      await cp.upsertNode("good", [free[3]], ann("10.88.0.134", "0e:00:00:00:00:34"));
      const good = await waitFor(
        "good's podCIDR",
        async () => (await cp!.node("good"))?.spec.podCIDR,
        60_000,
      );
      const want = {
        routes: [`${good} via ${good.split("/")[0]} dev flannel.1`],
        neigh: [`${good.split("/")[0]} 0e:00:00:00:00:34`],
        fdb: ["0e:00:00:00:00:34 10.88.0.134"],
      };
      await waitFor(
        c.explain("only the good Node programmed"),
        async () => JSON.stringify(await peerEntries(a, "10.244.0.0")) === JSON.stringify(want),
        60_000,
      );
      await new Promise((r) => setTimeout(r, 2500));
      assertEquals(await peerEntries(a, "10.244.0.0"), want, await c.state());
      const m = await metrics(c, a);
      assertEquals(rejected(m, "subnet_length"), 1, m);
      assertEquals(rejected(m, "public_ip"), 1, m);
      assertEquals(rejected(m, "vtep_mac"), 1, m);

      // Someone overwrites our Node's public-ip annotation: the daemon patches its own back.
      await cp.kubectlOk("annotate", "node", "kn1", "--overwrite", `${P}public-ip=10.88.0.177`);
      await waitFor(
        c.explain("our public-ip annotation patched back"),
        async () => (await cp!.node("kn1"))?.metadata.annotations?.[`${P}public-ip`] === a.ip,
        60_000,
      );
      assert(metric(await metrics(c, a), "flanctl_own_lease_rewrites_total") >= 1);
    } finally {
      await c.close();
      await cp?.stop();
    }
  },
});
