/**
 * The bridge plugin: cni0 (created if needed), a veth pair whose container end (CNI_IFNAME) is created
 * directly in the pod netns and whose host end (`veth` + 8 hex) is a port of the bridge, hairpin, MTU,
 * gateway address on the bridge (forceAddress), isGateway/isDefaultGateway, ip_forward, the per-container
 * masquerade chain, CHECK of what ADD made, and DEL that works without a netns. IPAM runs through
 * {@link delegate} (host-local in-process). Kernel changes go through the netlink layer only.
 * @module
 */
import { isObj } from "../base/json.ts";
import { IPAddr, IPNet, parseCidr, parseIp } from "../base/cidr.ts";
import type { LinkInfo, NetlinkHandle } from "../netlink/types.ts";
import { delegate } from "./delegate.ts";
import {
  type CniDNS,
  type CniInterface,
  type CniResult,
  type CniRoute,
  familyOf,
  parseResult,
} from "./result.ts";
import { type Plugin, type PluginCall, trace } from "./skel.ts";
import { type CmdArgs, CniError, configError, ErrCode, isIfName, parseCniArgs } from "./spec.ts";
import { CappedReadError, checkNsFile, readCappedText } from "../base/capped_read.ts";
import { runSteps, type Step, StepError } from "../base/steps.ts";
import { NET_CONF, type Shape } from "./gojson.ts";

/** Parsed bridge config. */
export interface BridgeConf {
  name: string;
  cniVersion: string;
  bridge: string;
  isGateway: boolean;
  isDefaultGateway: boolean;
  forceAddress: boolean;
  ipMasq: boolean;
  /** `ipMasqBackend` as given ("iptables", "nftables"; null: the default), checked by ADD (lib/cni/masq.ts). */
  ipMasqBackend: string | null;
  mtu: number;
  hairpinMode: boolean;
  /** IPv6 duplicate address detection in the pod (reference default: off). */
  enableDad: boolean;
  mac: string | null;
  /** The `ipam` section, or null for an L2-only bridge. */
  ipam: Record<string, unknown> | null;
  dns: CniDNS | null;
}

const cfgErr: (details: string) => never = configError("invalid bridge config");

function bool(c: Record<string, unknown>, k: string): boolean {
  const v = c[k];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") cfgErr(`'${k}' must be true or false`);
  return v;
}

const MAC_RE = /^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/;

/** Parses and checks the bridge config (and the MAC from CNI_ARGS / runtimeConfig / args). */
export function loadBridgeConf(c: Record<string, unknown>, version: string, cniArgs: string): BridgeConf {
  const a = parseCniArgs(cniArgs, ["MAC"]);
  const br = c.bridge ?? "cni0";
  // The kernel's rule for interface names, as CNI_IFNAME's: 15 bytes (not UTF-16 units), not . or ..
  if (typeof br !== "string" || !isIfName(br)) {
    cfgErr(`'bridge' must be an interface name of 1-15 bytes, got ${JSON.stringify(br)}`);
  }
  const mtu = c.mtu ?? 0;
  if (
    typeof mtu !== "number" || !Number.isInteger(mtu) || mtu < 0 || (mtu !== 0 && mtu < 68) || mtu > 65535
  ) {
    cfgErr(`'mtu' must be an integer 68..65535, got ${JSON.stringify(c.mtu)}`);
  }
  const isDefaultGateway = bool(c, "isDefaultGateway");
  const hairpinMode = bool(c, "hairpinMode");
  if (bool(c, "promiscMode")) {
    if (hairpinMode) cfgErr("cannot set hairpin mode and promiscuous mode at the same time");
    throw new CniError(
      ErrCode.UnsupportedField,
      "unsupported field",
      "promiscMode is not supported by flanctl's bridge",
    );
  }
  if (c.vlan !== undefined && c.vlan !== 0) {
    throw new CniError(
      ErrCode.UnsupportedField,
      "unsupported field",
      "vlan is not supported by flanctl's bridge",
    );
  }
  if (bool(c, "macspoofchk")) {
    throw new CniError(
      ErrCode.UnsupportedField,
      "unsupported field",
      "macspoofchk is not supported by flanctl's bridge",
    );
  }
  let mac: string | null = a.MAC || null;
  const rc = isObj(c.runtimeConfig) ? c.runtimeConfig : {};
  if (typeof rc.mac === "string" && rc.mac) mac = rc.mac;
  if (isObj(c.args) && isObj(c.args.cni) && typeof c.args.cni.mac === "string") mac = c.args.cni.mac;
  if (mac !== null && !MAC_RE.test(mac)) cfgErr(`MAC '${mac}' is not a MAC address (aa:bb:cc:dd:ee:ff)`);
  let ipam: Record<string, unknown> | null = null;
  if (c.ipam !== undefined && c.ipam !== null) {
    if (!isObj(c.ipam)) cfgErr("'ipam' must be an object");
    if (c.ipam.type !== undefined && typeof c.ipam.type !== "string") cfgErr("'ipam.type' must be a string");
    if (c.ipam.type) ipam = c.ipam;
  }
  const backend = c.ipMasqBackend ?? null;
  if (backend !== null && typeof backend !== "string") cfgErr("'ipMasqBackend' must be a string");
  let dns: CniDNS | null = null;
  if (c.dns !== undefined && c.dns !== null && !isObj(c.dns)) cfgErr(`'dns' must be an object`);
  if (isObj(c.dns) && Object.keys(c.dns).length) dns = c.dns as CniDNS;
  return {
    name: c.name as string,
    cniVersion: version,
    bridge: br,
    isGateway: bool(c, "isGateway") || isDefaultGateway,
    isDefaultGateway,
    forceAddress: bool(c, "forceAddress"),
    ipMasq: bool(c, "ipMasq"),
    ipMasqBackend: backend,
    mtu,
    hairpinMode,
    enableDad: bool(c, "enabledad"),
    mac: mac?.toLowerCase() ?? null,
    ipam,
    dns,
  };
}

