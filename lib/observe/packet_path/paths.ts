/**
 * flannel's packets, walked through the node's firewall: the overlay datagrams from each peer's
 * PublicIP to our VXLAN (or udp backend) port (INPUT), a pod → remote pod and a remote pod → local pod
 * packet (FORWARD), and a pod → outside packet (masquerade in POSTROUTING). Each returns the
 * {@link PathVerdict} with the packet it stands for; the words for reports are in {@link stepText}.
 * @module
 */
import { IPAddr, type IPNet } from "../../base/cidr.ts";
import { safeText } from "../../base/capped_read.ts";
import type { NodeSnapshot } from "../snapshot.ts";
import type { Hook, Packet, PathVerdict, Step } from "./types.ts";
import { walkPath } from "./walk.ts";
import { dumpsOf, readRuleset, type Ruleset } from "./ruleset.ts";
import { dev6Name, network6, own6 } from "../probes.ts";

/** A named packet and its verdict. */
export interface PathCheck {
  /** What the packet is, for reports ("VXLAN from 192.168.1.2 to UDP 8472"). */
  label: string;
  packet: Packet;
  hooks: Hook[];
  verdict: PathVerdict;
}

/** Hooks a datagram for this host crosses, and a forwarded packet. */
export const INPUT_HOOKS: Hook[] = ["ingress", "prerouting", "input"];
export const FORWARD_HOOKS: Hook[] = ["ingress", "prerouting", "forward", "postrouting"];

/** The address standing for "outside the cluster" in the masquerade walk. */
export const OUTSIDE = "8.8.8.8";

/** The packet as each hook sees it: no output interface before routing, no input interface at INPUT's end. */
export function atHook(p: Packet): (h: Hook) => Packet {
  return (h) => h === "ingress" || h === "prerouting" || h === "input" ? { ...p, oif: "" } : p;
}

/** Walks `p` through `hooks` over `rs`. */
export function evaluate(rs: Ruleset, p: Packet, hooks: Hook[]): PathVerdict {
  return walkPath(rs.tables, p, hooks, atHook(p));
}

/** This node's address peers send to: our lease's PublicIP, the VXLAN device's local, the underlay's. */
function ourPublicIP(ctx: NodeSnapshot): IPAddr | null {
  const cand = [ctx.ownLease()?.attrs.PublicIP, ctx.vxlanDevice()?.vxlan?.local];
  const u = ctx.underlay();
  if (u) cand.push(ctx.kernel?.addrs.find((a) => a.index === u.link.index && !a.local.includes(":"))?.local);
  for (const c of cand) {
    const ip = c ? IPAddr.tryParse(c) : null;
    if (ip && ip.family === 4 && ip.value !== 0n) return ip;
  }
  return null;
}

/** A pod address in a subnet (its second host: the first is the bridge's gateway). */
export function podIn(net: IPNet): IPAddr {
  return net.nth(net.size > 2n ? 2 : 0);
}

/**
 * The overlay datagrams each peer sends us: UDP from its PublicIP to `port` on our PublicIP, in on the
 * underlay. `sourcePort` is null for VXLAN (a hash of the inner flow), the port itself for the udp backend.
 */
export function overlayIn(
  ctx: NodeSnapshot,
  rs: Ruleset,
  port: number,
  what: string,
  sourcePort: number | null,
): PathCheck[] {
  const dst = ourPublicIP(ctx);
  const iif = ctx.underlay()?.link.name ?? "";
  if (!dst) return [];
  const local = ctx.localIPs();
  const out: PathCheck[] = [];
  const seen = new Set<string>();
  for (const l of ctx.peerLeases()) {
    const src = IPAddr.tryParse(l.attrs.PublicIP);
    if (!src || src.family !== 4 || seen.has(src.toString())) continue;
    seen.add(src.toString());
    out.push(udpIn(rs, what, src, dst, iif, sourcePort, port, local.has(src.toString())));
  }
  return out;
}

/** One overlay datagram from `src` to `dst`:`port`, in on `iif`, judged through the INPUT hooks of `rs`. */
function udpIn(
  rs: Ruleset,
  what: string,
  src: IPAddr,
  dst: IPAddr,
  iif: string,
  sport: number | null,
  port: number,
  srcLocal: boolean,
): PathCheck {
  const packet: Packet = {
    family: src.family,
    src,
    dst,
    iif,
    oif: "",
    proto: 17,
    sport,
    dport: port,
    srcLocal,
    dstLocal: true,
  };
  return {
    label: `${what} from ${src} to UDP ${port}`,
    packet,
    hooks: INPUT_HOOKS,
    verdict: evaluate(rs, packet, INPUT_HOOKS),
  };
}

