/**
 * The host-local IPAM plugin: ranges/rangeStart/rangeEnd/gateway/routes, requested IPs (CNI_ARGS `IP=`,
 * `args.cni.ips`, `runtimeConfig.ips`), round-robin allocation from the last reserved IP, the reference's
 * on-disk format and lock ({@link DiskStore}), CHECK, and GC against `cni.dev/valid-attachments`.
 * Allocation probes O_EXCL creates from last_reserved + 1, so its cost does not grow with the number of
 * allocated IPs (no directory scan per ADD; see host_local_store.ts).
 * @module
 */
import { isObj } from "../base/json.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import { DiskStore, type Owner } from "./host_local_store.ts";
import type { CniDNS, CniIPConfig, CniResult, CniRoute } from "./result.ts";
import { log, type Plugin, type PluginCall } from "./skel.ts";
import { CniError, compareVersions, configError, ErrCode, parseCniArgs } from "./spec.ts";
import { readCappedText } from "../base/capped_read.ts";
import { HOST_LOCAL_IPAM, NET_CONF } from "./gojson.ts";

/** Default data directory, as the reference. */
export const DEFAULT_DATA_DIR = "/var/lib/cni/networks";

/** One range of a range set, canonicalized. */
export interface IPRange {
  subnet: IPNet;
  rangeStart: IPAddr;
  rangeEnd: IPAddr;
  gateway: IPAddr;
}

/** The parsed `ipam` section. */
export interface HostLocalConf {
  /** Network name (the store's directory). */
  name: string;
  rangeSets: IPRange[][];
  routes: CniRoute[];
  dns?: CniDNS;
  dataDir: string;
  /** Requested IPs from every source, in the reference's order. */
  requested: IPAddr[];
}

const cfgErr: (details: string) => never = configError("invalid host-local config");

function parseIP(x: unknown, field: string): IPAddr {
  const ip = typeof x === "string" ? IPAddr.tryParse(x) : null;
  if (!ip) cfgErr(`${field}: '${String(x)}' is not an IP address`);
  return ip;
}

/** Parses `x` as a range (subnet/rangeStart/rangeEnd/gateway) and applies the reference's defaults/checks. */
export function canonicalizeRange(x: unknown, field: string): IPRange {
  if (!isObj(x)) cfgErr(`${field} must be an object with a "subnet"`);
  if (typeof x.subnet !== "string") cfgErr(`${field}.subnet is missing (e.g. "10.244.1.0/24")`);
  const m = /^([^/]+)\/(\d+)$/.exec(x.subnet);
  const host = m ? IPAddr.tryParse(m[1]) : null;
  const subnet = m ? IPNet.tryParse(x.subnet) : null;
  if (!host || !subnet) cfgErr(`${field}.subnet: '${x.subnet}' is not a CIDR`);
  if (subnet.prefix > host.bits - 2) cfgErr(`${field}: Network ${x.subnet} too small to allocate from`);
  // Go canonicalizes an IPv4-mapped address to 4 bytes, leaving a 16-byte mask: the reference refuses it.
  if (host.family === 6 && host.value >> 32n === 0xffffn && subnet.prefix >= 96) {
    cfgErr(
      `${field}.subnet: '${x.subnet}': IPNet IP and Mask version mismatch (write the IPv4 range as a.b.c.d/n)`,
    );
  }
  if (!host.equals(subnet.ip)) {
    cfgErr(
      `${field}: Network has host bits set. For a subnet mask of length ${subnet.prefix} the network address is ${subnet.ip}`,
    );
  }
  const inNet = (ip: IPAddr, what: string) => {
    if (!subnet.contains(ip)) cfgErr(`${field}: ${what} ${ip} not in network ${subnet}`);
    return ip;
  };
  // As the reference (allocator.Range.Canonicalize): a given gateway must be in the subnet.
  const gateway = x.gateway !== undefined
    ? inNet(parseIP(x.gateway, `${field}.gateway`), "gateway")
    : subnet.ip.add(1);
  const rangeStart = x.rangeStart !== undefined
    ? inNet(parseIP(x.rangeStart, `${field}.rangeStart`), "RangeStart")
    : subnet.ip.add(1);
  const rangeEnd = x.rangeEnd !== undefined
    ? inNet(parseIP(x.rangeEnd, `${field}.rangeEnd`), "RangeEnd")
    : subnet.family === 4
    ? subnet.last.add(-1)
    : subnet.last;
  if (rangeStart.compare(rangeEnd) > 0) {
    cfgErr(`${field}: rangeStart ${rangeStart} is after rangeEnd ${rangeEnd}`);
  }
  return { subnet, rangeStart, rangeEnd, gateway };
}

