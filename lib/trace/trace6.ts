/**
 * The IPv6 walk of `flanctl trace` (dual stack and IPv6-only): the same steps as the IPv4 vxlan/host-gw
 * walk with the IPv6 state — the pod's IPv6 route, the node's route to the peer's IPv6 subnet via
 * flannel-v6.<VNI> (or the peer's PublicIPv6 for host-gw), the NDP entry of the next hop (instead of
 * ARP), the FDB entry to the lease's PublicIPv6, the ip6tables masquerade rules (doctor's
 * ip6tables-masq), the remote flannel-v6 device and its route to cni0. The pod ends (pod.ts), the hops
 * both walks share (hops.ts) and the remote node's segment (remote.ts) are the IPv4 walk's. Read-only.
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";
import { routeGet } from "../netlink/mod.ts";
import type { LinkInfo, RouteLookup } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import * as hops from "./hops.ts";
import { lease6For, leaseText6, nodeOf6 } from "./lease.ts";
import { doctorText, finish, lookupText, type Path, startWalk, type Walk, type Why } from "./path.ts";
import { deliver, podHops } from "./pod.ts";
import { remoteNode } from "./remote.ts";
import { wgDevOf, wgIngress, wgOverlay } from "./wireguard.ts";
import { isPod, type TraceInput, type TraceNode, type TraceReport } from "./types.ts";
import { dev6, dev6Name, network6, nftablesMode, own6 } from "../observe/probes.ts";
import { vtepMacOf } from "../lease/backend_data.ts";
import { tracedForward } from "./firewall_hop.ts";
import { masqDecision } from "./masq.ts";
import { flannelV6Device, forwardFinding, ip6tablesMasq, nftFamilyFinding } from "../doctor/mod.ts";

/** VXLAN over IPv6: outer IPv6 40 + UDP 8 + VXLAN 8 + inner Ethernet 14. */
const V6_OVERHEAD = 70;

/** The IPv6 walk: the IPv6 source, the lease by IPv6 subnet, and the IPv6 networks. */
interface Walk6 extends Walk {
  /** The backend is vxlan (else host-gw). */
  vxlan: boolean;
  /** The IPv6 pod network and this node's IPv6 subnet. */
  net6: IPNet | null;
  own: IPNet | null;
}

/** Traces a packet to an IPv6 address. */
export async function trace6(inp: TraceInput): Promise<TraceReport> {
  const w = walk6(inp);
  const { p, lease, n, dst } = w;
  const end = () => finish(inp, inp.src.name, p);
  if (w.fromPod && !w.srcIP) {
    noAddressHop(w);
    return end();
  }

  // 1. In the source pod.
  const podMtu = await podHops(inp, p);
  if (p.broken) return end();
  // 2. This node's daemon.
  await hops.daemonHop(n, p);
  // 3. The node's IPv6 route (the kernel's input lookup from cni0 for a pod's packet).
  const route = await hostRoute6(w);
  // 4. ip6tables FORWARD for a pod's forwarded packet, then the IPv6 masquerade rules.
  await firewall6(w, route.r);
  if (!w.net6 || !w.net6.contains(dst)) {
    egressHop6(w, route.r);
    return end();
  }
  if (!route.ok) return end();
  if (w.own?.contains(dst)) {
    await deliver(inp, n, p);
    return end();
  }
  const pub6 = lease?.attrs.PublicIPv6 ?? null;
  if (!lease || !pub6) return end();
  // 5. The IPv6 overlay: flannel-v6 device, NDP entry of the next hop, FDB entry to the PublicIPv6.
  const underlayDst = w.backend === "wireguard"
    ? await wgOverlay(n, lease, w.text(lease), podMtu, p, 6) // one-device modes: maybe the PublicIP
    : w.vxlan && !route.direct
    ? await vxlanOverlay6(w, lease, pub6, route.r, podMtu)
    : pub6;
  if (underlayDst === null) return end();
  // 6. The IPv6 underlay to the peer's PublicIPv6.
  const underlay = {
    n,
    peer: { ip: underlayDst, label: underlayDst.includes(":") ? "PublicIPv6" as const : "PublicIP" as const },
    overlay: [dev6(w.ctx), w.backend === "wireguard" ? w.ctx.link(wgDevOf(w.ctx, 6)) : null],
    needDirect: (!w.vxlan && w.backend !== "wireguard") || route.direct,
    backend: w.backend,
    routeGet: underlayDst.includes(":") ? "ip -6 route get" : "ip route get",
    lease: w.text(lease),
  };
  if (!hops.underlayRouteHop(underlay, p)) return end();
  // 7. The remote node.
  await remoteNode({
    inp,
    src: n,
    peer: nodeOf6(inp.nodes, lease),
    publicIP: pub6,
    lease: w.text(lease),
    underlayDst,
    ingress: (peer) => remoteIngress6(w, peer, lease, pub6, route.direct, underlayDst),
  }, p);
  return end();
}

