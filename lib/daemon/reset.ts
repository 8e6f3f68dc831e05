/**
 * `flanctl reset`: removes what the daemon made on this node — for a rollback to flanneld (or a clean
 * uninstall) once the daemon is stopped. The daemon leaves all of it in place on purpose when it stops (so a
 * restart loses nothing); flanneld would trip over some of it: our persistent udp TUN `flannel0` keeps the
 * Network route while flanneld opens `flannel%d` and gets flannel1.
 *
 * Removed: the overlay devices (vxlan `flannel.<VNI>` and `flannel-v6.<VNI>`, udp `flannel0`, wireguard
 * `flannel-wg` and `flannel-wg-v6`, whose wireguard-go ends with its device; with them every
 * route, ARP and FDB entry on them), the other routes only when they can be attributed to flanctl — into
 * the pod network via a lease's PublicIP (host-gw peers; the leases read from the store the daemon
 * recorded), or the blackhole route of our own subnet (--ip-blackhole-route) — and flannel's rules in both
 * modes and families (iptables/ip6tables
 * FLANNEL-POSTRTG and FLANNEL-FWD with their jumps; nftables tables flannel-ipv4 and flannel-ipv6), the
 * NetworkPolicy table (`inet flanctl-netpol`, whose rules would go stale without the daemon), and the
 * files: subnet.env, the state file (flanctl.json) and the saved VTEP MACs in --state-dir.
 * Kept: cni0 and the pods (flanneld takes over the same subnet: etcd finds the lease by PublicIP, kube mode
 * has it on the Node), the lease in the store, the CNI plugins' files. Refuses while a flanctl daemon or
 * flanneld runs in this network namespace (its devices would be pulled from under it) unless forced.
 * @module
 */
import type { NetlinkHandle, RouteInfo } from "../netlink/types.ts";
import { RT_TABLE_MAIN } from "../netlink/mod.ts";
import { tunOwnerPids } from "../os/mod.ts";
import { readSubnetEnv } from "../node/subnet_env.ts";
import type { IPNet } from "../base/cidr.ts";
import { IPNet as Net } from "../base/cidr.ts";
import { errText, FlanctlError } from "../base/errors.ts";
import { daemonRunning, daemonStatePath, readDaemonState } from "../node/daemon_state.ts";
import { findDaemonProcess, OWN_NETNS } from "../node/daemon_process.ts";
import { FlannelRules } from "../firewall/flannel.ts";
import { UDP_DEVICE } from "../backend/config.ts";
import { FirewallError, type Runner } from "../firewall/types.ts";
import { nftDriver } from "../firewall/nft.ts";
import { removeNetpolTable } from "../netpol/engine.ts";
import { TABLE as NETPOL_TABLE } from "../netpol/render.ts";
import { WG_DEVICE, WG_DEVICE_V6 } from "../backend/wireguard/options.ts";
import type { Log } from "../base/log.ts";
import { choosesStore, openStore, type StoreOptions } from "../store/open.ts";
import type { SubnetStore } from "../store/types.ts";
import { withStoreTimeout } from "../store/util.ts";

/** Options of a reset. */
export interface ResetOptions {
  /** subnet.env of the daemon (its state file is next to it). */
  subnetFile: string;
  /** The daemon's --state-dir (saved VTEP MACs). */
  stateDir: string;
  /** Reset even though a daemon process runs in this namespace. */
  force: boolean;
}

/** What a reset did: each item as `kind name`, e.g. `device flannel.1`, `route 10.244.2.0/24 via …`. */
export interface ResetReport {
  removed: string[];
  /** What could not be removed, with the reason. */
  failed: string[];
  /** Routes into the pod network left alone because nothing ties them to flanctl, with the reason. */
  kept: string[];
}

/**
 * The peers' PublicIPs (v4 and v6) from the store's leases, or null with why they are unknown: a gateway
 * route is flanctl's only when it goes via one of them.
 */
export type LeaseGateways = { ips: Set<string> } | { ips: null; why: string };

