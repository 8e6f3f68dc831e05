/**
 * The trace engine: follows one packet from a pod (or a node) to an address through the live state of
 * every node it can read, with the kernel's own lookups (route lookups with the packet's addresses and
 * input interface, the neighbour and FDB entries the kernel would use), and checks each hop against the
 * lease that explains it. The first broken hop is the verdict; its why/fix come from the doctor check
 * that covers it (run on that node's gathered state), so trace and doctor never disagree in wording.
 * Read-only.
 *
 * This module is the IPv4 walk, written as its steps: the source pod (pod.ts), the node's daemon, its
 * route for the packet, the firewall (FORWARD and the masquerade decision), the overlay (vxlan here,
 * udp in udp.ts), the underlay, the remote node (remote.ts). The IPv6 walk is trace6.ts; the hops both
 * share are hops.ts.
 * @module
 */
import { IPAddr, type IPNet } from "../base/cidr.ts";
import { EHOSTUNREACH, routeGet } from "../netlink/mod.ts";
import type { LinkInfo, RouteLookup } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import { ALL_CHECKS, forwardPolicy } from "../doctor/mod.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import { masqDecision } from "./masq.ts";
import * as hops from "./hops.ts";
import { leaseFor, leaseText, nodeOfLease } from "./lease.ts";
import { doctorText, finish, lookupText, startWalk, type Walk, type Why } from "./path.ts";
import { deliver, podHops } from "./pod.ts";
import { remoteNode } from "./remote.ts";
import { udpDeviceHop, udpIngress, udpOverlay } from "./udp.ts";
import { wgIngress, wgOverlay } from "./wireguard.ts";
import { WG_DEVICE } from "../backend/wireguard/options.ts";
import { remoteInputHop, tracedForward } from "./firewall_hop.ts";
import type { TraceInput, TraceNode, TraceReport } from "./types.ts";
import { UDP_DEVICE } from "../backend/config.ts";
import { vtepMacOf } from "../lease/backend_data.ts";

/** Runs the trace. Never throws for node problems: they become broken hops. */
export async function trace(inp: TraceInput): Promise<TraceReport> {
  const w = startWalk(inp, { srcIP: inp.src.ip, lease: leaseFor, text: leaseText });
  const { ctx, dst, n, p, lease } = w;
  const end = () => finish(inp, inp.src.name, p);

  // 1. In the source pod: its route, its eth0 and the veth peer on the host, the cni0 port.
  const podMtu = await podHops(inp, p);
  if (p.broken) return end();
  // 2. This node's daemon (a dead one explains stale or missing entries further on).
  await hops.daemonHop(n, p);
  // 3. The node's route for the packet: the kernel's input lookup (from cni0) or its output lookup.
  const route = await hostRoute(w, podMtu);
  if (!route) return end();
  // 4. The firewall: FORWARD for forwarded pod traffic, and the masquerade decision.
  const from = await firewall(w, route.r);
  if (!ctx.network || !ctx.network.contains(dst)) {
    // Leaves the pod network: nothing is sent, the decision above is the answer.
    egressHop(w, route.r, ctx.network);
    return end();
  }
  if (!route.ok) return end();
  // 5. Same node: delivered by cni0 to the destination pod.
  if (ctx.nodeSubnet?.contains(dst)) {
    await deliver(inp, n, p);
    return end();
  }
  if (!lease) return end();
  // 6. The overlay: vxlan's device, ARP and FDB entries; udp's flannel0 and peer table.
  const direct = route.r.gateway === lease.attrs.PublicIP;
  const underlayDst = await overlay(w, lease, route.r, direct, podMtu);
  if (underlayDst === null) return end();
  // 7. The underlay: how the node reaches the peer's PublicIP.
  if (!hops.underlayRouteHop(underlayRoute(w, lease, underlayDst, direct), p)) return end();
  // 8. The remote node, when its state can be read here.
  await remoteNode({
    inp,
    src: n,
    peer: nodeOfLease(inp.nodes, lease),
    publicIP: lease.attrs.PublicIP,
    lease: w.text(lease),
    underlayDst,
    ingress: (peer) => remoteIngress(w, peer, lease, from, direct, underlayDst),
  }, p);
  return end();
}

/**
 * The node's route for the packet, checked against the lease; a route missing because the flannel
 * device is down (or gone) is the device's fault, reported as such. Returns the lookup and whether it
 * follows the lease, or null when a down device ended the walk.
 */