/**
 * The IPv6 twin of {@link overlayIn}: UDP from each peer's PublicIPv6 to `port` on our PublicIPv6 (the
 * lease's, else the underlay's global IPv6 address), in on the underlay, for the IPv6 ruleset `rs`.
 */
export function overlayIn6(ctx: NodeSnapshot, rs: Ruleset, port: number, what: string): PathCheck[] {
  const u = ctx.underlay();
  const cand = [
    ctx.ownLease()?.attrs.PublicIPv6,
    ...(ctx.kernel?.addrs ?? []).filter((a) =>
      u && a.index === u.link.index && a.family === 6 && a.scope !== "link"
    ).map((a) => a.local),
  ];
  const dst = cand.map((c) => c ? IPAddr.tryParse(c) : null).find((ip) => ip && ip.family === 6) ?? null;
  if (!dst) return [];
  const local = ctx.localIPs();
  const out: PathCheck[] = [];
  const seen = new Set<string>([dst.toString()]);
  for (const l of ctx.store.leases) {
    const src = l.attrs.PublicIPv6 ? IPAddr.tryParse(l.attrs.PublicIPv6) : null;
    if (!src || src.family !== 6 || seen.has(src.toString()) || local.has(src.toString())) continue;
    seen.add(src.toString());
    out.push(udpIn(rs, what, src, dst, u?.link.name ?? "", null, port, false));
  }
  return out;
}

/**
 * The overlay device pod traffic leaves by: flannel.<VNI> (vxlan, also when the backend is not known),
 * flannel0 (udp), flannel-wg (wireguard, flanneld's name), the underlay (host-gw); "" for a backend
 * without one here (alloc, extension): a rule naming an interface then does not match.
 */
export function overlayDevice(ctx: NodeSnapshot): string {
  const t = ctx.backendType;
  if (t === "udp") return "flannel0";
  if (t === "wireguard") return "flannel-wg";
  if (t === "host-gw") return ctx.underlay()?.link.name ?? "";
  if (t === "alloc" || t === "extension") return "";
  return ctx.vxlanName;
}

/** A TCP SYN from `src` to `dst` port 80, in on `iif`, out on `oif`. */
function tcpSyn(src: IPAddr, dst: IPAddr, iif: string, oif: string): Packet {
  return {
    family: src.family,
    src,
    dst,
    iif,
    oif,
    proto: 6,
    sport: 40000,
    dport: 80,
    tcpFlags: 0x02,
    srcLocal: false,
    dstLocal: false,
  };
}

/**
 * Forwarded pod traffic with the first peer: a pod here → a pod there (cni0 → overlay) and back (overlay
 * → cni0), as a new TCP connection to port 80.
 */
export function podForward(ctx: NodeSnapshot, rs: Ruleset): PathCheck[] {
  const own = ctx.nodeSubnet;
  const peer = ctx.peerLeases().find((l) => l.subnet && l.subnet.family === 4)?.subnet ??
    (ctx.network && own ? nextSubnet(ctx.network, own) : null);
  if (!own || own.family !== 4 || !peer) return [];
  const dev = overlayDevice(ctx);
  const a = podIn(own), b = podIn(peer);
  const out: PathCheck[] = [];
  for (
    const [label, p] of [
      [`pod ${a} → remote pod ${b} (cni0 → ${dev})`, tcpSyn(a, b, "cni0", dev)],
      [`remote pod ${b} → pod ${a} (${dev} → cni0)`, tcpSyn(b, a, dev, "cni0")],
    ] as const
  ) {
    out.push({ label, packet: p, hooks: FORWARD_HOOKS, verdict: evaluate(rs, p, FORWARD_HOOKS) });
  }
  return out;
}

/**
 * The IPv6 twin of {@link podForward}: a pod here → a pod of the first peer's IPv6 subnet and back, between
 * cni0 and the IPv6 overlay device (flannel-v6.<VNI> for vxlan), walked over the IPv6 ruleset `rs`.
 */
