/**
 * The loopback plugin: ADD brings `lo` up in the netns (whatever CNI_IFNAME says) and returns it with
 * 127.0.0.1/8 and ::1/128; DEL sets it down and succeeds when the netns is gone.
 * @module
 */
import { type CniResult, parseResult } from "./result.ts";
import type { Plugin, PluginCall } from "./skel.ts";
import { CniError, ErrCode } from "./spec.ts";
import { pathExists } from "../base/exists.ts";

async function setLo(netns: string, ifname: string, up: boolean): Promise<CniResult> {
  const { openNetlink } = await import("../netlink/mod.ts");
  const h = openNetlink({ path: netns });
  try {
    h.setUp("lo", up);
    if (!up) return {};
    // As the reference: the interface is reported under CNI_IFNAME with a zero MAC, v4 before v6.
    const lo = h.addrs().filter((a) => a.ifname === "lo");
    const ips = [...lo.filter((a) => a.family === 4), ...lo.filter((a) => a.family === 6)]
      .map((a) => ({ interface: 0, address: `${a.local}/${a.prefix}` }));
    return { interfaces: [{ name: ifname, mac: "00:00:00:00:00:00", sandbox: netns }], ips };
  } finally {
    h.close();
  }
}

/** The plugin. */
export const plugin: Plugin = {
  async add(c: PluginCall) {
    if (!pathExists(c.args.netns)) {
      throw new CniError(ErrCode.UnknownContainer, "failed to open netns", `${c.args.netns} does not exist`);
    }
    try {
      const r = await setLo(c.args.netns, c.args.ifname, true);
      // A result from an earlier plugin in the chain passes through unchanged, as the reference does.
      return c.conf.prevResult !== undefined ? parseResult(c.conf.prevResult, c.version) : r;
    } catch (e) {
      throw new CniError(ErrCode.KernelFailure, "failed to set lo up", (e as Error).message);
    }
  },
  async del(c: PluginCall) {
    if (!c.args.netns || !pathExists(c.args.netns)) return;
    try {
      await setLo(c.args.netns, c.args.ifname, false);
    } catch (e) {
      if (pathExists(c.args.netns)) {
        throw new CniError(ErrCode.KernelFailure, "failed to set lo down", (e as Error).message);
      }
    }
  },
  async check(c: PluginCall) {
    const { openNetlink } = await import("../netlink/mod.ts");
    if (!pathExists(c.args.netns)) {
      throw new CniError(ErrCode.UnknownContainer, "failed to open netns", c.args.netns);
    }
    const h = openNetlink({ path: c.args.netns });
    try {
      if (!h.link("lo")?.up) throw new CniError(ErrCode.CheckFailed, "loopback CHECK failed", "lo is down");
    } finally {
      h.close();
    }
  },
  status: () => Promise.resolve(),
  gc: () => Promise.resolve(),
};