async function hostRoute(w: Walk, podMtu: number | null): Promise<{ r: RouteLookup; ok: boolean } | null> {
  const { ctx, inp, lease } = w;
  const r = routeGet(w.n.h, w.fromPod ? { dst: inp.dst, src: w.srcIP!, iif: "cni0" } : { dst: inp.dst });
  const expect = expectedRoute(ctx, w.dst, lease, w.backend);
  const ok = r.errno === null && expect.ok(r);
  if (!ok && await deviceDown(w, r, podMtu)) return null;
  w.p.add({
    node: w.n.name,
    step: "host-route",
    ok,
    entry: lookupText(r),
    detail: hostRouteDetail(w, r, expect.text, ok),
    lease: lease ? w.text(lease) : undefined,
  }, await hostRouteWhy(w, r));
  return { r, ok };
}

/** Whether rp_filter on cni0 refused the pod's packet (EXDEV, or EINVAL on kernels ≥ 6.x: hops.ts). */
function rpfRefused(w: Walk, r: RouteLookup): boolean {
  return w.fromPod && hops.rpFilterRefused(w.n, r, w.srcIP ?? null, "cni0");
}

/** What the host-route hop says: why the lookup failed, or how the route compares with the lease. */
function hostRouteDetail(w: Walk, r: RouteLookup, expect: string, ok: boolean): string {
  const rpf = w.ctx.sysctl("net.ipv4.conf.cni0.rp_filter");
  const forward = w.ctx.sysctl("net.ipv4.ip_forward");
  return rpfRefused(w, r)
    ? `rp_filter (cni0 rp_filter=${rpf ?? "?"}) drops the packet: ${w.srcIP} is not routed back via cni0`
    : r.errno === EHOSTUNREACH || (r.errno !== null && forward === "0")
    ? `forwarding is off (net.ipv4.ip_forward=${forward ?? "?"})`
    : r.errno !== null
    ? `no route to ${w.inp.dst}`
    : ok
    ? expect + (w.fromPod ? ` (input lookup from cni0, rp_filter=${rpf ?? "?"})` : "")
    : `disagrees with the lease: expected ${expect}`;
}

/** The why of a broken host route: rp_filter, forwarding off, else the doctor's peer-routes. */
async function hostRouteWhy(w: Walk, r: RouteLookup): Promise<Why | null> {
  const { ctx, lease } = w;
  if (rpfRefused(w, r)) return await doctorText(ctx, "rp-filter");
  if (r.errno !== null && ctx.sysctl("net.ipv4.ip_forward") !== "1") {
    return await doctorText(ctx, "ip-forward");
  }
  return await doctorText(ctx, "peer-routes") ?? {
    why: lease ? "the node's route for the peer subnet must follow the lease" : "no lease covers the address",
    fix: lease ? ["restart the daemon: it re-adds every peer's route from the leases on start"] : [],
  };
}

/**
 * The kernel drops the routes of a device that goes down: a missing route through a down (or missing)
 * flannel device is the device's fault. Adds that device's hop and returns true when it is so.
 */
async function deviceDown(w: Walk, r: RouteLookup, podMtu: number | null): Promise<boolean> {
  const { ctx, lease, n, p } = w;
  const remote = !!lease && !(ctx.nodeSubnet?.contains(w.dst));
  const vxDev = ctx.vxlanDevice();
  if (remote && w.backend === "vxlan" && lease.attrs.BackendType === "vxlan" && (!vxDev || !vxDev.up)) {
    p.add({
      node: n.name,
      step: "vxlan-device",
      ok: false,
      entry: vxDev
        ? `${vxDev.name} DOWN (operstate ${vxDev.operstate}) mtu ${vxDev.mtu}`
        : `${ctx.vxlanName} does not exist`,
      detail: `${vxDev ? `${vxDev.name} is down` : `no ${ctx.vxlanName}`}: the kernel removed its routes, ` +
        `the node routes ${w.inp.dst} as ${lookupText(r)}`,
      lease: w.text(lease),
    }, await doctorText(ctx, "flannel-device"));
    return true;
  }
  if (remote && w.backend === "udp") {
    const tun = ctx.link(UDP_DEVICE);
    if (!tun || !tun.up) {
      await udpDeviceHop(n, "udp-device", podMtu, p);
      return true;
    }
  }
  return false;
}

