/**
 * Host services that interfere with flannel's devices: NetworkManager managing flannel.*, cni0 or veths
 * (it resets their addresses/MACs, flannel #1330).
 * @module
 */
import type { Check } from "../types.ts";
import { ok, unknown } from "../types.ts";

function inInitialNetns(): boolean {
  try {
    return Deno.readLinkSync("/proc/self/ns/net") === Deno.readLinkSync("/proc/1/ns/net");
  } catch {
    return false;
  }
}

/** networkmanager: NetworkManager must leave flannel.*, cni0 and veth* unmanaged. */
export const networkManager: Check = {
  id: "networkmanager",
  title: "NetworkManager leaves flannel devices alone",
  async run(ctx) {
    if (ctx.opts.netns !== null || !inInitialNetns()) {
      return [ok("networkmanager", "not the initial namespace: NetworkManager does not manage devices here")];
    }
    try {
      Deno.statSync("/run/NetworkManager");
    } catch {
      return [ok("networkmanager", "NetworkManager is not running")];
    }
    const r = await ctx.exec.run(["nmcli", "-t", "-f", "DEVICE,STATE", "device", "status"]);
    if (r.code !== 0) {
      return [unknown("networkmanager", `nmcli device status failed: ${r.stderr.trim() || "not installed"}`)];
    }
    const managed = r.stdout.split("\n").map((l) => l.split(":")).filter(([dev, state]) =>
      dev && /^(flannel|cni0$|veth)/.test(dev) && state !== "unmanaged"
    ).map(([dev, state]) => `${dev} (${state})`);
    if (!managed.length) {
      return [ok("networkmanager", "NetworkManager runs, flannel.*, cni0 and veth* are unmanaged")];
    }
    return [{
      id: "networkmanager",
      severity: "warning",
      detail: `NetworkManager manages ${managed.join(", ")}`,
      why:
        "NetworkManager rewrites the MAC/addresses of devices it manages: the VTEP MAC stops matching the " +
        "lease and cni0 loses its gateway address (flannel #1330)",
      fix: managed.map((m) => `nmcli device set ${m.split(" ")[0]} managed no`),
      persist: [
        "printf '[keyfile]\\nunmanaged-devices=interface-name:flannel*;interface-name:cni0;interface-name:veth*\\n' " +
        "> /etc/NetworkManager/conf.d/flannel.conf && systemctl reload NetworkManager",
      ],
    }];
  },
};

/** The checks of this family. */
export const HOST_CHECKS: Check[] = [networkManager];
