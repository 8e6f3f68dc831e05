/**
 * `flanctl status`: one view of a node. The daemon's state file says whether it runs (pid, version,
 * uptime, health address); when it runs its /metrics gives the counters (renewals, reconcile passes,
 * repairs, store up); the kernel and the store give the rest either way (lease, device, peers programmed
 * / missing / stale, rules). Read-only.
 * @module
 */
import { httpGet as get } from "../observe/http_get.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import type { LinkInfo } from "../netlink/types.ts";
import { RT_TABLE_MAIN } from "../netlink/mod.ts";
import type { Lease } from "../store/types.ts";
import {
  daemonRunning,
  DaemonStateError,
  type DaemonStateFile,
  daemonStatePath,
  readDaemonState,
} from "../node/daemon_state.ts";
import { IPNet } from "../base/cidr.ts";
import { dev6, dev6Name, network6, nftablesMode, own6, scanForDaemon } from "../observe/probes.ts";
import { UDP_DEVICE } from "../backend/config.ts";
import { WG_DEVICE } from "../backend/wireguard/options.ts";
import { vtepMacOf } from "../lease/backend_data.ts";
import { forwardPolicy, ip6tablesMasq, masqRules, nftRules } from "../doctor/mod.ts";

/** The `-o json` view of `flanctl status`. */
export interface StatusJson {
  /** The node: the name the daemon records (the Kubernetes node name in kube mode), else the host name or
   * the --netns name. */
  node: string;
  daemon: {
    running: boolean;
    pid: number | null;
    version: string | null;
    startedAt: string | null;
    uptimeSeconds: number | null;
    /** Where it was found: the state file, a process scan, or nowhere. */
    source: "state-file" | "process" | "none";
    detail: string;
  };
  store: {
    kind: string | null;
    /** Whether this command reached the store itself. */
    reachable: boolean;
    /** The daemon's view (flanctl_store_up), when its metrics were read. */
    daemonSeesStore: boolean | null;
    error: string | null;
  };
  lease: {
    subnet: string | null;
    publicIP: string | null;
    expiration: string | null;
    renewals: number | null;
    renewalErrors: number | null;
    /** Our IPv6 subnet (dual stack / IPv6-only), else null. */
    ipv6Subnet: string | null;
    /** Our lease's PublicIPv6, else null. */
    publicIPv6: string | null;
  };
  backend: {
    type: string | null;
    device: string | null;
    deviceUp: boolean | null;
    mtu: number | null;
    /** The IPv6 overlay device (vxlan: flannel-v6.<VNI>) when IPv6 is configured, else null. */
    deviceV6: { name: string; up: boolean; mtu: number | null } | null;
    /**
     * wireguard: how the device is driven, "userspace" (a TUN: wireguard-go over its UAPI socket) or
     * "kernel" (the kernel module's link); null for other backends or no device.
     */
    way?: "userspace" | "kernel" | null;
    /** extension: each command that ran (or was skipped), from the daemon's metrics. */
    commands?: ExtensionCommandStatus[];
  };
  peers: {
    /** Peer leases in the store. */
    leases: number;
    /** Peers whose kernel entries match their lease. */
    programmed: number;
    /** Peer subnets (lease) with a missing or wrong route/ARP/FDB entry. */
    missing: string[];
    /** Kernel routes to pod subnets no lease holds. */
    stale: string[];
    /** flanctl_peers of the daemon, when its metrics were read. */
    daemonPeers: number | null;
    /** The same accounting over the peers' IPv6 subnets, when IPv6 is configured; else null. */
    v6: { leases: number; programmed: number; missing: string[]; stale: string[] } | null;
  };
  reconcile: {
    runs: number | null;
    lastAt: string | null;
    lastSeconds: number | null;
    lastRepairs: number | null;
    repairsTotal: number | null;
    errors: number | null;
  };
  /**
   * masquerade: doctor's masq-rules (iptables mode) or nft-rules (nftables mode, both families);
   * masqueradeV6: ip6tables-masq in iptables mode with IPv6, else null.
   */
  rules: {
    masquerade: string;
    forward: string;
    ok: boolean;
    mode: "iptables" | "nftables";
    masqueradeV6: string | null;
  };
  health: { address: string | null; healthz: number | null; readyz: number | null; metrics: boolean };
  /**
   * NetworkPolicy enforcement as the daemon's /metrics report it (`--network-policy`); absent when the
   * daemon does not enforce policy (or its metrics were not read).
   */
  networkPolicy?: {
    enforcing: boolean;
    policies: number;
    isolatedPods: number;
    rules: number;
    repairs: number;
    /** Packets dropped by policy isolation, both directions, summed over policies' shares. */
    dropsByPolicy: Record<string, { ingress: number; egress: number }>;
  };
  /**
   * The host's neighbour tables as the kernel accounts them (RTM_GETNEIGHTBL): host-wide, shared by
   * every namespace; IPv4's, and IPv6's when IPv6 is configured. null when they could not be read.
   */
  neighbours: StatusNeighTable[] | null;
}

