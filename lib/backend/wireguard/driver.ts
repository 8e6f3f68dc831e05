/**
 * The interface of the two ways to a WireGuard device: kernel.ts (the `wireguard` link kind over rtnetlink,
 * configured over the `wireguard` generic netlink family) and userspace.ts (wireguard-go's TUN over its UAPI
 * socket). The choice between them at start: choose.ts.
 * @module
 */
import type { DeviceSet, DeviceState } from "./uapi.ts";

/** How a device is driven. */
export type WgWayName = "kernel" | "userspace";

/** One way to a WireGuard device. */
export interface WgDriver {
  readonly way: WgWayName;
  /** The device's name. */
  readonly dev: string;
  /** Makes the device when it is missing (or of another kind); returns what changed ([] when nothing). */
  ensureDevice(): string[];
  /** The device's key (its public half), port and peers. */
  get(): Promise<DeviceState>;
  /** Applies a set request (key, port, peers). */
  configure(s: DeviceSet): Promise<void>;
  /** Releases what the driver holds; the device keeps running. */
  close(): void;
}
