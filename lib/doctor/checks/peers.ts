/**
 * Per-peer consistency: for every other node's lease, the onlink route, the permanent ARP entry and the
 * FDB entry (or the DirectRouting / host-gw route via its PublicIP) are present and point at the lease's
 * VtepMAC and PublicIP; entries that belong to no lease are stale. Without a store, peers are derived from
 * the kernel (routes → ARP → FDB) and only internal consistency is checked.
 * @module
 */
import type { Check, CheckId, Finding } from "../types.ts";
import { IPNet } from "../../base/cidr.ts";
import { ok, unknown } from "../types.ts";
import type { KernelSnapshot, NodeSnapshot } from "../../observe/snapshot.ts";
import type { Lease } from "../../store/types.ts";
import type { FdbInfo, LinkInfo, NeighInfo, RouteInfo } from "../../netlink/types.ts";
import { RT_TABLE_MAIN } from "../../netlink/mod.ts";
import { vtepMacOf } from "../../lease/backend_data.ts";
import { sh } from "../../base/shell.ts";

/** What the kernel has for one peer lease. */
interface PeerState {
  lease: Lease;
  subnet: string;
  gwIP: string;
  publicIP: string;
  mac: string | null;
  route: RouteInfo | null;
  direct: boolean;
  neigh: NeighInfo | null;
  fdb: FdbInfo[];
}

const ZERO_MAC = "00:00:00:00:00:00";

function mainRoutes4(ctx: NodeSnapshot): RouteInfo[] {
  return (ctx.kernel?.routes ?? []).filter((r) => r.family === 4 && r.table === RT_TABLE_MAIN);
}

function peerStates(ctx: NodeSnapshot): PeerState[] {
  const dev = ctx.vxlanDevice();
  const routes = mainRoutes4(ctx);
  // Reservations not yet taken by a node carry no backend type: nothing is installed for them.
  return ctx.peerLeases().filter((l) => !!l.attrs.BackendType).map((lease) => {
    const subnet = lease.subnet!.toString();
    const gwIP = lease.subnet!.ip.toString();
    const publicIP = lease.attrs.PublicIP;
    const mac = vtepMacOf(lease.attrs.BackendData);
    const route = routes.find((r) => r.dst === subnet) ?? null;
    const direct = !!route && route.gateway === publicIP && (!dev || route.dev !== dev.index);
    const neigh = dev
      ? (ctx.kernel!.neigh.find((n) => n.index === dev.index && n.dst === gwIP) ?? null)
      : null;
    const fdb = dev && mac
      ? ctx.kernel!.fdb.filter((f) => f.index === dev.index && f.mac.toLowerCase() === mac)
      : [];
    return { lease, subnet, gwIP, publicIP, mac, route, direct, neigh, fdb };
  });
}

function isVxlanLease(l: Lease): boolean {
  return l.attrs.BackendType === "vxlan";
}

/** Common guard: kernel snapshot present; returns the reason a lease-based check cannot run. */
function leaseGuard(ctx: NodeSnapshot): string | null {
  if (!ctx.kernel) return `no kernel snapshot: ${ctx.kernelError}`;
  if (ctx.store.state !== "ok") return `leases not readable: ${ctx.store.hint ?? ctx.store.error}`;
  return null;
}

/**
 * Shared start of the ARP and FDB checks: other backends have no such entries (ok); without a kernel
 * snapshot or flannel's VXLAN device nothing can be checked (unknown). Else the device and
 * {@link leaseGuard}'s reason (null when the leases can be used).
 */
function vxlanPeerSetup(
  ctx: NodeSnapshot,
  id: CheckId,
): { done: Finding[] } | { dev: LinkInfo; g: string | null; kernel: KernelSnapshot } {
  const b = ctx.backendType;
  if (ctx.ipv4Disabled) return { done: [ok(id, "IPv4 disabled: no ARP/FDB entries (IPv6: see peers-v6)")] };
  if (!ctx.programsPeers) return { done: [ok(id, `backend ${b}: no data plane, no ARP/FDB entries`)] };
  if (b && b !== "vxlan") {
    return { done: [ok(id, `backend ${b}: peers are routed via their PublicIP, no ARP/FDB entries`)] };
  }
  const dev = ctx.vxlanDevice();
  const g = leaseGuard(ctx);
  if (!ctx.kernel || !dev) return { done: [unknown(id, g ?? `${ctx.vxlanName} does not exist`)] };
  return { dev, g, kernel: ctx.kernel };
}

