/**
 * The store's view: reachability, our own lease, duplicates, expiry, the public IP, and pod-network
 * overlap with host routes.
 * @module
 */
import { RT_TABLE_MAIN } from "../../netlink/mod.ts";
import type { Check, CheckId, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { IPAddr, IPNet } from "../../base/cidr.ts";
import { httpGet } from "../../observe/http_get.ts";
import { daemonStatePath, readDaemonState } from "../../node/daemon_state.ts";
import { UDP_DEVICE } from "../../backend/config.ts";
import { sh } from "../../base/shell.ts";
import { vtepMacOf } from "../../lease/backend_data.ts";

function noStore(ctx: NodeSnapshot, id: CheckId): Finding | null {
  if (ctx.store.state === "ok") return null;
  return unknown(id, `leases not readable: ${ctx.store.hint ?? ctx.store.error}`);
}

/** store: the store answered (or why it was not asked). */
export const storeCheck: Check = {
  id: "store",
  title: "Lease store reachable",
  run(ctx) {
    if (ctx.store.state === "ok" && ctx.store.malformed.length) {
      return [{
        id: "store",
        severity: "warning",
        detail: `${ctx.store.malformed.length} malformed lease entr(ies): ${ctx.store.malformed.join("; ")}`,
        why: "daemons skip these entries: the nodes they belong to get no routes from their peers",
        fix: ["inspect and remove the entries (flanctl lease revoke SUBNET), then restart the owning daemon"],
      }];
    }
    if (ctx.store.state === "ok") {
      const cfg = ctx.store.config;
      const cm = ctx.store.configMap;
      return [ok(
        "store",
        `${ctx.store.kind} store: ${ctx.store.leases.length} lease(s)` +
          (cfg ? `, network ${cfg.network}, backend ${cfg.backend.type}` : `; ${ctx.store.error}`) +
          (cm && "config" in cm && cm.config === cfg ? ` (net-conf from ${cm.where})` : ""),
      )];
    }
    if (ctx.store.state === "none") return [unknown("store", ctx.store.hint ?? "no store")];
    return [{
      id: "store",
      severity: ctx.opts.storeExplicit ? "unknown" : "warning",
      detail: `store unreachable: ${ctx.store.error}`,
      why: "without the store the daemon cannot renew its lease or learn about peers",
      fix: ["check the store flags/endpoints and that etcd (or the API server) is up"],
    }];
  },
};

/** What the daemon's /metrics say about claims of our subnet (see lib/daemon/peers.ts). */
export interface ClaimsSeen {
  /** Leases seen claiming our subnet since the daemon started. */
  claims: number;
  /** Times the daemon wrote its lease back. */
  rewrites: number;
  /** The last claimant's PublicIP and when it was seen. */
  last: { publicIP: string; at: Date } | null;
}

/** Parses the claim series of a daemon's /metrics body; null when it has none (an older daemon). */
export function parseClaims(body: string): ClaimsSeen | null {
  const num = (name: string) => {
    const m = new RegExp(`^${name} (\\d+)$`, "m").exec(body);
    return m ? Number(m[1]) : null;
  };
  const claims = num("flanctl_own_subnet_claims_total");
  if (claims === null) return null;
  const m =
    /^flanctl_own_subnet_last_claim_timestamp_seconds\{public_ip="([0-9a-fA-F.:]{1,45})"\} ([0-9.]+)$/m
      .exec(body);
  const ip = m ? IPAddr.tryParse(m[1]) : null;
  return {
    claims,
    rewrites: num("flanctl_own_lease_rewrites_total") ?? 0,
    last: ip && m ? { publicIP: ip.toString(), at: new Date(Number(m[2]) * 1000) } : null,
  };
}

/** The claims the running daemon saw (its /metrics), or null when it has no health endpoint or no answer. */
async function claimsSeen(ctx: NodeSnapshot): Promise<ClaimsSeen | null> {
  let health: string | undefined;
  try {
    health = readDaemonState(daemonStatePath(ctx.opts.subnetFile))?.health ?? undefined;
  } catch {
    return null;
  }
  if (!health) return null;
  const r = await httpGet(ctx.opts.netns, `http://${health}/metrics`);
  return r.status === 200 ? parseClaims(r.body) : null;
}

/** The first SubnetLen-sized subnet of the network no lease holds (for a podCIDR to patch in), or null. */
function freeSubnet(ctx: NodeSnapshot): string | null {
  const c = ctx.store.config;
  if (!c?.network) return null;
  const len = c.subnetLen ?? 24;
  const taken = ctx.store.leases.map((l) => l.subnet).filter((x) => x !== null);
  if (c.network.family !== 4 || len < c.network.prefix) return null;
  const size = 2n ** BigInt(32 - len);
  for (let i = 0n; i < 2n ** BigInt(len - c.network.prefix) && i < 4096n; i++) {
    const cand = IPNet.tryParse(`${c.network.ip.add(i * size)}/${len}`);
    if (cand && !taken.some((t) => t!.overlaps(cand))) return cand.toString();
  }
  return null;
}

/**
 * Kube mode: this Node as the API has it. No podCIDR: kube-controller-manager does not allocate them, and
 * the daemon exits at start ("pod cidr not assigned") — the root cause of everything else. A podCIDR outside
 * the net-conf Network: the controller-manager's --cluster-cidr and kube-flannel-cfg disagree.
 */
function kubeNodeFinding(ctx: NodeSnapshot): Finding | null {
  const n = ctx.store.kind === "kube" ? ctx.store.node : undefined;
  if (!n || "error" in n) return null;
  const net = ctx.store.config?.network ?? null;
  if (!n.podCIDRs.length && n.cidrEvents?.length) {
    // kube-controller-manager tried and found no subnet left in its --cluster-cidr.
    return {
      id: "lease-own",
      severity: "critical",
      rootCause: true,
      detail: `Node ${n.name} has no spec.podCIDR: event CIDRNotAvailable: ${
        n.cidrEvents[n.cidrEvents.length - 1]
      }`,
      why: "kube-controller-manager's --cluster-cidr has no free subnet of --node-cidr-mask-size left (too " +
        'small for the node count, or taken by Nodes that are gone); the daemon exits at start ("pod cidr ' +
        'not assigned") and crash-loops (flannel #728)',
      fix: [
        "kubectl get nodes -o custom-columns=NAME:.metadata.name,CIDR:.spec.podCIDR  # delete Nodes that " +
        "are gone (kubectl delete node NAME) to free their subnets",
      ],
      persist: [
        "give kube-controller-manager a larger --cluster-cidr (and the net-conf Network with it) or a " +
        "larger --node-cidr-mask-size",
      ],
    };
  }
  if (!n.podCIDRs.length) {
    const free = freeSubnet(ctx);
    return {
      id: "lease-own",
      severity: "critical",
      rootCause: true,
      detail: `Node ${n.name} has no spec.podCIDR: the daemon cannot take a lease and exits at start ` +
        `("node \"${n.name}\" pod cidr not assigned"), so it crash-loops`,
      why:
        "kube-controller-manager assigns podCIDRs only with --allocate-node-cidrs=true and --cluster-cidr " +
        "(kubeadm: init --pod-network-cidr); without them no node gets one (flannel #728, #1558, #1224)",
      fix: free
        ? [
          `kubectl patch node ${n.name} -p '{"spec":{"podCIDR":"${free}","podCIDRs":["${free}"]}}'  # a free ` +
          `subnet of ${net}; set once, it stays`,
        ]
        : [`kubectl patch node ${n.name} -p '{"spec":{"podCIDR":"<a free subnet of the Network>"}}'`],
      persist: [
        `kube-controller-manager --allocate-node-cidrs=true --cluster-cidr=${net ?? "<net-conf Network>"} ` +
        "(kubeadm: /etc/kubernetes/manifests/kube-controller-manager.yaml)",
      ],
    };
  }
  // The daemon's net-conf (its --net-config-path, or the ConfigMap when that is not readable here), then
  // the ConfigMap as the API has it now (edited since the daemon read it: its next start reads that one).
  const cm = ctx.store.configMap && "config" in ctx.store.configMap ? ctx.store.configMap : null;
  const nets: { net: IPNet; from: string }[] = [];
  if (net) nets.push({ net, from: cm?.config === ctx.store.config ? ` (${cm.where})` : "" });
  const cmNet = cm && cm.config !== ctx.store.config ? cm.config.network : null;
  if (cm && cmNet && (!net || String(cmNet) !== String(net))) {
    nets.push({ net: cmNet, from: ` (${cm.where}, not yet read by the daemon)` });
  }
  for (const { net, from } of nets) {
    const outside = n.podCIDRs.filter((c) => {
      const x = IPNet.tryParse(c);
      return x !== null && x.family === net.family && !net.contains(x);
    });
    if (!outside.length) continue;
    return {
      id: "lease-own",
      severity: "critical",
      rootCause: true,
      detail: `Node ${n.name} podCIDR ${outside.join(", ")} is outside the net-conf Network ${net}${from}`,
      why: "kube-controller-manager's --cluster-cidr and kube-flannel-cfg's Network disagree: the daemon " +
        "routes and masquerades the Network, so pods of this subnet are not routed between nodes (flannel " +
        "#1437)" +
        (from.includes("not yet read") ? "; the DaemonSet's pods read the ConfigMap when they start" : ""),
      fix: [
        'kubectl -n kube-flannel edit configmap kube-flannel-cfg  # net-conf.json "Network": the ' +
        "controller-manager's --cluster-cidr; then restart the DaemonSet's pods",
      ],
    };
  }
  return null;
}

/** lease-own: this node holds a lease, and no other writer claimed its subnet (the daemon's /metrics). */
export const leaseOwn: Check = {
  id: "lease-own",
  title: "This node holds a lease",
  async run(ctx) {
    const ns = noStore(ctx, "lease-own");
    if (ns) return [ns];
    const own = ctx.ownLease();
    const seen = own ? await claimsSeen(ctx) : null;
    if (own && seen?.claims && seen.last) {
      return [{
        id: "lease-own",
        severity: "warning",
        detail:
          `lease ${own.subnet} PublicIP ${own.attrs.PublicIP}; PublicIP ${seen.last.publicIP} claimed ` +
          `this subnet at ${seen.last.at.toISOString()} (${seen.claims} claim(s) since the daemon started, ` +
          `our lease written back ${seen.rewrites} time(s))`,
        why:
          "while a claim stands peers may send this node's pod traffic to the claimant; the daemon writes " +
          "its lease back at once, but whoever wrote the claim can write it again",
        fix: [
          `find the node or writer with PublicIP ${seen.last.publicIP}: a second daemon with this node's ` +
          "subnet.env or --public-ip, or a client with write access to the store",
        ],
        persist: ["give every node its own --public-ip; restrict write access to the lease store"],
      }];
    }
    const kube = kubeNodeFinding(ctx);
    if (kube) return [kube];
    if (own) return [ok("lease-own", `lease ${own.subnet} PublicIP ${own.attrs.PublicIP}`)];
    const dead = ctx.ownExpiredLease();
    return [{
      id: "lease-own",
      severity: "critical",
      detail: `no lease for ${ctx.subnetEnv?.subnet?.net ?? "this node"} and none with a local PublicIP ` +
        `(${
          [...ctx.localIPs()].filter((ip) => !ip.startsWith("127.") && ip !== "::1").join(", ") || "none"
        })` +
        (dead ? `; lease ${dead.subnet} expired at ${dead.expiration!.toISOString()}` : ""),
      why: "peers do not know this node: they install no routes to its pods",
      fix: ["restart the daemon: it re-acquires its lease"],
      persist: ["check the daemon's logs for renew failures (store reachability, clock)"],
    }];
  },
};

/** lease-unique: overlapping subnets, one PublicIP on several leases. */
export const leaseDuplicate: Check = {
  id: "lease-unique",
  title: "No overlapping leases or shared public IPs",
  run(ctx) {
    const ns = noStore(ctx, "lease-unique");
    if (ns) return [ns];
    const ls = ctx.store.leases.filter((l) => l.subnet);
    const crit: string[] = [];
    const warn: string[] = [];
    for (let i = 0; i < ls.length; i++) {
      for (let j = i + 1; j < ls.length; j++) {
        if (ls[i].subnet!.overlaps(ls[j].subnet!)) {
          crit.push(
            `${ls[i].subnet} (${ls[i].attrs.PublicIP}) overlaps ${ls[j].subnet} (${ls[j].attrs.PublicIP})`,
          );
        }
      }
    }
    const byIP = new Map<string, typeof ls>();
    for (const l of ls) byIP.set(l.attrs.PublicIP, [...(byIP.get(l.attrs.PublicIP) ?? []), l]);
    const fix: string[] = [];
    let shared = false;
    for (const [ip, group] of byIP) {
      if (group.length < 2) continue;
      const subs = group.map((l) => l.subnet!.toString()).join(", ");
      // Two nodes (two Nodes in kube mode; two VTEP MACs elsewhere) behind one address, or one node's
      // earlier lease that has not expired yet.
      const ids = group.map((l) => l.node ?? vtepMacOf(l.attrs.BackendData));
      const who = new Set(ids);
      if (ids.includes(null) || who.size < 2) {
        warn.push(`PublicIP ${ip} holds ${subs}`);
        fix.push(
          ...group.slice(1).map((l) =>
            `flanctl lease revoke ${l.subnet}  # after checking which one the node uses`
          ),
        );
        continue;
      }
      shared = true;
      const nodes = group.map((l) => l.node).filter(Boolean);
      crit.push(
        `${who.size} nodes share PublicIP ${ip}: ${subs}${
          nodes.length ? ` (nodes ${nodes.join(", ")})` : ""
        }`,
      );
      fix.push(...sharedIpFix(ctx, ip));
    }
    if (!crit.length && !warn.length) {
      return [ok("lease-unique", `${ls.length} lease(s), no overlaps, distinct PublicIPs`)];
    }
    return [{
      id: "lease-unique",
      severity: crit.length ? "critical" : "warning",
      detail: [...crit, ...warn].join("; "),
      why: shared
        ? "peers send the pod traffic of every node behind that address to one of them (one FDB entry or " +
          "route per address): pods on the others are unreachable. Cause: each node took the address of the " +
          "same interface — a NAT interface every VM has (VirtualBox/Vagrant's 10.0.2.15) or cloned VMs " +
          "(flannel #1289, #98)"
        : "two nodes route the same pod addresses, or peers install two routes for one node: traffic goes to " +
          "the wrong node (flannel #1289, #98)",
      fix: fix.length
        ? fix
        : ["revoke the lease of the node that should not have it: flanctl lease revoke SUBNET"],
      persist: ["give every node a distinct --public-ip / --iface"],
    }];
  },
};

/**
 * The fix for nodes sharing PublicIP `ip`: make each node choose its own address. When this node's
 * address is the shared one and it has another one, the interface holding it (kube mode: patched into
 * the DaemonSet's arguments; else the daemon's flags).
 */
function sharedIpFix(ctx: NodeSnapshot, ip: string): string[] {
  const own = ctx.ownLease()?.attrs.PublicIP;
  const other = (ctx.kernel?.addrs ?? []).find((a) =>
    a.family === 4 && a.local !== ip && a.scope === "global" &&
    !ctx.network?.contains(IPAddr.parse(a.local)) &&
    !/^(lo|cni0|flannel|veth|docker)/.test(a.ifname)
  );
  if (own === ip && other) {
    const arg = `--iface=${other.ifname}`;
    if (ctx.store.kind === "kube") {
      return [
        `kubectl -n kube-flannel patch ds kube-flannel-ds --type json -p '[{"op":"add","path":` +
        `"/spec/template/spec/containers/0/args/-","value":"${arg}"}]'  # ${other.local}: the address ` +
        "peers reach this node on; the pods restart with it",
      ];
    }
    return [`restart the daemon with ${arg} (${other.local}, the address peers reach this node on)`];
  }
  return [
    `on each node sharing ${ip}: start the daemon with --iface=<the interface peers reach it on> or ` +
    "--public-ip=<its own address>",
  ];
}

/** lease-expiry: our lease is not expired or about to expire (renewals failing, clock skew). */
export const leaseExpiry: Check = {
  id: "lease-expiry",
  title: "Own lease not close to expiry",
  run(ctx) {
    const ns = noStore(ctx, "lease-expiry");
    if (ns) return [ns];
    const own = ctx.ownLease() ?? ctx.ownExpiredLease();
    if (!own) return [unknown("lease-expiry", "no lease for this node (see lease-own)")];
    if (!own.expiration) {
      // A kube lease is the Node's podCIDR and annotations: it lives as long as the Node object.
      const what = own.node !== undefined || ctx.store.kind === "kube"
        ? `is node ${own.node ?? "?"}'s podCIDR (kube leases do not expire: they live as long as the Node)`
        : "is a reservation (no expiry)";
      return [ok("lease-expiry", `lease ${own.subnet ?? own.ipv6Subnet} ${what}`)];
    }
    const left = own.expiration.getTime() - Date.now();
    const mins = Math.round(left / 60000);
    const detail = `lease ${own.subnet} expires ${own.expiration.toISOString()} (${mins} min from now)`;
    if (left > 3600_000) return [ok("lease-expiry", detail)];
    return [{
      id: "lease-expiry",
      severity: left <= 0 ? "critical" : "warning",
      detail,
      why: "the daemon renews 60 min before expiry; less than that left means renewals are failing (store " +
        "unreachable, clock skew; flannel #340, #904). An expired lease can be taken by another node",
      fix: ["check the daemon log for renew errors; check the clock: timedatectl status"],
      persist: ["run NTP on every node and the etcd members (systemctl enable --now systemd-timesyncd)"],
    }];
  },
};

/** public-ip: our lease's PublicIP is a local address and the VXLAN device uses it. */
export const publicIP: Check = {
  id: "public-ip",
  title: "Lease PublicIP is a local address",
  run(ctx) {
    const ns = noStore(ctx, "public-ip");
    if (ns) return [ns];
    const own = ctx.ownLease();
    if (!own) return [unknown("public-ip", "no lease for this node (see lease-own)")];
    // IPv6-only: the lease's PublicIPv6 and flannel-v6.<VNI> (PublicIP is 0.0.0.0 there, as flanneld writes).
    const ip = ctx.ipv4Disabled ? own.attrs.PublicIPv6 ?? "" : own.attrs.PublicIP;
    const problems: string[] = [];
    const dev = ctx.ipv4Disabled ? ctx.link(`flannel-v6.${ctx.vni}`) : ctx.vxlanDevice();
    const local = dev?.vxlan?.local ?? null;
    // Behind NAT (--public-ip, or the public-ip-overwrite annotation in kube mode) the lease announces the
    // NAT's address while the VXLAN device sends from this node's own: that is flannel's NAT set-up, as
    // vxlan-csum-offload calls it too, and peers reach the node through the NAT.
    if (!ctx.localIPs().has(ip) && local && ctx.localIPs().has(local)) {
      return [
        ok(
          "public-ip",
          `PublicIP ${ip} (behind NAT: not an address of this node); ${
            dev!.name
          } sends from its own ${local}`,
        ),
      ];
    }
    if (!ctx.localIPs().has(ip)) problems.push(`lease PublicIP ${ip} is not assigned to any interface here`);
    if (local && local !== ip) {
      problems.push(`${dev!.name} local ${local} != lease PublicIP ${ip}`);
    }
    if (!problems.length) {
      const u = ctx.underlay();
      return [ok("public-ip", `PublicIP ${ip} on ${u?.link.name ?? "?"}`)];
    }
    return [{
      id: "public-ip",
      severity: "critical",
      detail: problems.join("; "),
      why:
        "peers encapsulate to an address this node does not answer on, or the node sends from another one " +
        "(wrong interface chosen, flannel #871, #2045)",
      fix: ["restart the daemon with the right --iface / --public-ip"],
      persist: ["set --iface (or --iface-can-reach) in the daemon's unit/DaemonSet"],
    }];
  },
};

/** pod-network-routes: host routes/addresses (not flannel's) inside the pod network (flannel #611). */
export const routeOverlap: Check = {
  id: "pod-network-routes",
  title: "Pod network does not overlap host routes",
  run(ctx) {
    const net = ctx.network;
    if (!net && ctx.ipv4Disabled) return [ok("pod-network-routes", "IPv4 disabled: no IPv4 pod network")];
    if (!net || !ctx.kernel) {
      return [unknown("pod-network-routes", "pod network unknown (no subnet.env/store)")];
    }
    // flannel's own devices: the VXLAN device, cni0, and with the udp backend flannel0 (its Network route
    // and the /32 of our subnet on it are the backend's own, as flanneld's udp backend makes them).
    const udp = ctx.backendType === "udp" ? ctx.link(UDP_DEVICE)?.index : undefined;
    const wg = ctx.backendType === "wireguard" ? ctx.link("flannel-wg")?.index : undefined;
    const own = new Set([ctx.vxlanDevice()?.index, ctx.link("cni0")?.index, udp, wg]);
    const leaseSubs = new Set<string | undefined>(ctx.store.leases.map((l) => l.subnet?.toString()));
    const pubs = new Set(ctx.store.leases.map((l) => l.attrs.PublicIP));
    const bad: string[] = [];
    const fix: string[] = [];
    for (const r of ctx.kernel.routes) {
      if (r.family !== 4 || r.dst === "default" || r.table !== RT_TABLE_MAIN || own.has(r.dev ?? -1)) {
        continue;
      }
      const d = IPNet.tryParse(r.dst);
      // Wider routes (10.0.0.0/8 via a corporate gateway) lose to the more specific pod routes: only
      // routes inside the pod network can steal its traffic.
      if (!d || !net.contains(d)) continue;
      if (leaseSubs.has(r.dst) && r.gateway && pubs.has(r.gateway)) continue; // host-gw / DirectRouting
      if (d.prefix > net.prefix && r.gateway) continue; // a peer route (peer-route / stale checks)
      bad.push(`route ${r.dst}${r.gateway ? ` via ${r.gateway}` : ""} dev ${r.devName}`);
      fix.push(
        ctx.cmd(
          sh`ip route del ${r.dst}` + (r.gateway ? sh` via ${r.gateway}` : "") + sh` dev ${r.devName ?? ""}`,
        ),
      );
    }
    for (const a of ctx.kernel.addrs) {
      if (a.family !== 4 || own.has(a.index) || a.ifname === "lo") continue;
      const ip = IPNet.tryParse(`${a.local}/32`);
      if (ip && net.contains(ip)) bad.push(`address ${a.local}/${a.prefix} on ${a.ifname}`);
    }
    if (!bad.length) return [ok("pod-network-routes", `no host route or address overlaps ${net}`)];
    return [{
      id: "pod-network-routes",
      severity: "critical",
      detail: `${bad.join("; ")} overlap(s) the pod network ${net}`,
      why: "traffic to some pods leaves through the host network instead of the overlay (flannel #611)",
      fix: bad.some((b) => b.startsWith("address "))
        ? [...fix, `move the host network away from ${net}`]
        : fix,
      persist: ["choose a pod Network that does not overlap any host/VPC network (net-conf Network)"],
    }];
  },
};

/** The checks of this family. */
export const LEASE_CHECKS: Check[] = [
  storeCheck,
  leaseOwn,
  leaseDuplicate,
  leaseExpiry,
  publicIP,
  routeOverlap,
];