/** The IPv6 walk's view of the packet and its source node. */
function walk6(inp: TraceInput): Walk6 {
  const ctx = inp.src.node.ctx;
  const w = startWalk(inp, {
    srcIP: isPod(inp.src) ? inp.src.ipv6 ?? null : inp.src.ip,
    // This node's own IPv6 subnet is delivered by cni0, not explained by a lease.
    lease: (c, dst) => own6(c)?.contains(dst) ? null : lease6For(c, dst),
    text: leaseText6,
  });
  return { ...w, vxlan: w.backend === "vxlan", net6: network6(ctx), own: own6(ctx) };
}

/** A pod without an IPv6 address cannot send to one. */
function noAddressHop(w: Walk6): void {
  const name = w.inp.src.name;
  w.p.add({
    node: name,
    step: "pod-address",
    ok: false,
    entry: `${name} has no IPv6 address`,
    detail: `the pod has no IPv6 address: it cannot send to ${w.inp.dst}`,
  }, { why: "IPv6 pod traffic needs an IPv6 address from the CNI result (EnableIPv6)", fix: [] });
}

/**
 * The node's IPv6 route for the packet, checked against the lease. Returns the lookup, whether it
 * follows the lease, and whether it goes straight to the peer's PublicIPv6 (DirectRouting).
 */
async function hostRoute6(w: Walk6): Promise<{ r: RouteLookup; ok: boolean; direct: boolean }> {
  const { ctx, inp, lease, n } = w;
  const r = routeGet(n.h, w.fromPod ? { dst: inp.dst, src: w.srcIP!, iif: "cni0" } : { dst: inp.dst });
  const devName = dev6Name(ctx);
  const sub = lease?.ipv6Subnet?.toString();
  const gw = lease?.ipv6Subnet?.ip.toString();
  const pub6 = lease?.attrs.PublicIPv6 ?? null;
  const local = !!w.own?.contains(w.dst);
  const direct = w.vxlan && !!pub6 && r.gateway === pub6 && ctx.directRouting;
  const wg = w.backend === "wireguard";
  const wgDev = wgDevOf(ctx, 6);
  const expectText = local
    ? `${w.own} dev cni0 (this node's IPv6 subnet)`
    : !lease
    ? `a route from a lease (no lease covers ${inp.dst})`
    : wg
    ? `${sub} via ${gw} dev ${wgDev} onlink (or ${w.net6} dev ${wgDev})`
    : w.vxlan
    ? `${sub} via ${gw} dev ${devName} onlink`
    : `${sub} via ${pub6}`;
  const ok = r.errno === null &&
    (local
      ? r.devName === "cni0"
      : wg
      ? !!lease && r.devName === wgDev && (r.route === sub || r.route === w.net6?.toString())
      : !!lease && r.route === sub &&
        (w.vxlan ? (r.gateway === gw && r.devName === devName) || direct : r.gateway === pub6));
  const fwd = ctx.sysctl("net.ipv6.conf.all.forwarding");
  w.p.add(
    {
      node: n.name,
      step: "host-route",
      ok,
      entry: lookupText(r),
      detail: r.errno !== null
        ? (fwd === "0" ? `IPv6 forwarding is off (net.ipv6.conf.all.forwarding=0)` : `no route to ${inp.dst}`)
        : ok
        ? expectText + (w.fromPod ? " (input lookup from cni0)" : "")
        : `disagrees with the lease: expected ${expectText}`,
      lease: lease ? w.text(lease) : undefined,
    },
    r.errno !== null && fwd === "0"
      ? await doctorText(ctx, "ipv6-forward")
      : await peerRoutesWhy6(ctx, lease),
  );
  return { r, ok, direct };
}

/** The why of an IPv6 route that disagrees with the lease: the doctor's peers-v6, else the lease's. */
async function peerRoutesWhy6(ctx: NodeSnapshot, lease: Lease | null): Promise<Why> {
  return await doctorText(ctx, "peers-v6") ?? {
    why: lease
      ? "the node's IPv6 route for the peer subnet must follow the lease"
      : "no lease covers the address",
    fix: lease ? ["restart the daemon: it re-adds every peer's routes from the leases on start"] : [],
  };
}

/**
 * ip6tables FORWARD for a pod's forwarded packet (the doctor's forward-policy verdict, IPv6 table), then
 * the IPv6 masquerade decision: with ip6tables, the packet walked through the nat table's POSTROUTING as
 * the IPv4 walk does (masq.ts), against what flannel's IPv6 rules want; in nftables mode
 * (EnableNFTables) table ip6 flannel-ipv6, checked as a whole by the doctor.
 */