/** Loads the kernel layer on demand (so config errors never load libnl). */
async function netlink() {
  return await import("../netlink/mod.ts");
}

/** Loads the netns calls on demand, as {@link netlink} (their own entry: the lib/os barrel loads far more). */
async function osCalls() {
  return await import("../os/netns.ts");
}

/** Opens a handle on the pod netns; a missing netns is error 3 (nothing to clean up). */
async function openPod(netns: string): Promise<NetlinkHandle> {
  const nl = await netlink();
  try {
    checkNsFile(netns);
  } catch (e) {
    if (e instanceof CappedReadError) {
      throw new CniError(ErrCode.InvalidEnv, "failed to open netns", e.message);
    }
    throw new CniError(ErrCode.UnknownContainer, "failed to open netns", `${netns} does not exist`);
  }
  try {
    return nl.openNetlink({ path: netns });
  } catch (e) {
    throw new CniError(ErrCode.UnknownContainer, "failed to open netns", `${netns}: ${(e as Error).message}`);
  }
}

function kernel<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof CniError) throw e;
    throw new CniError(ErrCode.KernelFailure, what, (e as Error).message);
  }
}

function isExists(e: unknown): boolean {
  // NetlinkError's fields (the class is not imported here: libnl's module loads lazily, see netlink()).
  return (e as { exists?: boolean })?.exists === true;
}

/** EADDRNOTAVAIL ("Cannot assign requested address"), as the kernel's errno or libnl's NLE_NOADDR. */
function addrNotAvailable(e: unknown): boolean {
  const n = e as { errno?: number | null; code?: number } | null;
  return n?.errno === 99 || n?.code === -19;
}

/** Ensures the bridge exists, is a bridge, and is up; returns it. Safe against a concurrent create. */
function ensureBridge(host: NetlinkHandle, c: BridgeConf): LinkInfo {
  let br = host.link(c.bridge);
  if (!br) {
    try {
      host.createBridge(c.bridge, c.mtu ? { mtu: c.mtu } : {});
    } catch (e) {
      if (!isExists(e)) throw e;
    }
    br = host.link(c.bridge);
    if (!br) throw new CniError(ErrCode.KernelFailure, "failed to create bridge", c.bridge);
  }
  if (br.kind !== "bridge") {
    cfgErr(`"${c.bridge}" already exists but is not a bridge`);
  }
  // The node owns the bridge's routes: no router advertisement from a pod may add a default route or a
  // SLAAC address (as the reference, in every mode; before the bridge goes up when we create it).
  noRouterAdverts(c.bridge);
  if (!br.up) host.setUp(br.index, true);
  return br;
}

/** The netns this process runs in (the host side); the nsfs file is opened before any switch. */
const HOST_NETNS = { path: "/proc/thread-self/ns/net" };