/** The route the lease says the node must have for `dst`, as a test of a lookup and as text. */
function expectedRoute(
  ctx: NodeSnapshot,
  dst: IPAddr,
  lease: Lease | null,
  backend: string,
): { ok: (r: RouteLookup) => boolean; text: string } {
  const own = ctx.nodeSubnet;
  if (own?.contains(dst)) {
    return { ok: (r) => r.devName === "cni0", text: `${own} dev cni0 (this node's subnet)` };
  }
  const net = ctx.network;
  if (!net || !net.contains(dst)) return { ok: () => true, text: "any route (outside the pod network)" };
  if (!lease?.subnet) return { ok: () => false, text: `a route from a lease (no lease covers ${dst})` };
  const sub = lease.subnet.toString(), pub = lease.attrs.PublicIP;
  if (backend === "udp") {
    // flannel's udp backend: one route for the whole Network and one per peer, both via flannel0; the
    // per-peer route is the one the lease explains (without it the packet still enters flannel0 through
    // the Network route, but the daemon did not program this peer).
    const gw = lease.subnet.ip.toString();
    return {
      ok: (r) => r.route === sub && r.devName === UDP_DEVICE && r.gateway === gw,
      text: `${sub} via ${gw} dev ${UDP_DEVICE} onlink`,
    };
  }
  if (backend === "wireguard") {
    // flanneld routes the whole Network via flannel-wg; flanctl also each peer subnet, via its address.
    const gw = lease.subnet.ip.toString();
    return {
      ok: (r) => r.devName === WG_DEVICE && (r.route === sub || r.route === net.toString()),
      text: `${sub} via ${gw} dev ${WG_DEVICE} onlink (or ${net} dev ${WG_DEVICE})`,
    };
  }
  if (backend !== "vxlan" || lease.attrs.BackendType !== "vxlan") {
    return { ok: (r) => r.route === sub && r.gateway === pub, text: `${sub} via ${pub}` };
  }
  const dev = ctx.vxlanName, gw = lease.subnet.ip.toString();
  return {
    ok: (r) =>
      r.route === sub && ((r.gateway === gw && r.devName === dev && r.flags.includes("onlink")) ||
        (ctx.directRouting && r.gateway === pub)),
    text: `${sub} via ${gw} dev ${dev} onlink${ctx.directRouting ? ` (or via ${pub}, DirectRouting)` : ""}`,
  };
}

/**
 * The firewall on the source node: FORWARD for a pod's forwarded packet, then the masquerade decision
 * for the packet's source. Returns that source: the pod's, else what the kernel picks for the output
 * device (prefsrc, else the device's primary address; MASQUERADE uses the same).
 */
async function firewall(w: Walk, r: RouteLookup): Promise<string | null> {
  const { ctx, n, p } = w;
  if (w.fromPod) {
    const f = tracedForward(ctx, w.srcIP, w.inp.dst, "cni0", r.devName ?? "") ??
      (await forwardPolicy.run(ctx))[0];
    hops.forwardHop(n, "forward", f, "", p);
  }
  const outAddr = r.prefsrc ??
    ctx.kernel?.addrs.find((a) => a.family === 4 && a.index === r.dev && a.scope === "global")?.local ??
    null;
  const from = w.srcIP ?? outAddr;
  if (from && ctx.store.config?.enableNFTables) await nftMasqHop(w, from);
  else if (from) await masqHop(w, r, from, outAddr);
  return from;
}

/**
 * nftables mode: flannel's masquerade rules live in table ip flannel-ipv4, whose presence and contents
 * the doctor's nft-rules check verifies; this walk evaluates iptables rules only.
 */
async function nftMasqHop(w: Walk, from: string): Promise<void> {
  const { ctx } = w;
  const f = (await ALL_CHECKS.find((c) => c.id === "nft-rules")?.run(ctx))?.[0];
  const okNft = !f || f.severity === "ok";
  w.p.add({
    node: w.n.name,
    step: "masquerade",
    ok: okNft,
    entry: f ? f.detail : "nftables mode",
    detail: `nftables mode (EnableNFTables): ${from} → ${w.inp.dst} is decided by flannel's flannel-ipv4 ` +
      "postrtg chain, checked as a whole, not walked per packet",
  }, okNft ? null : await doctorText(ctx, "nft-rules"));
}

/**
 * The nat table's verdict for the packet from `from`, against what flannel's rules want: pod → outside
 * (not multicast) is NATed; a non-pod source → another node's pods is NATed; pod ↔ pod and anything →
 * this node's pods keep their source.
 */
