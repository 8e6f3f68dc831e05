/**
 * The IPv6 walk of `flanctl trace` (dual stack and IPv6-only): the same hops as the IPv4 vxlan/host-gw
 * walk with the IPv6 state — the pod's IPv6 route, the node's route to the peer's IPv6 subnet via
 * flannel-v6.<VNI> (or the peer's PublicIPv6 for host-gw), the NDP entry of the next hop (instead of
 * ARP), the FDB entry to the lease's PublicIPv6, the ip6tables masquerade rules (doctor's
 * ip6tables-masq), the remote flannel-v6 device and its route to cni0. Read-only.
 * @module
 */
import { IPAddr, type IPNet } from "../ip/cidr.ts";
import { routeGet } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import { vtepMacOf } from "../doctor/checks/vxlan.ts";
import { dev6, dev6Name, flannelV6Device, ip6tablesMasq, network6, own6 } from "../doctor/checks/ipv6.ts";
import type { DoctorContext } from "../doctor/context.ts";
import { forwardFinding } from "../doctor/checks/iptables.ts";
import { nftablesMode, nftFamilyFinding } from "../doctor/checks/nftables.ts";
import {
  daemonHop,
  deliver,
  finish,
  isPod,
  nodeOfLease,
  podHops,
  type TraceInput,
  underlayHop,
} from "./trace.ts";
import * as hops from "./hops.ts";
import { doctorText, lookupText, Path, type Why } from "./path.ts";
import type { TraceNode, TraceReport } from "./types.ts";

/** VXLAN over IPv6: outer IPv6 40 + UDP 8 + VXLAN 8 + inner Ethernet 14. */
const V6_OVERHEAD = 70;

function lease6For(ctx: DoctorContext, ip: IPAddr): Lease | null {
  return ctx.store.leases.find((l) => l.ipv6Subnet?.contains(ip)) ?? null;
}

/** The node of a lease by its IPv6 subnet (IPv6-only leases have no IPv4 subnet). */
function nodeOf6(nodes: TraceNode[], l: Lease): TraceNode | null {
  return nodeOfLease(nodes, l) ?? nodes.find((n) => !!l.ipv6Subnet && own6(n.ctx)?.equals(l.ipv6Subnet)) ??
    null;
}