function restartHint(): string[] {
  return ["restart the daemon: it re-adds every peer's route, ARP and FDB entry from the leases on start"];
}

/** Whether `ip` is on a network directly attached to this node (a connected route, not via a gateway). */
function onLink(ctx: NodeSnapshot, ip: string): boolean {
  const a = IPNet.tryParse(`${ip}/32`);
  if (!a) return false;
  return mainRoutes4(ctx).some((r) => {
    if (r.gateway !== null || r.dst === "default" || r.type !== "unicast") return false;
    const n = IPNet.tryParse(r.dst);
    return !!n && n.contains(a.ip);
  });
}

/** The finding for host-gw peers beyond this node's L2 segment: no route fixes it, the backend must change. */
function hostGwNeedsL2(ctx: NodeSnapshot, l2: string[]): Finding {
  const edit = ctx.store.kind === "kube"
    ? 'kubectl -n kube-flannel edit configmap kube-flannel-cfg  # net-conf.json: "Backend": {"Type": "vxlan"}; then restart the DaemonSet\'s pods'
    : 'flanctl lease config set net-conf.json  # with "Backend": {"Type": "vxlan"}; then restart every daemon';
  return {
    id: "peer-routes",
    severity: "critical",
    rootCause: true,
    detail: `host-gw needs every node on one L2 segment: ${l2.join("; ")}`,
    why: "host-gw routes each peer's pod subnet via the peer's PublicIP as the next hop, which works only " +
      'when the peer is on a directly attached network; `ip route add … via` that peer fails ("Nexthop ' +
      'has invalid gateway"; flanneld logs "invalid argument", flannel #598). Use vxlan, with DirectRouting ' +
      "to keep direct routes where the peers are adjacent",
    fix: [edit],
  };
}

/** peer-routes: every peer lease has its route (onlink via the VTEP address, or via PublicIP). */
export const peerRoute: Check = {
  id: "peer-routes",
  title: "Route to every peer subnet",
  run(ctx) {
    if (!ctx.programsPeers) {
      return [ok("peer-routes", `backend ${ctx.backendType}: no data plane, no routes to peers expected`)];
    }
    const g = leaseGuard(ctx);
    const dev = ctx.vxlanDevice();
    if (g) {
      if (!ctx.kernel || !dev) return [unknown("peer-routes", g)];
      const n = mainRoutes4(ctx).filter((r) => r.dev === dev.index && r.flags.includes("onlink")).length;
      return [
        unknown(
          "peer-routes",
          `${n} onlink route(s) on ${dev.name}; cannot tell which are missing: ${g}`,
        ),
      ];
    }
    const bad: string[] = [];
    const fix: string[] = [];
    const l2: string[] = [];
    const peers = peerStates(ctx);
    for (const p of peers) {
      const vx = isVxlanLease(p.lease);
      if (p.lease.attrs.BackendType === "wireguard") {
        // flanneld routes the whole Network via flannel-wg; flanctl also each peer subnet (wg-peers checks
        // the rest: the peer's AllowedIPs).
        const wg = ctx.link("flannel-wg")?.index;
        const net = ctx.network?.toString();
        if (p.route?.dev === wg || mainRoutes4(ctx).some((r) => r.dst === net && r.dev === wg)) continue;
        bad.push(`no route to ${p.subnet} via flannel-wg`);
        fix.push(ctx.cmd(sh`ip route replace ${p.subnet} via ${p.gwIP} dev flannel-wg onlink`));
        continue;
      }
      if (!vx || p.direct) {
        if (p.route?.gateway === p.publicIP) continue;
        if (!vx && !p.direct && !onLink(ctx, p.publicIP)) {
          // host-gw routes a peer's subnet via its PublicIP as the next hop: that needs one L2 segment. A
          // route via it would fail (the kernel refuses a gateway that is not on a connected network).
          l2.push(`${p.subnet}: peer PublicIP ${p.publicIP} is not on a network this node is attached to`);
          continue;
        }
        bad.push(
          p.route
            ? `${p.subnet} routed via ${
              p.route.gateway ?? "-"
            } dev ${p.route.devName}, lease PublicIP ${p.publicIP}`
            : `no route to ${p.subnet} (peer ${p.publicIP})`,
        );
        fix.push(ctx.cmd(sh`ip route replace ${p.subnet} via ${p.publicIP}`));
        continue;
      }
      if (!dev) {
        bad.push(`no route to ${p.subnet}: ${ctx.vxlanName} missing`);
        continue;
      }
      const good = p.route && p.route.gateway === p.gwIP && p.route.dev === dev.index &&
        p.route.flags.includes("onlink");
      if (good) continue;
      const want = (ctx.directRouting ? `via ${p.publicIP} (DirectRouting) or ` : "") +
        `via ${p.gwIP} dev ${dev.name} onlink`;
      bad.push(
        p.route
          ? `${p.subnet} routed via ${p.route.gateway ?? "-"} dev ${p.route.devName}, expected ${want}`
          : `no route to ${p.subnet} (expected ${want})`,
      );
      fix.push(ctx.cmd(sh`ip route replace ${p.subnet} via ${p.gwIP} dev ${dev.name} onlink`));
    }
    const l2f = l2.length ? [hostGwNeedsL2(ctx, l2)] : [];
    if (!bad.length) {
      return l2f.length ? l2f : [ok("peer-routes", `routes to all ${peers.length} peer subnet(s) present`)];
    }
    return [...l2f, {
      id: "peer-routes",
      severity: "critical",
      detail: bad.join("; "),
      why:
        "traffic to those pods follows the default route and never reaches the peer (flannel #844, #869, #1434)",
      fix,
      persist: restartHint(),
    }];
  },
};

