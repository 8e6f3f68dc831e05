/**
 * The daemon's flags, compatible with flanneld's, and their `FLANNELD_<FLAG>` environment variables
 * (e.g. `--iface-can-reach` ↔ `FLANNELD_IFACE_CAN_REACH`; repeatable flags take a comma-separated list,
 * booleans true/false/1/0). A flag given on the command line wins over the environment.
 * @module
 */
import { type Command, Option } from "commander";
import { UsageError } from "../errors.ts";
import { IPAddr } from "../ip/cidr.ts";
import { DEFAULT_SUBNET_FILE } from "../subnet_env.ts";
import type { IfaceSelectionV6 } from "./iface6.ts";
import type { LogLevel } from "./log.ts";

/** Default directory for the persisted VTEP MAC. */
export const DEFAULT_STATE_DIR = "/var/lib/flanctl/state";

/** Parsed daemon options. */
export interface DaemonOptions extends IfaceSelectionV6 {
  subnetFile: string;
  /** Minutes before expiry to renew our lease. */
  subnetLeaseRenewMargin: number;
  ipMasq: boolean;
  /** Seconds between iptables rule checks. */
  iptablesResync: number;
  iptablesForwardRules: boolean;
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
}

/** Parses a boolean flag value (true/false/1/0/yes/no). */
export function parseBool(v: string, flag: string): boolean {
  const s = v.trim().toLowerCase();
  if (["true", "1", "yes", "on", ""].includes(s)) return true;
  if (["false", "0", "no", "off"].includes(s)) return false;
  throw new UsageError(`${flag}: '${v}' is not a boolean (use true or false)`);
}

function intParser(flag: string, min: number, max: number) {
  return (v: string): number => {
    if (!/^\d+$/.test(v.trim()) || Number(v) < min || Number(v) > max) {
      throw new UsageError(`${flag}: '${v}' must be an integer from ${min} to ${max}`);
    }
    return Number(v);
  };
}

function repeat(v: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), ...v.split(",").map((x) => x.trim()).filter(Boolean)];
}

/** Adds the daemon flags to `cmd`. */
export function addDaemonOptions(cmd: Command): Command {
  const boolOpt = (flags: string, desc: string, dflt: boolean) =>
    new Option(flags, desc).preset("true").default(dflt).argParser((v: string) =>
      parseBool(v, flags.split(" ")[0])
    );
  return cmd
    .addOption(
      new Option(
        "--iface <name|ip>",
        "interface (name or IP) for inter-host traffic; repeatable, first match wins",
      ).argParser(repeat).default([]),
    )
    .addOption(
      new Option("--iface-regex <regex>", "regex matching the interface name or IP; repeatable").argParser(
        repeat,
      ).default([]),
    )
    .addOption(new Option("--iface-can-reach <ip>", "use the interface the kernel routes this IP through"))
    .addOption(new Option("--public-ip <ip>", "IP announced to peers (default: the interface's IP)"))
    .addOption(new Option("--public-ipv6 <ip>", "IPv6 announced to peers (default: the interface's IPv6)"))
    .addOption(
      new Option("--subnet-file <path>", "file to write the node's network facts to").default(
        DEFAULT_SUBNET_FILE,
      ),
    )
    .addOption(
      new Option(
        "--subnet-lease-renew-margin <minutes>",
        "renew the lease this many minutes before it expires",
      )
        .argParser(intParser("--subnet-lease-renew-margin", 1, 1439)).default(60),
    )
    .addOption(
      boolOpt(
        "--ip-masq [bool]",
        "install flannel's masquerade rules for traffic leaving the overlay",
        false,
      ),
    )
    .addOption(
      new Option("--iptables-resync <seconds>", "check the iptables rules every N seconds")
        .argParser(intParser("--iptables-resync", 1, 86400)).default(5),
    )
    .addOption(
      boolOpt("--iptables-forward-rules [bool]", "add FORWARD ACCEPT rules for the cluster Network", true),
    )
    .addOption(
      new Option("--healthz-ip <ip>", "address of the /healthz, /readyz, /metrics server").default("0.0.0.0"),
    )
    .addOption(
      new Option("--healthz-port <port>", "port of the health/metrics server (0 = off)")
        .argParser(intParser("--healthz-port", 0, 65535)).default(0),
    )
    .addOption(
      new Option("--resync-interval <seconds>", "full reconcile of routes/ARP/FDB/device every N seconds")
        .argParser(intParser("--resync-interval", 1, 86400)).default(10),
    )
    .addOption(
      new Option(
        "--vxlan-tx-checksum-offload [auto|bool]",
        "TX checksum offload on the VXLAN device: true keeps it, false switches it off (flannel #1279), " +
          "auto switches it off only behind NAT (public IP not the interface's)",
      ).preset("true").default("auto").argParser((v: string) =>
        v.trim().toLowerCase() === "auto" ? "auto" : parseBool(v, "--vxlan-tx-checksum-offload")
      ),
    )
    .addOption(
      new Option("--state-dir <dir>", "directory for persistent daemon state (VTEP MAC)").default(
        DEFAULT_STATE_DIR,
      ),
    )
    .addOption(
      new Option("--log-level <level>", "debug, info, warn or error").choices([
        "debug",
        "info",
        "warn",
        "error",
      ]).default("info"),
    );
}

