/**
 * Kernel tunables: forwarding, br_netfilter, rp_filter, IPv6, neighbour-table (checks/neigh.ts) and
 * conntrack headroom.
 * @module
 */
import type { Check } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { neighGc } from "./neigh.ts";
import { sh, singleQuote } from "../../base/shell.ts";

/** The interfaces pod traffic crosses: flannel's VXLAN device, cni0 and the underlay. */
function pathIfaces(ctx: NodeSnapshot): string[] {
  const names = [ctx.vxlanDevice()?.name, ctx.link("cni0")?.name, ctx.underlay()?.link.name];
  return [...new Set(names.filter((n): n is string => !!n))];
}

/** sysctl key of a per-interface setting; slash form when the name has a dot (flannel.1). */
export function ifaceKey(iface: string, key: string): string {
  return iface.includes(".") ? `net/ipv4/conf/${iface}/${key}` : `net.ipv4.conf.${iface}.${key}`;
}

function persistSysctl(kv: string[]): string[] {
  return [
    `printf '%s\\n' ${kv.map(singleQuote).join(" ")} >> /etc/sysctl.d/90-flannel.conf && sysctl --system`,
  ];
}

/** ip-forward: net.ipv4.ip_forward and per-interface forwarding on the pod path. */
export const ipForward: Check = {
  id: "ip-forward",
  title: "IPv4 forwarding enabled (global and on the pod path)",
  run(ctx) {
    const g = ctx.sysctl("/proc/sys/net/ipv4/ip_forward");
    if (g === null) return [unknown("ip-forward", "cannot read /proc/sys/net/ipv4/ip_forward")];
    const off: string[] = [];
    if (g !== "1") off.push(`net.ipv4.ip_forward = ${g}`);
    for (const i of pathIfaces(ctx)) {
      const v = ctx.sysctl(`/proc/sys/net/ipv4/conf/${i}/forwarding`);
      if (v !== null && v !== "1") off.push(`${ifaceKey(i, "forwarding")} = ${v}`);
    }
    if (off.length === 0) {
      return [
        ok("ip-forward", `net.ipv4.ip_forward = 1; forwarding on ${pathIfaces(ctx).join(", ") || "-"}`),
      ];
    }
    // Setting net.ipv4.ip_forward=1 also turns forwarding on for every interface.
    const kv = (g !== "1" ? off.slice(0, 1) : off).map((s) => s.split(" = ")[0] + "=1");
    if (g !== "1" && ctx.kernel && ctx.cni0Veths().length === 0) {
      // flannel's daemon never sets it: the bridge plugin does, with the first pod's ADD.
      return [
        ok(
          "ip-forward",
          `${off.join("; ")}, and no pod on this node yet: nothing to forward; the CNI bridge plugin turns ` +
            `it on with the first pod (to set it now: ${ctx.cmd(sh`sysctl -w ${kv[0]}`)})`,
        ),
      ];
    }
    return [{
      id: "ip-forward",
      severity: "critical",
      detail: off.join("; "),
      why: "without forwarding the node drops every packet between pods, cni0, flannel.1 and the underlay",
      fix: kv.map((k) => ctx.cmd(sh`sysctl -w ${k}`)),
      persist: persistSysctl(kv),
    }];
  },
};

/** br-netfilter: bridged pod traffic must traverse iptables (kube-proxy services, FLANNEL-FWD). */
export const brNetfilter: Check = {
  id: "br-netfilter",
  title: "br_netfilter loaded, bridge-nf-call-iptables = 1",
  run(ctx) {
    const v = ctx.sysctl("/proc/sys/net/bridge/bridge-nf-call-iptables");
    if (v === null) {
      return [{
        id: "br-netfilter",
        severity: "warning",
        detail: "/proc/sys/net/bridge/bridge-nf-call-iptables does not exist: br_netfilter is not loaded",
        why:
          "pod-to-pod traffic on cni0 bypasses iptables: Service (kube-proxy) DNAT fails for pods on the " +
          "same node (flannel #2068, #2166)",
        fix: ["modprobe br_netfilter", ctx.cmd("sysctl -w net.bridge.bridge-nf-call-iptables=1")],
        persist: [
          "echo br_netfilter > /etc/modules-load.d/br_netfilter.conf",
          ...persistSysctl(["net.bridge.bridge-nf-call-iptables=1"]),
        ],
      }];
    }
    if (v !== "1") {
      return [{
        id: "br-netfilter",
        severity: "warning",
        detail: `net.bridge.bridge-nf-call-iptables = ${v}`,
        why: "bridged pod traffic skips iptables: Services and FLANNEL-FWD do not see it (flannel #2068)",
        fix: [ctx.cmd("sysctl -w net.bridge.bridge-nf-call-iptables=1")],
        persist: persistSysctl(["net.bridge.bridge-nf-call-iptables=1"]),
      }];
    }
    return [ok("br-netfilter", "br_netfilter loaded, net.bridge.bridge-nf-call-iptables = 1")];
  },
};

