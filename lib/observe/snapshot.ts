/**
 * The node snapshot: what a node looks like now, gathered ONCE per run and read by `flanctl doctor` (its
 * checks), `flanctl trace`, `flanctl status` and the doctor's bundle — the kernel objects (links, addresses,
 * routes, neighbours, FDB) through the netlink layer, the neighbour tables, the sysctls of the checked
 * namespace, iptables-save output and the nft ruleset, subnet.env, pod namespaces, and the leases and
 * network config from the store when one is reachable (lib/observe/probes.ts holds the reads its readers
 * share). What one doctor check alone needs it reads itself (`Check.run`, lib/doctor/types.ts).
 * @module
 */
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, NeighTableInfo, RouteInfo } from "../netlink/types.ts";
import type { Lease, SubnetStore } from "../store/types.ts";
import type { NetConfig } from "../config/types.ts";
import { readSubnetEnv, type SubnetEnv } from "../node/subnet_env.ts";
import type { IPNet } from "../base/cidr.ts";
import { PeerGuard, type PeerLike } from "../reconcile/peer_guard.ts";
import { keyOf } from "../lease/wire.ts";
import { NsExec } from "./exec.ts";
import { IpCliReader, type KernelReader } from "./kernel_ip.ts";
import { openKernel } from "./kernel.ts";
import { openNetlink, readNeighTables, RT_TABLE_MAIN } from "../netlink/mod.ts";
import { inNetns, netnsPath, nftLibrary } from "../os/mod.ts";
import { withStoreTimeout } from "../store/util.ts";
import type { NetnsRef } from "../netlink/types.ts";
import { listVethPairs } from "./veths.ts";
import { permanentEntries } from "./neigh_gc.ts";
import { FileStoreReader } from "../store/file/file_reader.ts";
import { CappedReadError, readCappedText } from "../base/capped_read.ts";
import { shellQuote } from "../base/shell.ts";
export { DEFAULT_PATHS } from "./paths.ts";

/** Options of one snapshot (paths default to the standard node locations). */
export interface SnapshotOptions {
  /** Namespace to check (`--netns`), null for the current one. */
  netns: string | null;
  /** subnet.env path. */
  subnetFile: string;
  /** CNI config dir (/etc/cni/net.d). */
  cniConfDir: string;
  /** CNI plugin dir (/opt/cni/bin). */
  cniBinDir: string;
  /** host-local data dir (/var/lib/cni/networks). */
  hostLocalDir: string;
  /** flannel CNI data dir (/var/lib/cni/flannel). */
  flannelDataDir: string;
  /** libcni result cache (/var/lib/cni/results). */
  cniResultsDir: string;
  /** Name prefix of pod namespaces created by the runtime (`cni-` for containerd/CRI-O). */
  podNetnsPrefix: string;
  /** Readiness URL of the daemon, or null (not checked). */
  readyzUrl: string | null;
  /** Run active probes (ping peers). */
  probe: boolean;
  /** Opens the store, or null when there is none to ask. */
  openStore: (() => Promise<SubnetStore>) | null;
  /** True when store flags were given explicitly (then an unreachable store is exit 3). */
  storeExplicit: boolean;
  /** Check ids to skip. */
  skip: Set<string>;
  /**
   * The runtime's CRI socket to compare IPs, veths and saved configs with (lib/doctor/checks/sandboxes.ts):
   * undefined looks for containerd's and CRI-O's default sockets; null or "" does not ask.
   */
  criSocket?: string | null;
  /** Where the WireGuard UAPI sockets are (default /var/run/wireguard; a lab node's own dir). */
  wgSocketDir?: string;
}

/** The kernel objects of the checked namespace. */
export interface KernelSnapshot {
  links: LinkInfo[];
  addrs: AddrInfo[];
  routes: RouteInfo[];
  neigh: NeighInfo[];
  fdb: FdbInfo[];
  /** Which layer produced it ("netlink" or "ip -j"). */
  source: string;
}

/** One iptables-save flavour's output. */
export interface IptDump {
  /** The command that produced it. */
  cmd: string;
  /** Its text, or null when the command is missing or failed. */
  text: string | null;
  error: string | null;
}

/** A pod namespace reached through a veth on cni0. */
export interface PodNetns {
  /** Name under /var/run/netns. */
  name: string;
  /** Its IPv4/IPv6 addresses (without prefix) on every interface but lo. */
  ips: string[];
  /** MTU of its end of the veth (usually eth0), or null. */
  mtu: number | null;
  /** Name of its end of the veth. */
  ifname: string | null;
}

