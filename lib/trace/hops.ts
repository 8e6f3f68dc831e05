/**
 * The hops the IPv4 walk (trace.ts) and the IPv6 walk (trace6.ts) have in common, each written once with
 * what differs between the families passed in: a node's daemon, the next hop's neighbour entry (ARP /
 * NDP) and FDB entry on the VXLAN device, the underlay route to the peer's public address, a lab's
 * underlay bridge, a peer whose state is not readable, the remote VXLAN device, the remote node's route
 * to cni0 and the FORWARD verdict. Each adds its hop to the {@link Path} and returns whether the walk
 * goes on.
 * @module
 */
import { EINVAL, EXDEV, openNetlink, routeGet } from "../netlink/mod.ts";
import type { LinkInfo, RouteLookup } from "../netlink/mod.ts";
import type { CheckId, Finding } from "../doctor/types.ts";
import { doctorText, lookupText, type Path, type Why } from "./path.ts";
import type { LabUnderlay, TraceNode } from "./types.ts";
import { daemonCheck } from "../doctor/mod.ts";

/**
 * Whether the IPv4 input lookup `r` of a packet from `src` arriving on `iif` was refused by rp_filter.
 * Older kernels say so with EXDEV; newer ones answer EINVAL, as for any martian source, so for EINVAL the
 * reverse path is checked the way the kernel checks it: the effective rp_filter is max(all, iif); strict
 * (1) drops when the route back to `src` does not leave by `iif`, loose (2) when there is no route back.
 */
export function rpFilterRefused(
  n: TraceNode,
  r: RouteLookup,
  src: string | null,
  iif: string | null,
): boolean {
  if (r.errno === EXDEV) return true;
  if (r.errno !== EINVAL || !src || !iif || src.includes(":")) return false;
  const v = (key: string) => Number(n.ctx.sysctl(`/proc/sys/net/ipv4/conf/${key}/rp_filter`) ?? "0");
  const mode = Math.max(v("all"), v(iif));
  if (mode !== 1 && mode !== 2) return false;
  const back = routeGet(n.h, { dst: src });
  return back.errno !== null || (mode === 1 && back.devName !== iif);
}

/** The peer's public address the underlay carries the packet to, as the lease names it. */
export interface PeerAddress {
  /** The address (the lease's PublicIP or PublicIPv6). */
  ip: string;
  /** Its name in the lease: "PublicIP" or "PublicIPv6". */
  label: "PublicIP" | "PublicIPv6";
}

/** A node's daemon: a dead one explains stale or missing entries further on. */
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

/** The device of node `n` holding address `ip` (where an underlay packet to `ip` arrives), or null. */
export function deviceOf(n: TraceNode, ip: string): string | null {
  return n.ctx.kernel?.addrs.find((a) => a.local === ip)?.ifname ?? null;
}

/** The next hop's neighbour entry on the VXLAN device ("arp" for IPv4, "ndp" for IPv6). */
export function neighHop(
  o: {
    n: TraceNode;
    dev: LinkInfo;
    /** The route's gateway: the peer's VTEP address. */
    nextHop: string;
    /** The lease's VtepMAC. */
    mac: string | null;
    proto: "ARP" | "NDP";
    /** Why the kernel cannot resolve it itself, e.g. "flannel.1 does not ARP". */
    noResolve: string;
    lease: string;
    why: Why | null;
  },
  p: Path,
): boolean {
  const { n, dev, nextHop, mac, proto } = o;
  const neigh = n.ctx.kernel?.neigh.find((x) => x.index === dev.index && x.dst === nextHop) ?? null;
  const ok = !!neigh && !!mac && neigh.lladdr?.toLowerCase() === mac && neigh.state.includes("PERMANENT");
  p.add({
    node: n.name,
    step: proto.toLowerCase(),
    ok,
    entry: neigh
      ? `${neigh.dst} dev ${neigh.ifname} lladdr ${neigh.lladdr ?? "-"} ${neigh.state.join(",")}`
      : `no neighbour entry for ${nextHop} on ${dev.name}`,
    detail: !neigh
      ? `no ${proto} entry for ${nextHop}: ${o.noResolve} (NOARP), the packet is dropped`
      : ok
      ? `next hop ${nextHop} is VTEP ${mac}`
      : `${proto} entry disagrees with the lease: lladdr ${neigh.lladdr} ${
        neigh.state.join(",")
      }, lease VtepMAC ${mac}`,
    lease: o.lease,
  }, o.why);
  return ok;
}

/**
 * The FDB entry of the VTEP MAC on the VXLAN device: one entry, to the peer's public address. Returns
 * the address the encapsulated frame goes to, or null when the hop is broken.
 */
