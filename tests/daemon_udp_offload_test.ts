/**
 * The UDP backend's offloads against a peer without them, in throwaway namespaces: node A runs with the
 * defaults (flannel0 with IFF_VNET_HDR + TSO, super-packets cut in userspace and sent with UDP GSO,
 * received segments coalesced, UDP_GRO reads), node B with FLANCTL_UDP_OFFLOAD=0 (a plain TUN, one
 * datagram per packet: what flannel's C proxy does), node C with the defaults too (A → C: GRO reads),
 * node D with the send offloads only (FLANCTL_UDP_COALESCE=0 FLANCTL_UDP_GRO=0). Pod-to-pod ping and
 * 1 MB TCP byte for byte both ways prove the wire format and the checksums (B's kernel checks every
 * segment A cut); a raw AF_PACKET capture on A's underlay interface proves no datagram on the wire
 * exceeds the underlay MTU and none is IP-fragmented; the counters prove each technique ran where it
 * should, and flannel0 loses its offloads when A stops.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { DaemonCluster, metric, waitFor } from "./daemon_fixture.ts";
import { nsRun, nsSh, ROOT } from "./netns.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } });
const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

/** `ethtool -k DEV` feature → on/off, in namespace `ns`. */
async function features(ns: string, dev: string): Promise<Record<string, string>> {
  const out = await nsSh(ns, "ethtool", "-k", dev);
  return Object.fromEntries(
    out.split("\n").map((l) => /^\s*([\w-]+):\s+(on|off)/.exec(l)).filter((m) => m !== null).map((m) => [
      m![1],
      m![2],
    ]),
  );
}

/** Sends `data` over TCP from pod netns `from` to `toIp`:`port` in pod netns `to`; returns what arrived. */
async function transfer(
  tmp: string,
  tag: string,
  from: string,
  to: string,
  toIp: string,
  data: Uint8Array,
): Promise<Uint8Array> {
  const src = `${tmp}/${tag}-tx.bin`, dst = `${tmp}/${tag}-rx.bin`;
  await Deno.writeFile(src, data);
  const server = new Deno.Command("ip", {
    args: ["netns", "exec", to, "sh", "-c", `exec nc -l -N -w 20 5001 > ${dst}`],
  }).spawn();
  let ended = false;
  try {
    await waitFor("listener", async () => (await nsRun(to, ["ss", "-ltn"])).stdout.includes(":5001"));
    const cl = await nsRun(from, ["sh", "-c", `nc -N -w 20 ${toIp} 5001 < ${src}`]);
    assertEquals(cl.code, 0, cl.stderr);
    await server.status;
    ended = true;
  } finally {
    // A failed wait or send leaves the listener running in a namespace about to be deleted: end it.
    if (!ended) {
      try {
        server.kill("SIGKILL");
      } catch { /* exited */ }
      await server.status;
    }
  }
  return await Deno.readFile(dst);
}

function random(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) b.set(crypto.getRandomValues(new Uint8Array(65536)), i);
  return b;
}

