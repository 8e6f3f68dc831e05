/**
 * The wireguard backend's net-conf keys, as flanneld reads them (pkg/backend/wireguard/wireguard.go,
 * RegisterNetwork): `ListenPort` (51820), `ListenPortV6` (51821), `MTU` (the underlay's), `PSK` (a
 * base64 key, none by default), `PersistentKeepaliveInterval` (whole seconds, 0 = off) and `Mode`
 * (`separate`, the default: one device per family, flannel-wg and flannel-wg-v6; `auto`, `ipv4`, `ipv6`:
 * one device, flannel-wg, for both families). Keys match case-insensitively (Go's encoding/json).
 * @module
 */
import { ConfigError } from "../../config/netconf.ts";
import type { BackendConfig } from "../../config/types.ts";
import { safeJson } from "../../base/capped_read.ts";
import { keyHex, parseKey } from "./keys.ts";

/** flanneld's device names. */
export const WG_DEVICE = "flannel-wg";
export const WG_DEVICE_V6 = "flannel-wg-v6";
/**
 * flanneld's overhead (pkg/backend/wireguard/wireguard_network.go `overhead = 80`), taken from the MTU for
 * both families: the device's MTU and the pods' (FLANNEL_MTU). An IPv4 underlay needs only 60 (20 + 8 +
 * 32); flanctl keeps flanneld's 80 so that mixed nodes agree.
 */
export const WG_OVERHEAD = 80;

/** The modes flanneld knows. */
export type WgMode = "separate" | "auto" | "ipv4" | "ipv6";

/** The backend's options with flanneld's defaults. */
export interface WireguardOptions {
  listenPort: number;
  listenPortV6: number;
  /** The underlay MTU to assume; 0 = the interface's. */
  mtu: number;
  /** The preshared key in hex (for the UAPI), or null. */
  pskHex: string | null;
  /** Seconds; 0 = no keepalives. */
  keepalive: number;
  mode: WgMode;
}

/**
 * The one-device mode a net-conf's Backend names (`auto`, `ipv4`, `ipv6`: flannel-wg carries both families),
 * or null (`separate`, or anything else). For readers of a stored config (doctor, trace, inspect).
 */
export function oneDeviceMode(raw: Record<string, unknown>): Exclude<WgMode, "separate"> | null {
  const v = pick(raw, "Mode");
  return v === "auto" || v === "ipv4" || v === "ipv6" ? v : null;
}

function pick(raw: Record<string, unknown>, name: string): unknown {
  let v: unknown = undefined;
  for (const [k, x] of Object.entries(raw)) if (k.toLowerCase() === name.toLowerCase()) v = x;
  return v;
}

function int(raw: Record<string, unknown>, name: string, dflt: number, min: number, max: number): number {
  const v = pick(raw, name);
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(
      `Backend.${name}`,
      `Backend.${name} must be an integer from ${min} to ${max}, got ${safeJson(v)}`,
    );
  }
  return v;
}

/** Parses and checks the wireguard options (the PSK's value never appears in an error). */
export function parseWireguardOptions(b: BackendConfig): WireguardOptions {
  const raw = b.raw;
  const psk = pick(raw, "PSK");
  let pskHex: string | null = null;
  if (psk !== undefined && psk !== null && psk !== "") {
    const k = parseKey(psk);
    if (!k) {
      throw new ConfigError(
        "Backend.PSK",
        "Backend.PSK is not a WireGuard key (base64 of 32 bytes, as `wg genpsk` prints it)",
      );
    }
    pskHex = keyHex(k);
  }
  const mode = pick(raw, "Mode") ?? "separate";
  if (mode !== "separate" && mode !== "auto" && mode !== "ipv4" && mode !== "ipv6") {
    throw new ConfigError(
      "Backend.Mode",
      `Backend.Mode ${safeJson(mode)} is not one of separate, auto, ipv4, ipv6`,
    );
  }
  return {
    listenPort: int(raw, "ListenPort", 51820, 1, 65535),
    listenPortV6: int(raw, "ListenPortV6", 51821, 1, 65535),
    mtu: int(raw, "MTU", 0, 0, 65535),
    pskHex,
    keepalive: int(raw, "PersistentKeepaliveInterval", 0, 0, 65535),
    mode,
  };
}
