/**
 * The trace engine: follows one packet from a pod (or a node) to an address through the live state of
 * every node it can read, with the kernel's own lookups (route lookups with the packet's addresses and
 * input interface, the neighbour and FDB entries the kernel would use), and checks each hop against the
 * lease that explains it. The first broken hop is the verdict; its why/fix come from the doctor check
 * that covers it (run on that node's gathered state), so trace and doctor never disagree in wording.
 * Read-only.
 * @module
 */
import { IPAddr } from "../ip/cidr.ts";
import { openNetlink, routeGet } from "../netlink/mod.ts";
import type { LinkInfo, NetnsRef, RouteLookup } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import { ALL_CHECKS } from "../doctor/mod.ts";
import { vtepMacOf } from "../doctor/checks/vxlan.ts";
import { daemonCheck } from "../doctor/checks/daemon.ts";
import { forwardPolicy } from "../doctor/checks/iptables.ts";
import { UDP_DEVICE, udpDevice, udpPort, udpPortCheck } from "../doctor/checks/udp.ts";
import type { DoctorContext } from "../doctor/context.ts";
import { masqDecision } from "./masq.ts";
import * as hops from "./hops.ts";
import { doctorText, lookupText, Path, type Why } from "./path.ts";
import type { PodRef, TraceHop, TraceNode, TraceReport } from "./types.ts";

export { doctorText, lookupText, Path, type Why };

/** Errnos a route lookup answers with (asm-generic/errno.h). */
const EHOSTUNREACH = 113;

/** What to trace. */
export interface TraceInput {
  /** A pod, or a node (then the packet starts in the node's own stack). */
  src: PodRef | { node: TraceNode; ip: string | null; name: string };
  /** Destination address. */
  dst: string;
  /** Display name of the destination (pod/node name in a lab), or the address. */
  dstName: string;
  /** Every node whose state can be read (the source's node included). */
  nodes: TraceNode[];
  /** Pods known by name (lab); others are found behind each node's cni0. */
  pods: PodRef[];
  /** A lab's underlay: its namespace, bridge and each node's port on it (by PublicIP). */
  underlay?: { netns: string; bridge: string; ports: Map<string, string> };
}

/** A pod namespace label as the doctor gathers it ("pid:N" for an unnamed one) → a netns reference. */
export function nsRef(label: string): NetnsRef {
  return /^pid:\d+$/.test(label) ? { pid: Number(label.slice(4)) } : { name: label };
}

export function isPod(s: TraceInput["src"]): s is PodRef {
  return "netns" in s;
}

/** The lease whose subnet holds `ip`, or null. */
export function leaseFor(ctx: DoctorContext, ip: IPAddr): Lease | null {
  return ctx.store.leases.find((l) => l.subnet?.contains(ip)) ?? null;
}