export function fdbHop(
  o: {
    n: TraceNode;
    dev: LinkInfo;
    mac: string | null;
    peer: PeerAddress;
    /** Show each entry's NUD state in the hop's entry (the IPv4 walk does). */
    withState: boolean;
    lease: string;
    why: Why | null;
  },
  p: Path,
): string | null {
  const { n, dev, mac, peer } = o;
  const fdb = n.ctx.kernel?.fdb.filter((f) => f.index === dev.index && f.mac.toLowerCase() === mac) ?? [];
  const f = fdb.find((x) => x.dst !== null) ?? null;
  const ok = !!f && f.dst === peer.ip && fdb.length === 1;
  p.add({
    node: n.name,
    step: "fdb",
    ok,
    entry: f
      ? fdb.map((x) =>
        `${x.mac} dev ${x.ifname} dst ${x.dst} ${x.flags.join(" ")}${
          o.withState ? ` ${x.state.join(",")}` : ""
        }`
          .trim()
      ).join("; ")
      : `no FDB entry for ${mac} on ${dev.name}`,
    detail: !f
      ? `no FDB entry for ${mac}: the kernel does not know where to send the encapsulated frame`
      : ok
      ? `encapsulated frame goes to ${f.dst}`
      : `FDB entry disagrees with the lease: dst ${
        fdb.map((x) => x.dst).join(", ")
      }, lease ${peer.label} ${peer.ip}`,
    lease: o.lease,
  }, o.why);
  return ok ? f!.dst : null;
}

/**
 * The VXLAN device's entries for the next hop: its neighbour entry (the lease's VtepMAC), then that
 * MAC's FDB entry to the peer's public address; marks the device on the path when both are ok. Returns
 * the address the encapsulated frame goes to, or null when an entry is broken.
 */
export async function vxlanEntryHops(
  o: {
    n: TraceNode;
    dev: LinkInfo;
    /** The route's gateway: the peer's VTEP address. */
    nextHop: string;
    /** The lease's VtepMAC. */
    mac: string | null;
    /** The family's neighbour protocol, and why the kernel cannot resolve the next hop itself. */
    neigh: { proto: "ARP" | "NDP"; noResolve: string };
    peer: PeerAddress;
    /** Show each FDB entry's NUD state (the IPv4 walk does). */
    withState: boolean;
    lease: string;
    /** The why of a broken neighbour or FDB entry (asked for just before its hop). */
    why: (entry: "neigh" | "fdb") => Promise<Why | null>;
  },
  p: Path,
): Promise<string | null> {
  const { n, dev, mac, lease } = o;
  const neighWhy = await o.why("neigh");
  if (!neighHop({ n, dev, nextHop: o.nextHop, mac, ...o.neigh, lease, why: neighWhy }, p)) return null;
  const fdbWhy = await o.why("fdb");
  const to = fdbHop({ n, dev, mac, peer: o.peer, withState: o.withState, lease, why: fdbWhy }, p);
  if (to !== null) p.dev(n.netns, dev.name, "tx");
  return to;
}

/** What {@link underlayRouteHop} checks: node `n`'s route to the peer's public address. */
export interface UnderlayRoute {
  n: TraceNode;
  peer: PeerAddress;
  /** The node's overlay devices (VXLAN, TUN), null where absent. */
  overlay: (LinkInfo | null)[];
  /** host-gw and DirectRouting: the peer must be on-link. */
  needDirect: boolean;
  backend: string;
  /** The `ip route get` of the family ("ip route get", "ip -6 route get"). */
  routeGet: string;
  lease: string;
}

/**
 * How node `n` reaches the peer's public address on the underlay: a unicast route that does not point
 * into an overlay device (the packet would loop), without a gateway where the backend needs the peer
 * on-link. Marks the underlay device on the path when the hop is ok.
 */
export function underlayRouteHop(o: UnderlayRoute, p: Path): boolean {
  const { n, peer } = o;
  const u = routeGet(n.h, { dst: peer.ip });
  const into = o.overlay.find((d) => d !== null && u.dev === d.index) ?? null;
  const ok = u.errno === null && !into && (!o.needDirect || u.gateway === null) && u.type === "unicast";
  p.add({
    node: n.name,
    step: "underlay",
    ok,
    entry: lookupText(u),
    detail: u.errno !== null
      ? `no route to the peer's ${peer.label} ${peer.ip}`
      : into
      ? `the route to ${peer.ip} points into ${u.devName ?? into.name}: encapsulated packets would loop`
      : o.needDirect && u.gateway !== null
      ? `${peer.ip} is behind gateway ${u.gateway}: ${o.backend} needs the peers on the same L2 network`
      : `sent to ${peer.ip} on ${u.devName}${u.prefsrc ? ` from ${u.prefsrc}` : ""}`,
    lease: o.lease,
  }, {
    why: `the peer's ${peer.label} must be reachable on the underlay`,
    fix: [n.ctx.cmd(`${o.routeGet} ${peer.ip}`)],
  });
  if (ok) p.dev(n.netns, u.devName, "tx");
  return ok;
}

