/**
 * The portmap plugin (chained after flannel/bridge): hostPort → pod DNAT from
 * `runtimeConfig.portMappings`, with the reference's options (`snat`, `masqAll`, `markMasqBit`,
 * `externalSetMarkChain`, `conditionsV4`/`conditionsV6`, `backend: iptables|nftables`) and its chain and
 * table names (lib/firewall/portmap.ts), so ours and the reference can take over each other's rules.
 *
 * Differences, on purpose: every mapping is validated before anything is installed (ports 1–65535, protocol
 * tcp/udp/sctp, hostIP an address of a family the container has) and bad input is a CNI error (code 7)
 * instead of a half-made rule set; DEL needs no netns and removes exactly this container's rules; UDP
 * conntrack entries of the mapped host ports are cleared after ADD (as the reference) and after DEL (so
 * a deleted mapping does not keep receiving traffic through a stale entry), over ctnetlink (the
 * `conntrack` tool only if that fails); GC removes the rules of this network's containers not in
 * `cni.dev/valid-attachments` (iptables: their DNAT chains, found by the entry rules' comments; nftables:
 * the containers recorded in the network's chain, see lib/firewall/portmap.ts).
 * @module
 */
import { IPAddr, IPNet } from "../base/cidr.ts";
import { isObj } from "../base/json.ts";
import { Iptables, splitSave, tools } from "../firewall/iptables.ts";
import { type NftDriver, nftDriver } from "../firewall/nft.ts";
import {
  dnatChain,
  iptablesAdd,
  iptablesContainers,
  iptablesDel,
  iptablesMissing,
  nftAdd,
  nftDel,
  nftGc,
  nftMissing,
  ownerChain,
  type PortMapping,
  type PortMapSpec,
} from "../firewall/portmap.ts";
import { type Family, FirewallError } from "../firewall/types.ts";
import { type CniResult, parseResult } from "./result.ts";
import { log, type Plugin, type PluginCall } from "./skel.ts";
import { CniError, configError, ErrCode } from "./spec.ts";
import { runProcess } from "../base/run.ts";
import type { Log } from "../base/log.ts";
import { NET_CONF, type Shape } from "./gojson.ts";

/** The parsed, validated config. */
export interface PortMapConf {
  name: string;
  backend: "iptables" | "nftables";
  snat: boolean;
  masqAll: boolean;
  markMasqBit: number;
  externalSetMarkChain?: string;
  conditionsV4: string[];
  conditionsV6: string[];
  mappings: PortMapping[];
}

const cfgErr: (details: string) => never = configError("invalid portmap configuration");

function conditions(c: Record<string, unknown>, key: string): string[] {
  const v = c[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) cfgErr(`${key} must be a list of strings`);
  return v as string[];
}

/** iptables-style conditions start with '-' or '!'; nftables ones never do (the reference's rule). */
function backendOf(conds: string[]): "iptables" | "nftables" | null {
  if (!conds.length || conds[0] === "") return null;
  return conds[0][0] === "-" || conds[0][0] === "!" ? "iptables" : "nftables";
}

function onPath(tool: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    try {
      if (Deno.statSync(`${dir}/${tool}`).isFile) return true;
    } catch { /* next */ }
  }
  return false;
}

