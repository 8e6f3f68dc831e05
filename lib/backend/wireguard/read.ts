/**
 * Reading a WireGuard device the way its link kind says, for the tools that read without the daemon's
 * driver (doctor, trace, inspect): a link of kind `wireguard` is the kernel's (GET_DEVICE over generic
 * netlink, in the device's namespace: kernel.ts), a `tun` is a userspace program's (wireguard-go: `get=1`
 * over its UAPI socket, uapi.ts). Both give the same {@link DeviceState}: public keys only.
 * @module
 */
import type { NetnsRef } from "../../netlink/mod.ts";
import { type DeviceState, uapiGet, uapiSocket } from "./uapi.ts";
import type { WgWayName } from "./driver.ts";
import { kernelDeviceState, kernelGenl, type WgGenl } from "./kernel.ts";

/** The way a link of kind `kind` is driven: "wireguard" the kernel, "tun" userspace; else null. */
export function wayOfKind(kind: string | null | undefined): WgWayName | null {
  return kind === "wireguard" ? "kernel" : kind === "tun" ? "userspace" : null;
}

/** Where to read. */
export interface WgReadOptions {
  /** The UAPI socket directory (default /var/run/wireguard). */
  socketDir?: string;
  /** The kernel device's namespace (default: the caller's). */
  ns?: NetnsRef | null;
  /** The kernel's generic netlink calls (tests pass a fake). */
  genl?: WgGenl;
  /** The UAPI's timeout (default 3 s). */
  timeoutMs?: number;
}

/** Device `dev`'s state, read the `way` it is driven. Throws what the socket or the kernel said. */
export function readDevice(dev: string, way: WgWayName, o: WgReadOptions = {}): Promise<DeviceState> {
  if (way === "userspace") return uapiGet(uapiSocket(dev, o.socketDir), o.timeoutMs ?? 3000);
  try {
    return Promise.resolve(kernelDeviceState(o.genl ?? kernelGenl(o.ns ?? null), dev));
  } catch (e) {
    return Promise.reject(e);
  }
}