/** One neighbour table in {@link StatusJson}: its entries, thresholds and overflow counters (since boot). */
export interface StatusNeighTable {
  table: string;
  family: 4 | 6;
  entries: number;
  gcThresh1: number;
  gcThresh2: number;
  gcThresh3: number;
  tableFulls: number;
  forcedGcRuns: number;
}

/** One extension command's runs by result and its last result (`status`). */
export interface ExtensionCommandStatus {
  command: string;
  ok: number;
  failed: number;
  timeout: number;
  /** Events skipped before a run (BackendData not a JSON string). */
  skipped: number;
  /** The last run's result, null when it never ran. */
  last: "ok" | "failed" | null;
}

const EXTENSION_COMMANDS = [
  "PreStartupCommand",
  "PostStartupCommand",
  "SubnetAddCommand",
  "SubnetRemoveCommand",
];

/**
 * The extension commands from the daemon's metrics (flanctl_extension_commands_total and the last run's
 * timestamp): those that ran or were skipped, in flanneld's order; undefined when the daemon has none.
 */
export function extensionCommands(metrics: Map<string, number> | null): ExtensionCommandStatus[] | undefined {
  if (!metrics) return undefined;
  const out: ExtensionCommandStatus[] = [];
  for (const command of EXTENSION_COMMANDS) {
    const get = (r: string) =>
      metrics.get(`flanctl_extension_commands_total{command="${command}",result="${r}"}`);
    if (get("ok") === undefined) return undefined;
    const [ok, failed, timeout, skipped] = ["ok", "failed", "timeout", "skipped"].map((r) => get(r) ?? 0);
    const last = (r: string) =>
      metrics.has(`flanctl_extension_command_last_run_timestamp_seconds{command="${command}",result="${r}"}`);
    if (ok + failed + timeout + skipped === 0) continue;
    out.push({
      command,
      ok,
      failed,
      timeout,
      skipped,
      last: last("ok") ? "ok" : last("failed") ? "failed" : null,
    });
  }
  return out;
}

/** Prometheus text → name (with labels) → value. */
export function parseMetrics(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    const v = Number(line.slice(i + 1));
    if (i > 0 && Number.isFinite(v)) m.set(line.slice(0, i), v);
  }
  return m;
}

/** GET `url` from inside the checked namespace: status code (null: no answer) and body. */
async function httpGet(ctx: NodeSnapshot, url: string): Promise<{ code: number | null; body: string }> {
  const r = await get(ctx.opts.netns, url);
  return { code: r.status, body: r.body };
}

/** One family's view for {@link peerAccounting}. */
interface Family {
  family: 4 | 6;
  dev: LinkInfo | null;
  peers: Lease[];
  subnet: (l: Lease) => string;
  gw: (l: Lease) => string;
  pub: (l: Lease) => string;
  mac: (l: Lease) => string | null;
  known: Set<string | undefined>;
  net: IPNet | null;
  own: IPNet | null;
}

