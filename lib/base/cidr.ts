/**
 * IPv4/IPv6 address and prefix arithmetic, and the branded address strings ({@link Ip}, {@link Cidr},
 * {@link Mac}) the kernel-facing types take. Written by hand: it is ~200 lines, every other module
 * needs it on the hot path, and the npm packages that do it (ipaddr.js, ip-cidr) either lack subnet
 * iteration or pull dependencies into every CNI start-up.
 * @module
 */
import { ParseError } from "./errors.ts";

/** Address family: 4 or 6. */
export type IPFamily = 4 | 6;

/**
 * An IPv4 or IPv6 address in text form. Made only by {@link parseIp}, {@link tryIp} and
 * {@link IPAddr.toString}: holding one means it was checked, and the compiler keeps it from standing
 * where a {@link Mac} or a {@link Cidr} is wanted. What a kernel dump returns stays a plain string.
 */
export type Ip = string & { readonly __brand: "Ip" };

/** A prefix `addr/len` in text form. Made only by {@link parseCidr}, {@link tryCidr}, {@link IPNet.toString}. */
export type Cidr = string & { readonly __brand: "Cidr" };

/** An Ethernet MAC, lower case (`aa:bb:cc:dd:ee:ff`). Made only by {@link parseMac} and {@link tryMac}. */
export type Mac = string & { readonly __brand: "Mac" };

/**
 * `s` as an {@link Ip} in canonical form (as the kernel's dumps print it: `2001:DB8::5` → `2001:db8::5`), or
 * null when it is not an IPv4/IPv6 address.
 */
export function tryIp(s: unknown): Ip | null {
  return typeof s === "string" ? IPAddr.tryParse(s)?.toString() ?? null : null;
}

/** `s` as an {@link Ip} in canonical form. Throws {@link ParseError} naming `field`. */
export function parseIp(s: string, field = "ip"): Ip {
  return IPAddr.parse(s, field).toString();
}

/**
 * `s` as a {@link Cidr} with its address in canonical form and its host bits kept (`2001:DB8::5/64` →
 * `2001:db8::5/64`), or null when it is not `addr/len`.
 */
export function tryCidr(s: unknown): Cidr | null {
  if (typeof s !== "string" || !IPNet.tryParse(s)) return null;
  const slash = s.indexOf("/");
  return `${IPAddr.tryParse(s.slice(0, slash))}/${Number(s.slice(slash + 1))}` as Cidr;
}

/** `s` as a {@link Cidr} as {@link tryCidr} gives it. Throws {@link ParseError} naming `field`. */
export function parseCidr(s: string, field = "cidr"): Cidr {
  IPNet.parse(s, field);
  return tryCidr(s)!;
}

const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

/** `s` (`aa:bb:cc:dd:ee:ff`, any case) as a lower-case {@link Mac}, or null when it is not one. */
export function tryMac(s: unknown): Mac | null {
  return typeof s === "string" && MAC_RE.test(s) ? s.toLowerCase() as Mac : null;
}

/** `s` as a lower-case {@link Mac}. Throws {@link ParseError} naming `field`. */
export function parseMac(s: string, field = "mac"): Mac {
  const m = tryMac(s);
  if (m === null) throw new ParseError(field, `'${s}' is not a MAC address (want aa:bb:cc:dd:ee:ff)`);
  return m;
}

const V4_MAX = (1n << 32n) - 1n;
const V6_MAX = (1n << 128n) - 1n;

function parseV4(s: string): bigint | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let v = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255 || (p.length > 1 && p[0] === "0")) return null;
    v = (v << 8n) | BigInt(n);
  }
  return v;
}

function parseV6(s: string): bigint | null {
  if (!/^[0-9a-fA-F:.]+$/.test(s)) return null;
  let tail4: bigint | null = null;
  let str = s;
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".")) {
    tail4 = parseV4(s.slice(lastColon + 1));
    if (tail4 === null) return null;
    str = s.slice(0, lastColon + 1) + "0:0";
  }
  const dbl = str.split("::");
  if (dbl.length > 2) return null;
  const head = dbl[0] ? dbl[0].split(":") : [];
  const tail = dbl.length === 2 && dbl[1] ? dbl[1].split(":") : [];
  const groups = dbl.length === 2
    ? [...head, ...Array(8 - head.length - tail.length).fill("0"), ...tail]
    : head;
  if (groups.length !== 8 || (dbl.length === 2 && head.length + tail.length > 7)) return null;
  let v = 0n;
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    v = (v << 16n) | BigInt(parseInt(g, 16));
  }
  if (tail4 !== null) v = (v & ~0xffffffffn) | tail4;
  return v;
}