/** peer-arp: permanent ARP entry peer VTEP address → lease VtepMAC on flannel.<VNI>. */
export const peerArp: Check = {
  id: "peer-arp",
  title: "Permanent ARP entry for every VXLAN peer",
  run(ctx) {
    const pre = vxlanPeerSetup(ctx, "peer-arp");
    if ("done" in pre) return pre.done;
    const { dev, g, kernel } = pre;
    const bad: string[] = [];
    const fix: string[] = [];
    let checked = 0;
    if (g) {
      // No leases: every onlink route on the device needs a permanent neighbour for its gateway.
      for (const r of mainRoutes4(ctx).filter((r) => r.dev === dev.index && r.gateway)) {
        checked++;
        const n = kernel.neigh.find((n) => n.index === dev.index && n.dst === r.gateway);
        if (!n || !n.lladdr || !n.state.includes("PERMANENT")) {
          bad.push(`route ${r.dst} via ${r.gateway} has no permanent ARP entry on ${dev.name}`);
        }
      }
      if (!bad.length) {
        return [
          unknown(
            "peer-arp",
            `${checked} route(s) on ${dev.name} have permanent ARP entries; MACs not verified: ${g}`,
          ),
        ];
      }
      return [{
        id: "peer-arp",
        severity: "critical",
        detail: bad.join("; ") + ` (lease MACs unknown: ${g})`,
        why:
          "the kernel cannot resolve the VTEP address (flannel.1 has NOARP): packets to those pods are dropped",
        fix: restartHint(),
        persist: restartHint(),
      }];
    }
    for (const p of peerStates(ctx)) {
      if (!isVxlanLease(p.lease) || p.direct) continue;
      checked++;
      if (!p.mac) {
        bad.push(`lease ${p.subnet} has no VtepMAC in BackendData`);
        continue;
      }
      const fixCmd = ctx.cmd(sh`ip neigh replace ${p.gwIP} lladdr ${p.mac} dev ${dev.name} nud permanent`);
      if (!p.neigh || !p.neigh.lladdr) {
        bad.push(`no ARP entry ${p.gwIP} on ${dev.name} (lease ${p.subnet}, VtepMAC ${p.mac})`);
        fix.push(fixCmd);
      } else if (p.neigh.lladdr.toLowerCase() !== p.mac) {
        bad.push(`ARP ${p.gwIP} → ${p.neigh.lladdr}, lease ${p.subnet} VtepMAC is ${p.mac}`);
        fix.push(fixCmd);
      } else if (!p.neigh.state.includes("PERMANENT")) {
        bad.push(`ARP ${p.gwIP} → ${p.neigh.lladdr} is ${p.neigh.state.join(",")}, not PERMANENT`);
        fix.push(fixCmd);
      }
    }
    if (!bad.length) {
      return [
        ok("peer-arp", `permanent ARP entries for all ${checked} VXLAN peer(s) match their leases`),
      ];
    }
    return [{
      id: "peer-arp",
      severity: "critical",
      detail: bad.join("; "),
      why:
        "the inner frame is addressed to the wrong or no MAC: the peer's flannel.1 drops it (flannel #533, #2554)",
      fix,
      persist: restartHint(),
    }];
  },
};