/** The state of the store as seen by this run. */
export interface StoreView {
  /** "none" (no store configured/found), "ok", "error". */
  state: "none" | "ok" | "error";
  kind: string | null;
  /** Live leases (expired ones are in `expired`). */
  leases: Lease[];
  /** Leases past their expiration that the store still holds. */
  expired: Lease[];
  /** Lease entries that could not be parsed. */
  malformed: string[];
  config: NetConfig | null;
  error: string | null;
  /** Why there is no store (for hints). */
  hint: string | null;
  /** Kube store: this node's Node as the daemon's credentials read it (name, podCIDRs), or why not. */
  node?: { name: string; podCIDRs: string[]; cidrEvents: string[] | null } | { error: string };
  /**
   * Kube store: the net-conf of the kube-flannel ConfigMap as the daemon's credentials read it from the API
   * (`where` names it), or why not. `config` is it when `--net-config-path` cannot be read (on the host).
   */
  configMap?: { where: string; config: NetConfig } | { error: string };
}

/** Sysctl paths read for every run (interface-specific ones are added from the link list). */
const FIXED_SYSCTLS = [
  "/proc/sys/net/ipv4/ip_forward",
  "/proc/sys/net/ipv4/conf/all/forwarding",
  "/proc/sys/net/ipv4/conf/all/rp_filter",
  "/proc/sys/net/ipv4/conf/default/rp_filter",
  "/proc/sys/net/ipv6/conf/all/forwarding",
  "/proc/sys/net/ipv6/conf/all/disable_ipv6",
  "/proc/sys/net/ipv6/conf/default/disable_ipv6",
  "/proc/sys/net/bridge/bridge-nf-call-iptables",
  "/proc/sys/net/bridge/bridge-nf-call-ip6tables",
  "/proc/sys/net/netfilter/nf_conntrack_count",
  "/proc/sys/net/netfilter/nf_conntrack_max",
  "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
  "/proc/sys/net/ipv6/neigh/default/gc_thresh3",
];

/** Gathered node state. Construct with {@link gatherSnapshot}. */
export class NodeSnapshot {
  /** Run options. */
  readonly opts: SnapshotOptions;
  /** Command runner in the checked namespace. */
  readonly exec: NsExec;
  /** Kernel snapshot, or null with `kernelError`. */
  kernel: KernelSnapshot | null = null;
  kernelError: string | null = null;
  /** Sysctl values by /proc/sys path (null = missing). */
  sysctls: Map<string, string | null> = new Map();
  /** subnet.env contents, or null with `subnetEnvError`. */
  subnetEnv: SubnetEnv | null = null;
  subnetEnvError: string | null = null;
  subnetEnvMissing = false;
  /** Set when subnet.env exists but cannot be read safely (a FIFO, a device, far too large): the reason. */
  subnetEnvUnreadable: string | null = null;
  /** Set when subnet.env is a symlink the readers refuse (pointing outside its directory). */
  subnetEnvSymlink = false;
  /** iptables-save (the default flavour), iptables-legacy-save, iptables-nft-save. */
  ipt: { main: IptDump; legacy: IptDump; nft: IptDump; variant: string | null } = {
    main: { cmd: "iptables-save", text: null, error: null },
    legacy: { cmd: "iptables-legacy-save", text: null, error: null },
    nft: { cmd: "iptables-nft-save", text: null, error: null },
    variant: null,
  };
  /** `nft list ruleset` (text) and its JSON form (with rule handles), or the error. */
  nftRuleset: { text: string | null; json: unknown; error: string | null } = {
    text: null,
    json: null,
    error: null,
  };
  /** ip6tables-save output (for the IPv6 checks in checks/ipv6.ts). */
  ip6t: IptDump = { cmd: "ip6tables-save", text: null, error: "not read" };
  /** Store state. */
  store: StoreView = {
    state: "none",
    kind: null,
    leases: [],
    expired: [],
    malformed: [],
    config: null,
    error: null,
    hint: null,
  };
  /**
   * Host veth on cni0 → its peer: namespace label (a name under /var/run/netns, "pid:PID" for an unnamed
   * one, "nsid:N" when it could not be found, or the checked netns itself / null when it is local) and
   * the peer's ifindex there.
   */
  vethPeers: Map<string, { netns: string | null; ifindex: number }> = new Map();
  /** How veths were paired. */
  pairing = "";
  /** Pod namespaces reached through cni0's veths, by name. */
  pods: Map<string, PodNetns> = new Map();
  /** Every name under /var/run/netns. */
  namedNetns: string[] = [];
  /** Fatal problems that make the whole run "could not check" (exit 3). */
  fatal: string[] = [];
  /**
   * The host's neighbour tables (RTM_GETNEIGHTBL: host-wide entries, thresholds, counters) as first read
   * while gathering, with the time of the read (ms); null with `neighTablesError` when unreadable.
   */
  neighTables: { at: number; tables: NeighTableInfo[] } | null = null;
  neighTablesError: string | null = null;
  /** Permanent neighbour entries of a family in the host's named namespaces (exempt from gc); tests fake it. */
  neighPermanent: (family: 4 | 6) => number = (family) => permanentEntries(family);
  /** Reads the neighbour tables now (the neigh-gc check reads twice to see counters grow); tests fake it. */
  readNeighTables: () => NeighTableInfo[] = () => {
    const h = openNetlink(this.opts.netns === null ? null : { name: this.opts.netns });
    try {
      return readNeighTables(h);
    } finally {
      h.close();
    }
  };

