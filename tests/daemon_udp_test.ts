/**
 * `flanctl daemon` with the UDP backend, in throwaway namespaces: the flannel0 TUN device as flannel
 * configures it, the lease as flannel's udp backend writes it, pod traffic through the userspace data
 * path (ping and a 1 MB TCP transfer checked byte for byte), peers learned and dropped without restart,
 * datagrams from addresses holding no lease dropped and counted, and bad input refused with nothing made.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, metric, routes, waitFor } from "./daemon_fixture.ts";
import { flanctl, ipJson, nsRun, sh } from "./netns.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { IPNet } from "../lib/base/cidr.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

async function ping(fromNs: string, ip: string, count = 2): Promise<boolean> {
  const r = await nsRun(fromNs, ["ping", "-c", String(count), "-W", "1", "-i", "0.2", ip]);
  return r.code === 0;
}

needsRoot.test("daemon udp: flannel0, lease, pod ping both ways, metrics", async () => {
  const c = new DaemonCluster();
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode();
    c.start(a, FAST);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    assertEquals((await c.subnetEnv(a)).FLANNEL_MTU, "1472");
    const l =
      (await ipJson<{ mtu: number; txqlen: number; flags: string[]; linkinfo?: { info_kind: string } }[]>(
        a.ns,
        "-d",
        "link",
        "show",
        "flannel0",
      ))[0];
    assertEquals(l.linkinfo?.info_kind, "tun");
    assertEquals(l.mtu, 1472);
    assertEquals(l.txqlen, 5000);
    assert(l.flags.includes("UP"), JSON.stringify(l));
    const addrs = await ipJson<{ addr_info: { local: string; prefixlen: number }[] }[]>(
      a.ns,
      "-4",
      "addr",
      "show",
      "flannel0",
    );
    assertEquals(addrs[0].addr_info.map((x) => `${x.local}/${x.prefixlen}`), [subA.replace("/24", "/32")]);
    const rs = await routes(a.ns);
    assert(
      rs.some((r) => r.dst === "10.244.0.0/16" && r.dev === "flannel0" && !r.gateway),
      JSON.stringify(rs),
    );
    const lease = JSON.parse(await Deno.readTextFile(`${c.storeDir}/subnets/${subA.replace("/", "-")}`));
    assertEquals(lease.lease, { PublicIP: a.ip, PublicIPv6: null });
    await waitFor("route for B on A", async () => (await routes(a.ns)).some((r) => r.dst === subB));
    // B may learn A later than A learns B (both start at once): until it does, B drops A's datagrams, and a
    // ping that still succeeds on its second request leaves A's counters short of 4.
    await waitFor("route for A on B", async () => (await routes(b.ns)).some((r) => r.dst === subA));
    const pa = await c.addPod(a), pb = await c.addPod(b);
    assert(await ping(pa.ns, pb.ip), `pod A → pod B over udp\n${a.log.join("\n")}`);
    assert(await ping(pb.ns, pa.ip), "pod B → pod A over udp");
    const [, m] = await c.http(a, "/metrics");
    assert(metric(m, 'flanctl_udp_packets_total{direction="tx"}') >= 4, m);
    assert(metric(m, 'flanctl_udp_packets_total{direction="rx"}') >= 4, m);
    assertEquals(metric(m, "flanctl_udp_peers"), 1);
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon udp: the receive worker warms up on loopback, counts none of it, keeps nothing of it", async () => {
  const c = new DaemonCluster("10.97");
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode();
    // B's namespace without a usable loopback: its warm-up cannot run, B must serve all the same. Its
    // health server on 127.0.0.1 cannot be reached either, so B's readiness is read from its log.
    await sh("ip", "-n", b.ns, "link", "set", "lo", "down");
    c.start(a, FAST);
    c.start(b, FAST);
    await c.waitReady(a);
    await waitFor("B ready (its log)", () => b.log.some((l) => l.includes(" msg=ready ")));
    const warmed = await waitFor(
      "A's warm-up logged",
      () => a.log.find((l) => l.includes("UDP data path warmed up")),
    );
    const laps = Number(/laps=(\d+)/.exec(warmed)?.[1]);
    assert(laps >= 4000, warmed);
    const short = await waitFor(
      "B's warm-up reported",
      () => b.log.find((l) => l.includes("warm-up ended short")),
    );
    assertStringIncludes(short, "level=warn", short);
    // Thousands of packets went round A's warm-up; none of them is in A's counters.
    const [, m] = await c.http(a, "/metrics");
    assertEquals(metric(m, 'flanctl_udp_packets_total{direction="rx"}'), 0, m);
    assertEquals(metric(m, 'flanctl_udp_packets_total{direction="tx"}'), 0, m);
    // Its stand-ins are closed: no UDP socket on the loopback is left in A's namespace.
    const ss = await nsRun(a.ns, ["ss", "-H", "-uan"]);
    assert(!ss.stdout.includes("127.0.0.1:"), ss.stdout);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
    await waitFor("route for B on A", async () => (await routes(a.ns)).some((r) => r.dst === subB));
    await waitFor("route for A on B", async () => (await routes(b.ns)).some((r) => r.dst === subA));
    const pa = await c.addPod(a), pb = await c.addPod(b);
    assert(await ping(pa.ns, pb.ip), `pod A → pod B after the warm-up\n${a.log.join("\n")}`);
    assert(await ping(pb.ns, pa.ip), `pod B (not warmed up) → pod A\n${b.log.join("\n")}`);
  } finally {
    await c.close();
  }
});

/** An IPv4/ICMP echo request from `src` to `dst` (checksums valid), as a UDP payload would carry it. */
function icmpEcho(src: string, dst: string): Uint8Array {
  const b = new Uint8Array(28);
  const v = new DataView(b.buffer);
  const ip = (s: string) => s.split(".").map(Number);
  b.set([0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, ...ip(src), ...ip(dst)]);
  const sum = (from: number, to: number) => {
    let x = 0;
    for (let i = from; i < to; i += 2) x += v.getUint16(i);
    while (x > 0xffff) x = (x & 0xffff) + (x >> 16);
    return ~x & 0xffff;
  };
  v.setUint16(10, sum(0, 20));
  b.set([8, 0, 0, 0, 0, 1, 0, 1], 20);
  v.setUint16(22, sum(20, 28));
  return b;
}

