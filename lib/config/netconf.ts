/**
 * Parser for flannel's net-conf.json. Field names are matched case-insensitively (as Go's encoding/json
 * does), defaults and checks follow current flannel (v0.28): SubnetLen from the Network prefix,
 * SubnetMin/SubnetMax defaults, the IPv6 mirror, and flannel's own error texts. Errors are
 * {@link ConfigError}s naming the field and the fix.
 * @module
 */
import { plainWarn, warnOnce } from "../base/warn.ts";
import { FlanctlError } from "../base/errors.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import { safeJson, safeText } from "../base/capped_read.ts";
import { isObj } from "../base/json.ts";
import type { BackendConfig, NetConfig } from "./types.ts";

/** A network config that is malformed or inconsistent. `field` names the offending field. */
export class ConfigError extends FlanctlError {
  /** The net-conf field (e.g. "SubnetLen", "Backend.Type") or "json" for unparsable text. */
  readonly field: string;
  /**
   * Makes the error.
   *
   * @param field the net-conf field
   * @param message what is wrong and the fix
   */
  constructor(field: string, message: string) {
    super(message, 1);
    this.field = field;
  }
}

/** Backend types flanctl knows (lower case). */
export const KNOWN_BACKENDS = ["vxlan", "host-gw", "udp", "wireguard", "ipip", "alloc", "extension"] as const;

/**
 * The backend used when net-conf has no `Backend.Type`. flanneld's parser falls back to "udp" (its docs
 * say vxlan); flanctl uses vxlan, the documented default and the backend it implements, and warns so a
 * mixed flanneld/flanctl cluster sets the type explicitly.
 */
export const DEFAULT_BACKEND_TYPE = "vxlan";

/** Default warning sink: stderr, each distinct message once per process (configs are re-read often). */
const defaultWarn = warnOnce(plainWarn);

/** Options of {@link parseNetConfig}. */
export interface ParseNetConfigOptions {
  /** Receives warnings (default: printed on stderr). */
  warn?: (msg: string) => void;
}

const FIELDS = [
  "Network",
  "SubnetLen",
  "SubnetMin",
  "SubnetMax",
  "EnableIPv4",
  "EnableIPv6",
  "IPv6Network",
  "IPv6SubnetLen",
  "IPv6SubnetMin",
  "IPv6SubnetMax",
  "Backend",
  "EnableNFTables",
] as const;
type Field = typeof FIELDS[number];

/** Picks fields case-insensitively; an exact-case key wins over a case-folded one (as Go does). */
function pickFields(obj: Record<string, unknown>): Partial<Record<Field, unknown>> {
  const out: Partial<Record<Field, unknown>> = {};
  const byLower = new Map(FIELDS.map((f) => [f.toLowerCase(), f]));
  for (const [k, v] of Object.entries(obj)) {
    const f = byLower.get(k.toLowerCase());
    if (!f) continue;
    if (k === f || !Object.hasOwn(out, f)) out[f] = v;
  }
  return out;
}

function wantBool(f: Field, v: unknown, dflt: boolean): boolean {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "boolean") {
    throw new ConfigError(f, `${f} must be true or false, got ${safeJson(v)}`);
  }
  return v;
}

function wantUint(f: Field, v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new ConfigError(f, `${f} must be a non-negative integer prefix length, got ${safeJson(v)}`);
  }
  return v;
}

function wantNet(f: Field, v: unknown, family: 4 | 6): IPNet | null {
  if (v === undefined || v === null || v === "") return null;
  if (typeof v !== "string") {
    throw new ConfigError(f, `${f} must be a CIDR string like "10.244.0.0/16", got ${safeJson(v)}`);
  }
  const n = IPNet.tryParse(v);
  if (!n || n.family !== family) {
    const ex = family === 4 ? "10.244.0.0/16" : "fc00::/48";
    throw new ConfigError(
      f,
      `${f} '${safeText(v, 120)}' is not a valid IPv${family} CIDR (expected e.g. "${ex}")`,
    );
  }
  return n;
}

function wantIP(f: Field, v: unknown, family: 4 | 6): IPAddr | null {
  if (v === undefined || v === null || v === "") return null;
  if (typeof v !== "string") {
    throw new ConfigError(f, `${f} must be an IP address string, got ${safeJson(v)}`);
  }
  // flannel accepts a bare address; tolerate "a.b.c.d/len" too and use its address.
  const ip = IPAddr.tryParse(v.split("/")[0]);
  if (!ip || ip.family !== family) {
    throw new ConfigError(f, `${f} '${safeText(v, 120)}' is not a valid IPv${family} address`);
  }
  return ip;
}