/** peer-fdb: FDB entry lease VtepMAC → lease PublicIP on flannel.<VNI>. */
export const peerFdb: Check = {
  id: "peer-fdb",
  title: "FDB entry for every VXLAN peer",
  run(ctx) {
    const pre = vxlanPeerSetup(ctx, "peer-fdb");
    if ("done" in pre) return pre.done;
    const { dev, g, kernel } = pre;
    const bad: string[] = [];
    const fix: string[] = [];
    let checked = 0;
    const fdbOn = (mac: string) =>
      kernel.fdb.filter((f) => f.index === dev.index && f.mac.toLowerCase() === mac);
    if (g) {
      for (
        const n of kernel.neigh.filter((n) =>
          n.index === dev.index && n.lladdr && n.state.includes("PERMANENT")
        )
      ) {
        checked++;
        if (!fdbOn(n.lladdr!.toLowerCase()).some((f) => f.dst)) {
          bad.push(`ARP ${n.dst} → ${n.lladdr} has no FDB entry on ${dev.name}`);
        }
      }
      if (!bad.length) {
        return [
          unknown(
            "peer-fdb",
            `${checked} ARP entr(ies) on ${dev.name} have FDB entries; public IPs not verified: ${g}`,
          ),
        ];
      }
      return [{
        id: "peer-fdb",
        severity: "critical",
        detail: bad.join("; ") + ` (lease public IPs unknown: ${g})`,
        why: "the kernel does not know which node to encapsulate to: frames are dropped",
        fix: restartHint(),
        persist: restartHint(),
      }];
    }
    for (const p of peerStates(ctx)) {
      if (!isVxlanLease(p.lease) || p.direct || !p.mac) continue;
      checked++;
      const fixCmd = ctx.cmd(
        sh`bridge fdb replace ${p.mac} dev ${dev.name} dst ${p.publicIP} self permanent`,
      );
      if (p.fdb.length === 0) {
        bad.push(`no FDB entry ${p.mac} on ${dev.name} (lease ${p.subnet}, PublicIP ${p.publicIP})`);
        fix.push(fixCmd);
      } else if (!p.fdb.some((f) => f.dst === p.publicIP)) {
        bad.push(
          `FDB ${p.mac} → ${p.fdb.map((f) => f.dst).join(",")}, lease ${p.subnet} PublicIP is ${p.publicIP}`,
        );
        fix.push(fixCmd);
      }
    }
    if (!bad.length) {
      return [
        ok("peer-fdb", `FDB entries for all ${checked} VXLAN peer(s) point at their PublicIPs`),
      ];
    }
    return [{
      id: "peer-fdb",
      severity: "critical",
      detail: bad.join("; "),
      why: "encapsulated packets go to no node or the wrong node (departed/readdressed peers, flannel #844)",
      fix,
      persist: restartHint(),
    }];
  },
};