/** A lab's underlay bridge: both nodes' ports up on it, and the bridge itself (it carries the encapsulated packet). */
export function underlayBridgeHop(
  u: LabUnderlay,
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

/** The peer's node is not one whose state this trace reads: the path ends at its public address. */
export function unreadableRemoteHop(peerIP: string, lease: string, p: Path): void {
  p.add({
    node: peerIP,
    step: "remote",
    ok: true,
    entry: `lease ${lease}`,
    detail:
      "the remote node's state is not readable from here: run `flanctl trace` on it for the rest of the path",
    lease,
  });
}

/**
 * The remote node's VXLAN device decapsulates the packet: it exists, is up and has the lease's VtepMAC.
 * Returns the device when the hop is ok, else null.
 */
export async function remoteVxlanHop(
  o: {
    peer: TraceNode;
    dev: LinkInfo | null;
    /** The device's name when it does not exist. */
    devName: string;
    /** The lease's VtepMAC of the family. */
    mac: string | null;
    /** "IPv6 " for the IPv6 walk (its entry shows no VNI, its texts name the family). */
    family: "" | "IPv6 ";
    lease: string;
    /** The hop's why, given its verdict and whether the device is missing or down. */
    why: (ok: boolean, missingOrDown: boolean) => Promise<Why | null>;
  },
  p: Path,
): Promise<LinkInfo | null> {
  const { peer, dev, mac, family } = o;
  const ok = !!dev && dev.up && (!mac || dev.mac?.toLowerCase() === mac);
  p.add({
    node: peer.name,
    step: "remote-vxlan",
    ok,
    entry: dev
      ? `${dev.name} ${dev.up ? "up" : "DOWN"} mac ${dev.mac} mtu ${dev.mtu}` +
        (family ? "" : ` vni ${dev.vxlan?.vni ?? "?"}`)
      : `${o.devName} does not exist`,
    detail: !dev
      ? `no ${family}VXLAN device: the encapsulated packet is dropped`
      : !dev.up
      ? `${dev.name} is down: the encapsulated packet is dropped`
      : !ok
      ? `device MAC ${dev.mac} disagrees with the lease's ${family}VtepMAC ${mac}` +
        (family ? "" : ": the inner frame is not for it")
      : `decapsulated on ${dev.name}`,
    lease: o.lease,
  }, await o.why(ok, !dev || !dev.up));
  return ok ? dev : null;
}

/**
 * The remote node's input route lookup for the packet (from `iif`, with the packet's source when both
 * are known): it must forward to cni0.
 */
export async function remoteRouteHop(
  o: {
    peer: TraceNode;
    dst: string;
    src: string | null;
    iif: string | null;
    /** The lease's subnet of the family (the peer's own). */
    subnet: string;
    /** "IPv6 " for the IPv6 walk: "this node's IPv6 subnet". */
    family: "" | "IPv6 ";
    /** The doctor check of the family's forwarding sysctl ("ip-forward", "ipv6-forward"). */
    forwardCheck: CheckId;
  },
  p: Path,
): Promise<boolean> {
  const { peer, iif, src } = o;
  const pc = peer.ctx;
  const r = iif && src ? routeGet(peer.h, { dst: o.dst, src, iif }) : routeGet(peer.h, { dst: o.dst });
  const ok = r.errno === null && r.devName === "cni0";
  const rpf = rpFilterRefused(peer, r, src, iif);
  p.add(
    {
      node: peer.name,
      step: "remote-route",
      ok,
      entry: lookupText(r),
      detail: rpf
        ? `rp_filter on ${iif} drops the packet from ${src}`
        : r.errno !== null
        ? `the remote node does not forward the packet (${r.error})`
        : ok
        ? `forwarded to cni0 (input lookup from ${iif ?? "?"})`
        : `routed to ${r.devName ?? "?"}, expected cni0 (${o.subnet} is this node's ${o.family}subnet)`,
    },
    rpf
      ? await doctorText(pc, "rp-filter")
      : r.errno !== null
      ? await doctorText(pc, o.forwardCheck)
      : await doctorText(pc, "cni0-address"),
  );
  return ok;
}

/**
 * The FORWARD chain's verdict for a forwarded pod packet on `n`, from the doctor's forward-policy finding
 * `f`; `tool` names the table in the texts ("ip6tables" for the IPv6 walk, "" for iptables).
 */
export function forwardHop(n: TraceNode, step: string, f: Finding, tool: "" | "ip6tables", p: Path): void {
  const bad = f.severity === "critical";
  p.add({
    node: n.name,
    step,
    ok: !bad,
    entry: tool ? `${tool}: ${f.detail}` : f.detail,
    detail: bad
      ? `the ${tool ? `${tool} ` : ""}FORWARD chain drops pod traffic`
      : "FORWARD lets the packet through",
  }, bad ? { why: f.why ?? f.detail, fix: f.fix ?? [], check: "forward-policy" } : null);
}