// RFC 5952 text without a dotted IPv4 tail, the form flannel's lease keys carry (Go's net.IP.String());
// glibc's inet_ntop, which lib/netlink/codec/format.ts copies for kernel dumps, writes ::a.b.c.d and
// ::ffff:a.b.c.d with one: the two differ on those addresses only.
function formatV6(v: bigint): string {
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((v >> BigInt(i * 16)) & 0xffffn));
  // Longest run of zero groups (length >= 2) collapses to "::" (RFC 5952).
  let bestStart = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) [bestStart, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return hex.slice(0, bestStart).join(":") + "::" + hex.slice(bestStart + bestLen).join(":");
}

/** An IPv4 or IPv6 address held as a bigint. Immutable. */
export class IPAddr {
  /** 4 or 6. */
  readonly family: IPFamily;
  /** The address as an unsigned integer. */
  readonly value: bigint;

  /**
   * Makes the address.
   *
   * @param family 4 or 6
   * @param value the address as an unsigned integer
   */
  constructor(family: IPFamily, value: bigint) {
    const max = family === 4 ? V4_MAX : V6_MAX;
    if (value < 0n || value > max) throw new ParseError("ip", `value out of range for IPv${family}`);
    this.family = family;
    this.value = value;
  }

  /** Parses dotted IPv4 or RFC 4291 IPv6 text. Throws {@link ParseError} naming `field`. */
  static parse(s: string, field = "ip"): IPAddr {
    const r = IPAddr.tryParse(s);
    if (!r) throw new ParseError(field, `'${s}' is not a valid IP address`);
    return r;
  }

  /** Like {@link IPAddr.parse} but returns null for bad input. */
  static tryParse(s: string): IPAddr | null {
    if (typeof s !== "string") return null;
    const v4 = parseV4(s);
    if (v4 !== null) return new IPAddr(4, v4);
    const v6 = s.includes(":") ? parseV6(s) : null;
    return v6 === null ? null : new IPAddr(6, v6);
  }

  /** From network-order bytes (4 or 16 of them). */
  static fromBytes(b: Uint8Array): IPAddr {
    if (b.length !== 4 && b.length !== 16) throw new ParseError("ip", `bad address length ${b.length}`);
    let v = 0n;
    for (const x of b) v = (v << 8n) | BigInt(x);
    return new IPAddr(b.length === 4 ? 4 : 6, v);
  }

  /** Network-order bytes. */
  toBytes(): Uint8Array {
    const n = this.family === 4 ? 4 : 16;
    const out = new Uint8Array(n);
    let v = this.value;
    for (let i = n - 1; i >= 0; i--) {
      out[i] = Number(v & 0xffn);
      v >>= 8n;
    }
    return out;
  }

  /** Number of bits in this family's addresses (32 or 128). */
  get bits(): number {
    return this.family === 4 ? 32 : 128;
  }

  /** This address plus `n` (may be negative). Throws when it leaves the family's range. */
  add(n: bigint | number): IPAddr {
    return new IPAddr(this.family, this.value + BigInt(n));
  }

  /** True when both have the same family and value. */
  equals(o: IPAddr): boolean {
    return this.family === o.family && this.value === o.value;
  }

  /** Orders v4 before v6, then by value. */
  compare(o: IPAddr): number {
    if (this.family !== o.family) return this.family - o.family;
    return this.value < o.value ? -1 : this.value > o.value ? 1 : 0;
  }

