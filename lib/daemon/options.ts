/**
 * The daemon's flags as one declarative table ({@link DAEMON_FLAGS}, with the store flags of
 * lib/store/flags.ts): every flag of current flanneld (main.go) with its default, glog's `-v`, `--vmodule`
 * and `--log_backtrace_at`, and flanctl's own. Parsed with Go flag syntax (lib/base/goflag.ts); every
 * flag not on the command line is read from `FLANNELD_<FLAG>` (e.g. `--iface-can-reach` ↔
 * `FLANNELD_IFACE_CAN_REACH`), taken verbatim as flanneld's flagutil does (no comma splitting). This module
 * does not import commander: the daemon path never loads it.
 * @module
 */
import { UsageError } from "../base/errors.ts";
import { flagEnv, type FlagSpec, goBool, parseGoFlags, renderFlagHelp, wrapText } from "../base/goflag.ts";
import { IPAddr } from "../base/cidr.ts";
import { STORE_FLAGS } from "../store/flags.ts";
import type { StoreOptions } from "../store/open.ts";
import { DEFAULT_SUBNET_FILE } from "../node/subnet_env.ts";
import type { IfaceSelectionV6 } from "./iface6.ts";
import type { LogLevel } from "../base/log.ts";

/** Default directory for the persisted VTEP MAC. */
export const DEFAULT_STATE_DIR = "/var/lib/flanctl/state";

/** Parsed daemon options. */
export interface DaemonOptions extends IfaceSelectionV6 {
  subnetFile: string;
  /** Minutes before expiry to renew our lease. */
  subnetLeaseRenewMargin: number;
  ipMasq: boolean;
  /** `--ip-masq-fully-random-disable`: MASQUERADE without `--random-fully`. */
  ipMasqFullyRandomDisable: boolean;
  /** Seconds between iptables rule checks. */
  iptablesResync: number;
  iptablesForwardRules: boolean;
  /** `--ip-blackhole-route`: a blackhole route for our own subnet. */
  ipBlackholeRoute: boolean;
  /** `--set-node-network-unavailable` (kube): set NetworkUnavailable=False once the data plane is up. */
  setNodeNetworkUnavailable: boolean;
  healthzIP: string;
  /** 0 = no HTTP server. */
  healthzPort: number;
  /** Seconds between full reconcile passes. */
  resyncInterval: number;
  stateDir: string;
  logLevel: LogLevel;
  /**
   * TX checksum offload of flannel.<VNI>: true leaves the kernel's setting, false switches it off on create,
   * reuse and every resync (flannel #1279, kubernetes #88986); "auto" (default) switches it off only when
   * the public IP is not the interface's own (behind NAT, where the bad checksums bite) and otherwise keeps
   * it, as flanneld does: off costs TSO and about half of VXLAN throughput.
   */
  vxlanTxChecksumOffload: boolean | "auto";
  /** `--network-policy` (kube mode): enforce NetworkPolicy for this node's pods (lib/netpol). */
  networkPolicy?: boolean;
}

