/**
 * `flanctl daemon` with the UDP backend: the receive worker as flannel0's reader while traffic is light
 * (FLANCTL_UDP_STEAL, on by default). Its sends are counted in flanctl_udp_tx_stolen_total, so these tests
 * see the path taken: every echo request and reply of a ping is read from flannel0 and sent by the receive
 * worker on both nodes (none lost); bulk TCP both ways, checked byte for byte, hands flannel0 over to the
 * transmit worker (it carries packets too) and back; a node with FLANCTL_UDP_STEAL=0 never takes that
 * path and still talks to the others.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, metric, routes, waitFor } from "./daemon_fixture.ts";
import { nsRun } from "./netns.ts";
import type { TestNode } from "./daemon_fixture.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

/** tx packets, of them sent by the receive worker, on node `n`. */
async function txCounts(c: DaemonCluster, n: TestNode): Promise<{ tx: number; stolen: number }> {
  const [, m] = await c.http(n, "/metrics");
  return {
    tx: metric(m, 'flanctl_udp_packets_total{direction="tx"}'),
    stolen: metric(m, "flanctl_udp_tx_stolen_total"),
  };
}

/** `count` pings at 50 ms from `fromNs` to `ip`; ping's summary (asserts it ran). */
async function pingRun(fromNs: string, ip: string, count: number): Promise<string> {
  const r = await nsRun(fromNs, ["ping", "-n", "-c", String(count), "-i", "0.05", "-W", "1", ip]);
  return r.stdout + r.stderr;
}

/** `bytes` random bytes over TCP (nc) from pod `from` to pod `to`, compared byte for byte. */
async function tcpCheck(c: DaemonCluster, from: string, to: { ns: string; ip: string }, bytes: number) {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < data.length; i += 65536) data.set(crypto.getRandomValues(new Uint8Array(65536)), i);
  const tag = crypto.randomUUID().slice(0, 8);
  const src = `${c.tmp}/tx-${tag}.bin`, dst = `${c.tmp}/rx-${tag}.bin`;
  await Deno.writeFile(src, data);
  const server = new Deno.Command("ip", {
    args: ["netns", "exec", to.ns, "sh", "-c", `exec nc -l -N -w 20 5001 > ${dst}`],
  }).spawn();
  try {
    await waitFor("listener", async () => (await nsRun(to.ns, ["ss", "-ltn"])).stdout.includes(":5001"));
    const cl = await nsRun(from, ["sh", "-c", `nc -N -w 20 ${to.ip} 5001 < ${src}`]);
    assertEquals(cl.code, 0, cl.stderr);
    assert((await server.status).success, "nc -l failed");
  } finally {
    try {
      server.kill("SIGKILL");
    } catch { /* exited */ }
    await server.status;
  }
  const got = await Deno.readFile(dst);
  assertEquals(got.length, data.length);
  assert(got.every((x, i) => x === data[i]), "received bytes differ");
}