function v4Family(ctx: NodeSnapshot): Family {
  // udp leases carry no BackendType (as flannel's): every peer counts there.
  const udp = ctx.backendType === "udp";
  return {
    family: 4,
    dev: backendDevice(ctx),
    // alloc, extension: nothing is programmed for any peer, so none can be missing.
    peers: ctx.programsPeers ? ctx.peerLeases().filter((l) => udp || !!l.attrs.BackendType) : [],
    subnet: (l) => l.subnet!.toString(),
    gw: (l) => l.subnet!.ip.toString(),
    pub: (l) => l.attrs.PublicIP,
    mac: (l) => vtepMacOf(l.attrs.BackendData),
    known: new Set(ctx.store.leases.map((l) => l.subnet?.toString())),
    net: ctx.network,
    own: ctx.nodeSubnet,
  };
}

function v6Family(ctx: NodeSnapshot): Family {
  const own = ctx.ownLease(), sub = own6(ctx);
  return {
    family: 6,
    dev: dev6(ctx),
    peers: ctx.store.leases.filter((l) =>
      ctx.programsPeers && l !== own && l.ipv6Subnet && l.attrs.BackendType &&
      !(sub && l.ipv6Subnet.equals(sub))
    ),
    subnet: (l) => l.ipv6Subnet!.toString(),
    gw: (l) => l.ipv6Subnet!.ip.toString(),
    pub: (l) => l.attrs.PublicIPv6 ?? "",
    mac: (l) => vtepMacOf(l.attrs.BackendV6Data),
    known: new Set(ctx.store.leases.map((l) => l.ipv6Subnet?.toString())),
    net: network6(ctx),
    own: sub,
  };
}

/** Peers of one family: programmed (route, and for vxlan neighbour + FDB), missing, stale routes. */
function peerAccounting(
  ctx: NodeSnapshot,
  f: Family,
): { leases: number; programmed: number; missing: string[]; stale: string[] } {
  const routes = (ctx.kernel?.routes ?? []).filter((r) => r.family === f.family && r.table === RT_TABLE_MAIN);
  const dev = f.dev;
  const missing: string[] = [];
  let programmed = 0;
  for (const l of f.peers) {
    const sub = f.subnet(l), gw = f.gw(l), pub = f.pub(l);
    const r = routes.find((r) => r.dst === sub);
    let ok: boolean;
    // udp, wireguard: the route into flannel0 / flannel-wg (wireguard's peers themselves: doctor's wg-peers).
    if (ctx.backendType === "udp" || ctx.backendType === "wireguard") {
      ok = !!r && !!dev && r.dev === dev.index;
    } else if (l.attrs.BackendType === "vxlan" && !(r && r.gateway === pub)) {
      const mac = f.mac(l);
      ok = !!r && !!dev && !!mac && r.gateway === gw && r.dev === dev.index &&
        !!ctx.kernel?.neigh.some((n) =>
          n.index === dev.index && n.dst === gw && n.lladdr?.toLowerCase() === mac
        ) &&
        !!ctx.kernel?.fdb.some((x) => x.index === dev.index && x.mac.toLowerCase() === mac && x.dst === pub);
    } else ok = !!r && r.gateway === pub;
    if (ok) programmed++;
    else missing.push(sub);
  }
  const net = f.net, own = f.own;
  const stale = ctx.store.state !== "ok" ? [] : routes.filter((r) => {
    const n = IPNet.tryParse(r.dst);
    if (!n || !net || !net.contains(n) || n.equals(net) || (own && own.contains(n))) return false;
    // (own.contains: also the kernel route of our own /128 on flannel-v6.)
    return !f.known.has(r.dst) && (r.gateway !== null || (dev !== null && r.dev === dev.index));
  }).map((r) => r.dst);
  return { leases: f.peers.length, programmed, missing, stale };
}