  constructor(opts: SnapshotOptions) {
    this.opts = opts;
    this.exec = new NsExec(opts.netns);
  }

  /** `cmd` as the operator should type it: prefixed with `ip netns exec NS` when checking a netns. */
  cmd(cmd: string): string {
    return this.opts.netns ? `ip netns exec ${shellQuote(this.opts.netns)} ${cmd}` : cmd;
  }

  /** A sysctl value (trimmed) or null. */
  sysctl(path: string): string | null {
    return this.sysctls.get(path.startsWith("/") ? path : `/proc/sys/${path.replaceAll(".", "/")}`) ?? null;
  }

  /** The link with this name or index, or null. */
  link(ref: string | number | null | undefined): LinkInfo | null {
    if (ref === null || ref === undefined || !this.kernel) return null;
    return this.kernel.links.find((l) => typeof ref === "number" ? l.index === ref : l.name === ref) ?? null;
  }

  /** Backend type from the network config; inferred from the kernel when there is no store. */
  get backendType(): string | null {
    if (this.store.config) return this.store.config.backend.type;
    if (this.vxlanDevice()) return "vxlan";
    return null;
  }

  /** False for the backends without a data plane (alloc, extension): no peer route or entry is expected. */
  get programsPeers(): boolean {
    const t = this.backendType;
    return t !== "alloc" && t !== "extension";
  }

  /** VNI from the config (default 1) or the name of an existing flannel.N device. */
  get vni(): number {
    const raw = this.store.config?.backend.raw;
    const v = raw ? pickCI(raw, "VNI") : undefined;
    if (typeof v === "number") return v;
    if (!this.store.config) {
      const dev = this.kernel?.links.find((l) => /^flannel\.\d+$/.test(l.name) && l.kind === "vxlan");
      if (dev) return Number(dev.name.split(".")[1]);
    }
    return 1;
  }

  /** The configured VXLAN UDP port (config `Port`, else the kernel default 8472). */
  get vxlanPort(): number {
    const raw = this.store.config?.backend.raw;
    const v = raw ? pickCI(raw, "Port") : undefined;
    return typeof v === "number" && v > 0 ? v : 8472;
  }

  /** True when DirectRouting is on in the config. */
  get directRouting(): boolean {
    const raw = this.store.config?.backend.raw;
    return raw ? pickCI(raw, "DirectRouting") === true : false;
  }

  /** Name of flannel's VXLAN device (`flannel.<VNI>`). */
  get vxlanName(): string {
    return `flannel.${this.vni}`;
  }

  /** flannel's VXLAN device, or null. */
  vxlanDevice(): LinkInfo | null {
    return this.link(this.vxlanName);
  }

  /** The node subnet: from subnet.env, else from our own lease. */
  get nodeSubnet(): IPNet | null {
    return this.subnetEnv?.subnet?.net ?? this.ownLease()?.subnet ?? null;
  }

  /** The cluster network: from the config, else subnet.env. */
  get network(): IPNet | null {
    return this.store.config?.network ?? this.subnetEnv?.network ?? null;
  }