/** True when `ip` is in `r` (subnet and start..end). */
export function rangeContains(r: IPRange, ip: IPAddr): boolean {
  return r.subnet.contains(ip) && ip.compare(r.rangeStart) >= 0 && ip.compare(r.rangeEnd) <= 0;
}

function rangesOverlap(a: IPRange, b: IPRange): boolean {
  return a.subnet.family === b.subnet.family && (
    rangeContains(a, b.rangeStart) || rangeContains(a, b.rangeEnd) ||
    rangeContains(b, a.rangeStart) || rangeContains(b, a.rangeEnd)
  );
}

function rangeSetString(rs: IPRange[]): string {
  return rs.map((r) => `${r.rangeStart}-${r.rangeEnd}`).join(",");
}

function parseRoutes(x: unknown, field: string): CniRoute[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) cfgErr(`${field} must be a list of {"dst": CIDR, "gw"?: IP}`);
  return x.map((r, i) => {
    if (!isObj(r) || typeof r.dst !== "string") cfgErr(`${field}[${i}].dst is missing`);
    const net = IPNet.tryParse(r.dst);
    if (!net) cfgErr(`${field}[${i}].dst: '${r.dst}' is not a CIDR`);
    const o: CniRoute = { dst: r.dst };
    if (r.gw !== undefined && r.gw !== null) o.gw = parseIP(r.gw, `${field}[${i}].gw`).toString();
    // Spec 1.1's route fields, as types.Route: mtu, advmss and priority omitted when 0; table and scope kept.
    for (const k of ["mtu", "advmss", "priority", "table", "scope"] as const) {
      const v = r[k];
      if (v === undefined || v === null) continue;
      if (!Number.isInteger(v) || (v as number) < 0) {
        cfgErr(`${field}[${i}].${k} must be a non-negative integer`);
      }
      if (v !== 0 || k === "table" || k === "scope") o[k] = v as number;
    }
    return o;
  });
}

function parseResolvConf(path: string): CniDNS {
  let text: string;
  try {
    text = readCappedText(path, 1024 * 1024);
  } catch (e) {
    cfgErr(`resolvConf: cannot read ${path}: ${(e as Error).message}`);
  }
  const d: CniDNS = {};
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f[0] === "nameserver" && f[1]) (d.nameservers ??= []).push(f[1]);
    else if (f[0] === "domain" && f[1]) d.domain = f[1];
    else if (f[0] === "search") d.search = f.slice(1);
    else if (f[0] === "options") (d.options ??= []).push(...f.slice(1));
  }
  return d;
}

function requestedFrom(x: unknown, field: string): IPAddr[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) cfgErr(`${field} must be a list of IPs`);
  return x.map((s, i) => {
    if (typeof s !== "string") cfgErr(`${field}[${i}] must be a string`);
    return parseIP(s.split("/")[0], `${field}[${i}]`);
  });
}