function port(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535) {
    cfgErr(`${field} must be a port number 1-65535, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Validates `runtimeConfig.portMappings`. */
export function parseMappings(raw: unknown): PortMapping[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) cfgErr("runtimeConfig.portMappings must be a list");
  return raw.map((m, i) => {
    const f = `runtimeConfig.portMappings[${i}]`;
    if (!isObj(m)) cfgErr(`${f} must be an object {hostPort, containerPort, protocol, hostIP}`);
    const proto = typeof m.protocol === "string" ? m.protocol.toLowerCase() : m.protocol;
    if (proto !== "tcp" && proto !== "udp" && proto !== "sctp") {
      cfgErr(`${f}.protocol must be tcp, udp or sctp, got ${JSON.stringify(m.protocol)}`);
    }
    const out: PortMapping = {
      hostPort: port(m.hostPort, `${f}.hostPort`),
      containerPort: port(m.containerPort, `${f}.containerPort`),
      protocol: proto,
    };
    if (m.hostIP !== undefined && m.hostIP !== null && m.hostIP !== "") {
      if (typeof m.hostIP !== "string" || !IPAddr.tryParse(m.hostIP)) {
        cfgErr(`${f}.hostIP must be an IP address, got ${JSON.stringify(m.hostIP)}`);
      }
      out.hostIP = m.hostIP;
    }
    return out;
  });
}

/** Parses and validates the plugin config (no kernel access). */
export function parseConf(c: Record<string, unknown>): PortMapConf {
  const rc = isObj(c.runtimeConfig) ? c.runtimeConfig : {};
  const mappings = parseMappings(rc.portMappings);
  const bool = (k: string, dflt: boolean) => {
    const v = c[k];
    if (v === undefined || v === null) return dflt;
    if (typeof v !== "boolean") cfgErr(`${k} must be true or false`);
    return v;
  };
  if (c.markMasqBit !== undefined && c.markMasqBit !== null && c.externalSetMarkChain != null) {
    cfgErr("Cannot specify externalSetMarkChain and markMasqBit");
  }
  const bit = c.markMasqBit ?? 13;
  if (typeof bit !== "number" || !Number.isInteger(bit) || bit < 0 || bit > 31) {
    cfgErr("MasqMarkBit must be between 0 and 31");
  }
  const ext = c.externalSetMarkChain;
  if (
    ext !== undefined && ext !== null && (typeof ext !== "string" || !/^[A-Za-z0-9_.\-]{1,28}$/.test(ext))
  ) {
    cfgErr("externalSetMarkChain must be an iptables chain name");
  }
  const conditionsV4 = conditions(c, "conditionsV4"), conditionsV6 = conditions(c, "conditionsV6");
  const wants: [string, string | null][] = [
    ["externalSetMarkChain", ext != null ? "iptables" : null],
    ["conditionsV4", backendOf(conditionsV4)],
    ["conditionsV6", backendOf(conditionsV6)],
  ];
  let backend = c.backend;
  if (backend === undefined || backend === null) {
    // As the reference: iptables, unless it is missing and nftables is there.
    backend = !onPath(tools(4).save) && !onPath(tools(6).save) ? "nftables" : "iptables";
  }
  if (backend !== "iptables" && backend !== "nftables") {
    cfgErr(`unrecognized backend ${JSON.stringify(backend)}`);
  }
  const wrong = wants.filter(([, b]) => b && b !== backend).map(([k]) => k);
  if (wrong.length) {
    cfgErr(
      `${backend} backend was requested but configuration contains ${wrong.join(", ")} of the other backend`,
    );
  }
  return {
    name: typeof c.name === "string" ? c.name : "",
    backend,
    snat: bool("snat", true),
    masqAll: bool("masqAll", false),
    markMasqBit: bit,
    externalSetMarkChain: typeof ext === "string" ? ext : undefined,
    conditionsV4,
    conditionsV6,
    mappings,
  };
}

/** The container's first IPv4 and IPv6 address (with prefix) from prevResult, as the reference picks them. */
export function containerAddrs(r: CniResult, ifname: string): Partial<Record<Family, string>> {
  const out: Partial<Record<Family, string>> = {};
  for (const ip of r.ips ?? []) {
    const fam: Family = ip.address.includes(":") ? 6 : 4;
    if (out[fam]) continue;
    if (
      ip.interface !== undefined && ip.interface >= 0 && r.interfaces && ip.interface < r.interfaces.length
    ) {
      const i = r.interfaces[ip.interface];
      if (i.name !== ifname || !i.sandbox) continue;
    }
    out[fam] = ip.address;
  }
  return out;
}

/** The per-family specs ADD/CHECK program; throws for a hostIP of a family the container lacks. */
export function specs(
  conf: PortMapConf,
  containerId: string,
  addrs: Partial<Record<Family, string>>,
): PortMapSpec[] {
  conf.mappings.forEach((m, i) => {
    if (!m.hostIP) return;
    const fam = IPAddr.parse(m.hostIP).family;
    if (!addrs[fam]) {
      cfgErr(
        `runtimeConfig.portMappings[${i}].hostIP ${m.hostIP} is IPv${fam} but the container has no IPv${fam} ` +
          "address: use a hostIP of the container's family",
      );
    }
  });
  const out: PortMapSpec[] = [];
  for (const fam of [4, 6] as const) {
    const addr = addrs[fam];
    if (!addr) continue;
    IPNet.parseWithHost(addr, "prevResult.ips");
    out.push({
      network: conf.name,
      containerId,
      family: fam,
      containerAddr: addr,
      mappings: conf.mappings.filter((m) => !m.hostIP || IPAddr.parse(m.hostIP).family === fam),
      allMappings: conf.mappings,
      snat: conf.snat,
      masqAll: conf.masqAll,
      markMasqBit: conf.markMasqBit,
      externalSetMarkChain: conf.externalSetMarkChain,
      conditions: fam === 4 ? conf.conditionsV4 : conf.conditionsV6,
    });
  }
  return out;
}

const pluginLog: Pick<Log, "info" | "warn"> = {
  info: (m) => log("portmap", m),
  warn: (m) => log("portmap", m),
};

let nft: NftDriver | null = null;
function nftd(): NftDriver {
  return nft ??= nftDriver({ log: pluginLog });
}

async function fw<T>(what: string, p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    if (e instanceof FirewallError) throw new CniError(ErrCode.IptablesFailure, what, e.message);
    throw e;
  }
}

/**
 * Clears UDP conntrack entries to the mapped host ports (best effort, as the reference: failures only
 * logged): over ctnetlink (lib/netlink/conntrack.ts); the `conntrack` tool only when that fails.
 */
async function clearUdpConntrack(mappings: PortMapping[], families: Family[]): Promise<void> {
  const ports = [...new Set(mappings.filter((m) => m.protocol === "udp").map((m) => m.hostPort))];
  if (!ports.length) return;
  const { deleteConntrack } = await import("../netlink/mod.ts");
  for (const fam of families) {
    for (const p of ports) {
      try {
        deleteConntrack({ family: fam, protocol: 17, dstPort: p });
      } catch (e) {
        log(
          "portmap",
          `ctnetlink delete of UDP dport ${p} failed (${(e as Error).message}); trying conntrack -D`,
        );
        await conntrackTool(fam, p);
      }
    }
  }
}

async function conntrackTool(fam: Family, port: number): Promise<void> {
  if (!onPath("conntrack")) {
    log(
      "portmap",
      "conntrack not installed: stale UDP conntrack entries of the mapped ports are not cleared",
    );
    return;
  }
  const o = await runProcess(
    ["conntrack", "-D", "-f", fam === 4 ? "ipv4" : "ipv6", "-p", "udp", "--orig-port-dst", String(port)],
  );
  // Exit 1 with "0 flow entries have been deleted" is the normal nothing-to-do case.
  const err = o.stderr;
  if (o.code !== 0 && !/0 flow entries/.test(err)) {
    log("portmap", `conntrack -D udp dport ${port}: ${err.trim()}`);
  }
}

/** Sets route_localnet on the interface routing the container's IPv4 address (so 127/8 can be DNATed). */
async function routeLocalnet(addr: string): Promise<void> {
  const { openNetlink, RT_TABLE_MAIN } = await import("../netlink/mod.ts");
  const ip = IPAddr.parse(addr.split("/")[0]);
  const h = openNetlink();
  let dev: string | null = null;
  try {
    let best = -1;
    for (const r of h.routes({ family: 4, table: RT_TABLE_MAIN })) {
      const net = r.dst === "default" ? IPNet.parse("0.0.0.0/0") : IPNet.tryParse(r.dst);
      if (net && net.contains(ip) && net.prefix > best && r.devName) {
        best = net.prefix;
        dev = r.devName;
      }
    }
  } finally {
    h.close();
  }
  if (!dev) return;
  try {
    Deno.writeTextFileSync(`/proc/sys/net/ipv4/conf/${dev}/route_localnet`, "1");
  } catch (e) {
    throw new CniError(ErrCode.KernelFailure, "unable to enable route_localnet", (e as Error).message);
  }
}

function prev(c: PluginCall): CniResult {
  if (c.conf.prevResult === undefined || c.conf.prevResult === null) {
    throw new CniError(
      ErrCode.InvalidNetworkConfig,
      "must be called as chained plugin",
      "prevResult is missing",
    );
  }
  return parseResult(c.conf.prevResult, c.version);
}

/** nft comments hold at most 128 bytes; the nftables backend tags every rule with the container ID. */
const NFT_COMMENT_MAX = 128;

function nftCommentable(containerId: string): void {
  const n = new TextEncoder().encode(containerId).length;
  if (n > NFT_COMMENT_MAX) {
    throw new CniError(
      ErrCode.InvalidEnv,
      "container ID too long for the nftables backend",
      `CNI_CONTAINERID has ${n} bytes; nftables rule comments (which carry it) hold at most ${NFT_COMMENT_MAX}: ` +
        `use "backend": "iptables" for such IDs`,
    );
  }
}

async function add(c: PluginCall): Promise<CniResult> {
  const conf = parseConf(c.conf);
  const r = prev(c);
  if (!conf.mappings.length) {
    c.holdsNothing?.(); // no rule made: a DEL with this config removes nothing (lib/cni/deleted.ts)
    return r;
  }
  const all = specs(conf, c.args.containerId, containerAddrs(r, c.args.ifname));
  if (conf.backend === "nftables") nftCommentable(c.args.containerId);
  try {
    for (const s of all) {
      if (conf.backend === "iptables") {
        await fw("unable to set up DNAT", () => iptablesAdd(new Iptables(s.family), s));
      } else await fw("unable to set up nftables rules for port mappings", () => nftAdd(nftd(), s));
      if (s.family === 4 && conf.snat) await routeLocalnet(s.containerAddr);
    }
  } catch (e) {
    // A failed ADD leaves no rule behind: what the families before the failing one installed goes.
    await removeRules(conf.backend, conf.name, c.args.containerId).catch((u) =>
      log("portmap", `undo after a failed ADD: ${(u as Error).message}`)
    );
    throw e;
  }
  await clearUdpConntrack(conf.mappings, all.map((s) => s.family));
  return r;
}

/** Removes this container's rules of `backend` (both families; a family whose tool is missing has none). */
async function removeRules(
  backend: "iptables" | "nftables",
  name: string,
  containerId: string,
): Promise<void> {
  if (backend === "nftables") {
    await fw("error deleting nftables rules", () => nftDel(nftd(), containerId, name));
    return;
  }
  let usable = 0;
  for (const fam of [4, 6] as const) {
    try {
      await iptablesDel(new Iptables(fam), name, containerId);
      usable++;
    } catch (e) {
      if (!(e instanceof FirewallError && e.missing)) {
        throw new CniError(
          ErrCode.IptablesFailure,
          `could not teardown ipv${fam} dnat`,
          (e as Error).message,
        );
      }
    }
  }
  if (!usable) throw new CniError(ErrCode.IptablesFailure, "neither iptables nor ip6tables is usable");
}

/**
 * DEL is best-effort cleanup and never fails on input its ADD refused: with a config ADD would refuse (bad
 * mappings, options, backend) the container's rules are looked for in every backend that is there, by its
 * ID alone; only a failing firewall tool is an error.
 */
async function del(c: PluginCall): Promise<void> {
  let conf: PortMapConf;
  try {
    conf = parseConf(c.conf);
  } catch (e) {
    if (!(e instanceof CniError)) throw e;
    log("portmap", `DEL: config refused (${e.message}); removing this container's rules by its ID`);
    const name = typeof c.conf.name === "string" ? c.conf.name : "";
    if (onPath(tools(4).save) || onPath(tools(6).save)) {
      await removeRules("iptables", name, c.args.containerId);
    }
    if (new TextEncoder().encode(c.args.containerId).length <= NFT_COMMENT_MAX) {
      // libnftables or the nft binary; neither there means no nftables rules either.
      await removeRules("nftables", name, c.args.containerId).catch((e) =>
        log("portmap", `DEL: nftables not usable (${(e as Error).message}): no nftables rules removed`)
      );
    }
    return;
  }
  if (!conf.mappings.length) return;
  await removeRules(conf.backend, conf.name, c.args.containerId);
  await clearUdpConntrack(conf.mappings, [4, 6]);
}