async function firewall6(w: Walk6, r: RouteLookup): Promise<void> {
  const { ctx, n } = w;
  const out = w.vxlan ? dev6Name(ctx) : ctx.underlay()?.link.name ?? "";
  if (w.fromPod && ctx.ip6t.text !== null) {
    forward6(n, "forward", w.net6, w.p, [w.srcIP, w.inp.dst, "cni0", out]);
  }
  const nft = nftablesMode(ctx);
  const from = w.srcIP && IPAddr.tryParse(w.srcIP)?.family === 6 ? w.srcIP : r.prefsrc;
  if (!nft && ctx.ip6t.text !== null && from && w.net6) return masqHop6(w, r, from, w.net6);
  const m = nft ? nftFamilyFinding(ctx, "ip6") : (await ip6tablesMasq.run(ctx))[0];
  const masqOk = !m || m.severity !== "critical";
  w.p.add(
    {
      node: n.name,
      step: "masquerade",
      ok: masqOk,
      entry: m ? (nft ? `nft: ${m.detail}` : m.detail) : "ip6tables not checked",
      detail: masqOk
        ? `pod → pod IPv6 keeps its source (${w.srcIP ?? "node"} → ${w.inp.dst})`
        : `flannel's IPv6 masquerade rules are missing${
          nft ? " (nftables mode: table ip6 flannel-ipv6)" : ""
        }`,
    },
    masqOk ? null : { why: m.why ?? m.detail, fix: m.fix ?? [], check: nft ? "nft-rules" : "ip6tables-masq" },
  );
}

/** IPv6 multicast (ff00::/8): flannel's rules never masquerade it. */
const MULTICAST6 = IPNet.parse("ff00::/8");

/**
 * The ip6tables nat verdict for the packet from `from`, against what flannel's IPv6 rules want (as IPv4:
 * pod → outside but not multicast is NATed; a non-pod source → another node's pods is NATed; pod ↔ pod and
 * anything → this node's pods keep their source).
 */
async function masqHop6(w: Walk6, r: RouteLookup, from: string, net6: IPNet): Promise<void> {
  const { ctx, inp, dst } = w;
  const d = masqDecision(ctx.ip6tTable("nat"), from, inp.dst, r.devName);
  const ipMasq = !!ctx.subnetEnv?.ipMasq;
  const outside = !net6.contains(dst);
  const wantNat = ipMasq &&
    (net6.contains(IPAddr.parse(from))
      ? outside && !MULTICAST6.contains(dst)
      : !outside && !w.own?.contains(dst));
  const okMasq = !ipMasq || d.nat === wantNat;
  w.p.add({
    node: w.n.name,
    step: "masquerade",
    ok: okMasq,
    entry: d.rule ?? "no ip6tables nat rule matches",
    detail: (d.nat ? `source NATed (${from} → ${inp.dst})` : `not NATed (${from} → ${inp.dst})`) +
      `; FLANNEL_IPMASQ=${ipMasq}` +
      (okMasq
        ? ""
        : wantNat
        ? ": should be masqueraded (flannel's IPv6 FLANNEL-POSTRTG rules are missing or bypassed)"
        : ": should keep its source (a rule NATs IPv6 traffic flannel leaves alone)"),
  }, okMasq ? null : await doctorText(ctx, "ip6tables-masq"));
}

/** The packet leaves the IPv6 pod network: the route it leaves by ends the path. */
function egressHop6(w: Walk6, r: RouteLookup): void {
  w.p.add({
    node: w.n.name,
    step: "egress",
    ok: r.errno === null,
    entry: lookupText(r),
    detail: `${w.inp.dst} is outside the IPv6 pod network ${w.net6 ?? "?"}: leaves via ${r.devName ?? "?"}`,
  });
}

/**
 * The IPv6 vxlan overlay: flannel-v6.<VNI>, the NDP entry of the next hop, the FDB entry of its MAC to
 * the lease's PublicIPv6. Returns the address the underlay carries the packet to, or null when broken.
 */
async function vxlanOverlay6(
  w: Walk6,
  lease: Lease,
  pub6: string,
  r: RouteLookup,
  podMtu: number | null,
): Promise<string | null> {
  const { ctx, n, p } = w;
  const dev = await vxlanDeviceHop6(w, podMtu);
  if (!dev) return null;
  return await hops.vxlanEntryHops({
    n,
    dev,
    nextHop: r.gateway!,
    mac: vtepMacOf(lease.attrs.BackendV6Data),
    neigh: { proto: "NDP", noResolve: `${dev.name} does not solicit` },
    peer: { ip: pub6, label: "PublicIPv6" },
    withState: false,
    lease: w.text(lease),
    why: async () => (await doctorText(ctx, "peers-v6")) ?? peerEntriesWhy6(),
  }, p);
}