/** Parses the network config for host-local (the `ipam` section plus args/runtimeConfig and CNI_ARGS). */
export function loadConf(conf: Record<string, unknown>, version: string, cniArgs: string): HostLocalConf {
  const ipam = conf.ipam;
  if (!isObj(ipam)) cfgErr(`IPAM config missing 'ipam' key`);
  const requested: IPAddr[] = [];
  const a = parseCniArgs(cniArgs, ["IP"]);
  if (a.IP) {
    for (const s of a.IP.split(",")) {
      const ip = IPAddr.tryParse(s.trim());
      if (!ip) throw new CniError(ErrCode.InvalidEnv, "invalid CNI_ARGS", `invalid IP "${s.trim()}"`);
      requested.push(ip);
    }
  }
  const args = conf.args;
  if (isObj(args) && isObj(args.cni)) requested.push(...requestedFrom(args.cni.ips, "args.cni.ips"));
  const rc = isObj(conf.runtimeConfig) ? conf.runtimeConfig : {};
  requested.push(...requestedFrom(rc.ips, "runtimeConfig.ips"));

  const sets: unknown[][] = [];
  if (isObj(rc) && Array.isArray(rc.ipRanges)) sets.push(...rc.ipRanges as unknown[][]);
  for (const k of ["subnet", "rangeStart", "rangeEnd", "gateway", "resolvConf"]) {
    if (ipam[k] !== undefined && ipam[k] !== null && typeof ipam[k] !== "string") {
      cfgErr(`ipam.${k} must be a string, got ${JSON.stringify(ipam[k])}`);
    }
  }
  if (typeof ipam.subnet === "string") sets.push([ipam]);
  if (ipam.ranges !== undefined) {
    if (!Array.isArray(ipam.ranges)) cfgErr(`ipam.ranges must be a list of range sets (lists of ranges)`);
    sets.push(...ipam.ranges as unknown[][]);
  }
  if (sets.length === 0) cfgErr(`no IP ranges specified (set ipam.ranges or ipam.subnet)`);
  const rangeSets = sets.map((set, i) => {
    if (!Array.isArray(set) || set.length === 0) cfgErr(`invalid range set ${i}: empty range set`);
    const rs = set.map((r, j) => canonicalizeRange(r, `ranges[${i}][${j}]`));
    if (rs.some((r) => r.subnet.family !== rs[0].subnet.family)) {
      cfgErr(`invalid range set ${i}: mixed address families`);
    }
    for (let x = 0; x < rs.length; x++) {
      for (let y = x + 1; y < rs.length; y++) {
        if (rangesOverlap(rs[x], rs[y])) {
          cfgErr(`invalid range set ${i}: subnets ${rs[x].subnet} and ${rs[y].subnet} overlap`);
        }
      }
    }
    return rs;
  });
  const v4 = rangeSets.filter((s) => s[0].subnet.family === 4).length;
  if ((v4 > 1 || rangeSets.length - v4 > 1) && compareVersions(version, "0.3.0") < 0) {
    cfgErr(`CNI version ${version} does not support more than 1 address per family`);
  }
  for (let i = 0; i < rangeSets.length; i++) {
    for (let j = i + 1; j < rangeSets.length; j++) {
      if (rangeSets[i].some((a) => rangeSets[j].some((b) => rangesOverlap(a, b)))) {
        cfgErr(`range set ${i} overlaps with ${j}`);
      }
    }
  }
  if (ipam.dataDir !== undefined && typeof ipam.dataDir !== "string") cfgErr(`ipam.dataDir must be a string`);
  let dns: CniDNS | undefined;
  if (typeof ipam.resolvConf === "string" && ipam.resolvConf) dns = parseResolvConf(ipam.resolvConf);
  return {
    name: conf.name as string,
    rangeSets,
    routes: parseRoutes(ipam.routes, "ipam.routes"),
    dns,
    dataDir: (ipam.dataDir as string | undefined) || DEFAULT_DATA_DIR,
    requested,
  };
}

/**
 * The reference's round-robin iterator over a range set: starts after the last reserved IP (when it lies in
 * the set) else at the first range's start, wraps across ranges, skips gateways, stops after one lap.
 */
