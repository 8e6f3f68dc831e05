/**
 * Makes the kernel of namespace `ns` learn a path MTU, as a router on the path would teach it: an ICMP
 * "fragmentation needed" (type 3 code 4, next-hop MTU `mtu`) sent to `victim` from `ns`'s neighbour
 * namespace `from`, quoting an echo reply `victim` sent to `dst`. The kernel (icmp_err → ipv4_update_pmtu)
 * adds a route-cache exception for `dst` — what `ip route get DST` shows as `cache expires … mtu MTU`.
 * @module
 */
import { nsRun } from "./netns.ts";

const PY = String.raw`
import socket, struct, sys
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
victim, dst, mtu = sys.argv[1], sys.argv[2], int(sys.argv[3])
echo = struct.pack("!BBHHH", 0, 0, 0, 0x1234, 1)
echo = struct.pack("!BBHHH", 0, 0, csum(echo), 0x1234, 1)
ih = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 1, 0x4000, 64, 1, 0, socket.inet_aton(victim), socket.inet_aton(dst))
ih = ih[:10] + struct.pack("!H", csum(ih)) + ih[12:]
icmp = struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + ih + echo
icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).sendto(icmp, (victim, 0))
`;

/** Sends the ICMP from namespace `from` (needs python3); throws when it could not be sent. */
export async function teachPmtu(from: string, victim: string, dst: string, mtu: number): Promise<void> {
  const r = await nsRun(from, ["python3", "-c", PY, victim, dst, String(mtu)]);
  if (r.code !== 0) throw new Error(`ICMP frag-needed from ${from} to ${victim}: ${r.stderr}`);
}