/** A daemon still runs: resetting would pull its devices and rules from under it. */
export class DaemonRunningError extends FlanctlError {
  constructor(what: string) {
    super(`${what}: stop it first (e.g. systemctl stop flanctl), or pass --force`, 1);
  }
}

/** Overlay device names the daemon creates (vxlan v4/v6 by VNI, udp's TUN, wireguard's devices). */
export function isOverlayDevice(name: string, kind: string | null): boolean {
  if (kind === "vxlan") return /^flannel(-v6)?\.\d+$/.test(name);
  if (isWgDevice(name, kind)) return true;
  return kind === "tun" && name === UDP_DEVICE;
}

/** wireguard's devices: wireguard-go's TUN (held by it: deleting the device ends it) or the kernel's. */
function isWgDevice(name: string, kind: string | null): boolean {
  return (kind === "tun" || kind === "wireguard") && (name === WG_DEVICE || name === WG_DEVICE_V6);
}

/**
 * The leases' PublicIPs from the store `opts` choose — only when a flag chose it or the daemon recorded
 * it (no guessing at etcd's default endpoints); unknown, with why, when it cannot be read in 5 s.
 */
export async function leaseGateways(opts: StoreOptions): Promise<LeaseGateways> {
  if (!choosesStore(opts) && !opts.recordedIn) {
    return {
      ips: null,
      why: "no store given and none recorded by the daemon (pass the daemon's store flags)",
    };
  }
  let store: SubnetStore | null = null;
  try {
    store = await withStoreTimeout(openStore(opts), 5000, "opening the store");
    const { leases } = await withStoreTimeout(store.listLeases(), 5000, "listing leases");
    const ips = new Set<string>();
    for (const l of leases) {
      if (l.attrs.PublicIP) ips.add(l.attrs.PublicIP);
      if (l.attrs.PublicIPv6) ips.add(l.attrs.PublicIPv6);
    }
    return { ips };
  } catch (e) {
    return { ips: null, why: `the store's leases could not be read (${(e as Error).message.slice(0, 200)})` };
  } finally {
    await store?.close().catch(() => {});
  }
}

function routeText(r: RouteInfo): string {
  if (r.type === "blackhole") return `route blackhole ${r.dst}`;
  return `route ${r.dst}${r.gateway ? ` via ${r.gateway}` : ""}${r.devName ? ` dev ${r.devName}` : ""}`;
}

