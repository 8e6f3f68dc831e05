/**
 * Key matching as Go's encoding/json decodes into a struct: a JSON object's key selects the struct field
 * whose name equals it, else one whose name equals it case-insensitively (Go's fold: ASCII letters, plus
 * the Kelvin sign for `k` and the long s for `s`); when several keys select one field, the last in the
 * document wins; keys no field takes are ignored (kept here, untouched, for plugins that pass a config on).
 * Maps (`map[string]…`) keep their keys as sent.
 *
 * The reference plugins decode every input this way, and runtimes rely on it: containerd's go-cni sends
 * `runtimeConfig.portMappings` as `{"HostPort":…,"ContainerPort":…,"Protocol":…,"HostIP":…}` (its struct has
 * no JSON tags), CRI-O sends `hostPort`/`containerPort`. {@link goFold} rewrites a parsed document's keys to
 * the canonical spellings of a {@link Shape}, so plugin code reads one spelling.
 * @module
 */
import { isObj } from "../base/json.ts";

/**
 * The fields of a Go struct: each canonical JSON name maps to the shape of its value: `null` for a scalar
 * or a map (keys kept), a Shape for a nested struct, `[shape]` for a list of structs, `[[shape]]` for a
 * list of lists of structs.
 */
export type Shape = { readonly [canonical: string]: Shape | ShapeList | null };
/** A list whose elements have the inner shape. */
export type ShapeList = readonly [Shape | ShapeList];

/** Go's case fold for matching field names (names are ASCII; K U+212A and ſ U+017F fold to k and s). */
export function goFoldName(s: string): string {
  let out = "";
  for (const ch of s) {
    if (ch === "\u212a") out += "k";
    else if (ch === "\u017f") out += "s";
    else if (ch >= "A" && ch <= "Z") out += ch.toLowerCase();
    else out += ch;
  }
  return out;
}

const folded = new WeakMap<Shape, Map<string, string>>();

function foldIndex(shape: Shape): Map<string, string> {
  let m = folded.get(shape);
  if (!m) {
    m = new Map();
    // The first field wins a fold collision, as Go's field order does (our shapes have none).
    for (const k of Object.keys(shape)) if (!m.has(goFoldName(k))) m.set(goFoldName(k), k);
    folded.set(shape, m);
  }
  return m;
}

function foldValue(v: unknown, s: Shape | ShapeList | null): unknown {
  if (s === null) return v;
  if (Array.isArray(s)) return Array.isArray(v) ? v.map((x) => foldValue(x, s[0])) : v;
  return isObj(v) ? goFold(v, s as Shape) : v;
}

/**
 * Returns a copy of `obj` whose keys that name a field of `shape` (exactly or case-insensitively) carry the
 * field's canonical name, nested values folded by their shapes; later keys override earlier ones for the
 * same field, as in Go. Values of the wrong JSON type are left for the plugin's checks.
 */
export function goFold(obj: Record<string, unknown>, shape: Shape): Record<string, unknown> {
  const idx = foldIndex(shape);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    const canon = Object.hasOwn(shape, k) ? k : idx.get(goFoldName(k));
    if (canon === undefined) {
      if (!Object.hasOwn(out, k)) out[k] = v;
      continue;
    }
    // Delete first so the winner also takes the last position (as a re-marshalled Go struct has one key).
    delete out[canon];
    out[canon] = foldValue(v, shape[canon]);
  }
  return out;
}

/** types.Route. */
export const ROUTE: Shape = {
  dst: null,
  gw: null,
  mtu: null,
  advmss: null,
  priority: null,
  table: null,
  scope: null,
};
/** types.DNS. */
export const DNS: Shape = { nameservers: null, domain: null, search: null, options: null };
/** A result of any version (current.Result, 0.2.0's ip4/ip6). */
export const RESULT: Shape = {
  cniVersion: null,
  interfaces: [{ name: null, mac: null, mtu: null, sandbox: null, socketPath: null, pciID: null }],
  ips: [{ interface: null, address: null, gateway: null, version: null }],
  routes: [ROUTE],
  dns: DNS,
  ip4: { ip: null, gateway: null, routes: [ROUTE] },
  ip6: { ip: null, gateway: null, routes: [ROUTE] },
};
/** A host-local range (allocator.Range). */
export const RANGE: Shape = { rangeStart: null, rangeEnd: null, subnet: null, gateway: null };
/** The capability arguments any of our plugins reads (portMappings, ips, mac, ipRanges). */
export const RUNTIME_CONFIG: Shape = {
  portMappings: [{ hostPort: null, containerPort: null, protocol: null, hostIP: null }],
  ips: null,
  mac: null,
  ipRanges: [[RANGE]],
};
/** host-local's IPAMConfig (with the old single-range fields). */
export const HOST_LOCAL_IPAM: Shape = {
  name: null,
  type: null,
  routes: [ROUTE],
  dataDir: null,
  resolvConf: null,
  ranges: [[RANGE]],
  ...RANGE,
};
/** types.NetConf plus the GC list: what every plugin reads. */
export const NET_CONF: Shape = {
  cniVersion: null,
  name: null,
  type: null,
  capabilities: null,
  ipam: { type: null },
  dns: DNS,
  prevResult: RESULT,
  runtimeConfig: RUNTIME_CONFIG,
  args: { cni: { ips: null, mac: null } },
  "cni.dev/valid-attachments": [{ containerID: null, ifname: null }],
  "cni.dev/attachments": [{ containerID: null, ifname: null }],
};
