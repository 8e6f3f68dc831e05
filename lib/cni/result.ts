/**
 * CNI results: the internal (spec 1.1.0) shape and conversion from/to every older result shape
 * (0.1.0/0.2.0 `ip4`/`ip6`, 0.3.x/0.4.0 with `version` per IP, 1.0.0, 1.1.0). Field order in the output
 * follows the reference library's structs so results diff cleanly against the Go plugins.
 * @module
 */
import { isObj } from "../base/json.ts";
import { CniError, compareVersions, ErrCode } from "./spec.ts";

/** An interface in a result. */
export interface CniInterface {
  name: string;
  mac?: string;
  /** spec 1.1 */
  mtu?: number;
  sandbox?: string;
  /** spec 1.1 */
  socketPath?: string;
  /** spec 1.1 */
  pciID?: string;
}

/** An address in a result. */
export interface CniIPConfig {
  /** Index into `interfaces`. */
  interface?: number;
  /** CIDR with the host part, e.g. "10.244.1.5/24". */
  address: string;
  gateway?: string;
}

/** A route in a result. */
export interface CniRoute {
  dst: string;
  gw?: string;
  /** spec 1.1 */
  mtu?: number;
  /** spec 1.1 */
  advmss?: number;
  /** spec 1.1 */
  priority?: number;
  /** spec 1.1 */
  table?: number;
  /** spec 1.1 */
  scope?: number;
}

/** DNS settings in a result. */
export interface CniDNS {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** A result in the internal (1.1.0) shape; `cniVersion` is filled on output. */
export interface CniResult {
  interfaces?: CniInterface[];
  ips?: CniIPConfig[];
  routes?: CniRoute[];
  dns?: CniDNS;
}

/** Family of an address or CIDR text. */
export function familyOf(addr: string): "4" | "6" {
  return addr.includes(":") ? "6" : "4";
}

function dnsOut(d: CniDNS | undefined): CniDNS {
  const o: CniDNS = {};
  if (d?.nameservers?.length) o.nameservers = d.nameservers;
  if (d?.domain) o.domain = d.domain;
  if (d?.search?.length) o.search = d.search;
  if (d?.options?.length) o.options = d.options;
  return o;
}

function routeOut(r: CniRoute, v11: boolean): CniRoute {
  const o: CniRoute = { dst: r.dst };
  if (r.gw) o.gw = r.gw;
  if (v11) {
    for (const k of ["mtu", "advmss", "priority", "table", "scope"] as const) {
      if (r[k] !== undefined) o[k] = r[k];
    }
  }
  return o;
}

/** `x` with the keys of every object in it in Go's map order (sorted by bytes; the keys here are ASCII). */
function sortedKeys(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sortedKeys);
  if (x === null || typeof x !== "object") return x;
  const o = x as Record<string, unknown>;
  return Object.fromEntries(Object.keys(o).sort().map((k) => [k, sortedKeys(o[k])]));
}

/**
 * Renders `r` in the shape of `version`. 0.1.0/0.2.0 keep the first IPv4 and IPv6 address and split the
 * routes by family (error 1 when there is no address to carry them).
 */
export function formatResult(r: CniResult, version: string): Record<string, unknown> {
  if (compareVersions(version, "0.3.0") < 0) {
    const out: Record<string, unknown> = { cniVersion: version };
    const routes = r.routes ?? [];
    for (const fam of ["4", "6"] as const) {
      const ip = (r.ips ?? []).find((i) => familyOf(i.address) === fam);
      if (!ip) continue;
      const o: Record<string, unknown> = { ip: ip.address };
      if (ip.gateway) o.gateway = ip.gateway;
      const rs = routes.filter((x) => familyOf(x.dst) === fam).map((x) => routeOut(x, false));
      if (rs.length) o.routes = rs;
      out[`ip${fam}`] = o;
    }
    if (!out.ip4 && !out.ip6) {
      throw new CniError(
        ErrCode.IncompatibleVersion,
        "cannot convert result",
        `a ${version} result needs an IP address`,
      );
    }
    out.dns = dnsOut(r.dns);
    return out;
  }
  const v04 = compareVersions(version, "1.0.0") < 0;
  const v11 = compareVersions(version, "1.1.0") >= 0;
  const out: Record<string, unknown> = { cniVersion: version };
  if (r.interfaces?.length) {
    out.interfaces = r.interfaces.map((i) => {
      const o: CniInterface = { name: i.name };
      if (i.mac) o.mac = i.mac;
      if (v11 && i.mtu) o.mtu = i.mtu;
      if (i.sandbox) o.sandbox = i.sandbox;
      if (v11 && i.socketPath) o.socketPath = i.socketPath;
      if (v11 && i.pciID) o.pciID = i.pciID;
      return o;
    });
  }
  if (r.ips?.length) {
    out.ips = r.ips.map((ip) => {
      const o: Record<string, unknown> = {};
      if (v04) o.version = familyOf(ip.address);
      if (ip.interface !== undefined) o.interface = ip.interface;
      o.address = ip.address;
      if (ip.gateway) o.gateway = ip.gateway;
      return o;
    });
  }
  if (r.routes?.length) out.routes = r.routes.map((x) => routeOut(x, v11));
  // As libcni's types (v1.2+): a 1.x result leaves out an empty dns (types/100's MarshalJSON), the 0.x
  // shapes print `"dns":{}` (omitempty does not apply to a struct).
  const dns = dnsOut(r.dns);
  if (v04 || Object.keys(dns).length) out.dns = dns;
  // types/100's MarshalJSON re-marshals through a map: a 1.x result's keys come out sorted at every level.
  return v04 ? out : sortedKeys(out) as Record<string, unknown>;
}