/** Runs the reset in the current network namespace. Throws {@link DaemonRunningError} unless forced. */
export async function resetNode(
  o: ResetOptions,
  deps: {
    nl: NetlinkHandle;
    run?: Runner;
    log?: Pick<Log, "info" | "warn" | "debug">;
    /** The leases' PublicIPs; without them no gateway route is removed. */
    gateways?: LeaseGateways;
  },
): Promise<ResetReport> {
  const rep: ResetReport = { removed: [], failed: [], kept: [] };
  const gateways: LeaseGateways = deps.gateways ?? { ips: null, why: "the store's leases were not read" };
  const statePath = daemonStatePath(o.subnetFile);
  if (!o.force) {
    let st = null;
    try {
      st = readDaemonState(statePath);
    } catch { /* unreadable: the process scan decides */ }
    if (st && daemonRunning(st) === true) {
      throw new DaemonRunningError(`the flanctl daemon (pid ${st.pid}, ${statePath}) is running`);
    }
    const p = findDaemonProcess(OWN_NETNS);
    if (p) throw new DaemonRunningError(`a daemon runs in this network namespace (pid ${p.pid}: ${p.cmd})`);
  }
  const nl = deps.nl;
  const attempt = (what: string, fn: () => void) => {
    try {
      fn();
      rep.removed.push(what);
    } catch (e) {
      rep.failed.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // The pod networks and our own subnets, from subnet.env (before it goes).
  const nets: IPNet[] = [];
  const own: IPNet[] = [];
  try {
    const env = readSubnetEnv(o.subnetFile);
    if (env.network) nets.push(env.network);
    if (env.ipv6Network) nets.push(env.ipv6Network);
    if (env.subnet) own.push(env.subnet.net);
    if (env.ipv6Subnet) own.push(env.ipv6Subnet.net);
  } catch { /* no subnet.env: the routes on our devices still go with them */ }

  // Devices (their routes, ARP and FDB entries go with them). A udp TUN some process still holds open is
  // not ours to take (a flanneld that got flannel0): only with --force is any process running at all.
  const devs = nl.links().filter((l) => isOverlayDevice(l.name, l.kind));
  for (const l of devs) {
    const owners = l.kind === "tun" && !isWgDevice(l.name, l.kind) ? tunOwnerPids(l.name, OWN_NETNS) : [];
    if (owners.length) {
      rep.failed.push(`device ${l.name}: held open by pid ${owners.join(",")}`);
      continue;
    }
    attempt(`device ${l.name}`, () => nl.deleteLink(l.name));
  }

  // Routes into the pod network the daemon made on other devices: host-gw peers (via a lease's PublicIP on
  // the underlay) and the blackhole route of our subnet. Routes to pods (a device, no gateway: cni0's, a
  // runtime's veths) are not the daemon's, nor is any route subnet.env's network merely contains (a wrong
  // FLANNEL_NETWORK, 0.0.0.0/0, would take the node's static routes with it).
  for (const fam of [4, 6] as const) {
    for (const r of nl.routes({ family: fam, table: RT_TABLE_MAIN })) {
      if (r.dst === "default" || (r.type !== "blackhole" && r.gateway === null)) continue;
      const dst = Net.tryParse(r.dst);
      if (!dst || !nets.some((n) => n.family === dst.family && n.contains(dst))) continue;
      if (r.type === "blackhole") {
        if (!own.some((n) => n.equals(dst))) {
          rep.kept.push(
            `${routeText(r)}: not our subnet's blackhole route (${own.join(", ") || "no subnet"})`,
          );
          continue;
        }
      } else if (gateways.ips === null || !gateways.ips.has(r.gateway!)) {
        rep.kept.push(
          `${routeText(r)}: ${gateways.ips === null ? gateways.why : `${r.gateway} is no lease's PublicIP`}`,
        );
        continue;
      }
      attempt(
        routeText(r),
        () =>
          nl.deleteRoute(
            r.type === "blackhole"
              ? { dst: r.dst, type: "blackhole" }
              : { dst: r.dst, via: r.gateway ?? undefined, dev: r.dev ?? undefined },
          ),
      );
    }
  }

  // flannel's rules, both modes (each mode's "other mode" cleanup is the one that removes the rest).
  for (const mode of ["nftables", "iptables"] as const) {
    try {
      const rules = new FlannelRules(mode, { run: deps.run, log: deps.log });
      for (const x of await rules.cleanupOtherMode()) rep.removed.push(`rules ${x}`);
    } catch (e) {
      rep.failed.push(`${mode === "nftables" ? "iptables" : "nftables"} rules: ${(e as Error).message}`);
    }
  }

  // The NetworkPolicy table (--network-policy): without the daemon its rules would go stale.
  try {
    if (await removeNetpolTable(nftDriver({ run: deps.run, log: deps.log }))) {
      rep.removed.push(`rules inet ${NETPOL_TABLE}`);
    }
  } catch (e) {
    if (!(e instanceof FirewallError && e.missing)) {
      rep.failed.push(`rules inet ${NETPOL_TABLE}: ${errText(e)}`);
    }
  }

  // Files: subnet.env, the state file, the saved VTEP MACs (and the state dir when that leaves it empty).
  const rm = (path: string, what: string) => {
    try {
      Deno.removeSync(path);
      rep.removed.push(`${what} ${path}`);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) rep.failed.push(`${what} ${path}: ${(e as Error).message}`);
    }
  };
  rm(o.subnetFile, "file");
  rm(statePath, "file");
  try {
    for (const e of Deno.readDirSync(o.stateDir)) {
      if (e.isFile && /^flannel(-v6)?\.\d+\.mac$/.test(e.name)) rm(`${o.stateDir}/${e.name}`, "file");
    }
    if (![...Deno.readDirSync(o.stateDir)].length) rm(o.stateDir, "directory");
  } catch { /* no state dir */ }
  return rep;
}
