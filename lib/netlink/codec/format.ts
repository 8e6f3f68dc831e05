/**
 * Text forms of kernel values exactly as iproute2 prints them: IPv4/IPv6 addresses (glibc `inet_ntop`),
 * MAC addresses, interface flags, NUD states, NTF flags, scopes, protocols and route types. Pure
 * functions, no FFI; hand-written because they are small tables that must match iproute2 byte for byte.
 * @module
 */
import { ParseError } from "../../base/errors.ts";
import { IPAddr } from "../../base/cidr.ts";
import { IFF_RUNNING, IFF_UP, RT_SCOPE_HOST, RT_SCOPE_LINK, RT_SCOPE_NOWHERE } from "./consts.ts";

const HEX = "0123456789abcdef";

/** Formats 4 or 16 network-order bytes like glibc `inet_ntop` (what iproute2 prints). */
export function formatIP(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length !== 16) throw new ParseError("ip", `bad address length ${b.length}`);
  const w: number[] = [];
  for (let i = 0; i < 16; i += 2) w.push((b[i] << 8) | b[i + 1]);
  // Longest run of >= 2 zero words becomes "::" (first one on ties), as glibc does.
  let bestStart = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) [bestStart, bestLen] = [i, j - i];
    i = j;
  }
  if (bestLen < 2) bestStart = -1;
  let out = "";
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      out += "::";
      i += bestLen - 1;
      continue;
    }
    // Embedded IPv4 (glibc): ::a.b.c.d, ::ffff:a.b.c.d.
    if (
      i === 6 && bestStart === 0 &&
      (bestLen === 6 || (bestLen === 7 && w[7] !== 1) || (bestLen === 5 && w[5] === 0xffff))
    ) {
      if (!out.endsWith(":")) out += ":";
      out += `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
      break;
    }
    if (out !== "" && !out.endsWith(":")) out += ":";
    out += w[i].toString(16);
  }
  return out;
}

/** Formats link-layer bytes as iproute2 does: lowercase hex pairs joined by ":". */
export function formatMac(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i++) {
    if (i) s += ":";
    s += HEX[b[i] >> 4] + HEX[b[i] & 15];
  }
  return s;
}

/** Parses "aa:bb:cc:dd:ee:ff" (also "-" separated). Throws {@link ParseError} naming `field`. */
export function parseMac(s: string, field = "mac"): Uint8Array<ArrayBuffer> {
  const parts = typeof s === "string" ? s.split(/[:-]/) : [];
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{1,2}$/.test(p))) {
    throw new ParseError(field, `'${s}' is not a MAC address (want aa:bb:cc:dd:ee:ff)`);
  }
  return new Uint8Array(parts.map((p) => parseInt(p, 16)));
}

/** Parses an IP address to network-order bytes. Throws {@link ParseError} naming `field`. */
export function parseIPBytes(s: string, field = "ip"): Uint8Array<ArrayBuffer> {
  const ip = IPAddr.tryParse(s);
  if (!ip) throw new ParseError(field, `'${s}' is not a valid IP address`);
  return ip.toBytes() as Uint8Array<ArrayBuffer>;
}

/** A parsed prefix: bytes of the address as given (host bits kept) and the prefix length. */
export interface ParsedPrefix {
  bytes: Uint8Array<ArrayBuffer>;
  prefix: number;
  family: 4 | 6;
}

/**
 * Parses "ADDR/LEN", a bare address (full-length prefix) or, when `allowDefault`, "default"
 * (0.0.0.0/0; `defaultFamily` picks v6). Host bits are kept (needed for interface addresses).
 */
export function parsePrefix(
  s: string,
  field: string,
  opts: { allowDefault?: boolean; defaultFamily?: 4 | 6 } = {},
): ParsedPrefix {
  if (opts.allowDefault && s === "default") {
    const family = opts.defaultFamily ?? 4;
    return { bytes: new Uint8Array(family === 4 ? 4 : 16), prefix: 0, family };
  }
  const slash = typeof s === "string" ? s.indexOf("/") : -1;
  const addr = slash >= 0 ? s.slice(0, slash) : s;
  const bytes = parseIPBytes(addr, field);
  const max = bytes.length * 8;
  let prefix = max;
  if (slash >= 0) {
    const p = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) {
      throw new ParseError(field, `'${s}' has a bad prefix length (0..${max})`);
    }
    prefix = Number(p);
  }
  return { bytes, prefix, family: bytes.length === 4 ? 4 : 6 };
}

/** Zeroes the host bits of `bytes` beyond `prefix` (in place) and returns it. */
export function maskBytes(bytes: Uint8Array<ArrayBuffer>, prefix: number): Uint8Array<ArrayBuffer> {
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    bytes[i] &= (0xff << (8 - keep)) & 0xff;
  }
  return bytes;
}

// Interface flags (linux/if.h) in the order iproute2's print_link_flags() prints them.
const LINK_FLAG_ORDER: [number, string][] = [
  [0x8, "LOOPBACK"],
  [0x2, "BROADCAST"],
  [0x10, "POINTOPOINT"],
  [0x1000, "MULTICAST"],
  [0x80, "NOARP"],
  [0x200, "ALLMULTI"],
  [0x100, "PROMISC"],
  [0x400, "MASTER"],
  [0x800, "SLAVE"],
  [0x4, "DEBUG"],
  [0x8000, "DYNAMIC"],
  [0x4000, "AUTOMEDIA"],
  [0x2000, "PORTSEL"],
  [0x20, "NOTRAILERS"],
  [0x1, "UP"],
  [0x10000, "LOWER_UP"],
  [0x20000, "DORMANT"],
  [0x40000, "ECHO"],
];

/** Interface flags as `ip -j link` lists them (NO-CARRIER first when up without carrier). */
export function linkFlagNames(flags: number): string[] {
  const out: string[] = [];
  if (flags & IFF_UP && !(flags & IFF_RUNNING)) out.push("NO-CARRIER");
  let rest = flags & ~IFF_RUNNING;
  for (const [bit, name] of LINK_FLAG_ORDER) {
    if (rest & bit) {
      out.push(name);
      rest &= ~bit;
    }
  }
  if (rest) out.push(rest.toString(16));
  return out;
}

const OPERSTATES = ["UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP"];

/** IF_OPER_* as iproute2 prints it. */
export function operstateName(s: number): string {
  return OPERSTATES[s] ?? String(s);
}

const NUD: [number, string][] = [
  [0x01, "INCOMPLETE"],
  [0x02, "REACHABLE"],
  [0x04, "STALE"],
  [0x08, "DELAY"],
  [0x10, "PROBE"],
  [0x20, "FAILED"],
  [0x40, "NOARP"],
  [0x80, "PERMANENT"],
];

/** NUD_* bits as `ip -j neigh` lists them ("NONE" for 0). */
export function nudNames(state: number): string[] {
  if (state === 0) return ["NONE"];
  const out: string[] = [];
  let rest = state;
  for (const [bit, name] of NUD) {
    if (state & bit) {
      out.push(name);
      rest &= ~bit;
    }
  }
  if (rest) out.push(`0x${rest.toString(16)}`);
  return out;
}

const NTF: [number, string][] = [
  [0x02, "self"],
  [0x08, "proxy"],
  [0x80, "router"],
  [0x10, "extern_learn"],
  [0x20, "offload"],
  [0x04, "master"],
  [0x40, "sticky"],
];

/** NTF_* bits as `bridge -j fdb` lists them. */
export function ntfNames(flags: number): string[] {
  const out: string[] = [];
  for (const [bit, name] of NTF) if (flags & bit) out.push(name);
  return out;
}

/** Address scope names as `ip -j addr` prints them (0 is "global"). */
export function addrScopeName(s: number): string {
  return s === 0 ? "global" : scopeTail(s);
}

/** Route scope names per the NetlinkHandle contract (0 is "universe"). */
export function routeScopeName(s: number): string {
  return s === 0 ? "universe" : scopeTail(s);
}

function scopeTail(s: number): string {
  switch (s) {
    case 200:
      return "site";
    case RT_SCOPE_LINK:
      return "link";
    case RT_SCOPE_HOST:
      return "host";
    case RT_SCOPE_NOWHERE:
      return "nowhere";
    default:
      return String(s);
  }
}

/** Scope name (universe/global, site, link, host, nowhere) or number to RT_SCOPE_* value. */
export function scopeValue(s: string | undefined, field: string): number {
  switch (s) {
    case undefined:
    case "universe":
    case "global":
      return 0;
    case "site":
      return 200;
    case "link":
      return RT_SCOPE_LINK;
    case "host":
      return RT_SCOPE_HOST;
    case "nowhere":
      return RT_SCOPE_NOWHERE;
  }
  throw new ParseError(field, `unknown scope '${s}' (want universe, link or host)`);
}

const PROTOCOLS: Record<number, string> = {
  0: "unspec",
  1: "redirect",
  2: "kernel",
  3: "boot",
  4: "static",
  8: "gated",
  9: "ra",
  10: "mrt",
  11: "zebra",
  12: "bird",
  13: "dnrouted",
  14: "xorp",
  15: "ntk",
  16: "dhcp",
  18: "keepalived",
  42: "babel",
  99: "openr",
  186: "bgp",
  187: "isis",
  188: "ospf",
  189: "rip",
  192: "eigrp",
};
const PROTOCOL_BY_NAME = new Map(Object.entries(PROTOCOLS).map(([k, v]) => [v, Number(k)]));

/** RTPROT_* as iproute2 names it (number as string when unnamed). */
export function protocolName(p: number): string {
  return PROTOCOLS[p] ?? String(p);
}

/** Protocol name or number to RTPROT_* value (default "boot", like `ip route`). */
export function protocolValue(p: number | string | undefined, field: string): number {
  if (p === undefined) return 3;
  if (typeof p === "number" && Number.isInteger(p) && p >= 0 && p <= 255) return p;
  if (typeof p === "string") {
    const v = PROTOCOL_BY_NAME.get(p) ?? (/^\d{1,3}$/.test(p) ? Number(p) : undefined);
    if (v !== undefined && v <= 255) return v;
  }
  throw new ParseError(field, `unknown route protocol '${p}' (want a name such as boot/static or 0..255)`);
}

const RTN = [
  "unspec",
  "unicast",
  "local",
  "broadcast",
  "anycast",
  "multicast",
  "blackhole",
  "unreachable",
  "prohibit",
  "throw",
  "nat",
  "xresolve",
];

/** RTN_* route type name. */
export function routeTypeName(t: number): string {
  return RTN[t] ?? String(t);
}

const RTNH_FLAGS: [number, string][] = [
  [0x1, "dead"],
  [0x4, "onlink"],
  [0x2, "pervasive"],
  [0x8, "offload"],
  [0x40, "trap"],
  [0x10, "linkdown"],
  [0x20, "unresolved"],
];

/** RTNH_F_* next-hop flags as `ip -j route` lists them. */
export function nexthopFlagNames(f: number): string[] {
  const out: string[] = [];
  for (const [bit, name] of RTNH_FLAGS) if (f & bit) out.push(name);
  return out;
}