async function masqHop(w: Walk, r: RouteLookup, from: string, outAddr: string | null): Promise<void> {
  const { ctx, inp } = w;
  const network = ctx.network;
  const outside = !network || !network.contains(w.dst);
  const env = ctx.subnetEnv;
  const d = masqDecision(ctx.iptTable("nat"), from, inp.dst, r.devName);
  const fromPodNet = !!network?.contains(IPAddr.parse(from));
  const multicast = IPAddr.parse(inp.dst).family === 4 && Number(inp.dst.split(".")[0]) >= 224 &&
    Number(inp.dst.split(".")[0]) < 240;
  const wantNat = !!env?.ipMasq &&
    (fromPodNet ? outside && !multicast : !outside && !(ctx.nodeSubnet?.contains(w.dst) ?? false));
  const okMasq = !env?.ipMasq || d.nat === wantNat;
  w.p.add({
    node: w.n.name,
    step: "masquerade",
    ok: okMasq,
    entry: d.rule ??
      (ctx.ipt.main.text === null ? `iptables-save: ${ctx.ipt.main.error}` : "no nat rule matches"),
    detail: (d.nat
      ? `source NATed to ${outAddr ?? "the outgoing address"} (${from} → ${inp.dst})`
      : `not NATed (${from} → ${inp.dst})`) +
      (env ? `; FLANNEL_IPMASQ=${env.ipMasq}` : "") +
      (okMasq
        ? ""
        : wantNat
        ? ": should be masqueraded (flannel's FLANNEL-POSTRTG rules are missing or bypassed)"
        : ": should keep its source (a rule NATs traffic flannel leaves alone)"),
  }, await doctorText(ctx, "masq-rules"));
}

/** The packet leaves the pod network: the route it leaves by ends the path. */
function egressHop(w: Walk, r: RouteLookup, network: IPNet | null): void {
  const { n } = w;
  w.p.add({
    node: n.name,
    step: "egress",
    ok: r.errno === null,
    entry: lookupText(r),
    detail:
      `${w.inp.dst} is outside the pod network ${network ?? "?"}: leaves ${n.name} via ${r.devName ?? "?"}` +
      (r.gateway ? ` to ${r.gateway}` : ""),
  });
}

/**
 * The source node's overlay for the lease: vxlan (unless DirectRouting sends it straight to the peer)
 * or udp; host-gw has none. Returns the address the underlay carries the packet to, or null when an
 * overlay hop is broken.
 */
async function overlay(
  w: Walk,
  lease: Lease,
  r: RouteLookup,
  direct: boolean,
  podMtu: number | null,
): Promise<string | null> {
  if (w.backend === "vxlan" && !direct) return await vxlanOverlay(w, lease, r, podMtu);
  if (w.backend === "udp") {
    return await udpOverlay(w.n, lease, w.text(lease), podMtu, w.p) ? lease.attrs.PublicIP : null;
  }
  if (w.backend === "wireguard") {
    return await wgOverlay(w.n, lease, w.text(lease), podMtu, w.p); // one-device modes: maybe PublicIPv6
  }
  return lease.attrs.PublicIP;
}

/** The vxlan overlay: the device, the ARP entry of the next hop, the FDB entry of its MAC. */
async function vxlanOverlay(
  w: Walk,
  lease: Lease,
  r: RouteLookup,
  podMtu: number | null,
): Promise<string | null> {
  const { ctx, n, p } = w;
  const dev = await vxlanDeviceHop(w, podMtu);
  if (!dev) return null;
  return await hops.vxlanEntryHops({
    n,
    dev,
    nextHop: r.gateway!,
    mac: vtepMacOf(lease.attrs.BackendData),
    neigh: { proto: "ARP", noResolve: `flannel.${ctx.vni} does not ARP` },
    peer: { ip: lease.attrs.PublicIP, label: "PublicIP" },
    withState: true,
    lease: w.text(lease),
    why: async (entry) => await doctorText(ctx, entry === "neigh" ? "peer-arp" : "peer-fdb"),
  }, p);
}

/**
 * flannel.<VNI> on the source node: a VXLAN device, up, whose MTU fits the underlay (its MTU − 50) and
 * the pod's MTU. Returns the device when the hop is ok, else null.
 */
