/**
 * flannel's lease wire format: the key (`10.5.52.0-24`, dual stack `10.5.52.0-24&fc00::-64`) and the JSON
 * value (`{"PublicIP":…,"PublicIPv6":null,"BackendType":…,"BackendData":…}` in Go's struct field order,
 * empty fields omitted as flannel's `omitempty` does), plus the `flanctl lease list -o json` shape.
 * @module
 */
import { plainWarn, type Warn } from "../base/warn.ts";
import { errText, FlanctlError } from "../base/errors.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import { safeJson, safeText } from "../base/capped_read.ts";
import { isObj } from "../base/json.ts";
import type { Lease, LeaseAttrsWire, LeaseJson } from "./types.ts";

/**
 * A stored lease that does not parse (foreign writer, corruption). Stores skip it with a warning. The
 * message quotes the store's key and values bounded and escaped (it is printed as it is).
 */
export class MalformedLeaseError extends FlanctlError {
  /** The key (or file name) of the bad entry. */
  readonly key: string;
  constructor(key: string, message: string) {
    super(`malformed lease ${safeText(key, 128)}: ${message}`, 1);
    this.key = key;
  }
}

/** flannel's subnet key: `10.5.52.0-24`, or `10.5.52.0-24&fc00::-64` with an IPv6 subnet. */
export function leaseKey(subnet: IPNet | null, ipv6Subnet: IPNet | null = null): string {
  const v4 = subnet ? subnet.toKey() : "0.0.0.0-0";
  return ipv6Subnet ? `${v4}&${ipv6Subnet.toKey()}` : v4;
}

/** Parses a subnet key (the last path element); null when it is not one. */
export function parseLeaseKey(key: string): { subnet: IPNet | null; ipv6Subnet: IPNet | null } | null {
  // flannel's pattern (pkg/subnet/subnet.go, ParseSubnetKey) takes lower-case hex only in the IPv6 part,
  // as Go writes it: a key with upper-case hex is foreign to flanneld, and skipped here too.
  const m = /^(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})-(\d{1,2})(?:&([0-9a-f:]+)-(\d{1,3}))?$/.exec(key);
  if (!m) return null;
  // Only the key flannel writes for the subnet (no host bits, no leading zeros, IPv6 as Go prints it): the
  // stores find a lease again by that key (renew, delete, compare-and-swap), so another spelling of it
  // would name an entry they cannot reach.
  const v4 = IPNet.tryParse(`${m[1]}/${m[2]}`);
  if (!v4 || v4.toKey() !== `${m[1]}-${m[2]}`) return null;
  let v6: IPNet | null = null;
  if (m[3] !== undefined) {
    v6 = IPNet.tryParse(`${m[3]}/${m[4]}`);
    if (!v6 || v6.family !== 6 || v6.toKey() !== `${m[3]}-${m[4]}`) return null;
  }
  const subnet = v4.prefix === 0 && v4.ip.value === 0n ? null : v4;
  if (!subnet && !v6) return null;
  return { subnet, ipv6Subnet: v6 };
}

/** The lease's key in flannel's form. */
export function keyOf(lease: Pick<Lease, "subnet" | "ipv6Subnet">): string {
  return leaseKey(lease.subnet, lease.ipv6Subnet);
}

/** Serialises attributes exactly as flannel (Go's LeaseAttrs: field order, omitempty, null PublicIPv6). */
export function encodeLeaseAttrs(a: LeaseAttrsWire): string {
  const o: Record<string, unknown> = { PublicIP: a.PublicIP || "0.0.0.0", PublicIPv6: a.PublicIPv6 ?? null };
  if (a.BackendType) o.BackendType = a.BackendType;
  if (a.BackendData !== undefined && a.BackendData !== null) o.BackendData = a.BackendData;
  if (a.BackendV6Data !== undefined && a.BackendV6Data !== null) o.BackendV6Data = a.BackendV6Data;
  return JSON.stringify(o);
}

/** Parses and validates a lease value; throws {@link MalformedLeaseError} naming `key`. */
export function decodeLeaseAttrs(key: string, text: string): LeaseAttrsWire {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new MalformedLeaseError(key, `value is not JSON (${safeText((e as Error).message, 160)})`);
  }
  return validateLeaseAttrs(key, v);
}

/** Validates an already-parsed lease value (field names as flannel, case-insensitive). */
export function validateLeaseAttrs(key: string, v: unknown): LeaseAttrsWire {
  if (!isObj(v)) throw new MalformedLeaseError(key, "value is not a JSON object");
  const get = (name: string): unknown => {
    const o = v;
    if (Object.hasOwn(o, name)) return o[name];
    const k = Object.keys(o).find((x) => x.toLowerCase() === name.toLowerCase());
    return k === undefined ? undefined : o[k];
  };
  const pub = get("PublicIP");
  if (typeof pub !== "string" || IPAddr.tryParse(pub)?.family !== 4) {
    throw new MalformedLeaseError(key, `PublicIP ${safeJson(pub)} is not an IPv4 address`);
  }
  const pub6 = get("PublicIPv6");
  if (
    pub6 !== undefined && pub6 !== null && (typeof pub6 !== "string" || IPAddr.tryParse(pub6)?.family !== 6)
  ) {
    throw new MalformedLeaseError(key, `PublicIPv6 ${safeJson(pub6)} is not an IPv6 address`);
  }
  const bt = get("BackendType");
  if (bt !== undefined && bt !== null && typeof bt !== "string") {
    throw new MalformedLeaseError(key, `BackendType ${safeJson(bt)} is not a string`);
  }
  const out: LeaseAttrsWire = {
    PublicIP: pub,
    PublicIPv6: (pub6 as string | null | undefined) ?? null,
    BackendType: (bt as string | undefined) ?? "",
  };
  const bd = get("BackendData");
  if (bd !== undefined && bd !== null) out.BackendData = bd;
  const bd6 = get("BackendV6Data");
  if (bd6 !== undefined && bd6 !== null) out.BackendV6Data = bd6;
  return out;
}

/** Builds a {@link Lease} from a key and a value; throws {@link MalformedLeaseError}. */
export function leaseFromKV(
  key: string,
  value: string,
  expiration: Date | null,
  revision?: string,
): Lease {
  const k = parseLeaseKey(key);
  if (!k) throw new MalformedLeaseError(key, "key is not a subnet in flannel's form (e.g. 10.5.52.0-24)");
  return { ...k, attrs: decodeLeaseAttrs(key, value), expiration, revision };
}

/** The `flanctl lease list -o json` element for a lease. */
export function leaseToJson(l: Lease): LeaseJson {
  const subnet = [l.subnet?.toString(), l.ipv6Subnet?.toString()].filter(Boolean).join(",");
  const publicIP = l.attrs.PublicIP !== "0.0.0.0" || !l.attrs.PublicIPv6
    ? l.attrs.PublicIP
    : l.attrs.PublicIPv6;
  return {
    subnet,
    publicIP,
    backendType: l.attrs.BackendType,
    backendData: l.attrs.BackendData ?? (l.subnet ? null : l.attrs.BackendV6Data ?? null),
    expiration: l.expiration ? l.expiration.toISOString() : null,
    publicIPv6: l.attrs.PublicIPv6 ?? null,
    backendV6Data: l.attrs.BackendV6Data ?? null,
    node: l.node ?? null,
  };
}

/** Reports a skipped entry to `warn` (default: a plain warning on stderr); never throws. */
export function warnMalformed(e: unknown, where: string, warn: Warn = plainWarn): void {
  const msg = errText(e);
  warn(`${safeText(where, 200)}: skipping ${msg}`);
}
