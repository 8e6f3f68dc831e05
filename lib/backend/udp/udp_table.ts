/**
 * Writing the UDP data path's peer table into its shared control block (udp_layout.ts) under the seqlock
 * the workers read it with: the live table (udp_dataplane.ts) and the warm-up's (udp_warmup.ts).
 * @module
 */
import {
  CTL_COUNT,
  CTL_ENTRIES,
  CTL_OWN_MASK,
  CTL_OWN_NET,
  CTL_SEQ,
  ENTRY_WORDS,
  ip4ToU32,
  maskU32,
} from "./udp_layout.ts";

/** One peer of the table. */
export interface UdpPeerEntry {
  /** The peer's subnet, "10.244.2.0/24". */
  subnet: string;
  /** Where its packets go: the peer's PublicIP. */
  publicIP: string;
  /** The peer's UDP port. */
  port: number;
}

/** A CIDR as [network, mask], both uint32. */
export function splitCidr(c: string): [number, number] {
  const [ip, p] = c.split("/");
  const prefix = p === undefined ? 32 : Number(p);
  const mask = maskU32(prefix);
  return [(ip4ToU32(ip) & mask) >>> 0, mask];
}

/** Runs `fn` (writes to `ctl`) with the sequence number odd: a worker reading meanwhile keeps its table. */
function seqWrite(ctl: Int32Array, fn: () => void): void {
  Atomics.add(ctl, CTL_SEQ, 1);
  try {
    fn();
  } finally {
    Atomics.add(ctl, CTL_SEQ, 1);
  }
}

/** Sets our subnet in control block `ctl`. */
export function writeOwn(ctl: Int32Array, own: string): void {
  const [net, mask] = splitCidr(own);
  seqWrite(ctl, () => {
    ctl[CTL_OWN_NET] = net | 0;
    ctl[CTL_OWN_MASK] = mask | 0;
  });
}

/** Replaces the peer entries of `ctl` (the caller checked they fit). */
export function writePeers(ctl: Int32Array, peers: readonly UdpPeerEntry[]): void {
  const words = peers.map((p) => {
    const [net, mask] = splitCidr(p.subnet);
    return [net | 0, mask | 0, ip4ToU32(p.publicIP) | 0, p.port];
  });
  seqWrite(ctl, () => {
    words.forEach((w, i) => ctl.set(w, CTL_ENTRIES + i * ENTRY_WORDS));
    Atomics.store(ctl, CTL_COUNT, words.length);
  });
}

/** Bytes of a control block holding `capacity` peers. */
export function ctlBytes(capacity: number): number {
  return (CTL_ENTRIES + capacity * ENTRY_WORDS) * 4;
}