export function* rangeIter(set: IPRange[], last: IPAddr | null): Generator<[IPAddr, IPRange]> {
  let idx = 0;
  let cur: IPAddr | null = null;
  let start: IPAddr | null = null;
  if (last && set.some((r) => rangeContains(r, last))) {
    idx = set.findIndex((r) => rangeContains(r, last));
    cur = last;
  } else {
    start = set[0].rangeStart;
  }
  let first = cur === null;
  for (;;) {
    let r = set[idx];
    if (first) {
      first = false;
      cur = r.rangeStart;
      start = cur;
    } else {
      if (cur!.equals(r.rangeEnd)) {
        idx = (idx + 1) % set.length;
        r = set[idx];
        cur = r.rangeStart;
      } else {
        cur = cur!.add(1);
      }
      if (start === null) start = cur;
      else if (cur.equals(start)) return;
    }
    if (cur.equals(r.gateway)) continue;
    yield [cur, r];
  }
}

/** host-local's wording, as the kubelet event shows it: `failed to allocate for range <idx>: <why>`. */
function rangeError(idx: number, why: string, details = ""): CniError {
  return new CniError(ErrCode.NoAddress, `failed to allocate for range ${idx}: ${why}`, details);
}

function allocOne(
  store: DiskStore,
  owner: Owner,
  set: IPRange[],
  idx: number,
  requested: IPAddr | null,
): CniIPConfig {
  if (requested) {
    const r = set.find((x) => rangeContains(x, requested))!;
    if (requested.equals(r.gateway)) throw rangeError(idx, `requested ip ${requested} is subnet's gateway`);
    if (!store.reserve(owner, requested, idx)) {
      throw rangeError(
        idx,
        `requested IP address ${requested} is not available in range set ${rangeSetString(set)}`,
      );
    }
    return { address: `${requested}/${r.subnet.prefix}`, gateway: r.gateway.toString() };
  }
  for (const [ip, r] of rangeIter(set, store.lastReserved(idx))) {
    if (store.reserve(owner, ip, idx)) {
      return { address: `${ip}/${r.subnet.prefix}`, gateway: r.gateway.toString() };
    }
  }
  throw rangeError(
    idx,
    `no IP addresses available in range set: ${rangeSetString(set)}`,
    "every address is reserved; `flanctl doctor` names the reservations whose container is gone",
  );
}

/** Allocates one IP per range set for `owner`. Everything is undone on failure. */
export async function allocate(c: HostLocalConf, owner: Owner): Promise<CniResult> {
  const store = new DiskStore(c.dataDir, c.name);
  await store.lock();
  try {
    const prev = store.readIndex(owner);
    const held = prev && prev.length ? store.held(owner) : prev ? store.scanFor(owner) : [];
    for (const ip of held) {
      const a = IPAddr.tryParse(ip);
      if (a && c.rangeSets.some((s) => s.some((r) => rangeContains(r, a)))) {
        throw new CniError(
          ErrCode.AlreadyExists,
          "failed to allocate",
          `${ip} has been allocated to ${owner.containerId}, duplicate allocation is not allowed`,
        );
      }
    }
    store.writeIndex(owner, []); // "in progress": a crash from here on is found by the DEL/GC scan
    const pending = [...c.requested];
    const ips: CniIPConfig[] = [];
    try {
      c.rangeSets.forEach((set, idx) => {
        const k = pending.findIndex((ip) => set.some((r) => rangeContains(r, ip)));
        const req = k >= 0 ? pending.splice(k, 1)[0] : null;
        ips.push(allocOne(store, owner, set, idx, req));
      });
      if (pending.length) {
        throw new CniError(
          ErrCode.NoAddress,
          "failed to allocate all requested IPs",
          pending.map(String).join(" ") + " (not in any range set)",
        );
      }
      store.writeIndex(owner, ips.map((i) => i.address.split("/")[0]));
    } catch (e) {
      store.releaseAll(owner);
      throw e;
    }
    const result: CniResult = { ips };
    if (c.routes.length) result.routes = c.routes;
    if (c.dns) result.dns = c.dns;
    return result;
  } finally {
    store.close();
  }
}