/** peer-entries: routes/ARP/FDB entries that belong to no lease. */
export const stalePeers: Check = {
  id: "peer-entries",
  title: "No routes/ARP/FDB entries for departed nodes",
  run(ctx) {
    const dev = ctx.vxlanDevice();
    if (!ctx.kernel) return [unknown("peer-entries", `no kernel snapshot: ${ctx.kernelError}`)];
    const g = leaseGuard(ctx);
    const stale: string[] = [];
    const fix: string[] = [];
    if (g) {
      if (!dev) return [unknown("peer-entries", g)];
      // Without leases: ARP entries no route uses and FDB entries no ARP entry uses are leftovers.
      const gws = new Set(mainRoutes4(ctx).filter((r) => r.dev === dev.index).map((r) => r.gateway));
      const macs = new Set<string>();
      for (
        const n of ctx.kernel.neigh.filter((n) => n.index === dev.index && n.state.includes("PERMANENT"))
      ) {
        if (n.lladdr) macs.add(n.lladdr.toLowerCase());
        if (!gws.has(n.dst)) {
          stale.push(`ARP ${n.dst} → ${n.lladdr} (no route uses it)`);
          fix.push(ctx.cmd(sh`ip neigh del ${n.dst} dev ${dev.name}`));
        }
      }
      for (const f of ctx.kernel.fdb.filter((f) => f.index === dev.index && f.dst && f.mac !== ZERO_MAC)) {
        if (!macs.has(f.mac.toLowerCase())) {
          stale.push(`FDB ${f.mac} → ${f.dst} (no ARP entry uses it)`);
          fix.push(ctx.cmd(sh`bridge fdb del ${f.mac} dev ${dev.name} dst ${f.dst}`));
        }
      }
      if (!stale.length) {
        return [unknown("peer-entries", `kernel entries on ${dev.name} are consistent; ${g}`)];
      }
    } else {
      const leases = ctx.store.leases.filter((l) => l.subnet);
      const subnets = new Set<string>(leases.map((l) => l.subnet!.toString()));
      const gwIPs = new Set<string>(leases.map((l) => l.subnet!.ip.toString()));
      const macs = new Set<string>(
        leases.map((l) => vtepMacOf(l.attrs.BackendData)).filter((m) => m !== null),
      );
      const net = ctx.network;
      const cni0 = ctx.link("cni0")?.index;
      for (const r of mainRoutes4(ctx)) {
        if (r.dst === "default" || r.protocol === "kernel" || subnets.has(r.dst)) continue;
        const onDev = !!dev && r.dev === dev.index;
        const dst = IPNet.tryParse(r.dst);
        const inNet = !!net && !!dst && r.dev !== cni0 && !!r.gateway && net.contains(dst) &&
          !net.equals(dst);
        if (!onDev && !inNet) continue;
        stale.push(`route ${r.dst} via ${r.gateway ?? "-"} dev ${r.devName} (no lease for ${r.dst})`);
        fix.push(
          ctx.cmd(
            sh`ip route del ${r.dst}` + (r.gateway ? sh` via ${r.gateway}` : "") +
              sh` dev ${r.devName ?? ""}`,
          ),
        );
      }
      if (dev) {
        for (
          const n of ctx.kernel.neigh.filter((n) => n.index === dev.index && n.state.includes("PERMANENT"))
        ) {
          if (!gwIPs.has(n.dst)) {
            stale.push(`ARP ${n.dst} → ${n.lladdr} on ${dev.name} (no lease)`);
            fix.push(ctx.cmd(sh`ip neigh del ${n.dst} dev ${dev.name}`));
          }
        }
        for (const f of ctx.kernel.fdb.filter((f) => f.index === dev.index && f.dst && f.mac !== ZERO_MAC)) {
          if (!macs.has(f.mac.toLowerCase())) {
            stale.push(`FDB ${f.mac} → ${f.dst} on ${dev.name} (no lease has this VtepMAC)`);
            fix.push(ctx.cmd(sh`bridge fdb del ${f.mac} dev ${dev.name} dst ${f.dst}`));
          }
        }
      }
    }
    if (!stale.length) return [ok("peer-entries", "no route/ARP/FDB entries for departed nodes")];
    return [{
      id: "peer-entries",
      severity: "warning",
      detail: stale.join("; "),
      why: "entries for departed or readdressed nodes black-hole traffic when their subnet is reused " +
        "(flannel #844, #2554)",
      fix,
      persist: ["none needed once removed; the daemon removes entries when it sees a lease expire"],
    }];
  },
};

/** The checks of this family. */
export const PEER_CHECKS: Check[] = [peerRoute, peerArp, peerFdb, stalePeers];