/** The backend device: vxlan's flannel.<VNI>, udp's flannel0 TUN, else (host-gw) the underlay. */
function backendDevice(ctx: NodeSnapshot): LinkInfo | null {
  const t = ctx.backendType;
  if (t === "vxlan" || t === null) return ctx.vxlanDevice();
  if (t === "udp") return ctx.link(UDP_DEVICE);
  if (t === "wireguard") return ctx.link(WG_DEVICE);
  return null;
}

/** Builds the status of the node `ctx` was gathered for. */
export async function nodeStatus(ctx: NodeSnapshot, node: string): Promise<StatusJson> {
  const daemon = await findDaemon(ctx);
  const ep = await readEndpoints(ctx, daemon.health);
  const mv = (k: string) => ep.metrics?.get(k) ?? null;
  const rules = await rulesStatus(ctx);
  return {
    // The name the daemon runs under (in kube mode the Node's name), else the host's or --netns's.
    node: daemon.state?.nodeName ?? node,
    daemon: daemonStatus(daemon),
    store: {
      kind: ctx.store.kind ?? daemon.state?.store?.kind ?? null,
      reachable: ctx.store.state === "ok",
      daemonSeesStore: ep.metrics ? mv("flanctl_store_up") === 1 : null,
      error: ctx.store.state === "ok" ? null : (ctx.store.error ?? ctx.store.hint),
    },
    lease: leaseStatus(ctx, mv),
    backend: { ...backendStatus(ctx), ...withCommands(extensionCommands(ep.metrics)) },
    peers: peersStatus(ctx, mv),
    reconcile: reconcileStatus(mv),
    rules,
    health: { address: daemon.health, healthz: ep.healthz, readyz: ep.readyz, metrics: ep.metrics !== null },
    neighbours: neighStatus(ctx),
    ...(ep.metrics?.has("flanctl_netpol_enforcing") ? { networkPolicy: netpolStatus(ep.metrics) } : {}),
  };
}

/** The daemon's NetworkPolicy metrics (lib/netpol/controller.ts). */
function netpolStatus(m: Map<string, number>): NonNullable<StatusJson["networkPolicy"]> {
  const drops: Record<string, { ingress: number; egress: number }> = {};
  for (const [k, v] of m) {
    const d =
      /^flanctl_netpol_dropped_packets_total\{policy="([a-z0-9.\/-]{1,600})",direction="(ingress|egress)"\}$/
        .exec(k);
    if (!d) continue;
    (drops[d[1]] ??= { ingress: 0, egress: 0 })[d[2] as "ingress" | "egress"] = v;
  }
  return {
    enforcing: m.get("flanctl_netpol_enforcing") === 1,
    policies: m.get("flanctl_netpol_policies") ?? 0,
    isolatedPods: m.get("flanctl_netpol_isolated_pods") ?? 0,
    rules: m.get("flanctl_netpol_rules") ?? 0,
    repairs: m.get("flanctl_netpol_repairs_total") ?? 0,
    dropsByPolicy: drops,
  };
}

/** `{ commands }` when there are some, else nothing (the JSON of other backends stays as it was). */
function withCommands(c: ExtensionCommandStatus[] | undefined): { commands?: ExtensionCommandStatus[] } {
  return c ? { commands: c } : {};
}

/** The neighbour tables of the families in use (IPv6's only when IPv6 is configured). */
function neighStatus(ctx: NodeSnapshot): StatusJson["neighbours"] {
  if (!ctx.neighTables) return null;
  const v6 = network6(ctx) !== null;
  return ctx.neighTables.tables
    .filter((t) => t.family === 4 ? !ctx.ipv4Disabled : v6)
    .map((t) => ({
      table: t.name,
      family: t.family,
      entries: t.entries,
      gcThresh1: t.gcThresh1,
      gcThresh2: t.gcThresh2,
      gcThresh3: t.gcThresh3,
      tableFulls: t.tableFulls,
      forcedGcRuns: t.forcedGcRuns,
    }));
}

