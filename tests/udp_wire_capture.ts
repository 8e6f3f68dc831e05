/**
 * A raw check of what a network namespace puts on the wire (no tcpdump needed): run inside the
 * namespace (`ip netns exec NS deno run -A tests/udp_wire_capture.ts IFACE PORT STOPFILE`), it opens an
 * AF_PACKET socket on IFACE, prints "ready", then records every IPv4 UDP packet to or from PORT — its IP
 * total length (from the header, so truncated reads still count whole packets) and whether it is an IP
 * fragment — until STOPFILE exists; then prints one JSON line
 * `{"packets":N,"maxIpLen":M,"fragments":F,"outgoing":O}`. A test helper, not product code.
 */
const [iface, portArg, stopFile] = Deno.args;
const port = Number(portArg);
const L = Deno.dlopen("libc.so.6", {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  recvfrom: { parameters: ["i32", "buffer", "u32", "i32", "buffer", "buffer"], result: "i32" },
  poll: { parameters: ["buffer", "u32", "i32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
}).symbols;
// ETH_P_ALL (network order): only "all" taps see outgoing packets; IPv4 is picked by sll_protocol.
const AF_PACKET = 17, SOCK_DGRAM = 2, SOCK_NONBLOCK = 0o4000, ETH_P_ALL_BE = 0x0300;
const MSG_TRUNC = 0x20, PACKET_OUTGOING = 4;
const fd = L.socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, ETH_P_ALL_BE);
if (fd < 0) throw new Error("AF_PACKET socket failed");
const rcvbuf = new Int32Array([8 << 20]);
L.setsockopt(fd, 1, 33, /* SO_RCVBUFFORCE */ new Uint8Array(rcvbuf.buffer), 4);
const ifindex = Number(Deno.readTextFileSync(`/sys/class/net/${iface}/ifindex`).trim());
// struct sockaddr_ll: family u16, protocol be16, ifindex i32, hatype u16, pkttype u8, halen u8, addr[8].
const sll = new Uint8Array(20);
const sv = new DataView(sll.buffer);
sv.setUint16(0, AF_PACKET, true);
sv.setUint16(2, ETH_P_ALL_BE, true);
sv.setInt32(4, ifindex, true);
if (L.bind(fd, sll, 20) < 0) throw new Error(`bind to ${iface} failed`);
console.log("ready");
const buf = new Uint8Array(128), from = new Uint8Array(20), fromLen = new Uint32Array([20]);
const pfd = new Uint8Array(8);
new DataView(pfd.buffer).setInt32(0, fd, true);
new DataView(pfd.buffer).setInt16(4, 1, true);
let packets = 0, maxIpLen = 0, fragments = 0, outgoing = 0;
const stopped = () => {
  try {
    Deno.statSync(stopFile);
    return true;
  } catch {
    return false;
  }
};
for (;;) {
  L.poll(pfd, 1, 100);
  for (;;) {
    fromLen[0] = 20;
    const n = L.recvfrom(fd, buf, buf.length, MSG_TRUNC, from, new Uint8Array(fromLen.buffer));
    if (n < 0) break;
    if (from[2] !== 0x08 || from[3] !== 0x00) continue; // not IPv4
    if (n < 28 || buf[0] >> 4 !== 4 || buf[9] !== 17) continue;
    const ihl = (buf[0] & 15) * 4;
    const frag = ((buf[6] & 0x3f) << 8) | buf[7];
    const mf = (buf[6] & 0x20) !== 0;
    if (frag & 0x1fff || mf) {
      fragments++; // a later fragment carries no UDP header: count it whatever its ports
      continue;
    }
    const sport = (buf[ihl] << 8) | buf[ihl + 1], dport = (buf[ihl + 2] << 8) | buf[ihl + 3];
    if (sport !== port && dport !== port) continue;
    packets++;
    if (from[10] === PACKET_OUTGOING) outgoing++;
    maxIpLen = Math.max(maxIpLen, (buf[2] << 8) | buf[3]);
  }
  if (stopped()) break;
}
console.log(JSON.stringify({ packets, maxIpLen, fragments, outgoing }));