/** Traces a packet to an IPv6 address. */
export async function trace6(inp: TraceInput): Promise<TraceReport> {
  const p = new Path();
  const srcNode = inp.src.node;
  const ctx = srcNode.ctx;
  const dst = IPAddr.parse(inp.dst, "DST");
  const srcName = inp.src.name;
  const net6: IPNet | null = network6(ctx);
  const own: IPNet | null = own6(ctx);
  const backend = ctx.backendType ?? "vxlan";
  const lease = own?.contains(dst) ? null : lease6For(ctx, dst);
  const peerNode = lease ? nodeOf6(inp.nodes, lease) : null;
  const leaseText = (l: Lease) => {
    const mac = vtepMacOf(l.attrs.BackendV6Data);
    const who = nodeOf6(inp.nodes, l)?.name;
    return `${l.ipv6Subnet} → ${who ? `${who}, ` : ""}PublicIPv6 ${l.attrs.PublicIPv6 ?? "-"}` +
      (mac ? `, VtepMAC ${mac}` : "");
  };
  const fromPod = isPod(inp.src);
  const srcIP = fromPod ? (inp.src as { ipv6?: string }).ipv6 ?? null : inp.src.ip;
  if (fromPod && !srcIP) {
    p.add({
      node: srcName,
      step: "pod-address",
      ok: false,
      entry: `${srcName} has no IPv6 address`,
      detail: `the pod has no IPv6 address: it cannot send to ${inp.dst}`,
    }, { why: "IPv6 pod traffic needs an IPv6 address from the CNI result (EnableIPv6)", fix: [] });
    return finish(inp, srcName, p);
  }

  // 1. In the source pod.
  const podMtu = await podHops(inp, p);
  if (p.broken) return finish(inp, srcName, p);

  // 2. This node's daemon.
  await daemonHop(srcNode, p);

  // 3. The node's IPv6 route (the kernel's input lookup from cni0 for a pod's packet).
  const r = routeGet(srcNode.h, fromPod ? { dst: inp.dst, src: srcIP!, iif: "cni0" } : { dst: inp.dst });
  const devName = dev6Name(ctx);
  const sub = lease?.ipv6Subnet?.toString();
  const gw = lease?.ipv6Subnet?.ip.toString();
  const pub6 = lease?.attrs.PublicIPv6 ?? null;
  const vxlan = backend === "vxlan";
  const direct = vxlan && !!pub6 && r.gateway === pub6 && ctx.directRouting;
  const expectText = own?.contains(dst)
    ? `${own} dev cni0 (this node's IPv6 subnet)`
    : !lease
    ? `a route from a lease (no lease covers ${inp.dst})`
    : vxlan
    ? `${sub} via ${gw} dev ${devName} onlink`
    : `${sub} via ${pub6}`;
  const routeOk = r.errno === null &&
    (own?.contains(dst) ? r.devName === "cni0" : !!lease && r.route === sub &&
      (vxlan ? (r.gateway === gw && r.devName === devName) || direct : r.gateway === pub6));
  const fwd = ctx.sysctl("net.ipv6.conf.all.forwarding");
  p.add(
    {
      node: srcNode.name,
      step: "host-route",
      ok: routeOk,
      entry: lookupText(r),
      detail: r.errno !== null
        ? (fwd === "0" ? `IPv6 forwarding is off (net.ipv6.conf.all.forwarding=0)` : `no route to ${inp.dst}`)
        : routeOk
        ? expectText + (fromPod ? " (input lookup from cni0)" : "")
        : `disagrees with the lease: expected ${expectText}`,
      lease: lease ? leaseText(lease) : undefined,
    },
    r.errno !== null && fwd === "0"
      ? await doctorText(ctx, "ipv6-forward")
      : await doctorText(ctx, "peers-v6") ?? {
        why: lease
          ? "the node's IPv6 route for the peer subnet must follow the lease"
          : "no lease covers the address",
        fix: lease ? ["restart the daemon: it re-adds every peer's routes from the leases on start"] : [],
      },
  );

  // 4. ip6tables FORWARD for a pod's forwarded packet (the doctor's forward-policy verdict, IPv6 table),
  // then the IPv6 masquerade rules (flannel's ip6tables FLANNEL-POSTRTG, checked by the doctor).
  if (fromPod && ctx.ip6t.text !== null) forward6(srcNode, "forward", net6, p);
  // 4'. The IPv6 masquerade rules (flannel's ip6tables FLANNEL-POSTRTG, checked by the doctor).
  // In nftables mode (EnableNFTables) they are table ip6 flannel-ipv6's postrtg and forward chains.
  const nft = nftablesMode(ctx);
  const m = nft ? nftFamilyFinding(ctx, "ip6") : (await ip6tablesMasq.run(ctx))[0];
  const masqOk = !m || m.severity !== "critical";
  p.add(
    {
      node: srcNode.name,
      step: "masquerade",
      ok: masqOk,
      entry: m ? (nft ? `nft: ${m.detail}` : m.detail) : "ip6tables not checked",
      detail: masqOk
        ? `pod → pod IPv6 keeps its source (${srcIP ?? "node"} → ${inp.dst})`
        : `flannel's IPv6 masquerade rules are missing${
          nft ? " (nftables mode: table ip6 flannel-ipv6)" : ""
        }`,
    },
    masqOk ? null : { why: m.why ?? m.detail, fix: m.fix ?? [], check: nft ? "nft-rules" : "ip6tables-masq" },
  );
  if (!net6 || !net6.contains(dst)) {
    p.add({
      node: srcNode.name,
      step: "egress",
      ok: r.errno === null,
      entry: lookupText(r),
      detail: `${inp.dst} is outside the IPv6 pod network ${net6 ?? "?"}: leaves via ${r.devName ?? "?"}`,
    });
    return finish(inp, srcName, p);
  }
  if (!routeOk) return finish(inp, srcName, p);
  if (own?.contains(dst)) {
    await deliver(inp, srcNode, p);
    return finish(inp, srcName, p);
  }
  if (!lease || !pub6) return finish(inp, srcName, p);

  // 5. The IPv6 overlay: flannel-v6 device, NDP entry of the next hop, FDB entry to the PublicIPv6.
  let underlayDst = pub6;
  if (vxlan && !direct) {
    const dev = dev6(ctx);
    const f = (await flannelV6Device.run(ctx))[0];
    const mtuBad = !!dev && podMtu !== null && podMtu > dev.mtu;
    const devOk = !!dev && dev.up && f?.severity !== "critical" && !mtuBad;
    p.add({
      node: srcNode.name,
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
    if (!devOk) return finish(inp, srcName, p);
    const mac = vtepMacOf(lease.attrs.BackendV6Data);
    const why6: Why = {
      why:
        "flannel programs a permanent neighbour entry (NDP) and an FDB entry per IPv6 peer; without them " +
        "the IPv6 VXLAN device does not know where to send the packet",
      fix: ["restart the daemon: it re-adds every peer's neighbour and FDB entries on start"],
      check: "peers-v6",
    };
    const l = leaseText(lease);
    const ndp = { proto: "NDP" as const, noResolve: `${dev!.name} does not solicit` };
    const ndpWhy = (await doctorText(ctx, "peers-v6")) ?? why6;
    if (
      !hops.neighHop({ n: srcNode, dev: dev!, nextHop: r.gateway!, mac, ...ndp, lease: l, why: ndpWhy }, p)
    ) {
      return finish(inp, srcName, p);
    }
    const peer = { ip: pub6, label: "PublicIPv6" as const };
    const fdbWhy = (await doctorText(ctx, "peers-v6")) ?? why6;
    const to = hops.fdbHop({ n: srcNode, dev: dev!, mac, peer, withState: false, lease: l, why: fdbWhy }, p);
    if (to === null) return finish(inp, srcName, p);
    underlayDst = to;
    p.dev(srcNode.netns, dev!.name, "tx");
  }

  // 6. The IPv6 underlay to the peer's PublicIPv6.
  const underlay = {
    n: srcNode,
    peer: { ip: underlayDst, label: "PublicIPv6" as const },
    overlay: [dev6(ctx)],
    needDirect: !vxlan || direct,
    backend,
    routeGet: "ip -6 route get",
    lease: leaseText(lease),
  };
  if (!hops.underlayRouteHop(underlay, p)) return finish(inp, srcName, p);

  // 7. The remote node.
  if (!peerNode) {
    hops.unreadableRemoteHop(pub6, leaseText(lease), p);
    return finish(inp, srcName, p);
  }
  if (inp.underlay) underlayHop(inp.underlay, srcNode, peerNode, underlayDst, p);
  await daemonHop(peerNode, p);
  const mark = p.hops.length;
  const pc = peerNode.ctx;
  let iif: string | null;
  if (vxlan && !direct) {
    const dev = dev6(pc);
    const mac = vtepMacOf(lease.attrs.BackendV6Data);
    const ok = !!dev && dev.up && (!mac || dev.mac?.toLowerCase() === mac);
    p.add({
      node: peerNode.name,
      step: "remote-vxlan",
      ok,
      entry: dev
        ? `${dev.name} ${dev.up ? "up" : "DOWN"} mac ${dev.mac} mtu ${dev.mtu}`
        : `${dev6Name(pc)} does not exist`,
      detail: !dev
        ? "no IPv6 VXLAN device: the encapsulated packet is dropped"
        : !dev.up
        ? `${dev.name} is down: the encapsulated packet is dropped`
        : !ok
        ? `device MAC ${dev.mac} disagrees with the lease's IPv6 VtepMAC ${mac}`
        : `decapsulated on ${dev.name}`,
      lease: leaseText(lease),
    }, ok ? null : await doctorText(pc, "flannel-v6-device"));
    if (!ok) return finish(inp, srcName, p);
    iif = dev!.name;
  } else {
    iif = pc.kernel?.addrs.find((a) => a.local === pub6)?.ifname ?? null;
  }
  p.dev(peerNode.netns, iif, "rx");
  const route = { peer: peerNode, dst: inp.dst, src: srcIP, iif, subnet: String(lease.ipv6Subnet) };
  const rrOk = await hops.remoteRouteHop({ ...route, family: "IPv6 ", forwardCheck: "ipv6-forward" }, p);
  if (rrOk && pc.ip6t.text !== null) forward6(peerNode, "remote-forward", network6(pc), p);
  if (p.hops.slice(mark).every((h) => h.ok)) await deliver(inp, peerNode, p);
  return finish(inp, srcName, p);
}

/** ip6tables FORWARD on `n`: its policy, or flannel's accept rules for the IPv6 pod network. */
function forward6(n: TraceNode, step: string, net6: IPNet | null, p: Path): void {
  const f = forwardFinding(n.ctx, n.ctx.ip6tTable("filter"), net6?.toString(), "ip6tables");
  hops.forwardHop(n, step, f, "ip6tables", p);
}