/** Releases every IP of `owner` (idempotent). */
export async function release(c: { dataDir: string; name: string }, owner: Owner): Promise<string[]> {
  const store = new DiskStore(c.dataDir, c.name);
  await store.lock();
  try {
    return store.releaseAll(owner);
  } finally {
    store.close();
  }
}

/**
 * Parses `cni.dev/valid-attachments` (or the older `cni.dev/attachments`); null when the list is absent or
 * null. libcni may send GC so; the reference plugins then exit 0, and so do ours, but collect nothing:
 * without the list GC would release every allocation on the node.
 */
export function validAttachments(conf: Record<string, unknown>): Owner[] | null {
  const raw = conf["cni.dev/valid-attachments"] ?? conf["cni.dev/attachments"];
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) cfgErr(`cni.dev/valid-attachments must be a list of {containerID, ifname}`);
  return raw.map((a, i) => {
    if (!isObj(a) || typeof a.containerID !== "string" || typeof a.ifname !== "string") {
      cfgErr(`cni.dev/valid-attachments[${i}] needs string containerID and ifname`);
    }
    return { containerId: a.containerID, ifname: a.ifname };
  });
}

/** Releases everything not in `valid`. Returns the released IPs. */
export async function gc(c: { dataDir: string; name: string }, valid: Owner[]): Promise<string[]> {
  const keep = new Set(valid.map((o) => `${o.containerId}\n${o.ifname}`));
  const keepId = new Set(valid.map((o) => o.containerId));
  const store = new DiskStore(c.dataDir, c.name);
  await store.lock();
  try {
    const out: string[] = [];
    for (const [ip, o] of store.scan()) {
      const ok = o.ifname === "" ? keepId.has(o.containerId) : keep.has(`${o.containerId}\n${o.ifname}`);
      if (!ok && store.releaseIp(ip, o)) out.push(ip);
    }
    for (const o of store.indexEntries()) {
      if (!keep.has(`${o.containerId}\n${o.ifname}`)) store.dropIndex(o);
    }
    return out;
  } finally {
    store.close();
  }
}

function dataDirOf(conf: Record<string, unknown>): { dataDir: string; name: string } {
  const ipam = isObj(conf.ipam) ? conf.ipam : {};
  return {
    dataDir: typeof ipam.dataDir === "string" && ipam.dataDir ? ipam.dataDir : DEFAULT_DATA_DIR,
    name: conf.name as string,
  };
}

/** The plugin. */
export const plugin: Plugin = {
  shape: { ...NET_CONF, ipam: HOST_LOCAL_IPAM },
  add(c: PluginCall) {
    const conf = loadConf(c.conf, c.version, c.args.args);
    return allocate(conf, { containerId: c.args.containerId, ifname: c.args.ifname });
  },
  async del(c: PluginCall) {
    // DEL must succeed even with a config (or CNI_ARGS) ADD would refuse: only name and dataDir matter.
    await release(dataDirOf(c.conf), { containerId: c.args.containerId, ifname: c.args.ifname });
  },
  async check(c: PluginCall) {
    const conf = loadConf(c.conf, c.version, c.args.args);
    const store = new DiskStore(conf.dataDir, conf.name);
    const held = store.held({ containerId: c.args.containerId, ifname: c.args.ifname });
    if (held.length === 0) {
      throw new CniError(
        ErrCode.CheckFailed,
        "host-local: failed to find address added by container",
        c.args.containerId,
      );
    }
    await Promise.resolve();
  },
  async status(c: PluginCall) {
    const conf = loadConf(c.conf, c.version, "");
    try {
      Deno.mkdirSync(`${conf.dataDir}/${conf.name}`, { recursive: true });
    } catch (e) {
      throw new CniError(
        ErrCode.PluginNotAvailable,
        "host-local data directory unusable",
        (e as Error).message,
      );
    }
    await Promise.resolve();
  },
  async gc(c: PluginCall) {
    const valid = validAttachments(c.conf);
    if (valid === null) return log("host-local", "GC without cni.dev/valid-attachments: nothing collected");
    await gc(dataDirOf(c.conf), valid);
  },
};