/** Why an IPv6 peer's neighbour or FDB entry matters, when the doctor's peers-v6 finds nothing. */
function peerEntriesWhy6(): Why {
  return {
    why: "flannel programs a permanent neighbour entry (NDP) and an FDB entry per IPv6 peer; without them " +
      "the IPv6 VXLAN device does not know where to send the packet",
    fix: ["restart the daemon: it re-adds every peer's neighbour and FDB entries on start"],
    check: "peers-v6",
  };
}

/**
 * flannel-v6.<VNI> on the source node: the doctor's flannel-v6-device finding, plus the pod MTU fitting
 * it. Returns the device when the hop is ok, else null.
 */
async function vxlanDeviceHop6(w: Walk6, podMtu: number | null): Promise<LinkInfo | null> {
  const { ctx } = w;
  const devName = dev6Name(ctx);
  const dev = dev6(ctx);
  const f = (await flannelV6Device.run(ctx))[0];
  const mtuBad = !!dev && podMtu !== null && podMtu > dev.mtu;
  const devOk = !!dev && dev.up && f?.severity !== "critical" && !mtuBad;
  w.p.add({
    node: w.n.name,
    step: "vxlan-device",
    ok: devOk,
    entry: dev
      ? `${dev.name} ${dev.up ? "up" : "DOWN"} mtu ${dev.mtu} vni ${dev.vxlan?.vni ?? "?"}` +
        (podMtu !== null ? `; pod mtu ${podMtu}` : "")
      : `${devName} does not exist`,
    detail: devOk
      ? `encapsulates into VXLAN over IPv6 (overhead ${V6_OVERHEAD}), MTU ${dev!.mtu}`
      : mtuBad
      ? `pod MTU ${podMtu} > ${dev!.name} MTU ${dev!.mtu}: larger packets are dropped`
      : f?.detail ?? `${devName} is not usable`,
  }, devOk ? null : mtuBad ? await doctorText(ctx, "mtu") : { why: f?.why ?? "", fix: f?.fix ?? [] });
  return devOk ? dev : null;
}

/**
 * The remote node receives the packet: its flannel-v6 device (vxlan) or the interface holding its
 * PublicIPv6 (host-gw, DirectRouting), its IPv6 route to cni0, its ip6tables FORWARD verdict.
 */
async function remoteIngress6(
  w: Walk6,
  peer: TraceNode,
  lease: Lease,
  pub6: string,
  direct: boolean,
  underlayDst: string,
): Promise<void> {
  const { p } = w;
  const pc = peer.ctx;
  let iif: string | null;
  if (w.backend === "wireguard") {
    const d = await wgIngress(peer, lease, p, 6, underlayDst);
    if (!d) return;
    iif = d;
  } else if (w.vxlan && !direct) {
    const dev = await hops.remoteVxlanHop({
      peer,
      dev: dev6(pc),
      devName: dev6Name(pc),
      mac: vtepMacOf(lease.attrs.BackendV6Data),
      family: "IPv6 ",
      lease: w.text(lease),
      why: async (ok) => ok ? null : await doctorText(pc, "flannel-v6-device"),
    }, p);
    if (!dev) return;
    iif = dev.name;
  } else {
    iif = hops.deviceOf(peer, pub6);
  }
  p.dev(peer.netns, iif, "rx");
  const route = { peer, dst: w.inp.dst, src: w.srcIP, iif, subnet: String(lease.ipv6Subnet) };
  const rrOk = await hops.remoteRouteHop({ ...route, family: "IPv6 ", forwardCheck: "ipv6-forward" }, p);
  if (rrOk && pc.ip6t.text !== null) {
    forward6(peer, "remote-forward", network6(pc), p, [w.srcIP, w.inp.dst, iif ?? "", "cni0"]);
  }
}

/**
 * FORWARD on `n` for the traced packet (`pkt`: source, destination, in and out devices), walked through
 * ip6tables and the native nft tables; without an IPv6 source, ip6tables' FORWARD policy and flannel's
 * accept rules for the IPv6 pod network.
 */
function forward6(
  n: TraceNode,
  step: string,
  net6: IPNet | null,
  p: Path,
  pkt: [string | null, string, string, string],
): void {
  const walked = tracedForward(n.ctx, ...pkt);
  if (walked) return hops.forwardHop(n, step, walked, "", p);
  const f = forwardFinding(n.ctx, n.ctx.ip6tTable("filter"), net6?.toString(), "ip6tables");
  hops.forwardHop(n, step, f, "ip6tables", p);
}