export function podForward6(ctx: NodeSnapshot, rs: Ruleset): PathCheck[] {
  const own = own6(ctx);
  const net = network6(ctx);
  if (!own || own.family !== 6) return [];
  const peer = ctx.store.leases.find((l) => l.ipv6Subnet && !l.ipv6Subnet.equals(own))?.ipv6Subnet ??
    (net ? nextSubnet(net, own) : null);
  if (!peer) return [];
  const t = ctx.backendType;
  const dev = t === "vxlan" || t === null ? dev6Name(ctx) : overlayDevice(ctx);
  const a = podIn(own), b = podIn(peer);
  return ([
    [`pod ${a} → remote pod ${b} (cni0 → ${dev})`, tcpSyn(a, b, "cni0", dev)],
    [`remote pod ${b} → pod ${a} (${dev} → cni0)`, tcpSyn(b, a, dev, "cni0")],
  ] as const).map(([label, p]) => ({
    label,
    packet: p,
    hooks: FORWARD_HOOKS,
    verdict: evaluate(rs, p, FORWARD_HOOKS),
  }));
}

/** Another subnet of `net` than `own` (the remote pod when there is no peer lease). */
function nextSubnet(net: IPNet, own: IPNet): IPNet | null {
  const n = own.next();
  return net.contains(n) ? n : null;
}

/** A pod → outside packet (to {@link OUTSIDE}) through forward and postrouting: is it masqueraded? */
export function podOutside(ctx: NodeSnapshot, rs: Ruleset): PathCheck | null {
  const own = ctx.nodeSubnet;
  const u = ctx.underlay();
  if (!own || own.family !== 4 || !u) return null;
  const p = tcpSyn(podIn(own), IPAddr.parse(OUTSIDE), "cni0", u.link.name);
  return {
    label: `pod ${p.src} → ${OUTSIDE} (cni0 → ${u.link.name})`,
    packet: p,
    hooks: FORWARD_HOOKS,
    verdict: evaluate(rs, p, FORWARD_HOOKS),
  };
}

const parsed = new WeakMap<NodeSnapshot, Ruleset>();
const parsed6 = new WeakMap<NodeSnapshot, Ruleset>();

/** The IPv6 ruleset of a snapshot (ip6tables-save and the native tables), parsed once per snapshot. */
export function ruleset6(ctx: NodeSnapshot): Ruleset {
  let rs = parsed6.get(ctx);
  if (!rs) parsed6.set(ctx, rs = readRuleset(dumpsOf(ctx), 6));
  return rs;
}

/**
 * The IPv4 ruleset of a snapshot, parsed once per snapshot (a node with kube-proxy's 20,000 iptables rules
 * takes 0.3–3 s to parse; the checks, the probe and trace share it).
 */
export function ruleset4(ctx: NodeSnapshot): Ruleset {
  let rs = parsed.get(ctx);
  if (!rs) parsed.set(ctx, rs = readRuleset(dumpsOf(ctx), 4));
  return rs;
}

/**
 * Where a step's rule lives, as a report says it: `iptables-nft filter INPUT rule 5` (back-end — ip6tables-…
 * for IPv6 —, table, chain, place).
 */
export function placeText(s: Step): string {
  const r = s.rule;
  const fam = s.backend === "nftables" ? `${s.family} ` : "";
  // ip6tables' rules are named by ip6tables' back-end (ip6tables-nft, ip6tables-legacy).
  const be = s.family === "ip6" && s.backend.startsWith("iptables") ? `ip6${s.backend.slice(2)}` : s.backend;
  if (!r) return `${be} ${fam}${s.table} ${s.chain} policy`;
  const where = r.handle !== null ? `handle ${r.handle}` : `rule ${r.position}`;
  return `${be} ${fam}${s.table} ${r.chain} ${where}`;
}

/** A step in words: where, what it did, the rule (untrusted text, bounded and escaped). */
export function stepText(s: Step): string {
  const what = s.verdict === "nat" ? `${s.note ?? "nat"}` : s.verdict;
  const rule = s.rule ? `: ${safeText(s.rule.text, 200)}` : "";
  const via = s.via.length > 1 ? ` (via ${s.via.map((v) => safeText(v, 40)).join(" → ")})` : "";
  return `${placeText(s)} ${what.toUpperCase()}${rule}${via}`;
}

/** The verdict in one line: the dropping rule, the unknown match, or "passes". */
export function verdictText(v: PathVerdict): string {
  if (v.verdict === "drop" && v.dropped) return `dropped by ${stepText(v.dropped)}`;
  if (v.verdict === "unknown") return `cannot tell: ${safeText(v.reason ?? "unknown", 200)}`;
  const crossed = v.steps.filter((s) => s.verdict !== "skipped").length;
  return `passes (${crossed} base chain${crossed === 1 ? "" : "s"} crossed)`;
}
