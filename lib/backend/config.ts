/**
 * Backend options from net-conf's `Backend` object (keys matched case-insensitively, as flannel's JSON
 * decoding does), validated with errors that name the field and the fix.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import type { BackendConfig } from "../config/types.ts";
import { safeJson } from "../base/capped_read.ts";

/** Backends the daemon implements. */
export const SUPPORTED_BACKENDS = ["vxlan", "host-gw", "udp", "wireguard", "alloc", "extension"] as const;

/** VXLAN options with flannel's defaults applied. */
export interface VxlanOptions {
  /** VXLAN network identifier (default 1). */
  vni: number;
  /** UDP port; 0 = the kernel default 8472. */
  port: number;
  gbp: boolean;
  learning: boolean;
  directRouting: boolean;
  /** MTU of the underlay to assume instead of the interface's (0 = use the interface MTU). */
  mtu: number;
}

function pick(raw: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(raw, name)) return raw[name];
  const k = Object.keys(raw).find((x) => x.toLowerCase() === name.toLowerCase());
  return k === undefined ? undefined : raw[k];
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

function bool(raw: Record<string, unknown>, name: string): boolean {
  const v = pick(raw, name);
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") {
    throw new ConfigError(
      `Backend.${name}`,
      `Backend.${name} must be true or false, got ${safeJson(v)}`,
    );
  }
  return v;
}

/** Throws a {@link ConfigError} when the daemon cannot run this backend type. */
export function checkSupported(b: BackendConfig): void {
  if (!(SUPPORTED_BACKENDS as readonly string[]).includes(b.type)) {
    throw new ConfigError(
      "Backend.Type",
      `Backend.Type "${b.type}" is not supported by the flanctl daemon (use one of: ${
        SUPPORTED_BACKENDS.join(", ")
      })`,
    );
  }
}

/** Parses and validates VXLAN options. */
export function parseVxlanOptions(b: BackendConfig): VxlanOptions {
  const raw = b.raw;
  return {
    vni: int(raw, "VNI", 1, 0, 16777215),
    port: int(raw, "Port", 0, 0, 65535),
    gbp: bool(raw, "GBP"),
    learning: bool(raw, "Learning"),
    directRouting: bool(raw, "DirectRouting"),
    mtu: int(raw, "MTU", 0, 0, 65535) || 0,
  };
}

/** The UDP backend's TUN device (flannel opens "flannel%d": the first is flannel0). */
export const UDP_DEVICE = "flannel0";

/** UDP backend options with flannel's defaults applied. */
export interface UdpOptions {
  /** UDP port of every node (default 8285). */
  port: number;
}

/** Parses and validates UDP options (Port 1–65535; flannel's 0 would bind a random port peers never learn). */
export function parseUdpOptions(b: BackendConfig): UdpOptions {
  return { port: int(b.raw, "Port", 8285, 1, 65535) };
}