/** The daemon's own flags (the store flags are {@link STORE_FLAGS}). */
export const DAEMON_FLAGS: readonly FlagSpec[] = [
  {
    name: "iface",
    kind: "list",
    origin: "flanneld",
    arg: "<name|ip>",
    help: "interface (name or IP) for inter-host traffic; give once per candidate, first match wins",
  },
  {
    name: "iface-regex",
    kind: "list",
    origin: "flanneld",
    arg: "<regex>",
    help: "regex matching the interface name or IP, checked after --iface; give once per regex",
  },
  {
    name: "iface-can-reach",
    kind: "string",
    origin: "flanneld",
    arg: "<ip>",
    help: "use the interface the kernel routes this IP through (after --iface and --iface-regex)",
  },
  {
    name: "subnet-file",
    kind: "string",
    origin: "flanneld",
    arg: "<path>",
    default: DEFAULT_SUBNET_FILE,
    help: "file to write the node's network facts to",
  },
  {
    name: "public-ip",
    kind: "string",
    origin: "flanneld",
    arg: "<ip>",
    help: "IPv4 announced to peers (alone: also selects the interface that has it)",
  },
  { name: "public-ipv6", kind: "string", origin: "flanneld", arg: "<ip>", help: "IPv6 announced to peers" },
  {
    name: "subnet-lease-renew-margin",
    kind: "int",
    origin: "flanneld",
    min: 1,
    max: 1439,
    default: 60,
    arg: "<minutes>",
    help: "renew the lease this many minutes before it expires",
  },
  {
    name: "ip-masq",
    kind: "bool",
    origin: "flanneld",
    default: false,
    help: "install flannel's masquerade rules for traffic leaving the overlay",
  },
  {
    name: "ip-masq-fully-random-disable",
    kind: "bool",
    origin: "flanneld",
    default: false,
    help: "MASQUERADE without --random-fully",
  },
  {
    name: "healthz-ip",
    kind: "string",
    origin: "flanneld",
    arg: "<ip>",
    default: "0.0.0.0",
    help: "address of the /healthz, /readyz, /metrics server",
  },
  {
    name: "healthz-port",
    kind: "int",
    origin: "flanneld",
    min: 0,
    max: 65535,
    default: 0,
    arg: "<port>",
    help: "port of the health/metrics server (0 = off)",
  },
  {
    name: "iptables-resync",
    kind: "int",
    origin: "flanneld",
    min: 1,
    max: 86400,
    default: 5,
    arg: "<seconds>",
    help: "check the iptables rules every N seconds",
  },
  {
    name: "iptables-forward-rules",
    kind: "bool",
    origin: "flanneld",
    default: true,
    help: "add FORWARD ACCEPT rules for the cluster Network",
  },
  {
    name: "ip-blackhole-route",
    kind: "bool",
    origin: "flanneld",
    default: false,
    help: "add a blackhole route for the node's own subnet",
  },
  {
    name: "set-node-network-unavailable",
    kind: "bool",
    origin: "flanneld",
    default: true,
    help: "kube: set the node's NetworkUnavailable=False once device, subnet.env and rules are in place",
  },
  { name: "version", kind: "bool", origin: "flanneld", env: null, help: "print the version and exit" },
  {
    name: "resync-interval",
    kind: "int",
    origin: "flanctl",
    min: 1,
    max: 86400,
    default: 10,
    arg: "<seconds>",
    help: "full reconcile of routes/ARP/FDB/device every N seconds",
  },
  {
    name: "vxlan-tx-checksum-offload",
    kind: "string",
    origin: "flanctl",
    arg: "<auto|true|false>",
    default: "auto",
    help: "TX checksum offload on the VXLAN device: true keeps it, false switches it off (flannel #1279), " +
      "auto switches it off only behind NAT (public IP not the interface's)",
  },
  {
    name: "network-policy",
    kind: "bool",
    origin: "flanctl",
    default: false,
    help: "enforce Kubernetes NetworkPolicy for this node's pods (kube mode; nft table inet flanctl-netpol)",
  },
  {
    name: "state-dir",
    kind: "string",
    origin: "flanctl",
    arg: "<dir>",
    default: DEFAULT_STATE_DIR,
    help: "directory for persistent daemon state (VTEP MAC)",
  },
  {
    name: "log-level",
    kind: "string",
    origin: "flanctl",
    arg: "<level>",
    choices: ["debug", "info", "warn", "error"],
    help: "debug, info, warn or error (default info; -v 1 or more means debug)",
  },
  {
    name: "v",
    kind: "int",
    origin: "glog",
    min: 0,
    arg: "<level>",
    help: "log verbosity: 0 info, 1 or more debug",
  },
  {
    name: "vmodule",
    kind: "string",
    origin: "glog",
    arg: "<pattern=N,...>",
    help: "accepted for flanneld compatibility; ignored",
  },
  {
    name: "log_backtrace_at",
    kind: "string",
    origin: "glog",
    arg: "<file:line>",
    help: "accepted for flanneld compatibility; ignored",
  },
];

/** Every flag `flanctl daemon` takes: the daemon's and the store's. */
export const ALL_DAEMON_FLAGS: readonly FlagSpec[] = [...DAEMON_FLAGS, ...STORE_FLAGS];

/** What {@link parseDaemonArgs} yields. */
export interface DaemonArgs {
  daemon: DaemonOptions;
  store: StoreOptions;
  /** `--help` was given: print {@link daemonHelp} and exit 0. */
  help: boolean;
  /** `--version` was given. */
  version: boolean;
}

/**
 * Parses a flanneld-style argument list (Go flag syntax) and the `FLANNELD_*` environment into daemon and
 * store options. Throws {@link UsageError} naming the flag.
 */