/** rp-filter: strict reverse-path filtering drops asymmetric overlay traffic on multi-NIC hosts. */
export const rpFilter: Check = {
  id: "rp-filter",
  title: "rp_filter not strict on the pod path",
  run(ctx) {
    const all = Number(ctx.sysctl("/proc/sys/net/ipv4/conf/all/rp_filter") ?? "0");
    const strict: string[] = [];
    const seen: string[] = [];
    for (const i of pathIfaces(ctx)) {
      const v = Number(ctx.sysctl(`/proc/sys/net/ipv4/conf/${i}/rp_filter`) ?? "0");
      const eff = Math.max(all, v);
      seen.push(`${i}=${eff}`);
      if (eff === 1) strict.push(`${i} (all=${all}, ${i}=${v})`);
    }
    if (strict.length === 0) return [ok("rp-filter", `effective rp_filter: ${seen.join(", ") || "-"}`)];
    const kv = strict.map((s) => `${ifaceKey(s.split(" ")[0], "rp_filter")}=2`);
    if (all === 1) kv.unshift("net.ipv4.conf.all.rp_filter=2");
    return [{
      id: "rp-filter",
      severity: "warning",
      detail: `rp_filter strict (1) on ${strict.join("; ")}`,
      why:
        "strict reverse-path filtering drops packets whose reply route uses another interface (multi-NIC " +
        "nodes, DirectRouting, host-gw); the effective value is max(all, interface)",
      fix: kv.map((k) => ctx.cmd(sh`sysctl -w ${k}`)),
      persist: persistSysctl(kv),
    }];
  },
};

/** ipv6: IPv6 configured (dual stack) but disabled in the kernel. */
export const ipv6Disabled: Check = {
  id: "ipv6",
  title: "IPv6 enabled when the network is dual stack",
  run(ctx) {
    const wants = !!ctx.subnetEnv?.ipv6Network || ctx.store.config?.enableIPv6 === true;
    if (!wants) return [ok("ipv6", "IPv6 is not configured for the pod network")];
    const v = ctx.sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6");
    if (v === null) {
      return [{
        id: "ipv6",
        severity: "critical",
        detail:
          "IPv6 is configured but /proc/sys/net/ipv6 does not exist (ipv6.disable=1 on the kernel command line?)",
        why: "dual-stack pods cannot get IPv6 addresses; flannel fails to set up flannel-v6.1",
        fix: ["remove ipv6.disable=1 from the kernel command line and reboot"],
        persist: ["edit GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub"],
      }];
    }
    if (v === "1") {
      return [{
        id: "ipv6",
        severity: "critical",
        detail: "the pod network is dual stack but net.ipv6.conf.all.disable_ipv6 = 1",
        why: "IPv6 addresses cannot be added to flannel-v6.1, cni0 or pods (flannel #1671)",
        fix: [ctx.cmd("sysctl -w net.ipv6.conf.all.disable_ipv6=0")],
        persist: persistSysctl(["net.ipv6.conf.all.disable_ipv6=0"]),
      }];
    }
    return [ok("ipv6", "dual stack configured and IPv6 enabled (disable_ipv6 = 0)")];
  },
};

/** conntrack: nf_conntrack_count close to nf_conntrack_max ("table full, dropping packet"). */
export const conntrack: Check = {
  id: "conntrack",
  title: "Conntrack table below nf_conntrack_max",
  run(ctx) {
    const c = ctx.sysctl("/proc/sys/net/netfilter/nf_conntrack_count");
    const m = ctx.sysctl("/proc/sys/net/netfilter/nf_conntrack_max");
    if (c === null || m === null) return [ok("conntrack", "nf_conntrack is not loaded in this namespace")];
    const count = Number(c), max = Number(m);
    const pct = max > 0 ? Math.round((count / max) * 100) : 0;
    const detail = `nf_conntrack_count = ${count}, nf_conntrack_max = ${max} (${pct}%)`;
    if (count < max * 0.9) return [ok("conntrack", detail)];
    return [{
      id: "conntrack",
      severity: count >= max ? "critical" : "warning",
      detail,
      why: 'a full conntrack table drops new connections ("nf_conntrack: table full, dropping packet")',
      fix: [`sysctl -w net.netfilter.nf_conntrack_max=${max * 2}`],
      persist: persistSysctl([`net.netfilter.nf_conntrack_max=${max * 2}`]),
    }];
  },
};

/** The checks of this family. */
export const SYSCTL_CHECKS: Check[] = [ipForward, brNetfilter, rpFilter, ipv6Disabled, neighGc, conntrack];