needsRoot.test("daemon udp offloads: TSO split + UDP GSO + coalescing interoperate with a plain peer; no oversized datagram on the wire", async () => {
  const c = new DaemonCluster("10.89");
  let capture: Deno.ChildProcess | null = null;
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode(), cn = await c.addNode(), d = await c.addNode();
    c.start(a, FAST);
    c.start(b, FAST, { FLANCTL_UDP_OFFLOAD: "0" });
    c.start(cn, FAST);
    c.start(d, FAST, { FLANCTL_UDP_COALESCE: "0", FLANCTL_UDP_GRO: "0" });
    for (const n of [a, b, cn, d]) await c.waitReady(n);
    const fa = await features(a.ns, "flannel0"), fb = await features(b.ns, "flannel0");
    assertEquals(fa["tcp-segmentation-offload"], "on", `A's flannel0: ${JSON.stringify(fa)}`);
    assertEquals(fb["tcp-segmentation-offload"], "off", `B's flannel0: ${JSON.stringify(fb)}`);
    const pa = await c.addPod(a), pb = await c.addPod(b);
    await waitFor(
      "A's pod reaches B's pod",
      async () => (await nsRun(pa.ns, ["ping", "-c", "1", "-W", "1", pb.ip])).code === 0,
    );
    assertEquals((await nsRun(pb.ns, ["ping", "-c", "3", "-i", "0.2", "-W", "1", pa.ip])).code, 0, "B → A");
    assertEquals((await nsRun(pa.ns, ["ping", "-c", "3", "-i", "0.2", "-W", "1", pb.ip])).code, 0, "A → B");

    // Both ends with offloads (A → C): A's UDP GSO packets reach C's socket whole (veth), C reads them
    // with UDP_GRO (several datagrams per read), cuts them and coalesces the segments again.
    const pc = await c.addPod(cn);
    await waitFor(
      "A's pod reaches C's pod",
      async () => (await nsRun(pa.ns, ["ping", "-c", "1", "-W", "1", pc.ip])).code === 0,
    );
    const ac = random(1 << 20);
    const gotC = await transfer(c.tmp, "ac", pa.ns, pc.ns, pc.ip, ac);
    assertEquals(gotC.length, ac.length, "A → C length");
    assert(gotC.every((x, i) => x === ac[i]), "A → C bytes differ");
    const [, mc] = await c.http(cn, "/metrics");
    assert(metric(mc, "flanctl_udp_rx_gro_total") > 0, mc);
    assert(metric(mc, 'flanctl_udp_rx_coalesced_total{unit="packets"}') > 0, mc);
    assertEquals(metric(mc, 'flanctl_udp_errors_total{op="tun_write"}'), 0, mc);

    // Send offloads only (D: TUN offloads and UDP GSO, no GRO, no coalescing: every datagram written to
    // flannel0 with a zero virtio_net_hdr), both ways with A.
    const pd = await c.addPod(d);
    await waitFor(
      "A's pod reaches D's pod",
      async () => (await nsRun(pa.ns, ["ping", "-c", "1", "-W", "1", pd.ip])).code === 0,
    );
    const ad = random(1 << 20), da = random(1 << 20);
    const gotD = await transfer(c.tmp, "ad", pa.ns, pd.ns, pd.ip, ad);
    assert(gotD.length === ad.length && gotD.every((x, i) => x === ad[i]), "A → D bytes differ");
    const gotAD = await transfer(c.tmp, "da", pd.ns, pa.ns, pa.ip, da);
    assert(gotAD.length === da.length && gotAD.every((x, i) => x === da[i]), "D → A bytes differ");
    const [, md] = await c.http(d, "/metrics");
    assert(metric(md, 'flanctl_udp_tx_offload_total{op="tso_split"}') > 0, md);
    assertEquals(metric(md, "flanctl_udp_rx_gro_total"), 0, md);
    assertEquals(metric(md, 'flanctl_udp_rx_coalesced_total{unit="packets"}'), 0, md);
    assert(metric(md, 'flanctl_udp_packets_total{direction="rx"}') >= (1 << 20) / 1500, md);
    assertEquals(metric(md, 'flanctl_udp_errors_total{op="tun_write"}'), 0, md);

    // The wire: A's underlay interface without UDP segmentation offload, so a UDP GSO send is cut into
    // datagrams before it (on a veth with the offload, the kernel would hand a 64 KiB UDP GSO skb to the
    // peer namespace uncut, as it hands one to a NIC that segments in hardware: not what a wire carries).
    await nsSh(a.ns, "ethtool", "-K", "eth0", "tx-udp-segmentation", "off");
    const mtu = Number((await nsSh(a.ns, "cat", "/sys/class/net/eth0/mtu")).trim());
    const stop = `${c.tmp}/capture.stop`;
    capture = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        a.ns,
        Deno.execPath(),
        "run",
        "-A",
        `${ROOT}tests/udp_wire_capture.ts`,
        "eth0",
        "8285",
        stop,
      ],
      stdout: "piped",
    }).spawn();
    const lines = capture.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("ready\n")) {
      const r = await lines.read();
      if (r.done) throw new Error(`capture ended: ${out}`);
      out += r.value;
    }

    const ab = random(1 << 20), ba = random(1 << 20);
    const gotB = await transfer(c.tmp, "ab", pa.ns, pb.ns, pb.ip, ab);
    assertEquals(gotB.length, ab.length, "A → B length");
    assert(gotB.every((x, i) => x === ab[i]), "A → B bytes differ");
    const gotA = await transfer(c.tmp, "ba", pb.ns, pa.ns, pa.ip, ba);
    assertEquals(gotA.length, ba.length, "B → A length");
    assert(gotA.every((x, i) => x === ba[i]), "B → A bytes differ");

    await Deno.writeTextFile(stop, "");
    for (;;) {
      const r = await lines.read();
      if (r.done) break;
      out += r.value;
    }
    await capture.status;
    capture = null;
    const wire = JSON.parse(out.trim().split("\n").pop()!) as {
      packets: number;
      maxIpLen: number;
      fragments: number;
      outgoing: number;
    };
    assert(wire.outgoing >= (1 << 20) / 1500, `A sent the 1 MB as datagrams: ${JSON.stringify(wire)}`);
    assert(wire.maxIpLen <= mtu, `a datagram of ${wire.maxIpLen} bytes exceeds the underlay MTU ${mtu}`);
    assert(wire.maxIpLen > mtu - 100, `full-size datagrams expected: ${JSON.stringify(wire)}`);
    assertEquals(wire.fragments, 0, "no IP fragments on the wire");

    const [, ma] = await c.http(a, "/metrics"), [, mb] = await c.http(b, "/metrics");
    assert(metric(ma, 'flanctl_udp_tx_offload_total{op="tso_split"}') > 0, ma);
    assert(metric(ma, 'flanctl_udp_tx_offload_total{op="udp_gso"}') > 0, ma);
    assert(metric(ma, 'flanctl_udp_rx_coalesced_total{unit="packets"}') > 0, ma);
    assertEquals(metric(ma, 'flanctl_udp_errors_total{op="tun_write"}'), 0, ma);
    assertEquals(metric(ma, 'flanctl_udp_errors_total{op="send"}'), 0, ma);
    assertEquals(metric(mb, 'flanctl_udp_tx_offload_total{op="tso_split"}'), 0, mb);
    assertEquals(metric(mb, 'flanctl_udp_rx_coalesced_total{unit="packets"}'), 0, mb);
    assertEquals(metric(mb, 'flanctl_udp_errors_total{op="tun_write"}'), 0, mb);

    // The persistent device must not keep offloads for a reader that may not ask for them.
    await c.stop(a);
    assertEquals((await features(a.ns, "flannel0"))["tcp-segmentation-offload"], "off", "offloads cleared");
  } finally {
    if (capture) {
      try {
        capture.kill("SIGKILL");
      } catch { /* exited */ }
      await capture.status;
    }
    await c.close();
  }
});