interface FamilyResult {
  subnetLen: number;
  min: IPNet;
  max: IPNet;
}

/** flannel's per-family defaults and checks. `p` = "" for IPv4, "IPv6" for IPv6. */
function checkFamily(
  network: IPNet,
  lenIn: number,
  minIn: IPAddr | null,
  maxIn: IPAddr | null,
  v6: boolean,
): FamilyResult {
  const p = v6 ? "IPv6" : "";
  const lenField = `${p}SubnetLen`;
  const maxLen = v6 ? 126 : 30;
  const tooSmall = v6 ? 124 : 28;
  let subnetLen = lenIn;
  if (subnetLen > 0) {
    if (subnetLen > maxLen) {
      throw new ConfigError(
        lenField,
        `SubnetLen must be less than /${maxLen + 1} (${lenField}=${subnetLen})`,
      );
    }
    if (subnetLen < network.prefix + 2) {
      throw new ConfigError(
        lenField,
        `network must be able to accommodate at least four subnets (${lenField}=${subnetLen} with ` +
          `${p}Network /${network.prefix}: use ${lenField} >= ${network.prefix + 2})`,
      );
    }
  } else if (network.prefix > tooSmall) {
    throw new ConfigError(
      `${p}Network`,
      // flannel's texts: "network is too small…" (IPv4), "IPv6Network is too small…" (IPv6).
      `${v6 ? "IPv6Network" : "network"} is too small. Minimum useful network prefix is /${tooSmall}`,
    );
  } else if (network.prefix <= (v6 ? 62 : 22)) {
    subnetLen = v6 ? 64 : 24;
  } else {
    subnetLen = network.prefix + 2;
  }
  const size = 1n << BigInt(network.ip.bits - subnetLen);
  const check = (name: string, ip: IPAddr | null, dflt: IPAddr): IPNet => {
    const field = `${p}${name}`;
    if (ip === null) return new IPNet(dflt, subnetLen);
    if (!network.contains(ip)) {
      throw new ConfigError(
        field,
        `${field} is not in the range of the ${p}Network (${ip} not in ${network})`,
      );
    }
    if (ip.value % size !== 0n) {
      throw new ConfigError(
        field,
        `${field} is not on a SubnetLen boundary: ${ip} (use a multiple of /${subnetLen})`,
      );
    }
    return new IPNet(ip, subnetLen);
  };
  // Order as flannel: both range checks run before the boundary checks.
  if (minIn && !network.contains(minIn)) check("SubnetMin", minIn, minIn);
  if (maxIn && !network.contains(maxIn)) check("SubnetMax", maxIn, maxIn);
  const min = check("SubnetMin", minIn, network.ip.add(size));
  const max = check("SubnetMax", maxIn, new IPAddr(network.family, network.last.value + 1n - size));
  return { subnetLen, min, max };
}

function parseBackend(v: unknown, warn: (m: string) => void): BackendConfig {
  if (v === undefined || v === null) {
    warn(
      `net-conf: no Backend given: using Type "${DEFAULT_BACKEND_TYPE}" (flanneld would fall back to "udp"; ` +
        `set "Backend": {"Type": "vxlan"} explicitly in clusters shared with flanneld)`,
    );
    return { type: DEFAULT_BACKEND_TYPE, raw: { Type: DEFAULT_BACKEND_TYPE } };
  }
  if (!isObj(v)) {
    throw new ConfigError(
      "Backend",
      `Backend must be an object like {"Type": "vxlan"}, got ${safeJson(v)}`,
    );
  }
  const raw = v;
  const typeKey = Object.keys(raw).find((k) => k === "Type") ??
    Object.keys(raw).find((k) => k.toLowerCase() === "type");
  const t = typeKey === undefined ? undefined : raw[typeKey];
  if (t === undefined || t === null || t === "") {
    warn(
      `net-conf: Backend.Type is not set: using "${DEFAULT_BACKEND_TYPE}" (flannel's documented default; ` +
        `set it explicitly in clusters shared with flanneld)`,
    );
    return { type: DEFAULT_BACKEND_TYPE, raw };
  }
  if (typeof t !== "string") {
    throw new ConfigError(
      "Backend.Type",
      `Backend.Type must be a string like "vxlan", got ${safeJson(t)}`,
    );
  }
  const type = t.toLowerCase();
  if (!(KNOWN_BACKENDS as readonly string[]).includes(type)) {
    throw new ConfigError(
      "Backend.Type",
      `Backend.Type "${safeText(t, 60)}" is not a known backend type (use one of: ${
        KNOWN_BACKENDS.join(", ")
      })`,
    );
  }
  return { type, raw };
}