  /** Every local IP address (all interfaces). */
  localIPs(): Set<string> {
    return new Set((this.kernel?.addrs ?? []).map((a) => a.local));
  }

  /** This node's lease: the one for the subnet.env subnet, else the one whose PublicIP is local. */
  ownLease(): Lease | null {
    const sub = this.subnetEnv?.subnet?.net;
    if (sub) {
      const l = this.store.leases.find((l) => l.subnet?.equals(sub));
      if (l) return l;
    }
    // IPv6-only: the lease of the subnet.env IPv6 subnet, else the one whose PublicIPv6 is local.
    const sub6 = this.subnetEnv?.ipv6Subnet?.net;
    const l6 = sub6 ? this.store.leases.find((l) => l.ipv6Subnet?.equals(sub6)) : undefined;
    if (l6) return l6;
    const local = this.localIPs();
    return this.store.leases.find((l) => local.has(l.attrs.PublicIP)) ??
      (this.ipv4Disabled
        ? this.store.leases.find((l) => !!l.attrs.PublicIPv6 && local.has(l.attrs.PublicIPv6))
        : undefined) ??
      null;
  }

  /** True in an IPv6-only network (EnableIPv4 false, or a subnet.env with only the IPv6 lines). */
  get ipv4Disabled(): boolean {
    if (this.store.config) return !this.store.config.enableIPv4;
    return !!this.subnetEnv?.ipv6Network && !this.subnetEnv.network;
  }

  /** Our lease among the expired ones (same rules as {@link ownLease}), or null. */
  ownExpiredLease(): Lease | null {
    const sub = this.subnetEnv?.subnet?.net;
    const local = this.localIPs();
    return this.store.expired.find((l) => sub && l.subnet?.equals(sub)) ??
      this.store.expired.find((l) => local.has(l.attrs.PublicIP)) ?? null;
  }

  #peers: Lease[] | null = null;

