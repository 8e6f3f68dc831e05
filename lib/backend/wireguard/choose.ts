/**
 * The choice between the two ways to a WireGuard device at start (driver.ts).
 *
 * A device already there keeps its way (wireguard-go's TUN stays userspace, so a restart loses nothing; a
 * kernel link stays kernel); else the kernel is tried first — where it refuses the link kind (EOPNOTSUPP:
 * no module) or has no `wireguard` generic netlink family (ENOENT), the link made is deleted and the
 * userspace way is used (the caller says why in one log line: {@link Chosen}'s `fallback`). Any other refusal is a start failure ({@link WgDeviceError})
 * with no device left. `FLANCTL_WIREGUARD_WAY` (`kernel`, `userspace`, `auto`: the default) forces one way:
 * forced, the kernel's refusal is a failure.
 * @module
 */
import { errText } from "../../base/errors.ts";
import type { NetlinkHandle } from "../../netlink/mod.ts";
import { ConfigError } from "../../config/netconf.ts";
import type { WgDriver, WgWayName } from "./driver.ts";
import { KernelDriver, type WgGenl, WgKernelMissing } from "./kernel.ts";
import { type UserspaceDriver, WgDeviceError } from "./userspace.ts";

/** The environment variable that forces a way: `kernel`, `userspace` or `auto` (the default). */
export const WIREGUARD_WAY_ENV = "FLANCTL_WIREGUARD_WAY";

/** The way asked for: a forced one, or auto (kernel first, then userspace). */
export type WgWayWanted = WgWayName | "auto";

/** FLANCTL_WIREGUARD_WAY's value (unset or empty: auto); anything else is a ConfigError. */
export function wantedWay(env: Record<string, string | undefined> = Deno.env.toObject()): WgWayWanted {
  const v = (env[WIREGUARD_WAY_ENV] ?? "").trim().toLowerCase();
  if (v === "" || v === "auto") return "auto";
  if (v === "kernel" || v === "userspace") return v;
  throw new ConfigError(
    WIREGUARD_WAY_ENV,
    `${WIREGUARD_WAY_ENV} must be kernel, userspace or auto, not ${JSON.stringify(v.slice(0, 20))}`,
  );
}

/** What the choice needs. */
export interface ChooseOptions {
  nl: NetlinkHandle;
  dev: string;
  mtu: number;
  wanted: WgWayWanted;
  /** The generic netlink calls (tests pass a fake). */
  genl: WgGenl;
  /**
   * The userspace driver, made on demand; `why` says why the kernel is not used (null: not tried). Throws
   * when there is no wireguard-go.
   */
  userspace: (why: string | null) => UserspaceDriver;
}

/** The chosen driver, what it changed, and why the kernel was not used (null when it is). */
export interface Chosen {
  driver: WgDriver;
  changes: string[];
  fallback: string | null;
}

/**
 * Picks the way and makes the device (see the module doc). Throws WgDeviceError for a kernel refusal other
 * than a missing module (nothing left behind), ConfigError when no way is left.
 */
export function chooseDriver(o: ChooseOptions): Chosen {
  const have = o.nl.link(o.dev);
  if (o.wanted === "userspace" || (have?.kind === "tun" && o.wanted === "auto")) {
    const d = o.userspace(null);
    return { driver: d, changes: d.ensureDevice(), fallback: null };
  }
  const k = new KernelDriver(o.nl, o.dev, o.mtu, o.genl);
  try {
    return { driver: k, changes: k.ensureDevice(), fallback: null };
  } catch (e) {
    if (!(e instanceof WgKernelMissing)) {
      throw new WgDeviceError(`cannot make the kernel WireGuard device ${o.dev}: ${errText(e)}`);
    }
    if (o.wanted === "kernel") {
      throw new WgDeviceError(
        `${WIREGUARD_WAY_ENV}=kernel, but ${e.message}: load the wireguard module, or unset ` +
          `${WIREGUARD_WAY_ENV} to use wireguard-go`,
      );
    }
    const d = o.userspace(e.message);
    return { driver: d, changes: d.ensureDevice(), fallback: e.message };
  }
}