/**
 * A random locally administered unicast MAC, as the kernel picks for a veth (eth_random_addr). We pick it so
 * the result can name it without another full link dump of the host (cost grows with the pod count).
 */
function randomMac(): string {
  const b = crypto.getRandomValues(new Uint8Array(6));
  b[0] = (b[0] & 0xfe) | 0x02;
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join(":");
}

function randomVethName(): string {
  const b = crypto.getRandomValues(new Uint8Array(4));
  return "veth" + [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** The gateway for an address without one: the subnet's first address. */
function calcGateway(addr: string): string {
  return IPNet.parse(addr, "ip").ip.add(1).toString();
}

/**
 * Puts `gw/prefix` on the bridge; another address of the family is an error unless forceAddress.
 *
 * Every pod after the first finds the address already there, so the exclusive create comes first: "exists"
 * (same address and prefix) ends it with one request, where listing the bridge's addresses dumps every
 * address of the host (a link-local one per pod veth). Only when the address was new are the bridge's other
 * addresses read, and a conflicting one either removed (forceAddress) or the new address taken back.
 */
function ensureBridgeAddr(host: NetlinkHandle, br: LinkInfo, cidr: string, force: boolean): void {
  const want = IPNet.parseWithHost(cidr, "gateway");
  try {
    host.addAddr(br.index, cidr, { broadcast: true });
  } catch (e) {
    if (isExists(e)) return;
    throw e;
  }
  const conflicts = host.addrs(want.ip.family).filter((a) => {
    if (a.index !== br.index || (a.local === want.ip.toString() && a.prefix === want.net.prefix)) {
      return false;
    }
    const theirs = IPNet.parse(`${a.local}/${a.prefix}`);
    return want.ip.family === 4 || theirs.contains(want.ip) || want.net.contains(IPAddr.parse(a.local));
  });
  if (conflicts.length === 0) return;
  if (!force) {
    try {
      host.delAddr(br.index, cidr);
    } catch { /* best effort: leave the bridge as we found it */ }
    // The bridge plugin's wording, as users find it in kubelet events; ours adds the way out.
    throw new CniError(
      ErrCode.InvalidNetworkConfig,
      `failed to set bridge addr: "${br.name}" already has an IP address different from ${cidr}`,
      "set forceAddress to replace it, or remove the old address when the node's subnet changed",
    );
  }
  for (const a of conflicts) {
    try {
      host.delAddr(br.index, `${a.local}/${a.prefix}`);
    } catch (e) {
      // Already gone with a primary deleted before it.
      if (!addrNotAvailable(e)) throw e;
    }
  }
  // Removing a primary address also removes the secondaries of its subnet (ours among them, unless
  // promote_secondaries): put ours back if it went with them.
  try {
    host.addAddr(br.index, cidr, { broadcast: true });
  } catch (e) {
    if (!isExists(e)) throw e;
  }
}

/** Writes /proc/sys/<key> in the netns this thread is in (the caller switches with inNetns). */
function writeSysctl(key: string, value: string): void {
  Deno.writeTextFileSync(`/proc/sys/${key}`, value);
}

/**
 * Writes a per-interface sysctl the way the reference does (errors ignored: without IPv6 in the kernel the
 * IPv6 keys do not exist, and neither does what they guard).
 */
function trySysctl(key: string, value: string): void {
  try {
    writeSysctl(key, value);
  } catch { /* as the reference: best effort */ }
}

/** accept_ra=0 on a host-side interface (the bridge, a host veth). */
function noRouterAdverts(ifname: string): void {
  trySysctl(`net/ipv6/conf/${ifname}/accept_ra`, "0");
}

function enableForward(family: "4" | "6"): void {
  const path = family === "4" ? "/proc/sys/net/ipv4/ip_forward" : "/proc/sys/net/ipv6/conf/all/forwarding";
  try {
    if (readCappedText(path, 4096).trim() === "1") return;
  } catch { /* try writing */ }
  Deno.writeTextFileSync(path, "1");
}

function ipamType(c: BridgeConf): string {
  return c.ipam!.type as string;
}

async function ipamCall(c: PluginCall, conf: BridgeConf, cmd: "ADD" | "DEL" | "CHECK" | "GC" | "STATUS") {
  return await delegate(ipamType(conf), cmd, c.args.stdin, c.args);
}

function ipFamilies(conf: BridgeConf, ips: string[]): (4 | 6)[] {
  const fams = new Set<4 | 6>(ips.map((a) => (familyOf(a) === "4" ? 4 : 6)));
  if (ips.length === 0) {
    fams.add(4);
    if (conf.ipam && JSON.stringify(conf.ipam).includes("::")) fams.add(6);
  }
  return [...fams];
}

/** What ADD works on; each step fills in its part. */
interface AddState {
  readonly c: PluginCall;
  readonly conf: BridgeConf;
  readonly args: CmdArgs;
  readonly os: Awaited<ReturnType<typeof osCalls>>;
  readonly pod: NetlinkHandle;
  readonly host: NetlinkHandle;
  /** The host end's MAC (picked here, so the result names it without a dump). */
  readonly hostMac: string;
  ipam: CniResult;
  br?: LinkInfo;
  hostVeth: string;
  ips: NonNullable<CniResult["ips"]>;
  routes: CniRoute[];
  /** Gateway addresses (`gw/prefix`) for the bridge. */
  gws: string[];
  cont?: LinkInfo;
  result?: CniResult;
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) {
    throw new CniError(ErrCode.Internal, "internal error", `${what} not set by an earlier step`);
  }
  return v;
}

/** `ifname-free`: CNI_IFNAME must not exist in the pod yet. Undo: none (changes nothing). */
const ifnameFree: Step<AddState> = {
  name: "ifname-free",
  run({ pod, args }) {
    if (kernel("read pod links", () => pod.link(args.ifname))) {
      throw new CniError(
        ErrCode.AlreadyExists,
        "interface already exists",
        `container veth name "${args.ifname}" already exists`,
      );
    }
  },
};

/**
 * `ipam`: IPAM first, the cheap step that rejects duplicates and exhaustion before any kernel change.
 * Undo: IPAM DEL (also when the result has no IP: the allocation is released before the error).
 */
const ipamStep: Step<AddState> = {
  name: "ipam",
  async run(st) {
    const { c, conf } = st;
    if (!conf.ipam) return;
    st.ipam = parseResult(await ipamCall(c, conf, "ADD"), c.version);
    trace("ipam done");
    if (!st.ipam.ips?.length) {
      await ipamCall(c, conf, "DEL").catch(() => {/* best effort: the missing IP config is the error */});
      throw new CniError(ErrCode.InvalidNetworkConfig, "IPAM plugin returned missing IP config");
    }
  },
  async undo({ c, conf }) {
    if (conf.ipam) await ipamCall(c, conf, "DEL");
  },
};

/** `bridge`: the bridge exists, is a bridge and is up. Undo: none (shared by every pod, as the reference). */
const bridgeStep: Step<AddState> = {
  name: "bridge",
  run(st) {
    st.br = kernel("ensure bridge", () => ensureBridge(st.host, st.conf));
    trace("bridge ok");
  },
};

/**
 * `veth`: the pair, its container end (CNI_IFNAME) made inside the pod netns and its host end created
 * directly in our own netns: one atomic request, nothing to move afterwards. Undo: the pair is deleted.
 */
const vethStep: Step<AddState> = {
  name: "veth",
  run(st) {
    const { pod, args, conf } = st;
    kernel("create veth", () => {
      for (let i = 0;; i++) {
        const name = randomVethName();
        try {
          pod.createVeth(args.ifname, name, {
            peerNetns: HOST_NETNS,
            ...(conf.mtu ? { mtu: conf.mtu } : {}),
            ...(conf.mac ? { mac: conf.mac } : {}),
            peerMac: st.hostMac,
            // As the reference's veths: the container end's txqueuelen left to the kernel (1000), the host
            // end's 0 (vishvananda/netlink sends the peer's IFLA_TXQLEN from Veth.PeerTxQLen, 0 there).
            peerTxqlen: 0,
          });
          st.hostVeth = name;
          return;
        } catch (e) {
          if (!isExists(e) || i >= 3) throw e;
          if (pod.link(args.ifname)) throw e;
        }
      }
    });
  },
  undo({ host, hostVeth }) {
    // Deleting the host end removes the container end too.
    host.deleteLink(hostVeth);
  },
};

/** `host-veth`: the host end joins the bridge (hairpin as configured) and goes up. Undo: goes with the veth. */
const hostVethStep: Step<AddState> = {
  name: "host-veth",
  run({ host, hostVeth, br, conf }) {
    const index = need(br, "bridge").index;
    kernel("set up host veth", () => {
      host.setMaster(hostVeth, index);
      host.setHairpin(hostVeth, conf.hairpinMode);
      noRouterAdverts(hostVeth); // before it goes up (the reference: just after)
      host.setUp(hostVeth, true);
    });
    trace("veth ok");
  },
};

/**
 * `plan`: the container's addresses, gateways and routes from the IPAM result (isGateway, isDefaultGateway).
 * Undo: none (computes only).
 */
const planStep: Step<AddState> = {
  name: "plan",
  run(st) {
    const { conf, ipam } = st;
    st.routes = [...(ipam.routes ?? [])];
    st.ips = (ipam.ips ?? []).map((ip) => ({ ...ip, interface: 2 }));
    for (const ip of st.ips) {
      if (!ip.gateway && conf.isGateway) ip.gateway = calcGateway(ip.address);
      if (conf.isGateway && ip.gateway) st.gws.push(`${ip.gateway}/${ip.address.split("/")[1]}`);
      if (conf.isDefaultGateway && ip.gateway) {
        const def = familyOf(ip.address) === "4" ? "0.0.0.0/0" : "::/0";
        const clash = st.routes.find((r) => r.dst === def && r.gw && r.gw !== ip.gateway);
        if (clash) {
          cfgErr(`isDefaultGateway ineffective because IPAM sets default route via "${clash.gw}"`);
        }
        st.routes.push({ dst: def, gw: ip.gateway });
      }
    }
  },
};

/**
 * `pod-sysctls`: as the reference, for a pod with IP configuration: no IPv6 DAD unless enabledad (the
 * addresses, link-local included, are usable at once instead of ~1 s "tentative"; kubernetes #54800),
 * enabledad turns on enhanced DAD; arp_notify (a gratuitous ARP when the interface comes up, so neighbours
 * drop a stale entry of a reused IP); keep_addr_on_down when the pod has IPv6 (its addresses survive a link
 * flap). Written before the interface goes up. Undo: none (they go with the veth).
 */
const podSysctls: Step<AddState> = {
  name: "pod-sysctls",
  run({ ips, conf, args, os }) {
    if (!conf.ipam) return;
    const v6 = ips.some((i) => familyOf(i.address) === "6");
    const dev = args.ifname;
    os.inNetns({ path: args.netns }, () => {
      if (conf.enableDad) {
        trySysctl(`net/ipv6/conf/${dev}/enhanced_dad`, "1");
        trySysctl(`net/ipv6/conf/${dev}/accept_dad`, "1");
      } else trySysctl(`net/ipv6/conf/${dev}/accept_dad`, "0");
      trySysctl(`net/ipv4/conf/${dev}/arp_notify`, "1");
      if (v6) trySysctl(`net/ipv6/conf/${dev}/keep_addr_on_down`, "1");
    });
  },
};

/** A result route's numeric scope (spec 1.1) as the netlink layer names it; none = universe (0). */
function routeScope(scope: number | undefined): "universe" | "link" | "host" {
  switch (scope ?? 0) {
    case 0:
      return "universe";
    case 253:
      return "link";
    case 254:
      return "host";
  }
  throw new CniError(
    ErrCode.InvalidNetworkConfig,
    "unsupported route scope",
    `route scope ${scope} is not supported (0 universe, 253 link or 254 host)`,
  );
}

/** `container`: CNI_IFNAME up with its addresses and routes. Undo: goes with the veth. */
const containerStep: Step<AddState> = {
  name: "container",
  run(st) {
    const { pod, args, ips, routes } = st;
    st.cont = kernel("configure container interface", () => {
      pod.setUp(args.ifname, true);
      for (const ip of ips) pod.addAddr(args.ifname, ip.address, { broadcast: true });
      for (const r of routes) {
        const fam = familyOf(r.dst);
        const gw = r.gw ?? ips.find((i) => familyOf(i.address) === fam && i.gateway)?.gateway;
        // As the reference (pkg/ipam ConfigureIface): scope universe unless the route names one (also for
        // a route without a gateway), the route's priority and table.
        pod.replaceRoute({
          dst: parseCidr(r.dst, "routes.dst"),
          dev: args.ifname,
          ...(gw ? { via: parseIp(gw, "gateway") } : {}),
          scope: routeScope(r.scope),
          ...(r.priority !== undefined ? { metric: r.priority } : {}),
          ...(r.table !== undefined ? { table: r.table } : {}),
        });
      }
      return pod.link(args.ifname)!;
    });
  },
};

/**
 * `bridge-addr`: the gateway addresses on the bridge (isGateway) and ip_forward. Undo: none (the gateway
 * serves every pod of the subnet; a conflicting address is taken back by ensureBridgeAddr itself).
 */
const bridgeAddr: Step<AddState> = {
  name: "bridge-addr",
  run(st) {
    const { host, br, gws, conf } = st;
    const b = need(br, "bridge");
    kernel("configure bridge", () => {
      for (const g of gws) ensureBridgeAddr(host, b, g, conf.forceAddress);
      for (const fam of new Set(gws.map((g) => familyOf(g)))) enableForward(fam);
      // The bridge took the lowest port MAC when the first port joined: pin it, so it stays as pods come and
      // go (as the reference, after the port and the gateway address; pinned before the first port, the
      // bridge keeps bridge_id 8000.00:00:00:00:00:00). Re-read for the result's MAC.
      const now = host.link(b.index) ?? b;
      if (gws.length && now.mac) host.setMac(now.index, now.mac);
      st.br = now;
    });
    trace("addresses, routes, bridge ok");
  },
};

/** The attachment the masquerade rules are for. */
function attachment({ conf, args }: { conf: BridgeConf; args: CmdArgs }) {
  return { network: conf.name, ifname: args.ifname, containerId: args.containerId };
}

/** Removes the container's masquerade rules (best effort for rules that never got made). */
async function teardownOwnMasq(st: AddState): Promise<void> {
  const { masqBackend, masqTeardown } = await import("./masq.ts");
  const nft = masqBackend(st.conf.ipMasqBackend) === "nftables";
  await masqTeardown(attachment(st), ipFamilies(st.conf, []), [], nft);
}

/**
 * `masq`: the per-container masquerade rules (ipMasq) in the configured backend (lib/cni/masq.ts). Undo:
 * they are removed; also after a half setup.
 */
const masqStep: Step<AddState> = {
  name: "masq",
  async run(st) {
    const { conf, ips } = st;
    if (!conf.ipMasq || !ips.length) return;
    const { masqBackend, masqSetup } = await import("./masq.ts");
    try {
      await masqSetup(masqBackend(conf.ipMasqBackend), attachment(st), ips.map((i) => i.address));
    } catch (e) {
      await teardownOwnMasq(st).catch(() => {/* best effort: the step's own error is the one reported */});
      throw e;
    }
    trace("masq ok");
  },
  async undo(st) {
    if (st.conf.ipMasq && st.ips.length) await teardownOwnMasq(st);
  },
};

/** `result`: the CNI result (interfaces, IPs, routes, DNS). Undo: none. */
const resultStep: Step<AddState> = {
  name: "result",
  run(st) {
    const { conf, args, hostVeth, hostMac, ips, routes, ipam } = st;
    const br = need(st.br, "bridge"), cont = need(st.cont, "container interface");
    const interfaces: CniInterface[] = [
      { name: br.name, mac: br.mac ?? undefined },
      { name: hostVeth, mac: hostMac },
      { name: args.ifname, mac: cont.mac ?? undefined, sandbox: args.netns },
    ];
    if (conf.mtu) { for (const i of interfaces) i.mtu = conf.mtu; }
    const result: CniResult = { interfaces, ips, routes };
    if (!ips.length) delete result.ips;
    if (!routes.length) delete result.routes;
    const dns = conf.dns ?? ipam.dns;
    if (dns) result.dns = dns;
    st.result = result;
  },
};

/** ADD's steps, in order; on a failure the done ones are undone in reverse (nothing half-made is left). */
const ADD_STEPS: readonly Step<AddState>[] = [
  ifnameFree,
  ipamStep,
  bridgeStep,
  vethStep,
  hostVethStep,
  planStep,
  podSysctls,
  containerStep,
  bridgeAddr,
  masqStep,
  resultStep,
];

async function add(c: PluginCall): Promise<CniResult> {
  const conf = loadBridgeConf(c.conf, c.version, c.args.args);
  // An unknown ipMasqBackend fails before any change (the reference finds out after the veth, then undoes).
  if (conf.ipMasq && conf.ipMasqBackend !== null) (await import("./masq.ts")).masqBackend(conf.ipMasqBackend);
  const nl = await netlink();
  const os = await osCalls();
  trace("netlink loaded");
  const pod = await openPod(c.args.netns);
  const host = nl.openNetlink();
  trace("handles open");
  const st: AddState = {
    c,
    conf,
    args: c.args,
    os,
    pod,
    host,
    hostMac: randomMac(),
    ipam: {},
    hostVeth: "",
    ips: [],
    routes: [],
    gws: [],
  };
  try {
    await runSteps(ADD_STEPS, st);
    return need(st.result, "result");
  } catch (e) {
    // The step's own error (its CNI code) is the answer; the undos were best effort.
    throw e instanceof StepError ? e.cause : e;
  } finally {
    pod.close();
    host.close();
  }
}

/**
 * DEL: the config as ADD reads it, or, when ADD would refuse it (DEL is best-effort cleanup and must not
 * fail on input its ADD refused), only what cleanup needs: the bridge, ipMasq and the ipam section, each
 * taken when well-formed; CNI_ARGS are not needed.
 */
function loadForDel(c: PluginCall): BridgeConf {
  try {
    return loadBridgeConf(c.conf, c.version, c.args.args);
  } catch (e) {
    if (!(e instanceof CniError)) throw e;
    return lenientConf(c.conf, c.version);
  }
}

function lenientConf(c: Record<string, unknown>, version: string): BridgeConf {
  const br = typeof c.bridge === "string" && /^[^/:\s]{1,15}$/.test(c.bridge) ? c.bridge : "cni0";
  const ipam = isObj(c.ipam) && typeof c.ipam.type === "string" && c.ipam.type ? c.ipam : null;
  return {
    name: c.name as string,
    cniVersion: version,
    bridge: br,
    isGateway: false,
    isDefaultGateway: false,
    forceAddress: false,
    ipMasq: c.ipMasq === true,
    ipMasqBackend: typeof c.ipMasqBackend === "string" ? c.ipMasqBackend : null,
    mtu: 0,
    hairpinMode: false,
    enableDad: false,
    mac: null,
    ipam,
    dns: null,
  };
}

/** The reference bridge's NetConf: the fields whose keys are matched as encoding/json does. */
const BRIDGE_SHAPE: Shape = {
  ...NET_CONF,
  bridge: null,
  isGateway: null,
  isDefaultGateway: null,
  forceAddress: null,
  ipMasq: null,
  ipMasqBackend: null,
  mtu: null,
  hairpinMode: null,
  promiscMode: null,
  vlan: null,
  vlanTrunk: null,
  preserveDefaultVlan: null,
  macspoofchk: null,
  enabledad: null,
  disableContainerInterface: null,
  portIsolation: null,
};

async function del(c: PluginCall): Promise<void> {
  const conf = loadForDel(c);
  const args = c.args;
  // The container's addresses, read before its interface goes: they name the exact masquerade rules to
  // delete (one iptables-restore); without them (netns gone) the rules are found by chain name instead.
  const addrs: string[] = [];
  if (args.netns) {
    let exists = true;
    try {
      Deno.statSync(args.netns);
    } catch {
      exists = false;
    }
    if (exists) {
      const nl = await netlink();
      let pod: NetlinkHandle | null = null;
      try {
        pod = nl.openNetlink({ path: args.netns });
      } catch { /* netns going away: nothing left in it */ }
      if (pod) {
        try {
          trace("pod handle open");
          kernel("delete container interface", () => {
            if (!conf.ipMasq) {
              // Nothing to read first: delete by name (one lookup, none of the link attributes parsed).
              try {
                pod!.deleteLink(args.ifname);
              } catch (e) {
                if ((e as { notFound?: boolean })?.notFound !== true) throw e;
              }
              return;
            }
            const link = pod!.link(args.ifname);
            if (!link) return;
            for (const a of pod!.addrs()) {
              if (a.index === link.index && a.scope === "global") addrs.push(`${a.local}/${a.prefix}`);
            }
            pod!.deleteLink(link.index);
          });
          trace("container interface deleted");
        } finally {
          pod.close();
        }
      }
    }
  }
  if (conf.ipam) await ipamCall(c, conf, "DEL");
  trace("ipam released");
  if (conf.ipMasq) {
    const { delLooksInNft, masqTeardown } = await import("./masq.ts");
    await masqTeardown(
      attachment({ conf, args }),
      ipFamilies(conf, addrs),
      addrs,
      delLooksInNft(conf.ipMasqBackend),
    );
  }
}

function checkErr(details: string): never {
  throw new CniError(ErrCode.CheckFailed, "bridge CHECK failed", details);
}

async function check(c: PluginCall): Promise<void> {
  const conf = loadBridgeConf(c.conf, c.version, c.args.args);
  const args: CmdArgs = c.args;
  if (c.conf.prevResult === undefined) checkErr("required prevResult missing");
  const prev = parseResult(c.conf.prevResult, c.version);
  if (conf.ipam) await ipamCall(c, conf, "CHECK");
  const nl = await netlink();
  const pod = await openPod(args.netns);
  const host = nl.openNetlink();
  try {
    const br = host.link(conf.bridge);
    if (!br || br.kind !== "bridge") checkErr(`bridge ${conf.bridge} not found`);
    const contPrev = prev.interfaces?.find((i) => i.name === args.ifname && i.sandbox);
    if (!contPrev) checkErr(`prevResult has no interface ${args.ifname} with a sandbox`);
    const cont = pod.link(args.ifname);
    if (!cont) checkErr(`container interface ${args.ifname} not found in ${args.netns}`);
    if (cont.kind !== "veth") checkErr(`${args.ifname} is not a veth`);
    if (contPrev.mac && cont.mac !== contPrev.mac.toLowerCase()) {
      checkErr(`${args.ifname} MAC ${cont.mac} differs from ${contPrev.mac}`);
    }
    if (conf.mtu && cont.mtu !== conf.mtu) checkErr(`${args.ifname} MTU ${cont.mtu}, expected ${conf.mtu}`);
    const hostPrev = prev.interfaces?.find((i) => !i.sandbox && i.name !== conf.bridge);
    const hv = cont.parent !== null ? host.link(cont.parent) : null;
    if (!hv || (hostPrev && hv.name !== hostPrev.name)) checkErr(`host end of ${args.ifname} not found`);
    if (hv.master !== br.index) checkErr(`${hv.name} is not a port of ${conf.bridge}`);
    const addrs = pod.addrs().filter((a) => a.index === cont.index).map((a) => `${a.local}/${a.prefix}`);
    for (const ip of prev.ips ?? []) {
      if (!addrs.includes(ip.address)) checkErr(`address ${ip.address} missing on ${args.ifname}`);
    }
    const routes = pod.routes();
    for (const r of prev.routes ?? []) {
      const dst = r.dst === "0.0.0.0/0" || r.dst === "::/0" ? "default" : r.dst;
      if (!routes.some((x) => x.dst === dst && x.dev === cont.index && (!r.gw || x.gateway === r.gw))) {
        checkErr(`route ${r.dst}${r.gw ? ` via ${r.gw}` : ""} missing in ${args.netns}`);
      }
    }
    if (conf.isGateway) {
      const bAddrs = host.addrs().filter((a) => a.index === br.index).map((a) => a.local);
      for (const ip of prev.ips ?? []) {
        if (ip.gateway && !bAddrs.includes(ip.gateway)) {
          checkErr(`gateway ${ip.gateway} missing on ${conf.bridge}`);
        }
      }
    }
    if (conf.ipMasq) {
      const { masqBackend, masqMissing } = await import("./masq.ts");
      const ips = (prev.ips ?? []).map((ip) => ip.address.split("/")[0]);
      const missing = await masqMissing(masqBackend(conf.ipMasqBackend), attachment({ conf, args }), ips);
      if (missing) checkErr(missing);
    }
  } finally {
    pod.close();
    host.close();
  }
}

/** The plugin. */
export const plugin: Plugin = {
  shape: BRIDGE_SHAPE,
  add,
  del,
  check,
  async status(c: PluginCall) {
    const conf = loadBridgeConf(c.conf, c.version, "");
    if (conf.ipam) await ipamCall(c, conf, "STATUS");
  },
  async gc(c: PluginCall) {
    const conf = loadBridgeConf(c.conf, c.version, "");
    if (conf.ipam) await ipamCall(c, conf, "GC");
    if (conf.ipMasq) {
      // Chains of containers that are gone (e.g. an ADD killed after its iptables step).
      const { masqGc } = await import("./masq.ts");
      const { validAttachments } = await import("./host_local.ts");
      const valid = validAttachments(c.conf);
      if (valid === null) return; // no list: nothing collected (host-local's GC says so)
      await masqGc(conf.name, valid, ipFamilies(conf, []));
    }
  },
};