/**
 * Reads one address family's fields (`Network`, `SubnetLen`, … or the same with an `IPv6` prefix) and
 * applies flannel's checks and defaults, with flannel's text for a missing or /0 network.
 */
function parseFamily(f: Partial<Record<Field, unknown>>, v6: boolean): FamilyResult & { network: IPNet } {
  const p = v6 ? "IPv6" : "";
  const family = v6 ? 6 : 4;
  const netField: Field = `${p}Network`;
  const example = v6 ? "fc00::/48" : "10.244.0.0/16";
  let net: IPNet | null = null;
  try {
    net = wantNet(netField, f[netField], family);
  } catch { /* reported below with flannel's text */ }
  if (!net || net.prefix === 0) {
    const got = f[netField] === undefined ? "missing" : `got ${safeJson(f[netField])}`;
    throw new ConfigError(
      netField,
      `please define a correct ${netField} parameter in the flannel config (${got}; e.g. "${example}")`,
    );
  }
  const r = checkFamily(
    net,
    wantUint(`${p}SubnetLen`, f[`${p}SubnetLen`]),
    wantIP(`${p}SubnetMin`, f[`${p}SubnetMin`], family),
    wantIP(`${p}SubnetMax`, f[`${p}SubnetMax`], family),
    v6,
  );
  return { network: net, ...r };
}

/**
 * Parses net-conf.json text into a defaulted {@link NetConfig}. Throws {@link ConfigError} for malformed
 * JSON, wrong field types, unknown backend types and every check flannel makes (with flannel's text).
 */
export function parseNetConfig(text: string, opts: ParseNetConfigOptions = {}): NetConfig {
  const warn = opts.warn ?? defaultWarn;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(
      "json",
      `net-conf is not valid JSON (${safeText((e as Error).message, 160)}); expected e.g. ` +
        `{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan"}}`,
    );
  }
  if (!isObj(doc)) {
    throw new ConfigError("json", `net-conf must be a JSON object like {"Network": "10.244.0.0/16"}`);
  }
  const f = pickFields(doc);
  const enableIPv4 = wantBool("EnableIPv4", f.EnableIPv4, true);
  const enableIPv6 = wantBool("EnableIPv6", f.EnableIPv6, false);
  const enableNFTables = wantBool("EnableNFTables", f.EnableNFTables, false);
  const cfg: NetConfig = {
    enableIPv4,
    enableIPv6,
    network: null,
    subnetLen: 0,
    subnetMin: null,
    subnetMax: null,
    ipv6Network: null,
    ipv6SubnetLen: 0,
    ipv6SubnetMin: null,
    ipv6SubnetMax: null,
    backend: { type: DEFAULT_BACKEND_TYPE, raw: {} },
    enableNFTables,
    source: text,
  };
  if (!enableIPv4 && !enableIPv6) {
    throw new ConfigError("EnableIPv4", "both EnableIPv4 and EnableIPv6 are false: enable at least one");
  }
  if (enableIPv4) {
    const r = parseFamily(f, false);
    Object.assign(cfg, { network: r.network, subnetLen: r.subnetLen, subnetMin: r.min, subnetMax: r.max });
  }
  if (enableIPv6) {
    const r = parseFamily(f, true);
    Object.assign(cfg, {
      ipv6Network: r.network,
      ipv6SubnetLen: r.subnetLen,
      ipv6SubnetMin: r.min,
      ipv6SubnetMax: r.max,
    });
  }
  cfg.backend = parseBackend(f.Backend, warn);
  return cfg;
}

/** True when `subnet` is a valid node subnet of `cfg` (right family, length and inside Min..Max). */
export function subnetFitsConfig(cfg: NetConfig, subnet: IPNet): boolean {
  if (subnet.family === 4) {
    return !!cfg.network && cfg.enableIPv4 && subnet.prefix === cfg.subnetLen &&
      subnet.ip.value >= cfg.subnetMin!.ip.value && subnet.ip.value <= cfg.subnetMax!.ip.value;
  }
  return !!cfg.ipv6Network && cfg.enableIPv6 && subnet.prefix === cfg.ipv6SubnetLen &&
    subnet.ip.value >= cfg.ipv6SubnetMin!.ip.value && subnet.ip.value <= cfg.ipv6SubnetMax!.ip.value;
}