  /** Canonical text form. */
  toString(): Ip {
    if (this.family === 4) {
      const v = Number(this.value);
      return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}` as Ip;
    }
    return formatV6(this.value) as Ip;
  }

  /** JSON form is the text form. */
  toJSON(): string {
    return this.toString();
  }
}

/** A network prefix (`10.244.1.0/24`). The address is always masked to the network address. */
export class IPNet {
  /** The network address (host bits zero). */
  readonly ip: IPAddr;
  /** Prefix length. */
  readonly prefix: number;

  /**
   * Makes the prefix.
   *
   * @param ip the network address (host bits must be zero)
   * @param prefix the prefix length
   */
  constructor(ip: IPAddr, prefix: number) {
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > ip.bits) {
      throw new ParseError("cidr", `prefix length ${prefix} is out of range for IPv${ip.family}`);
    }
    this.prefix = prefix;
    const hostBits = BigInt(ip.bits - prefix);
    this.ip = new IPAddr(ip.family, (ip.value >> hostBits) << hostBits);
  }

  /** Parses `addr/prefix`; host bits are masked off (as Go's net.ParseCIDR). */
  static parse(s: string, field = "cidr"): IPNet {
    const r = IPNet.tryParse(s);
    if (!r) throw new ParseError(field, `'${s}' is not a valid CIDR (expected e.g. 10.244.0.0/16)`);
    return r;
  }

  /** Like {@link IPNet.parse} but returns null for bad input. */
  static tryParse(s: string): IPNet | null {
    if (typeof s !== "string") return null;
    const m = /^([^/]+)\/(\d{1,3})$/.exec(s);
    if (!m) return null;
    const ip = IPAddr.tryParse(m[1]);
    const p = Number(m[2]);
    if (!ip || p > ip.bits) return null;
    return new IPNet(ip, p);
  }

  /** Parses `addr/prefix` keeping the host part: returns the address and its network. */
  static parseWithHost(s: string, field = "cidr"): { ip: IPAddr; net: IPNet } {
    const net = IPNet.parse(s, field);
    return { ip: IPAddr.parse(s.split("/")[0], field), net };
  }

  /** 4 or 6. */
  get family(): IPFamily {
    return this.ip.family;
  }

  /** Number of addresses in the prefix. */
  get size(): bigint {
    return 1n << BigInt(this.ip.bits - this.prefix);
  }

  /** Last address of the prefix (the IPv4 broadcast address). */
  get last(): IPAddr {
    return new IPAddr(this.family, this.ip.value + this.size - 1n);
  }

  /** The `n`-th address in the prefix (0 = network address). */
  nth(n: bigint | number): IPAddr {
    const i = BigInt(n);
    if (i < 0n || i >= this.size) throw new ParseError("cidr", `index ${i} outside ${this}`);
    return this.ip.add(i);
  }

  /** True when `x` (an address or prefix) lies wholly within this prefix. */
  contains(x: IPAddr | IPNet): boolean {
    if (x instanceof IPNet) {
      return x.family === this.family && x.prefix >= this.prefix && this.contains(x.ip);
    }
    if (x.family !== this.family) return false;
    return (x.value >> BigInt(x.bits - this.prefix)) === (this.ip.value >> BigInt(x.bits - this.prefix));
  }

  /** True when the two prefixes share any address. */
  overlaps(o: IPNet): boolean {
    return this.contains(o.ip) || o.contains(this.ip);
  }

  /** The next prefix of the same length (10.0.1.0/24 → 10.0.2.0/24). */
  next(): IPNet {
    return new IPNet(this.ip.add(this.size), this.prefix);
  }

  /** True when both name the same prefix. */
  equals(o: IPNet): boolean {
    return this.prefix === o.prefix && this.ip.equals(o.ip);
  }

  /** `10.244.1.0/24`. */
  toString(): Cidr {
    return `${this.ip}/${this.prefix}` as Cidr;
  }

  /** JSON form is the text form. */
  toJSON(): string {
    return this.toString();
  }

  /** flannel's etcd key form: `10.244.1.0-24`. */
  toKey(): string {
    return `${this.ip}-${this.prefix}`;
  }

  /** Parses flannel's key form `10.244.1.0-24` (also accepts `a/b`). */
  static fromKey(s: string): IPNet | null {
    const i = s.lastIndexOf("-");
    return IPNet.tryParse(i < 0 ? s : `${s.slice(0, i)}/${s.slice(i + 1)}`);
  }
}

/** Prefix length → dotted IPv4 netmask (24 → 255.255.255.0). */
export function prefixToMask4(prefix: number): string {
  const v = prefix === 0 ? 0n : (V4_MAX << BigInt(32 - prefix)) & V4_MAX;
  return new IPAddr(4, v).toString();
}