  /**
   * Leases of the other nodes (IPv4) that the daemon accepts as peers: those its peer checks
   * (lib/reconcile/peer_guard.ts) refuse get no kernel entries, so none are expected for them (a lease
   * overlapping another is reported by lease-unique).
   */
  peerLeases(): Lease[] {
    if (this.#peers) return this.#peers;
    const own = this.ownLease();
    const sub = this.nodeSubnet;
    const all = this.store.leases.filter((l) => l !== own && l.subnet && !(sub && l.subnet.equals(sub)));
    const net = this.network;
    if (!net || !sub || net.family !== 4) return this.#peers = all;
    const subnetLen = this.store.kind === "kube" ? sub.prefix : this.store.config?.subnetLen ?? sub.prefix;
    const guard = new PeerGuard<PeerLike & { lease: Lease }>(
      { network: net, subnetLen, own: sub, ownIPs: [...this.localIPs()].filter((ip) => !ip.includes(":")) },
      () => {},
    );
    guard.reset(all.map((l) => ({
      id: l.node !== undefined ? `node ${l.node}` : keyOf(l),
      created: l.created,
      peer: {
        subnet: l.subnet!,
        publicIP: l.attrs.PublicIP,
        backendType: l.attrs.BackendType,
        backendData: l.attrs.BackendData,
        lease: l,
      },
    })));
    const ok = new Set([...guard.entries()].map(([, p]) => p.lease));
    return this.#peers = all.filter((l) => ok.has(l));
  }

  /**
   * The underlay interface and how it was found: the VXLAN device's `dev`, else the interface holding
   * our lease's PublicIP or the VXLAN `local` address, else the default route's interface.
   */
  underlay(): { link: LinkInfo; how: string } | null {
    const vx = this.vxlanDevice();
    if (vx?.vxlan?.dev) {
      const l = this.link(vx.vxlan.dev);
      if (l) return { link: l, how: `dev of ${vx.name}` };
    }
    const byAddr = (ip: string | null | undefined, how: string) => {
      if (!ip) return null;
      const a = this.kernel?.addrs.find((a) => a.local === ip);
      const l = a ? this.link(a.index) : null;
      return l ? { link: l, how } : null;
    };
    const r = byAddr(this.ownLease()?.attrs.PublicIP, "holds the lease's PublicIP") ??
      byAddr(vx?.vxlan?.local, `holds ${vx?.name} local address`);
    if (r) return r;
    const def = this.kernel?.routes.find((r) =>
      r.family === 4 && r.dst === "default" && r.table === RT_TABLE_MAIN
    );
    const l = this.link(def?.dev);
    return l ? { link: l, how: "default route" } : null;
  }

  /** Host veths that are ports of cni0. */
  cni0Veths(): LinkInfo[] {
    const br = this.link("cni0");
    if (!br || !this.kernel) return [];
    return this.kernel.links.filter((l) => l.kind === "veth" && l.master === br.index);
  }

  /** Text of ip6tables-save's table `name`, or "". */
  ip6tTable(name: string): string {
    return this.iptTable(name, this.ip6t);
  }

  /** Text of iptables-save's table `name` (`*nat` … `COMMIT`) from `dump`, or "". */
  iptTable(name: string, dump = this.ipt.main): string {
    const t = dump.text ?? "";
    const start = t.indexOf(`*${name}\n`);
    if (start < 0) return "";
    const end = t.indexOf("\nCOMMIT", start);
    return t.slice(start, end < 0 ? undefined : end);
  }
}

/** Case-insensitive key lookup (net-conf fields are matched that way). */
export function pickCI(o: Record<string, unknown>, key: string): unknown {
  if (Object.hasOwn(o, key)) return o[key];
  const k = Object.keys(o).find((k) => k.toLowerCase() === key.toLowerCase());
  return k === undefined ? undefined : o[k];
}

/** Gathers the whole context. Never throws for node problems; records them for the checks. */
export async function gatherSnapshot(opts: SnapshotOptions): Promise<NodeSnapshot> {
  const ctx = new NodeSnapshot(opts);
  if (opts.netns !== null) {
    try {
      Deno.statSync(netnsPath({ name: opts.netns })); // a malformed name throws: not found either
    } catch {
      ctx.fatal.push(`network namespace '${opts.netns}' not found (see 'ip netns list')`);
      return ctx;
    }
  }
  gatherNeighTables(ctx);
  await gatherKernel(ctx);
  await gatherSysctls(ctx);
  gatherSubnetEnv(ctx);
  await gatherIptables(ctx);
  await gatherNft(ctx);
  await gatherPods(ctx);
  await gatherStore(ctx);
  return ctx;
}

/** First read of the host's neighbour tables (the neigh-gc check reads them again later). */
export function gatherNeighTables(ctx: NodeSnapshot): void {
  try {
    ctx.neighTables = { at: Date.now(), tables: ctx.readNeighTables() };
  } catch (e) {
    ctx.neighTablesError = (e as Error).message;
  }
}

async function gatherKernel(ctx: NodeSnapshot): Promise<void> {
  const read = (reader: KernelReader, source: string): KernelSnapshot => {
    try {
      return {
        links: reader.links(),
        addrs: reader.addrs(),
        routes: reader.routes(),
        neigh: reader.neighbours(),
        fdb: reader.fdb(),
        source,
      };
    } finally {
      reader.close();
    }
  };
  let nlError: string;
  try {
    ctx.kernel = read(openKernel(ctx.opts.netns), "netlink");
    return;
  } catch (e) {
    nlError = (e as Error).message;
  }
  // The netlink layer failed (libnl missing, or a dump error): iproute2 gives the same views, so the
  // doctor still reports on a node whose FFI layer is broken.
  try {
    ctx.kernel = read(await IpCliReader.load(ctx.exec), `ip -j (netlink layer failed: ${nlError})`);
  } catch (e) {
    ctx.kernelError = `${(e as Error).message} (netlink: ${nlError})`;
    if (/Operation not permitted|EPERM|permission/i.test(ctx.kernelError)) {
      ctx.fatal.push(`cannot read kernel state: ${ctx.kernelError} (run as root)`);
    }
  }
}

async function gatherSysctls(ctx: NodeSnapshot): Promise<void> {
  const paths = [...FIXED_SYSCTLS];
  for (const l of ctx.kernel?.links ?? []) {
    for (const k of ["forwarding", "rp_filter"]) paths.push(`/proc/sys/net/ipv4/conf/${l.name}/${k}`);
    for (const k of ["accept_ra", "disable_ipv6"]) paths.push(`/proc/sys/net/ipv6/conf/${l.name}/${k}`);
  }
  ctx.sysctls = await ctx.exec.readFiles(paths);
  // Neighbour gc thresholds exist only in the initial namespace; the limit is global. With --netns this
  // process still runs in the namespace it started in (usually the initial one): read them here.
  for (const fam of ["ipv4", "ipv6"]) {
    const p = `/proc/sys/net/${fam}/neigh/default/gc_thresh3`;
    if (ctx.sysctls.get(p) === null && ctx.opts.netns !== null) {
      try {
        ctx.sysctls.set(p, readCappedText(p, 64 * 1024).trim());
      } catch { /* stays null */ }
    }
  }
}

function gatherSubnetEnv(ctx: NodeSnapshot): void {
  try {
    Deno.statSync(ctx.opts.subnetFile);
  } catch {
    ctx.subnetEnvMissing = true;
  }
  try {
    ctx.subnetEnv = readSubnetEnv(ctx.opts.subnetFile);
  } catch (e) {
    ctx.subnetEnvError = (e as Error).message;
    const cause = (e as Error).cause;
    if (cause instanceof CappedReadError) {
      ctx.subnetEnvUnreadable = (e as Error).message;
      ctx.subnetEnvSymlink = cause.reason === "symlink";
    }
  }
}

async function gatherIptables(ctx: NodeSnapshot): Promise<void> {
  for (const d of [ctx.ipt.main, ctx.ipt.legacy, ctx.ipt.nft]) {
    const r = await ctx.exec.run([d.cmd]);
    if (r.code === 0) d.text = r.stdout;
    else d.error = r.code === null ? `${d.cmd} not installed` : r.stderr.trim() || `exit ${r.code}`;
  }
  const r6 = await ctx.exec.run([ctx.ip6t.cmd]);
  if (r6.code === 0) [ctx.ip6t.text, ctx.ip6t.error] = [r6.stdout, null];
  else {ctx.ip6t.error = r6.code === null
      ? `${ctx.ip6t.cmd} not installed`
      : r6.stderr.trim() || `exit ${r6.code}`;}
  const v = await ctx.exec.run(["iptables", "--version"]);
  const m = /\((nf_tables|legacy)\)/.exec(v.stdout);
  ctx.ipt.variant = m ? m[1] : null;
}

/**
 * The nftables ruleset through libnftables (in the checked namespace), else the nft binary: the whole
 * ruleset as JSON, and as text flannel's own tables only. (Text listing of iptables-nft's tables makes
 * libnftables print `XT target MASQUERADE not found` on our stderr for every xt rule; JSON does not.)
 */
async function gatherNft(ctx: NodeSnapshot): Promise<void> {
  const lib = nftLibrary();
  const read = async (cmd: string, json: boolean): Promise<{ out: string | null; err: string | null }> => {
    if (lib) {
      const r = ctx.opts.netns
        ? inNetns({ name: ctx.opts.netns }, () => lib.run(cmd, { json }))
        : lib.run(cmd, { json });
      return r.rc === 0 ? { out: r.output, err: null } : { out: null, err: r.error.trim() };
    }
    const r = await ctx.exec.run(["nft", ...(json ? ["-j"] : []), ...cmd.split(" ")]);
    if (r.code === 0) return { out: r.stdout, err: null };
    return {
      out: null,
      err: r.code === null ? "nft not installed (Debian package nftables)" : r.stderr.trim(),
    };
  };
  const tables = await read("list tables", false);
  let text = tables.out;
  if (text !== null) {
    const ours = text.split("\n").map((l) => l.trim())
      .filter((l) => l === "table ip flannel-ipv4" || l === "table ip6 flannel-ipv6");
    const parts = await Promise.all(ours.map((t) => read(`list ${t}`, false)));
    text = parts.some((p) => p.out === null) ? null : parts.map((p) => p.out).join("");
    tables.err ??= parts.find((p) => p.err)?.err ?? null;
  }
  const j = await read("list ruleset", true);
  ctx.nftRuleset.text = text;
  ctx.nftRuleset.error = tables.err ?? j.err;
  try {
    ctx.nftRuleset.json = j.out ? JSON.parse(j.out) : null;
  } catch { /* text is enough for most checks */ }
}

async function gatherPods(ctx: NodeSnapshot): Promise<void> {
  try {
    ctx.namedNetns = [...Deno.readDirSync("/var/run/netns")].map((e) => e.name).sort();
  } catch { /* none */ }
  const veths = ctx.cni0Veths();
  if (veths.length === 0) return;
  // Pairing through the kernel layer (RTM_GETNSID against every namespace on the host); when it fails,
  // `ip netns list-id` maps the veths' link-netnsids to names under /var/run/netns.
  try {
    for (const p of listVethPairs({ netns: ctx.opts.netns })) {
      ctx.vethPeers.set(p.name, { netns: p.peer.netns, ifindex: p.peer.ifindex });
    }
    ctx.pairing = "netlink";
  } catch (e) {
    ctx.pairing = `ip netns list-id (netlink pairing failed: ${(e as Error).message})`;
    const names = new Map<number, string>();
    const r = await ctx.exec.run(["ip", "-j", "netns", "list-id"]);
    if (r.code === 0 && r.stdout.trim()) {
      for (const e of JSON.parse(r.stdout) as { nsid: number; name?: string }[]) {
        if (e.name) names.set(e.nsid, e.name);
      }
    }
    for (const v of veths) {
      const netns = v.linkNetnsId === null
        ? ctx.opts.netns
        : (names.get(v.linkNetnsId) ?? `nsid:${v.linkNetnsId}`);
      ctx.vethPeers.set(v.name, { netns, ifindex: v.parent ?? 0 });
    }
  }
  for (const v of veths) {
    const peer = ctx.vethPeers.get(v.name);
    const label = peer?.netns;
    if (!peer || !label || label.startsWith("nsid:") || label === ctx.opts.netns || ctx.pods.has(label)) {
      continue;
    }
    const ref: NetnsRef = label.startsWith("pid:") ? { pid: Number(label.slice(4)) } : { name: label };
    try {
      const h = openNetlink(ref);
      try {
        const links = h.links();
        const addrs = h.addrs();
        const peerLink = links.find((l) => l.index === peer.ifindex);
        ctx.pods.set(label, {
          name: label,
          ips: addrs.filter((a) => a.ifname !== "lo").map((a) => a.local),
          mtu: peerLink?.mtu ?? null,
          ifname: peerLink?.name ?? null,
        });
      } finally {
        h.close();
      }
    } catch {
      /* the pod went away while we looked */
    }
  }
}

async function gatherStore(ctx: NodeSnapshot): Promise<void> {
  if (!ctx.opts.openStore) {
    ctx.store.hint = "no store flags given and the default file store (/var/lib/flanctl) does not exist; " +
      "pass --store-dir DIR or --etcd-endpoints URL to check leases";
    return;
  }
  let store: SubnetStore | null = null;
  try {
    store = await withStoreTimeout(ctx.opts.openStore(), 5000, "opening the store");
    ctx.store.kind = store.kind;
    const { leases } = await withStoreTimeout(store.listLeases(), 5000, "listing leases");
    const now = Date.now();
    const dead = (l: Lease) => l.expiration !== null && l.expiration.getTime() <= now;
    ctx.store.leases = leases.filter((l) => !dead(l));
    ctx.store.expired = leases.filter(dead);
    if (store instanceof FileStoreReader) ctx.store.malformed = [...store.malformed];
    try {
      ctx.store.config = await withStoreTimeout(store.getNetworkConfig(), 5000, "reading the network config");
    } catch (e) {
      ctx.store.error = `network config: ${(e as Error).message}`;
    }
    if ("ownNode" in store && typeof store.ownNode === "function") {
      const own = store.ownNode as () => Promise<
        { name: string; podCIDRs: string[]; cidrEvents: string[] | null }
      >;
      try {
        ctx.store.node = await withStoreTimeout(own.call(store), 5000, "reading this node's Node");
      } catch (e) {
        ctx.store.node = { error: (e as Error).message };
      }
    }
    if ("netConfigMap" in store && typeof store.netConfigMap === "function") {
      const read = store.netConfigMap as () => Promise<{ where: string; config: NetConfig }>;
      try {
        const cm = await withStoreTimeout(read.call(store), 5000, "reading the net-conf ConfigMap");
        ctx.store.configMap = cm;
        if (!ctx.store.config) {
          // On the host the DaemonSet's mount of net-conf.json is not there: the ConfigMap is the same file.
          ctx.store.config = cm.config;
          ctx.store.error = null;
        }
      } catch (e) {
        ctx.store.configMap = { error: (e as Error).message };
      }
    }
    ctx.store.state = "ok";
  } catch (e) {
    ctx.store.state = "error";
    ctx.store.error = (e as Error).message;
    if (ctx.opts.storeExplicit) ctx.fatal.push(`store unreachable: ${ctx.store.error}`);
  } finally {
    await store?.close().catch(() => {});
  }
}