function bad(what: string): never {
  throw new CniError(ErrCode.DecodingFailure, "failed to parse result", what);
}

function str(x: unknown, what: string): string {
  if (typeof x !== "string") bad(`${what} must be a string`);
  return x;
}

function parseRoutes(x: unknown, what: string): CniRoute[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) bad(`${what} must be a list`);
  return x.map((r, i) => {
    if (!isObj(r)) bad(`${what}[${i}] must be an object`);
    const o: CniRoute = { dst: str(r.dst, `${what}[${i}].dst`) };
    if (r.gw !== undefined && r.gw !== null) o.gw = str(r.gw, `${what}[${i}].gw`);
    for (const k of ["mtu", "advmss", "priority", "table", "scope"] as const) {
      if (typeof r[k] === "number") o[k] = r[k] as number;
    }
    return o;
  });
}

function parseDns(x: unknown): CniDNS | undefined {
  if (!isObj(x)) return undefined;
  const o: CniDNS = {};
  if (Array.isArray(x.nameservers)) o.nameservers = x.nameservers.map(String);
  if (typeof x.domain === "string") o.domain = x.domain;
  if (Array.isArray(x.search)) o.search = x.search.map(String);
  if (Array.isArray(x.options)) o.options = x.options.map(String);
  return o;
}

/**
 * Parses a result of any supported version (a delegate's output or a prevResult) into the internal shape.
 * The version is the object's own `cniVersion`, else `fallbackVersion`.
 */
export function parseResult(x: unknown, fallbackVersion: string): CniResult {
  if (!isObj(x)) bad("a result must be a JSON object");
  const version = typeof x.cniVersion === "string" && x.cniVersion ? x.cniVersion : fallbackVersion;
  const out: CniResult = {};
  if (compareVersions(version, "0.3.0") < 0) {
    const ips: CniIPConfig[] = [];
    const routes: CniRoute[] = [];
    for (const k of ["ip4", "ip6"]) {
      const v = x[k];
      if (v === undefined || v === null) continue;
      if (!isObj(v)) bad(`${k} must be an object`);
      const ip: CniIPConfig = { address: str(v.ip, `${k}.ip`) };
      if (typeof v.gateway === "string") ip.gateway = v.gateway;
      ips.push(ip);
      routes.push(...parseRoutes(v.routes, `${k}.routes`));
    }
    if (ips.length) out.ips = ips;
    if (routes.length) out.routes = routes;
  } else {
    if (Array.isArray(x.interfaces)) {
      out.interfaces = x.interfaces.map((i, n) => {
        if (!isObj(i)) bad(`interfaces[${n}] must be an object`);
        const o: CniInterface = { name: str(i.name, `interfaces[${n}].name`) };
        if (typeof i.mac === "string") o.mac = i.mac;
        if (typeof i.mtu === "number") o.mtu = i.mtu;
        if (typeof i.sandbox === "string") o.sandbox = i.sandbox;
        if (typeof i.socketPath === "string") o.socketPath = i.socketPath;
        if (typeof i.pciID === "string") o.pciID = i.pciID;
        return o;
      });
    }
    if (x.ips !== undefined && x.ips !== null) {
      if (!Array.isArray(x.ips)) bad("ips must be a list");
      out.ips = x.ips.map((i, n) => {
        if (!isObj(i)) bad(`ips[${n}] must be an object`);
        const o: CniIPConfig = { address: str(i.address, `ips[${n}].address`) };
        if (typeof i.interface === "number") o.interface = i.interface;
        if (typeof i.gateway === "string") o.gateway = i.gateway;
        return o;
      });
    }
    const routes = parseRoutes(x.routes, "routes");
    if (routes.length) out.routes = routes;
  }
  const dns = parseDns(x.dns);
  if (dns) out.dns = dns;
  return out;
}