export function parseDaemonArgs(
  argv: readonly string[],
  env: Record<string, string | undefined> = Deno.env.toObject(),
): DaemonArgs {
  const p = parseGoFlags(ALL_DAEMON_FLAGS, argv, env);
  const v = p.values;
  return {
    daemon: p.help ? toDaemonOptions({}) : toDaemonOptions(v),
    store: v as StoreOptions,
    help: p.help,
    version: v.version === true,
  };
}

/** The help text of `flanctl daemon`, with every flag's env variable and default. */
export function daemonHelp(): string {
  const about = "Runs the node daemon: acquires a subnet lease, sets up the vxlan/host-gw backend, writes " +
    "subnet.env, programs routes/ARP/FDB for every peer and keeps the masquerade rules. Store: kube with " +
    "--kube-subnet-mgr, etcd with --etcd-endpoints, the embedded file store with --store-dir, else etcd at " +
    "flanneld's default endpoints. A flag not given is read from its env variable. Flags in flanneld's " +
    "syntax: -flag value, --flag=value, --bool=false.";
  return "Usage: flanctl daemon [flags]\n\n" + wrapText(about, "", 80).join("\n") + "\n" +
    renderFlagHelp(ALL_DAEMON_FLAGS, {
      flanneld: "flanneld flags:",
      flanctl: "flanctl flags:",
      glog: "glog flags (flanneld compatibility):",
    });
}

/** The env variable of a long flag: `--iface-can-reach` → `FLANNELD_IFACE_CAN_REACH`. */
export function envName(long: string): string {
  const name = long.replace(/^--?/, "");
  const spec = ALL_DAEMON_FLAGS.find((s) => s.name === name);
  return (spec && flagEnv(spec)) ?? "FLANNELD_" + name.toUpperCase().replace(/-/g, "_");
}

function str(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : null;
}

/** Validates and converts parsed values (keys as {@link parseGoFlags} yields them) into {@link DaemonOptions}. */
export function toDaemonOptions(o: Record<string, unknown>): DaemonOptions {
  const healthzIP = String(o.healthzIp ?? "0.0.0.0");
  if (!IPAddr.tryParse(healthzIP)) {
    throw new UsageError(`--healthz-ip: '${healthzIP}' is not an IP address; give an address like 0.0.0.0`);
  }
  for (
    const [key, flag, family] of [["publicIp", "--public-ip", 4], ["publicIpv6", "--public-ipv6", 6]] as const
  ) {
    const ip = str(o[key]);
    if (ip !== null && IPAddr.tryParse(ip)?.family !== family) {
      throw new UsageError(`${flag}: '${ip}' is not an IPv${family} address; give this node's address`);
    }
  }
  const offload = String(o.vxlanTxChecksumOffload ?? "auto");
  const offloadBool = goBool(offload);
  if (offload !== "auto" && offloadBool === null) {
    throw new UsageError(`--vxlan-tx-checksum-offload: '${offload}' is not valid; use auto, true or false`);
  }
  const verbose = Number(o.v ?? 0);
  return {
    iface: (o.iface as string[] | undefined) ?? [],
    ifaceRegex: (o.ifaceRegex as string[] | undefined) ?? [],
    ifaceCanReach: str(o.ifaceCanReach),
    publicIP: str(o.publicIp),
    publicIPv6: str(o.publicIpv6),
    subnetFile: String(o.subnetFile ?? DEFAULT_SUBNET_FILE),
    subnetLeaseRenewMargin: Number(o.subnetLeaseRenewMargin ?? 60),
    ipMasq: o.ipMasq === true,
    ipMasqFullyRandomDisable: o.ipMasqFullyRandomDisable === true,
    iptablesResync: Number(o.iptablesResync ?? 5),
    iptablesForwardRules: o.iptablesForwardRules !== false,
    ipBlackholeRoute: o.ipBlackholeRoute === true,
    setNodeNetworkUnavailable: o.setNodeNetworkUnavailable !== false,
    healthzIP,
    healthzPort: Number(o.healthzPort ?? 0),
    resyncInterval: Number(o.resyncInterval ?? 10),
    stateDir: String(o.stateDir ?? DEFAULT_STATE_DIR),
    logLevel: (str(o.logLevel) as LogLevel | null) ?? (verbose >= 1 ? "debug" : "info"),
    vxlanTxChecksumOffload: offload === "auto" ? "auto" : offloadBool === true,
    ...(o.networkPolicy === true ? { networkPolicy: true } : {}),
  };
}