async function check(c: PluginCall): Promise<void> {
  const conf = parseConf(c.conf);
  const r = prev(c);
  if (!conf.mappings.length) return;
  for (const s of specs(conf, c.args.containerId, containerAddrs(r, c.args.ifname))) {
    let missing: string[];
    if (conf.backend === "iptables") {
      const ipt = new Iptables(s.family);
      const lines = splitSave(await fw("iptables-save failed", () => ipt.save("nat"))).get("nat") ?? [];
      missing = iptablesMissing(lines, s, await dnatChain(s.network, s.containerId));
    } else {
      missing = await fw("nft failed", () => nftMissing(nftd(), s));
    }
    if (missing.length) {
      throw new CniError(ErrCode.CheckFailed, `portmap CHECK failed (IPv${s.family})`, missing.join("; "));
    }
  }
}

async function gc(c: PluginCall): Promise<void> {
  const conf = parseConf(c.conf);
  const raw = c.conf["cni.dev/valid-attachments"] ?? c.conf["cni.dev/attachments"];
  if (raw === undefined || raw === null) {
    // As the reference, exit 0; without the list we cannot tell stale containers from live ones.
    log("portmap", "GC without cni.dev/valid-attachments: nothing collected");
    return;
  }
  if (!Array.isArray(raw)) cfgErr(`cni.dev/valid-attachments must be a list of {containerID, ifname}`);
  const keep = new Set(raw.map((a) => (isObj(a) ? String(a.containerID) : "")));
  if (conf.backend === "nftables") {
    // Only containers recorded for this network (lib/firewall/portmap.ts, "nftables GC").
    if (!ownerChain(conf.name)) {
      log(
        "portmap",
        `GC: network name ${JSON.stringify(conf.name)} cannot name an nft chain; nothing collected`,
      );
      return;
    }
    const plans = await fw("GC failed", () => nftGc(nftd(), conf.name, keep));
    const removed = [...new Set(plans.flatMap((p) => p.removed))];
    const shared = [...new Set(plans.flatMap((p) => p.shared))];
    if (removed.length) {
      log("portmap", `GC: removed the nftables rules of ${removed.length} stale container(s)`);
    }
    if (shared.length) {
      log("portmap", `GC: ${shared.length} stale container(s) also recorded by another network: rules kept`);
    }
    return;
  }
  for (const fam of [4, 6] as const) {
    const ipt = new Iptables(fam);
    let text: string;
    try {
      text = await ipt.save("nat");
    } catch (e) {
      if (e instanceof FirewallError && e.missing) continue;
      throw new CniError(ErrCode.IptablesFailure, "iptables-save failed", (e as Error).message);
    }
    const gone = [...iptablesContainers(splitSave(text).get("nat") ?? [], conf.name)].filter(([id]) =>
      !keep.has(id)
    );
    if (gone.length) {
      await fw("GC failed", () => ipt.removeChains("nat", gone.map(([, chain]) => chain)));
    }
  }
}

/** The reference portmap's PortMapConf: the fields whose keys are matched as encoding/json does. */
const PORTMAP_SHAPE: Shape = {
  ...NET_CONF,
  snat: null,
  masqAll: null,
  markMasqBit: null,
  externalSetMarkChain: null,
  conditionsV4: null,
  conditionsV6: null,
  backend: null,
};

/** The plugin. */
export const plugin: Plugin = {
  shape: PORTMAP_SHAPE,
  add,
  del,
  check,
  status: () => Promise.resolve(),
  gc,
};