needsRoot.test("daemon udp: 1 MB TCP byte for byte, node joins and is revoked under traffic, foreign datagrams dropped", async () => {
  const c = new DaemonCluster("10.98");
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode();
    c.start(a, FAST);
    c.start(b, FAST);
    await c.waitReady(a);
    await c.waitReady(b);
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(c.explain("A reaches B"), () => ping(pa.ns, pb.ip, 1));

    // 1 MB over TCP, compared byte for byte.
    const data = new Uint8Array(1 << 20);
    for (let i = 0; i < data.length; i += 65536) data.set(crypto.getRandomValues(new Uint8Array(65536)), i);
    const src = `${c.tmp}/tx.bin`, dst = `${c.tmp}/rx.bin`;
    await Deno.writeFile(src, data);
    const server = new Deno.Command("ip", {
      args: ["netns", "exec", pb.ns, "sh", "-c", `nc -l -N -w 20 5001 > ${dst}`],
    }).spawn();
    await waitFor("listener", async () => (await nsRun(pb.ns, ["ss", "-ltn"])).stdout.includes(":5001"));
    const cl = await nsRun(pa.ns, ["sh", "-c", `nc -N -w 20 ${pb.ip} 5001 < ${src}`]);
    assertEquals(cl.code, 0, cl.stderr);
    await server.status;
    const got = await Deno.readFile(dst);
    assertEquals(got.length, data.length);
    assert(got.every((x, i) => x === data[i]), "received bytes differ");

    // Traffic A → B keeps flowing while C joins (learned without restart) and is revoked (dropped).
    const pinger = new Deno.Command("ip", {
      args: ["netns", "exec", pa.ns, "ping", "-c", "60", "-i", "0.1", "-W", "1", pb.ip],
      stdout: "piped",
    }).spawn();
    const cn = await c.addNode();
    c.start(cn, FAST);
    await c.waitReady(cn);
    const subC = await c.subnetOf(cn);
    const pc = await c.addPod(cn);
    await waitFor(c.explain("A reaches the new node's pod"), () => ping(pa.ns, pc.ip, 1));
    assert(await ping(pc.ns, pb.ip), "C's pod reaches B's pod");
    await c.stop(cn);
    await new FileStore({ dir: c.storeDir }).revokeLease(IPNet.parse(subC));
    await waitFor("A drops the revoked node", async () => {
      const [, m] = await c.http(a, "/metrics");
      return metric(m, "flanctl_udp_peers") === 1 && !(await routes(a.ns)).some((r) => r.dst === subC);
    });
    assert(!(await ping(pa.ns, pc.ip, 1)), "the revoked node's pod must be unreachable");
    const out = new TextDecoder().decode((await pinger.output()).stdout);
    assertStringIncludes(out, " 0% packet loss", out);

    // A datagram from the underlay router (it holds no lease) with a valid packet for A's pod: dropped.
    const [, m0] = await c.http(a, "/metrics");
    const before = metric(m0, 'flanctl_udp_dropped_total{reason="unknown_source"}');
    const rx0 = metric(m0, 'flanctl_udp_packets_total{direction="rx"}');
    const pkt = `${c.tmp}/foreign.bin`;
    await Deno.writeFile(pkt, icmpEcho("10.244.99.5", pa.ip));
    await sh("ip", "netns", "exec", c.underlay, "sh", "-c", `nc -u -w 1 ${a.ip} 8285 < ${pkt}`);
    await waitFor("unknown_source counted", async () => {
      const [, m] = await c.http(a, "/metrics");
      return metric(m, 'flanctl_udp_dropped_total{reason="unknown_source"}') === before + 1;
    });
    const [, m1] = await c.http(a, "/metrics");
    assertEquals(metric(m1, 'flanctl_udp_packets_total{direction="rx"}'), rx0, "nothing written to flannel0");
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon udp: bad Port and a second daemon on the same port fail clearly, nothing half-made", async () => {
  const c = new DaemonCluster("10.97");
  try {
    await c.init(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp", Port: 0 } }));
    const a = await c.addNode();
    const p = c.start(a, FAST);
    const st = await p.status;
    assert(st.code !== 0, "Port 0 must fail");
    await waitFor("error logged", () => a.log.some((l) => l.includes("Backend.Port")));
    assertEquals((await nsRun(a.ns, ["ip", "link", "show", "flannel0"])).code, 1, "no flannel0 made");
    await Deno.writeTextFile(`${c.storeDir}/config`, NETCONF);
    c.start(a, FAST);
    await c.waitReady(a);
    const leases = [...Deno.readDirSync(`${c.storeDir}/subnets`)].length;
    const r = await flanctl(
      [
        "daemon",
        "--store-dir",
        c.storeDir,
        "--subnet-file",
        `${a.dir}/other.env`,
        "--state-dir",
        `${a.dir}/other`,
        "--healthz-port",
        "0",
      ],
      { ns: a.ns },
    );
    assert(r.code !== 0, "a second daemon on port 8285 must fail");
    assertStringIncludes(r.stderr, "8285");
    assertStringIncludes(r.stderr, "already in use");
    assertEquals([...Deno.readDirSync(`${c.storeDir}/subnets`)].length, leases, "no lease taken");
    assertEquals((await c.http(a, "/readyz"))[0], 200, "the first daemon keeps serving");
  } finally {
    await c.close();
  }
});