/** Runs the trace. Never throws for node problems: they become broken hops. */
export async function trace(inp: TraceInput): Promise<TraceReport> {
  const p = new Path();
  const add = (h: TraceHop, why?: Why | null) => p.add(h, why);
  const brokenNow = () => p.broken;
  const srcNode = inp.src.node;
  const ctx = srcNode.ctx;
  const dst = IPAddr.parse(inp.dst, "DST");
  const srcName = inp.src.name;
  const srcIP = inp.src.ip;
  const network = ctx.network;
  const own = ctx.nodeSubnet;
  const backend = ctx.backendType ?? "vxlan";
  const lease = leaseFor(ctx, dst);
  const peerNode = lease ? nodeOfLease(inp.nodes, lease) : null;
  const leaseText = (l: Lease) => {
    const mac = vtepMacOf(l.attrs.BackendData);
    const who = nodeOfLease(inp.nodes, l)?.name;
    return `${l.subnet} → ${who ? `${who}, ` : ""}PublicIP ${l.attrs.PublicIP}` +
      (mac ? `, VtepMAC ${mac}` : "");
  };
  let podMtu: number | null = null;

  // 1. In the source pod: its route, its eth0 and the veth peer on the host, the cni0 port.
  podMtu = await podHops(inp, p);
  if (brokenNow()) return finish(inp, srcName, p);

  // 2. This node's daemon (a dead one explains stale or missing entries further on).
  await daemonHop(srcNode, p);

  // 3. The node's route for the packet: the kernel's input lookup (from cni0) or its output lookup.
  const fromPod = isPod(inp.src);
  const r = routeGet(srcNode.h, fromPod ? { dst: inp.dst, src: srcIP!, iif: "cni0" } : { dst: inp.dst });
  const rpf = ctx.sysctl("net.ipv4.conf.cni0.rp_filter");
  const rpfRefused = fromPod && hops.rpFilterRefused(srcNode, r, srcIP, "cni0");
  const expect = expectedRoute(ctx, dst, lease, backend);
  const routeOk = r.errno === null && expect.ok(r);
  // The kernel drops the routes of a device that goes down: a missing route through a down (or
  // missing) flannel device is the device's fault, reported as such.
  const vxDev = ctx.vxlanDevice();
  const overlayLease = !!lease && backend === "vxlan" && lease.attrs.BackendType === "vxlan" &&
    !(own?.contains(dst));
  if (!routeOk && overlayLease && (!vxDev || !vxDev.up)) {
    add({
      node: srcNode.name,
      step: "vxlan-device",
      ok: false,
      entry: vxDev
        ? `${vxDev.name} DOWN (operstate ${vxDev.operstate}) mtu ${vxDev.mtu}`
        : `${ctx.vxlanName} does not exist`,
      detail: `${vxDev ? `${vxDev.name} is down` : `no ${ctx.vxlanName}`}: the kernel removed its routes, ` +
        `the node routes ${inp.dst} as ${lookupText(r)}`,
      lease: lease ? leaseText(lease) : undefined,
    }, await doctorText(ctx, "flannel-device"));
    return finish(inp, srcName, p);
  }
  const udpLease = !!lease && backend === "udp" && !(own?.contains(dst));
  if (!routeOk && udpLease) {
    const tun = ctx.link(UDP_DEVICE);
    if (!tun || !tun.up) {
      await udpDeviceHop(srcNode, "udp-device", podMtu, p);
      return finish(inp, srcName, p);
    }
  }
  add(
    {
      node: srcNode.name,
      step: "host-route",
      ok: routeOk,
      entry: lookupText(r),
      detail: rpfRefused
        ? `rp_filter (cni0 rp_filter=${rpf ?? "?"}) drops the packet: ${srcIP} is not routed back via cni0`
        : r.errno === EHOSTUNREACH || (r.errno !== null && ctx.sysctl("net.ipv4.ip_forward") === "0")
        ? `forwarding is off (net.ipv4.ip_forward=${ctx.sysctl("net.ipv4.ip_forward") ?? "?"})`
        : r.errno !== null
        ? `no route to ${inp.dst}`
        : routeOk
        ? expect.text + (fromPod ? ` (input lookup from cni0, rp_filter=${rpf ?? "?"})` : "")
        : `disagrees with the lease: expected ${expect.text}`,
      lease: lease ? leaseText(lease) : undefined,
    },
    await (async () => {
      if (rpfRefused) return await doctorText(ctx, "rp-filter");
      if (r.errno !== null && ctx.sysctl("net.ipv4.ip_forward") !== "1") {
        return await doctorText(
          ctx,
          "ip-forward",
        );
      }
      return await doctorText(ctx, "peer-routes") ?? {
        why: lease
          ? "the node's route for the peer subnet must follow the lease"
          : "no lease covers the address",
        fix: lease ? ["restart the daemon: it re-adds every peer's route from the leases on start"] : [],
      };
    })(),
  );

  // 4. The firewall: FORWARD for forwarded pod traffic, and the masquerade decision.
  if (fromPod) hops.forwardHop(srcNode, "forward", (await forwardPolicy.run(ctx))[0], "", p);
  const outside = !network || !network.contains(dst);
  // The packet's source: the pod's, else what the kernel picks for the output device (prefsrc, else the
  // device's primary address; MASQUERADE uses the same).
  const outAddr = r.prefsrc ??
    ctx.kernel?.addrs.find((a) => a.family === 4 && a.index === r.dev && a.scope === "global")?.local ??
    null;
  const from = srcIP ?? outAddr;
  if (from && ctx.store.config?.enableNFTables) {
    // nftables mode: flannel's masquerade rules live in table ip flannel-ipv4, whose presence and
    // contents the doctor's nft-rules check verifies; this walk evaluates iptables rules only.
    const f = (await ALL_CHECKS.find((c) => c.id === "nft-rules")?.run(ctx))?.[0];
    const okNft = !f || f.severity === "ok";
    add({
      node: srcNode.name,
      step: "masquerade",
      ok: okNft,
      entry: f ? f.detail : "nftables mode",
      detail: `nftables mode (EnableNFTables): ${from} → ${inp.dst} is decided by flannel's flannel-ipv4 ` +
        "postrtg chain, checked as a whole, not walked per packet",
    }, okNft ? null : await doctorText(ctx, "nft-rules"));
  } else if (from) {
    const env = ctx.subnetEnv;
    const nat = ctx.iptTable("nat");
    const d = masqDecision(nat, from, inp.dst, r.devName);
    // flannel's rules: pod → outside (not multicast) is NATed; a non-pod source → another node's pods
    // is NATed; pod ↔ pod and anything → this node's pods keep their source.
    const fromPodNet = !!network?.contains(IPAddr.parse(from));
    const multicast = IPAddr.parse(inp.dst).family === 4 && Number(inp.dst.split(".")[0]) >= 224 &&
      Number(inp.dst.split(".")[0]) < 240;
    const wantNat = !!env?.ipMasq &&
      (fromPodNet ? outside && !multicast : !outside && !(own?.contains(dst) ?? false));
    const okMasq = !env?.ipMasq || d.nat === wantNat;
    add({
      node: srcNode.name,
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
  if (outside) {
    // Leaves the pod network: nothing is sent, the decision above is the answer.
    add({
      node: srcNode.name,
      step: "egress",
      ok: r.errno === null,
      entry: lookupText(r),
      detail:
        `${inp.dst} is outside the pod network ${network ?? "?"}: leaves ${srcNode.name} via ${
          r.devName ?? "?"
        }` +
        (r.gateway ? ` to ${r.gateway}` : ""),
    });
    return finish(inp, srcName, p);
  }
  if (!routeOk) return finish(inp, srcName, p);

  // 5. Same node: delivered by cni0 to the destination pod.
  if (own?.contains(dst)) {
    await deliver(inp, srcNode, p);
    return finish(inp, srcName, p);
  }
  if (!lease) return finish(inp, srcName, p);

  // 6. The overlay (vxlan): device, ARP entry of the next hop, FDB entry of its MAC.
  let underlayDst = lease.attrs.PublicIP;
  const direct = r.gateway === lease.attrs.PublicIP;
  if (backend === "vxlan" && !direct) {
    const dev = ctx.vxlanDevice();
    const under = ctx.underlay();
    const max = under ? under.link.mtu - 50 : null;
    const mtuBad = !!dev && ((max !== null && dev.mtu > max) || (podMtu !== null && podMtu > dev.mtu));
    const devOk = !!dev && dev.up && dev.kind === "vxlan" && !mtuBad;
    add(
      {
        node: srcNode.name,
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
      !dev || !dev.up
        ? await doctorText(ctx, "flannel-device")
        : mtuBad
        ? await doctorText(ctx, "mtu")
        : null,
    );
    if (!devOk) return finish(inp, srcName, p);
    const mac = vtepMacOf(lease.attrs.BackendData);
    const l = leaseText(lease);
    const arp = { proto: "ARP" as const, noResolve: `flannel.${ctx.vni} does not ARP` };
    const arpWhy = await doctorText(ctx, "peer-arp");
    if (!hops.neighHop({ n: srcNode, dev, nextHop: r.gateway!, mac, ...arp, lease: l, why: arpWhy }, p)) {
      return finish(inp, srcName, p);
    }
    const peer = { ip: lease.attrs.PublicIP, label: "PublicIP" as const };
    const fdbWhy = await doctorText(ctx, "peer-fdb");
    const to = hops.fdbHop({ n: srcNode, dev, mac, peer, withState: true, lease: l, why: fdbWhy }, p);
    if (to === null) return finish(inp, srcName, p);
    underlayDst = to;
    p.dev(srcNode.netns, dev.name, "tx");
  } else if (backend === "udp") {
    // 6'. The overlay (udp): flannel0 (the doctor's udp-device check), then the daemon's peer table:
    // the userspace data path sends the packet to the lease's PublicIP on the configured port.
    if (!await udpDeviceHop(srcNode, "udp-device", podMtu, p)) return finish(inp, srcName, p);
    p.dev(srcNode.netns, UDP_DEVICE, "tx");
    const port = udpPort(ctx);
    const bt = lease.attrs.BackendType;
    const peerOk = bt === "udp" || bt === "";
    add({
      node: srcNode.name,
      step: "udp-peer",
      ok: peerOk,
      entry: `${lease.subnet} → ${lease.attrs.PublicIP}:${port} (BackendType ${bt || '""'})`,
      detail: peerOk
        ? `the data path wraps the packet in UDP to ${lease.attrs.PublicIP}:${port}`
        : `the peer's lease has BackendType ${bt}: the udp data path does not send to it`,
      lease: leaseText(lease),
    }, {
      why: "every node of a udp network must run the udp backend; the data path only keeps udp peers",
      fix: ["run every node with the same Backend.Type (the network config's)"],
    });
    if (!peerOk) return finish(inp, srcName, p);
  }

  // 7. The underlay: how the node reaches the peer's PublicIP.
  const overlay = [ctx.vxlanDevice(), backend === "udp" ? ctx.link(UDP_DEVICE) : null];
  // vxlan and udp encapsulate (any routed underlay); host-gw and DirectRouting need the peer on-link.
  const needDirect = (backend !== "vxlan" && backend !== "udp") || direct;
  const underlay = {
    n: srcNode,
    peer: { ip: underlayDst, label: "PublicIP" as const },
    overlay,
    needDirect,
    backend,
    routeGet: "ip route get",
    lease: leaseText(lease),
  };
  if (!hops.underlayRouteHop(underlay, p)) return finish(inp, srcName, p);

  // 8. The remote node, when its state can be read here.
  if (!peerNode) {
    hops.unreadableRemoteHop(lease.attrs.PublicIP, leaseText(lease), p);
    return finish(inp, srcName, p);
  }
  if (inp.underlay) underlayHop(inp.underlay, srcNode, peerNode, underlayDst, p);
  await daemonHop(peerNode, p);
  // A dead remote daemon is the verdict, but the rest of the path is still shown.
  const mark = p.hops.length;
  await remoteIngress(inp, from, peerNode, backend, direct, lease, leaseText, p);
  if (p.hops.slice(mark).every((h) => h.ok)) await deliver(inp, peerNode, p);
  return finish(inp, srcName, p);
}

/** The source pod's hops (its route, its eth0 ↔ host veth, the cni0 port); returns the pod's MTU. */
export async function podHops(inp: TraceInput, p: Path): Promise<number | null> {
  const add = (h: TraceHop, why?: Why | null) => p.add(h, why);
  const srcNode = inp.src.node;
  const ctx = srcNode.ctx;
  let podMtu: number | null = null;
  if (isPod(inp.src)) {
    const pod = inp.src;
    const ph = openNetlink(nsRef(pod.netns));
    let eth: LinkInfo | null = null;
    try {
      const r = routeGet(ph, { dst: inp.dst });
      eth = r.dev !== null ? ph.link(r.dev) : null;
      podMtu = eth?.mtu ?? null;
      p.dev(pod.netns, eth?.name ?? null, "tx");
      add({
        node: pod.name,
        step: "pod-route",
        ok: r.errno === null && eth !== null,
        entry: lookupText(r),
        detail: r.errno === null
          ? `leaves the pod on ${r.devName}${r.gateway ? ` to ${r.gateway}` : ""}`
          : `the pod has no route to ${inp.dst}`,
      }, {
        why: "the pod's routes come from the CNI result (flannel delegates isDefaultGateway to the bridge " +
          "plugin); without a route the packet never leaves the pod",
        fix: [`ip -n ${pod.netns} route`, "delete and re-create the pod (the CNI ADD installs its routes)"],
      });
    } finally {
      ph.close();
    }
    if (eth) {
      const host = eth.parent !== null ? ctx.link(eth.parent) : null;
      const peer = host ? ctx.vethPeers.get(host.name) : undefined;
      const paired = !!host && host.kind === "veth" && !!peer && peer.netns === pod.netns &&
        peer.ifindex === eth.index;
      add({
        node: srcNode.name,
        step: "veth",
        ok: paired && eth.up,
        entry: host
          ? `${eth.name}@if${eth.parent} (pod) ↔ ${host.name} ifindex ${host.index}${
            eth.linkNetnsId !== null ? ` (link-netnsid ${eth.linkNetnsId})` : ""
          }`
          : `${eth.name}@if${eth.parent ?? "?"}: no such ifindex on ${srcNode.name}`,
        detail: !host
          ? `the pod's ${eth.name} is not paired with a veth on ${srcNode.name}`
          : !paired
          ? `${host.name} (ifindex ${host.index}) is not the peer of the pod's ${eth.name}`
          : !eth.up
          ? `the pod's ${eth.name} is down`
          : `pod ${eth.name} (mtu ${eth.mtu}) pairs with host ${host.name}`,
      }, {
        why: "the pod's interface must be one end of a veth whose other end is a port of cni0",
        fix: [`ip -n ${pod.netns} link set ${eth.name} up`, `ip -n ${pod.netns} -d link show ${eth.name}`],
      });
      if (host && paired) {
        p.dev(srcNode.netns, host.name, "rx");
        await cniPort(srcNode, host, pod.name, p);
      }
    }
  }
  return podMtu;
}

/** The node whose lease this is: its subnet.env subnet or its own lease matches. */
export function nodeOfLease(nodes: TraceNode[], l: Lease): TraceNode | null {
  return nodes.find((n) => !!l.subnet && n.ctx.nodeSubnet?.equals(l.subnet)) ?? null;
}

function expectedRoute(
  ctx: DoctorContext,
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

export async function daemonHop(n: TraceNode, p: Path): Promise<void> {
  const f = (await daemonCheck.run(n.ctx))[0];
  p.add({
    node: n.name,
    step: "daemon",
    ok: f.severity === "ok",
    entry: f.detail,
    detail: f.severity === "ok"
      ? "the daemon keeps routes, ARP/FDB entries and rules in step with the leases"
      : "the daemon is not running: nothing repairs or updates this node's entries, its lease is not renewed",
  }, f.severity === "ok" ? null : { why: f.why ?? f.detail, fix: f.fix ?? [], check: "daemon" });
}

/** A lab's underlay bridge: both nodes' ports up on it, and the bridge itself (it carries the encapsulated packet). */
export function underlayHop(
  u: NonNullable<TraceInput["underlay"]>,
  from: TraceNode,
  to: TraceNode,
  toIP: string,
  p: Path,
): void {
  const fromPort = [...u.ports.entries()].find(([ip]) => from.ctx.localIPs().has(ip))?.[1] ?? null;
  const toPort = u.ports.get(toIP) ?? null;
  const h = openNetlink({ name: u.netns });
  try {
    const br = h.link(u.bridge);
    const ports = [fromPort, toPort].map((n) => (n ? h.link(n) : null));
    const bad = ports.filter((l) => !l || !l.up || l.master !== br?.index);
    const ok = !!br && br.up && bad.length === 0;
    p.add({
      node: "underlay",
      step: "underlay-bridge",
      ok,
      entry: `${u.bridge} ${br?.up ? "up" : "DOWN"}; ` +
        [[fromPort, ports[0], from.name], [toPort, ports[1], to.name]].map(([n, l, who]) =>
          `${n ?? "?"} (${who}) ${l ? (l as LinkInfo).up ? "up" : "DOWN" : "missing"}`
        ).join(", "),
      detail: ok
        ? `the underlay bridge carries the encapsulated packet to ${toIP}`
        : `the underlay does not carry the packet: ${
          !br
            ? `no bridge ${u.bridge}`
            : !br.up
            ? `${u.bridge} is down`
            : "a node's port on it is down or missing"
        }`,
    }, {
      why: "the lab's underlay (bridge and each node's veth on it) is the network between the nodes",
      fix: [
        `ip -n ${u.netns} link set ${u.bridge} up`,
        ...[fromPort, toPort].filter(Boolean).map((n) => `ip -n ${u.netns} link set ${n} up`),
      ],
    });
    if (ok) p.dev(u.netns, toPort, "tx");
  } finally {
    h.close();
  }
}

/** Bridge port states (linux/if_bridge.h BR_STATE_*). */
const PORT_STATES: Record<number, string> = {
  0: "disabled",
  1: "listening",
  2: "learning",
  3: "forwarding",
  4: "blocking",
};

/** The cni0 port of a host veth: up, enslaved to cni0, cni0 up (hairpin shown). */
export async function cniPort(n: TraceNode, host: LinkInfo, podName: string, p: Path): Promise<void> {
  const br = n.ctx.link("cni0");
  const enslaved = !!br && host.master === br.index;
  // The bridge's own port state (STP: disabled while the port's device is down), as sysfs shows it in
  // the node's namespace; null when unreadable.
  const raw = enslaved
    ? await n.ctx.exec.run(["cat", `/sys/class/net/${host.name}/brport/state`], 3000)
    : null;
  const state = raw?.code === 0 ? (PORT_STATES[Number(raw.stdout.trim())] ?? raw.stdout.trim()) : null;
  const portUp = host.up && host.operstate !== "DOWN" && host.operstate !== "LOWERLAYERDOWN" &&
    (state === null || state === "forwarding");
  const ok = enslaved && portUp && !!br?.up;
  const hairpin = host.bridgePort ? (host.bridgePort.hairpin ? "on" : "off") : "?";
  p.add({
    node: n.name,
    step: "cni0-port",
    ok,
    entry: `${host.name} ${host.up ? "up" : "DOWN"} (operstate ${host.operstate}) master ${
      host.master !== null ? (n.ctx.link(host.master)?.name ?? host.master) : "none"
    }${state ? ` port state ${state}` : ""} hairpin ${hairpin}; cni0 ${
      br ? (br.up ? "up" : "DOWN") : "missing"
    }`,
    detail: !br
      ? "cni0 does not exist"
      : !enslaved
      ? `${host.name} is not a port of cni0`
      : !portUp
      ? `${host.name} ${host.up ? `port state ${state}` : "is down"}: the cni0 port of ${podName} does not ` +
        "forward, its frames are dropped"
      : !br.up
      ? "cni0 is down"
      : `${host.name} forwards on cni0`,
  }, {
    why: "a pod's host veth must be an up port of cni0 for the bridge to forward its frames",
    fix: [n.ctx.cmd(`ip link set ${host.name} up`), n.ctx.cmd(`ip link set ${host.name} master cni0`)].concat(
      br && !br.up ? [n.ctx.cmd("ip link set cni0 up")] : [],
    ),
  });
}

/** The remote node receives the packet: its overlay device (vxlan) and its route to cni0. */
async function remoteIngress(
  inp: TraceInput,
  src: string | null,
  peer: TraceNode,
  backend: string,
  direct: boolean,
  lease: Lease,
  leaseText: (l: Lease) => string,
  p: Path,
): Promise<void> {
  const pc = peer.ctx;
  let iif: string | null = null;
  if (backend === "vxlan" && !direct) {
    const dev = pc.vxlanDevice();
    const mac = vtepMacOf(lease.attrs.BackendData);
    const ok = !!dev && dev.up && (!mac || dev.mac?.toLowerCase() === mac);
    p.add({
      node: peer.name,
      step: "remote-vxlan",
      ok,
      entry: dev
        ? `${dev.name} ${dev.up ? "up" : "DOWN"} mac ${dev.mac} mtu ${dev.mtu} vni ${dev.vxlan?.vni ?? "?"}`
        : `${pc.vxlanName} does not exist`,
      detail: !dev
        ? "no VXLAN device: the encapsulated packet is dropped"
        : !dev.up
        ? `${dev.name} is down: the encapsulated packet is dropped`
        : !ok
        ? `device MAC ${dev.mac} disagrees with the lease's VtepMAC ${mac}: the inner frame is not for it`
        : `decapsulated on ${dev.name}`,
      lease: leaseText(lease),
    }, !dev || !dev.up ? await doctorText(pc, "flannel-device") : await doctorText(pc, "vtep-mac"));
    if (!ok) return;
    const a = pc.kernel?.addrs.find((a) => a.local === lease.attrs.PublicIP);
    p.dev(peer.netns, a?.ifname ?? null, "rx");
    p.dev(peer.netns, dev!.name, "rx");
    iif = dev!.name;
  } else if (backend === "udp") {
    const f = (await udpPortCheck.run(pc))[0];
    const portOk = !f || f.severity !== "critical";
    p.add({
      node: peer.name,
      step: "remote-udp-port",
      ok: portOk,
      entry: f?.detail ?? "udp-port not checked",
      detail: portOk
        ? `INPUT lets UDP ${udpPort(pc)} from ${src ?? "the peer"} reach the data path`
        : "INPUT drops the overlay datagrams before the daemon reads them",
      lease: leaseText(lease),
    }, portOk ? null : { why: f.why ?? f.detail, fix: f.fix ?? [], check: "udp-port" });
    if (!portOk) return;
    const a = pc.kernel?.addrs.find((a) => a.local === lease.attrs.PublicIP);
    p.dev(peer.netns, a?.ifname ?? null, "rx");
    if (!await udpDeviceHop(peer, "remote-udp-device", null, p)) return;
    p.dev(peer.netns, UDP_DEVICE, "rx");
    iif = UDP_DEVICE;
  } else {
    const a = pc.kernel?.addrs.find((a) => a.local === lease.attrs.PublicIP);
    iif = a?.ifname ?? null;
    p.dev(peer.netns, iif, "rx");
  }
  const route = { peer, dst: inp.dst, src, iif, subnet: String(lease.subnet), family: "" as const };
  if (!await hops.remoteRouteHop({ ...route, forwardCheck: "ip-forward" }, p)) return;
  hops.forwardHop(peer, "remote-forward", (await forwardPolicy.run(pc))[0], "", p);
}

/**
 * flannel0 on `n`: the doctor's udp-device finding (TUN, up, /32 address, MTU = underlay − 28, held open
 * by a live daemon), plus the pod MTU fitting it. Returns whether the hop is ok.
 */
async function udpDeviceHop(n: TraceNode, step: string, podMtu: number | null, p: Path): Promise<boolean> {
  const f = (await udpDevice.run(n.ctx))[0];
  const dev = n.ctx.link(UDP_DEVICE);
  const mtuBad = !!dev && podMtu !== null && podMtu > dev.mtu;
  const ok = !!f && f.severity === "ok" && !mtuBad;
  p.add(
    {
      node: n.name,
      step,
      ok,
      entry: dev
        ? `${dev.name} ${dev.kind ?? "?"} ${dev.up ? "up" : "DOWN"} mtu ${dev.mtu}` +
          (podMtu !== null ? `; pod mtu ${podMtu}` : "")
        : `${UDP_DEVICE} does not exist`,
      detail: !f
        ? "udp-device not checked"
        : f.severity !== "ok"
        ? f.detail
        : mtuBad
        ? `pod MTU ${podMtu} > ${UDP_DEVICE} MTU ${dev!.mtu}: larger packets are dropped`
        : f.detail,
    },
    ok ? null : mtuBad && f?.severity === "ok" ? await doctorText(n.ctx, "mtu") : {
      why: f?.why ?? f?.detail ?? "flannel0 is not usable",
      fix: f?.fix ?? [],
      check: "udp-device",
    },
  );
  return ok;
}

/** cni0 on `n` hands the packet to the destination pod: its veth port, its eth0 holding the address. */
export async function deliver(inp: TraceInput, n: TraceNode, p: Path): Promise<void> {
  const pod = inp.pods.find((p) => (p.ip === inp.dst || p.ipv6 === inp.dst) && p.node === n) ??
    [...n.ctx.pods.values()].filter((p) => p.ips.includes(inp.dst)).map((p) => ({
      name: p.name,
      netns: p.name,
      ip: inp.dst,
      node: n,
    }))[0];
  if (!pod) {
    p.add({
      node: n.name,
      step: "pod",
      ok: false,
      entry: `no pod behind cni0 holds ${inp.dst}`,
      detail: `${inp.dst} is in ${n.name}'s subnet but no pod namespace reached through cni0 has it`,
    }, {
      why: "the address is not (or no longer) assigned to a pod",
      fix: [n.ctx.cmd(`ip neigh show dev cni0 ${inp.dst}`)],
    });
    return;
  }
  const host = [...n.ctx.vethPeers.entries()].find(([, p]) => p.netns === pod.netns);
  const link = host ? n.ctx.link(host[0]) : null;
  const mark = p.hops.length;
  if (link) {
    p.dev(n.netns, link.name, "tx");
    await cniPort(n, link, pod.name, p);
  } else {
    p.add({
      node: n.name,
      step: "cni0-port",
      ok: false,
      entry: `no cni0 port pairs with ${pod.netns}`,
      detail: `pod ${pod.name}'s veth is not a port of cni0`,
    });
    return;
  }
  if (!p.hops.slice(mark).every((h) => h.ok)) return;
  const ph = openNetlink(nsRef(pod.netns));
  try {
    const a = ph.addrs(inp.dst.includes(":") ? 6 : 4).find((a) => a.local === inp.dst);
    const l = a ? ph.link(a.index) : null;
    p.dev(pod.netns, l?.name ?? null, "rx");
    p.add({
      node: pod.name,
      step: "pod",
      ok: !!l && l.up,
      entry: a
        ? `${a.local}/${a.prefix} dev ${a.ifname} ${l?.up ? "up" : "DOWN"} mtu ${l?.mtu ?? "?"}`
        : `no ${inp.dst} in ${pod.netns}`,
      detail: !a
        ? `the pod does not hold ${inp.dst}`
        : l?.up
        ? `delivered to ${pod.name}`
        : `the pod's ${a.ifname} is down`,
    });
  } finally {
    ph.close();
  }
}

export function finish(inp: TraceInput, src: string, p: Path): TraceReport {
  const { hops, whys } = p;
  const i = hops.findIndex((h) => !h.ok);
  const rep: TraceReport = { ok: i < 0, src, dst: inp.dstName, hops, devices: p.devices };
  if (i >= 0) {
    const w = whys.get(i)!;
    rep.brokenAt = i;
    rep.why = w.why;
    rep.fix = w.fix;
    if (w.check) rep.check = w.check;
  }
  return rep;
}