/** What is known of the daemon: its state file (if readable) and whether its process runs. */
interface DaemonFound {
  state: DaemonStateFile | null;
  /** The state file's process runs (null: it lives in another pid namespace and could not be told). */
  running: boolean | null;
  /** A daemon process found by a scan when there is no state file. */
  scan: { pid: number; cmd: string } | null;
  detail: string;
  /** Its health address, when it runs and has one. */
  health: string | null;
}

/** The daemon: its state file says whether it runs; without one, a process scan does. */
async function findDaemon(ctx: NodeSnapshot): Promise<DaemonFound> {
  const path = daemonStatePath(ctx.opts.subnetFile);
  let state: DaemonStateFile | null = null;
  // An unreadable or malformed state file counts as none, but the detail says what is wrong with it.
  let noState = `no ${path}`;
  try {
    state = readDaemonState(path);
  } catch (e) {
    if (!(e instanceof DaemonStateError)) throw e;
    noState = e.message;
  }
  let running = state ? daemonRunning(state) : false;
  let elsewhere = "";
  if (running === null && state) {
    // The daemon lives in another pid namespace (a container): its endpoint, else a process here, says.
    running = state.health
      ? (await httpGet(ctx, `http://${state.health}/healthz`)).code === 200
      : scanForDaemon(ctx) !== null;
    elsewhere = " in another pid namespace";
  }
  const scan = !state ? scanForDaemon(ctx) : null;
  const detail = state
    ? (running
      ? `running${elsewhere} (${path})`
      : `not running: pid ${state.pid}${elsewhere} from ${path} is gone (killed or crashed)`)
    : scan
    ? `running (process scan: ${scan.cmd}; ${noState})`
    : `not running (${noState}, no daemon process)`;
  return { state, running, scan, detail, health: running ? state?.health ?? null : null };
}

/** The daemon's section of the view. */
function daemonStatus(d: DaemonFound): StatusJson["daemon"] {
  const { state, running, scan } = d;
  const startedAt = running && state?.startedAt ? state.startedAt : null;
  return {
    running: running || !!scan,
    pid: running ? state!.pid : scan?.pid ?? null,
    version: running ? state!.version : null,
    startedAt,
    uptimeSeconds: startedAt ? Math.max(0, Math.round((Date.now() - Date.parse(startedAt)) / 1000)) : null,
    source: state ? "state-file" : scan ? "process" : "none",
    detail: d.detail,
  };
}

/** The daemon's endpoints at `health`: /healthz and /readyz codes, /metrics parsed (null: not read). */
async function readEndpoints(ctx: NodeSnapshot, health: string | null): Promise<{
  metrics: Map<string, number> | null;
  healthz: number | null;
  readyz: number | null;
}> {
  if (!health) return { metrics: null, healthz: null, readyz: null };
  const healthz = (await httpGet(ctx, `http://${health}/healthz`)).code;
  const readyz = (await httpGet(ctx, `http://${health}/readyz`)).code;
  const m = await httpGet(ctx, `http://${health}/metrics`);
  return { metrics: m.code === 200 ? parseMetrics(m.body) : null, healthz, readyz };
}

/** A daemon metric's value, null when it was not read. */
type MetricValue = (name: string) => number | null;

/** Our lease (both families) and the daemon's renewal counters. */
function leaseStatus(ctx: NodeSnapshot, mv: MetricValue): StatusJson["lease"] {
  const own = ctx.ownLease();
  const net6 = network6(ctx);
  return {
    subnet: ctx.nodeSubnet?.toString() ?? null,
    publicIP: own?.attrs.PublicIP ?? null,
    expiration: own ? (own.expiration?.toISOString() ?? "never") : null,
    renewals: mv("flanctl_lease_renewals_total"),
    renewalErrors: mv("flanctl_lease_renewal_errors_total"),
    ipv6Subnet: net6 ? own6(ctx)?.toString() ?? null : null,
    publicIPv6: net6 ? own?.attrs.PublicIPv6 ?? null : null,
  };
}

