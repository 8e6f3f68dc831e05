/**
 * What a vxlan lease's backend data says, read by flanneld's rule. flanneld decodes `BackendData` (and
 * `BackendV6Data`) with Go's encoding/json into `vxlanLeaseAttrs{VNI int; VtepMAC hardwareAddr}`
 * (pkg/backend/vxlan), and encoding/json matches an object key to a field name case-insensitively, the
 * last matching key winning: `{"vtepmac": …}` is a VtepMAC to flanneld, so it is one to the daemon, the
 * peer guard, doctor and trace alike.
 * @module
 */
import { type Mac, tryMac } from "../base/cidr.ts";

/** Whether `key` names the Go field `name` as encoding/json matches it (ASCII letters, any case). */
function goFieldMatch(key: string, name: string): boolean {
  return key.length === name.length && key.toLowerCase() === name.toLowerCase();
}

/**
 * The VtepMAC value of backend data as flanneld finds it (the last key equal to `VtepMAC` in any case), not
 * yet checked; undefined when `data` is not an object or has no such key.
 */
export function vtepMacField(data: unknown): unknown {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return undefined;
  let v: unknown = undefined;
  for (const [k, x] of Object.entries(data)) if (goFieldMatch(k, "VtepMAC")) v = x;
  return v;
}

/** The VtepMAC of backend data ({@link vtepMacField}) as a lower-case {@link Mac}, or null when it is not one. */
export function vtepMacOf(data: unknown): Mac | null {
  return tryMac(vtepMacField(data));
}

/**
 * The PublicKey value of a wireguard lease's backend data as flanneld finds it (flanneld decodes it into
 * `wireguardLeaseAttrs{PublicKey string; Port uint16}`, pkg/backend/wireguard), not yet checked.
 */
export function wgPublicKeyField(data: unknown): unknown {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return undefined;
  let v: unknown = undefined;
  for (const [k, x] of Object.entries(data)) if (goFieldMatch(k, "PublicKey")) v = x;
  return v;
}

/** Why `key` cannot be a WireGuard public key (base64 of exactly 32 bytes), or null when it can. */
export function badWgKey(key: unknown): string | null {
  if (typeof key !== "string") return "is missing";
  if (key.length !== 44 || !/^[A-Za-z0-9+/]{43}=$/.test(key)) return "is not base64 of 32 bytes";
  return null;
}