needsRoot.test("daemon udp steal: the receive worker carries light traffic, hands bulk over and back, nothing lost", async () => {
  const c = new DaemonCluster("10.88");
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode(), off = await c.addNode();
    c.start(a, FAST);
    c.start(b, FAST);
    c.start(off, FAST, { FLANCTL_UDP_STEAL: "0" });
    for (const n of [a, b, off]) await c.waitReady(n);
    const pa = await c.addPod(a), pb = await c.addPod(b), po = await c.addPod(off);
    await waitFor(
      "A reaches B",
      async () => (await nsRun(pa.ns, ["ping", "-c", "1", "-W", "1", pb.ip])).code === 0,
    );

    // Light traffic: every echo request (on A) and reply (on B) is read from flannel0 and sent by the
    // receive worker; all 40 come back.
    const a0 = await txCounts(c, a), b0 = await txCounts(c, b);
    const out = await pingRun(pa.ns, pb.ip, 40);
    assertStringIncludes(out, "40 received", out);
    const a1 = await txCounts(c, a), b1 = await txCounts(c, b);
    assert(a1.stolen - a0.stolen >= 40, `A: requests sent by the receive worker ${JSON.stringify([a0, a1])}`);
    assert(b1.stolen - b0.stolen >= 40, `B: replies sent by the receive worker ${JSON.stringify([b0, b1])}`);
    assertEquals(a1.tx - a0.tx, a1.stolen - a0.stolen, "the transmit worker had nothing to do");

    // Bulk both ways, byte for byte: flannel0 is handed to the transmit worker (it carries packets) and
    // the order of what the two workers read is kept (TCP would still fix a reorder, so also no loss:
    // the ping after it has none).
    await tcpCheck(c, pa.ns, pb, 8 << 20);
    await tcpCheck(c, pb.ns, pa, 8 << 20);
    const a2 = await txCounts(c, a), b2 = await txCounts(c, b);
    assert(
      a2.tx - a2.stolen > a1.tx - a1.stolen,
      `A's transmit worker carried the bulk ${JSON.stringify(a2)}`,
    );
    assert(
      b2.tx - b2.stolen > b1.tx - b1.stolen,
      `B's transmit worker carried the bulk ${JSON.stringify(b2)}`,
    );

    // Light again: flannel0 is back with the receive worker (the transmit worker gives it up after 5 ms
    // without a packet; on a loaded machine the first replies may still be its own, so not all 20).
    await new Promise((r) => setTimeout(r, 100));
    const out2 = await pingRun(pa.ns, pb.ip, 20);
    assertStringIncludes(out2, "20 received", out2);
    const b3 = await txCounts(c, b);
    assert(
      b3.stolen - b2.stolen >= 10,
      `B: replies sent by the receive worker again ${JSON.stringify([b2, b3])}`,
    );

    // FLANCTL_UDP_STEAL=0: the transmit worker alone reads flannel0; the node still talks to the others.
    const out3 = await pingRun(po.ns, pa.ip, 10);
    assertStringIncludes(out3, "10 received", out3);
    await tcpCheck(c, po.ns, pb, 1 << 20);
    const o = await txCounts(c, off);
    assert(o.tx >= 10, JSON.stringify(o));
    assertEquals(o.stolen, 0, "no receive-worker sends with FLANCTL_UDP_STEAL=0");
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon udp steal: the first packet to a node just learned goes out (the idle receive worker reads the new table)", async () => {
  const c = new DaemonCluster("10.87");
  try {
    await c.init(NETCONF);
    const a = await c.addNode();
    c.start(a, FAST);
    await c.waitReady(a);
    const pa = await c.addPod(a);
    for (let i = 0; i < 2; i++) {
      // A is idle: its receive worker sleeps in poll() with flannel0 in the set while the peer table
      // changes. The packet that wakes it must be routed with the table as it is then, not as it was.
      const d = await c.addNode();
      c.start(d, FAST);
      const sub = await waitFor("D's subnet", () => c.subnetOf(d));
      await waitFor("A's route for D", async () => (await routes(a.ns)).some((r) => r.dst === sub));
      const [, m0] = await c.http(a, "/metrics");
      const p = sub.split("/")[0].split(".").map(Number);
      await nsRun(pa.ns, ["ping", "-n", "-c", "1", "-W", "1", `${p[0]}.${p[1]}.${p[2]}.${p[3] + 9}`]);
      const [, m1] = await c.http(a, "/metrics");
      const noRoute = 'flanctl_udp_dropped_total{reason="no_route"}';
      assertEquals(metric(m1, noRoute) - metric(m0, noRoute), 0, `round ${i}: dropped as no_route\n${m1}`);
      const tx = 'flanctl_udp_packets_total{direction="tx"}';
      assertEquals(metric(m1, tx) - metric(m0, tx), 1, `round ${i}: the echo request was sent to D`);
    }
  } finally {
    await c.close();
  }
});