/** The env variable of a long flag: `--iface-can-reach` → `FLANNELD_IFACE_CAN_REACH`. */
export function envName(long: string): string {
  return "FLANNELD_" + long.replace(/^--/, "").toUpperCase().replace(/-/g, "_");
}

/**
 * Fills every option of `cmd` (daemon and store flags alike) not given on the command line from its
 * `FLANNELD_<FLAG>` environment variable. Call in the action, after parsing.
 */
export function applyEnv(cmd: Command, env: Record<string, string> = Deno.env.toObject()): void {
  for (const opt of cmd.options) {
    if (!opt.long || opt.long === "--help" || opt.long === "--version") continue;
    const attr = opt.attributeName();
    if (cmd.getOptionValueSource(attr) === "cli") continue;
    const raw = env[envName(opt.long)];
    if (raw === undefined) continue;
    let v: unknown;
    const takesArg = opt.required || opt.optional;
    if (!takesArg) v = opt.negate ? !parseBool(raw, opt.long) : parseBool(raw, opt.long);
    else if (opt.parseArg) {
      const isList = Array.isArray(opt.defaultValue);
      v = isList ? opt.parseArg(raw, undefined as unknown as string) : opt.parseArg(raw, opt.defaultValue);
    } else v = raw;
    if (opt.argChoices && typeof v === "string" && !opt.argChoices.includes(v)) {
      throw new UsageError(`${envName(opt.long)}: '${raw}' is not one of ${opt.argChoices.join(", ")}`);
    }
    cmd.setOptionValueWithSource(attr, v, "env");
  }
}

/** Validates and converts commander's option values. */
export function toDaemonOptions(o: Record<string, unknown>): DaemonOptions {
  const healthzIP = String(o.healthzIp ?? "0.0.0.0");
  if (!IPAddr.tryParse(healthzIP)) throw new UsageError(`--healthz-ip: '${healthzIP}' is not an IP address`);
  return {
    iface: (o.iface as string[] | undefined) ?? [],
    ifaceRegex: (o.ifaceRegex as string[] | undefined) ?? [],
    ifaceCanReach: (o.ifaceCanReach as string | undefined) ?? null,
    publicIP: (o.publicIp as string | undefined) ?? null,
    publicIPv6: (o.publicIpv6 as string | undefined) ?? null,
    subnetFile: String(o.subnetFile ?? DEFAULT_SUBNET_FILE),
    subnetLeaseRenewMargin: Number(o.subnetLeaseRenewMargin ?? 60),
    ipMasq: o.ipMasq === true,
    iptablesResync: Number(o.iptablesResync ?? 5),
    iptablesForwardRules: o.iptablesForwardRules !== false,
    healthzIP,
    healthzPort: Number(o.healthzPort ?? 0),
    resyncInterval: Number(o.resyncInterval ?? 10),
    stateDir: String(o.stateDir ?? DEFAULT_STATE_DIR),
    logLevel: (o.logLevel as LogLevel | undefined) ?? "info",
    vxlanTxChecksumOffload: o.vxlanTxChecksumOffload === undefined || o.vxlanTxChecksumOffload === "auto"
      ? "auto"
      : o.vxlanTxChecksumOffload === true,
  };
}