async function vxlanDeviceHop(w: Walk, podMtu: number | null): Promise<LinkInfo | null> {
  const { ctx } = w;
  const dev = ctx.vxlanDevice();
  const under = ctx.underlay();
  const max = under ? under.link.mtu - 50 : null;
  const mtuBad = !!dev && ((max !== null && dev.mtu > max) || (podMtu !== null && podMtu > dev.mtu));
  const devOk = !!dev && dev.up && dev.kind === "vxlan" && !mtuBad;
  w.p.add(
    {
      node: w.n.name,
      step: "vxlan-device",
      ok: devOk,
      entry: dev
        ? `${dev.name} ${dev.up ? "up" : "DOWN"} mtu ${dev.mtu} vni ${dev.vxlan?.vni ?? "?"} dstport ${
          dev.vxlan?.port || 8472
        } dev ${under?.link.name ?? "?"} (mtu ${under?.link.mtu ?? "?"})` +
          (podMtu !== null ? `; pod mtu ${podMtu}` : "")
        : `${ctx.vxlanName} does not exist`,
      detail: !dev
        ? `no ${ctx.vxlanName}: no overlay`
        : !dev.up
        ? `${dev.name} is down: the packet is dropped`
        : mtuBad
        ? (max !== null && dev.mtu > max
          ? `${dev.name} MTU ${dev.mtu} > ${under!.link.name} MTU ${
            under!.link.mtu
          } - 50: large packets are dropped`
          : `pod MTU ${podMtu} > ${dev.name} MTU ${dev.mtu}: packets larger than ${dev.mtu} are dropped`)
        : `encapsulates into VXLAN VNI ${dev.vxlan?.vni}, MTU ${dev.mtu} fits ${
          under?.link.name ?? "the underlay"
        }`,
    },
    !dev || !dev.up ? await doctorText(ctx, "flannel-device") : mtuBad ? await doctorText(ctx, "mtu") : null,
  );
  return devOk ? dev : null;
}

/** The underlay hop's inputs: vxlan and udp encapsulate (any routed underlay); host-gw and DirectRouting need the peer on-link. */
function underlayRoute(
  w: Walk,
  lease: Lease,
  underlayDst: string,
  direct: boolean,
): hops.UnderlayRoute {
  const { ctx, backend } = w;
  return {
    n: w.n,
    peer: { ip: underlayDst, label: underlayDst.includes(":") ? "PublicIPv6" as const : "PublicIP" as const },
    overlay: [
      ctx.vxlanDevice(),
      backend === "udp" ? ctx.link(UDP_DEVICE) : null,
      backend === "wireguard" ? ctx.link(WG_DEVICE) : null,
    ],
    needDirect: (backend !== "vxlan" && backend !== "udp" && backend !== "wireguard") || direct,
    backend,
    routeGet: underlayDst.includes(":") ? "ip -6 route get" : "ip route get",
    lease: w.text(lease),
  };
}

/**
 * The remote node receives the packet: its backend's ingress (vxlan's device, udp's port and flannel0,
 * host-gw's underlay interface), its route to cni0, its FORWARD verdict.
 */
async function remoteIngress(
  w: Walk,
  peer: TraceNode,
  lease: Lease,
  src: string | null,
  direct: boolean,
  underlayDst: string,
): Promise<void> {
  const { p } = w;
  const pc = peer.ctx;
  let iif: string | null;
  if (w.backend === "vxlan" && !direct) {
    if (!remoteInputHop(peer, w.ctx.ownLease()?.attrs.PublicIP ?? null, w.text(lease), p)) return;
    const dev = await hops.remoteVxlanHop({
      peer,
      dev: pc.vxlanDevice(),
      devName: pc.vxlanName,
      mac: vtepMacOf(lease.attrs.BackendData),
      family: "",
      lease: w.text(lease),
      why: async (_ok, missingOrDown) => await doctorText(pc, missingOrDown ? "flannel-device" : "vtep-mac"),
    }, p);
    if (!dev) return;
    p.dev(peer.netns, hops.deviceOf(peer, lease.attrs.PublicIP), "rx");
    p.dev(peer.netns, dev.name, "rx");
    iif = dev.name;
  } else if (w.backend === "udp") {
    iif = await udpIngress(peer, lease, src, w.text(lease), p);
    if (iif === null) return;
  } else if (w.backend === "wireguard") {
    iif = await wgIngress(peer, lease, p, 4, underlayDst);
    if (iif === null) return;
  } else {
    iif = hops.deviceOf(peer, lease.attrs.PublicIP);
    p.dev(peer.netns, iif, "rx");
  }
  const route = { peer, dst: w.inp.dst, src, iif, subnet: String(lease.subnet), family: "" as const };
  if (!await hops.remoteRouteHop({ ...route, forwardCheck: "ip-forward" }, p)) return;
  const f = tracedForward(pc, src ?? w.srcIP, w.inp.dst, iif ?? "", "cni0") ??
    (await forwardPolicy.run(pc))[0];
  hops.forwardHop(peer, "remote-forward", f, "", p);
}