/** The backend's device (vxlan's flannel.<VNI>, udp's flannel0, host-gw's underlay) and the IPv6 one. */
export function backendStatus(ctx: NodeSnapshot): StatusJson["backend"] {
  const dev = backendDevice(ctx);
  const overlay = ctx.backendType === "vxlan" || ctx.backendType === "udp" || ctx.backendType === "wireguard";
  const v6 = network6(ctx) && ctx.backendType === "vxlan";
  const d6 = v6 ? dev6(ctx) : null;
  return {
    type: ctx.backendType,
    device: dev?.name ??
      (ctx.backendType === "vxlan"
        ? ctx.vxlanName
        : ctx.backendType === "udp"
        ? UDP_DEVICE
        : ctx.backendType === "wireguard"
        ? WG_DEVICE
        : ctx.underlay()?.link.name ?? null),
    deviceUp: dev ? dev.up : (overlay ? false : ctx.underlay()?.link.up ?? null),
    mtu: dev?.mtu ?? ctx.subnetEnv?.mtu ?? null,
    deviceV6: v6 ? { name: d6?.name ?? dev6Name(ctx), up: d6?.up ?? false, mtu: d6?.mtu ?? null } : null,
    ...(ctx.backendType === "wireguard"
      ? {
        way: dev?.kind === "tun"
          ? "userspace" as const
          : dev?.kind === "wireguard"
          ? "kernel" as const
          : null,
      }
      : {}),
  };
}

/** The peers of both families against the kernel, and the daemon's own count. */
function peersStatus(ctx: NodeSnapshot, mv: MetricValue): StatusJson["peers"] {
  const { leases: _l, ...peers } = peerAccounting(ctx, v4Family(ctx));
  const peers6 = network6(ctx) ? peerAccounting(ctx, v6Family(ctx)) : null;
  return { leases: ctx.peerLeases().length, ...peers, daemonPeers: mv("flanctl_peers"), v6: peers6 };
}

/** The daemon's reconcile counters (the last pass's numbers only once there was one). */
function reconcileStatus(mv: MetricValue): StatusJson["reconcile"] {
  const lastAt = mv("flanctl_last_reconcile_timestamp_seconds");
  return {
    runs: mv("flanctl_reconcile_runs_total"),
    lastAt: lastAt ? new Date(lastAt * 1000).toISOString() : null,
    lastSeconds: lastAt ? mv("flanctl_last_reconcile_duration_seconds") : null,
    lastRepairs: lastAt ? mv("flanctl_last_reconcile_repairs") : null,
    repairsTotal: mv("flanctl_reconcile_repairs_total"),
    errors: mv("flanctl_reconcile_errors_total"),
  };
}

/**
 * The rules: in nftables mode one check (nft-rules) covers both families' tables; in iptables mode IPv6
 * is its own (ip6tables-masq).
 */
async function rulesStatus(ctx: NodeSnapshot): Promise<StatusJson["rules"]> {
  const nft = nftablesMode(ctx);
  const masq = (await (nft ? nftRules : masqRules).run(ctx))[0];
  const fwd = (await forwardPolicy.run(ctx))[0];
  const masq6 = !nft && network6(ctx) ? (await ip6tablesMasq.run(ctx))[0] : null;
  return {
    masquerade: `${masq.severity}: ${masq.detail}`,
    forward: `${fwd.severity}: ${fwd.detail}`,
    ok: masq.severity === "ok" && fwd.severity === "ok" && (!masq6 || masq6.severity === "ok"),
    mode: nft ? "nftables" : "iptables",
    masqueradeV6: masq6 ? `${masq6.severity}: ${masq6.detail}` : null,
  };
}
