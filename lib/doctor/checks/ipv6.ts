/**
 * IPv6 checks of a dual-stack or IPv6-only node: IPv6 forwarding, the flannel-v6.<VNI> device (up, own
 * /128 address, accept_ra 0, MTU chain underlay − 70 ≥ device ≥ FLANNEL_MTU), per-peer IPv6 route / NDP /
 * FDB entries (or the host-gw / DirectRouting route via PublicIPv6), flannel's ip6tables masquerade lines,
 * and IPv6 switched off on the devices of the pod path. Every check is ok ("not configured") when the node
 * has no IPv6 network.
 * @module
 */
import { RT_TABLE_MAIN } from "../../netlink/mod.ts";
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import type { Lease } from "../../store/types.ts";
import { masqRules } from "../../firewall/masq_rules.ts";
import { VXLAN6_OVERHEAD } from "../../backend/vxlan.ts";
import { dev6, dev6Name, network6, own6 } from "../../observe/probes.ts";
import { vtepMacOf } from "../../lease/backend_data.ts";
import { oneDeviceMode, WG_DEVICE, WG_DEVICE_V6 } from "../../backend/wireguard/options.ts";
import { sh, singleQuote } from "../../base/shell.ts";

/** sysctl key of a per-interface IPv6 setting (slash form: device names hold dots). */
function key6(iface: string, k: string): string {
  return `net/ipv6/conf/${iface}/${k}`;
}

function persist(kv: string[]): string[] {
  return [
    `printf '%s\\n' ${kv.map(singleQuote).join(" ")} >> /etc/sysctl.d/90-flannel.conf && sysctl --system`,
  ];
}

const NOT_CONFIGURED = "IPv6 is not configured for the pod network";

/** ipv6-forward: net.ipv6.conf.all.forwarding = 1. */
export const ipv6Forward: Check = {
  id: "ipv6-forward",
  title: "IPv6 forwarding enabled",
  run(ctx) {
    if (!network6(ctx)) return [ok("ipv6-forward", NOT_CONFIGURED)];
    const v = ctx.sysctl("/proc/sys/net/ipv6/conf/all/forwarding");
    if (v === null) return [unknown("ipv6-forward", "cannot read /proc/sys/net/ipv6/conf/all/forwarding")];
    if (v === "1") return [ok("ipv6-forward", "net.ipv6.conf.all.forwarding = 1")];
    return [{
      id: "ipv6-forward",
      severity: "critical",
      detail: `net.ipv6.conf.all.forwarding = ${v}`,
      why:
        "without IPv6 forwarding the node drops every IPv6 packet between pods, cni0, the overlay and the " +
        "underlay",
      fix: [ctx.cmd("sysctl -w net.ipv6.conf.all.forwarding=1")],
      persist: persist(["net.ipv6.conf.all.forwarding=1"]),
    }];
  },
};

/** ipv6-path: IPv6 not disabled on the devices pod traffic crosses. */
export const ipv6Path: Check = {
  id: "ipv6-path",
  title: "IPv6 enabled on cni0, the IPv6 overlay device and the underlay",
  run(ctx) {
    if (!network6(ctx)) return [ok("ipv6-path", NOT_CONFIGURED)];
    const names = [dev6(ctx)?.name, ctx.link("cni0")?.name, ctx.underlay()?.link.name].filter((
      n,
    ): n is string => !!n);
    const off = names.filter((n) => ctx.sysctl(`/proc/sys/${key6(n, "disable_ipv6")}`) === "1");
    if (off.length === 0) return [ok("ipv6-path", `IPv6 enabled on ${names.join(", ") || "-"}`)];
    return [{
      id: "ipv6-path",
      severity: "critical",
      detail: `disable_ipv6 = 1 on ${off.join(", ")}`,
      why: "a device with IPv6 disabled loses its IPv6 addresses: pods or peers on that path have no IPv6",
      fix: off.map((n) => ctx.cmd(sh`sysctl -w ${key6(n, "disable_ipv6") + "=0"}`)),
      persist: persist(off.map((n) => `${key6(n, "disable_ipv6")}=0`)),
    }];
  },
};

/** flannel-v6-device: the IPv6 VXLAN device, its address, accept_ra and the MTU chain. */
export const flannelV6Device: Check = {
  id: "flannel-v6-device",
  title: "IPv6 VXLAN device up, /128 address, accept_ra 0, MTU chain",
  run(ctx) {
    if (!network6(ctx)) return [ok("flannel-v6-device", NOT_CONFIGURED)];
    if (ctx.backendType !== "vxlan") {
      return [ok("flannel-v6-device", `backend ${ctx.backendType ?? "unknown"}: no IPv6 overlay device`)];
    }
    if (!ctx.kernel) return [unknown("flannel-v6-device", `no kernel snapshot: ${ctx.kernelError}`)];
    const name = dev6Name(ctx);
    const dev = dev6(ctx);
    const restart = "restart the daemon (it re-creates the device), e.g. systemctl restart flanctl";
    if (!dev) {
      return [{
        id: "flannel-v6-device",
        severity: "critical",
        detail: `${name} does not exist`,
        why: "no IPv6 overlay: pods on this node cannot reach other nodes' pods over IPv6",
        fix: [restart],
      }];
    }
    const problems: string[] = [];
    const warn: string[] = [];
    const fix: string[] = [];
    if (dev.kind !== "vxlan") problems.push(`${name} is a ${dev.kind ?? "physical"} device, not vxlan`);
    if (!dev.up) {
      problems.push(`${name} is down`);
      fix.push(ctx.cmd(sh`ip link set ${name} up`));
    }
    const sub = own6(ctx);
    if (sub) {
      const want = `${sub.ip}/128`;
      const have = ctx.kernel.addrs.filter((a) =>
        a.index === dev.index && a.family === 6 && a.scope !== "link"
      );
      if (!have.some((a) => `${a.local}/${a.prefix}` === want)) {
        problems.push(
          `${name} has ${have.map((a) => `${a.local}/${a.prefix}`).join(", ") || "no address"}, ` +
            `expected ${want}`,
        );
        fix.push(ctx.cmd(sh`ip -6 addr add ${want} dev ${name}`));
      }
    }
    const ra = ctx.sysctl(`/proc/sys/${key6(name, "accept_ra")}`);
    if (ra !== null && ra !== "0") {
      warn.push(`${key6(name, "accept_ra")} = ${ra} (flannel sets 0)`);
      fix.push(ctx.cmd(sh`sysctl -w ${key6(name, "accept_ra") + "=0"}`));
    }
    const under = ctx.underlay()?.link;
    if (under && dev.mtu > under.mtu - VXLAN6_OVERHEAD) {
      warn.push(
        `${name} MTU ${dev.mtu} > ${under.name} MTU ${under.mtu} − ${VXLAN6_OVERHEAD}: full-size IPv6 pod ` +
          `packets do not fit the IPv6 underlay`,
      );
      fix.push(ctx.cmd(sh`ip link set ${name} mtu ${under.mtu - VXLAN6_OVERHEAD}`));
    }
    const podMtu = ctx.subnetEnv?.mtu;
    if (podMtu && podMtu > dev.mtu) {
      warn.push(`FLANNEL_MTU ${podMtu} > ${name} MTU ${dev.mtu}`);
    }
    if (problems.length === 0 && warn.length === 0) {
      return [ok(
        "flannel-v6-device",
        `${name} up, address ${sub ? `${sub.ip}/128` : "?"}, accept_ra 0, MTU ${dev.mtu}` +
          (under
            ? ` (${under.name} ${under.mtu} − ${VXLAN6_OVERHEAD} = ${under.mtu - VXLAN6_OVERHEAD})`
            : ""),
      )];
    }
    return [{
      id: "flannel-v6-device",
      severity: problems.length ? "critical" : "warning",
      detail: [...problems, ...warn].join("; "),
      why: "the IPv6 overlay device must be up with the IPv6 subnet's address; router advertisements on it " +
        "add routes and addresses nobody asked for; too large an MTU drops full-size IPv6 packets",
      fix: fix.length ? fix : [restart],
      persist: [restart + " (the daemon re-checks the device and accept_ra on every resync)"],
    }];
  },
};

/** The peers' leases with an IPv6 subnet (not ours, not reservations). */
function peers6(ctx: NodeSnapshot): Lease[] {
  const own = ctx.ownLease();
  const sub = own6(ctx);
  return ctx.store.leases.filter((l) =>
    l !== own && l.ipv6Subnet && l.attrs.BackendType && !(sub && l.ipv6Subnet.equals(sub))
  );
}

/** peers-v6: every peer's IPv6 route, NDP entry and FDB entry (or route via PublicIPv6). */
export const peersV6: Check = {
  id: "peers-v6",
  title: "Per-peer IPv6 route, NDP and FDB entries",
  run(ctx) {
    if (!network6(ctx)) return [ok("peers-v6", NOT_CONFIGURED)];
    if (!ctx.programsPeers) {
      return [ok("peers-v6", `backend ${ctx.backendType}: no data plane, no IPv6 peer entries expected`)];
    }
    if (!ctx.kernel) return [unknown("peers-v6", `no kernel snapshot: ${ctx.kernelError}`)];
    if (ctx.store.state !== "ok") {
      return [unknown("peers-v6", `leases not readable: ${ctx.store.hint ?? ctx.store.error}`)];
    }
    const k = ctx.kernel;
    const dev = dev6(ctx);
    const routes = k.routes.filter((r) => r.family === 6 && r.table === RT_TABLE_MAIN);
    const out: Finding[] = [];
    let good = 0;
    for (const l of peers6(ctx)) {
      const subnet = l.ipv6Subnet!.toString();
      const gw = l.ipv6Subnet!.ip.toString();
      const pub = l.attrs.PublicIPv6 ?? "";
      const r = routes.find((x) => x.dst === subnet);
      const missing: string[] = [];
      const fix: string[] = [];
      const viaPublic = !!r && r.gateway === pub && (!dev || r.dev !== dev.index);
      if (ctx.backendType === "vxlan" && !viaPublic) {
        const mac = vtepMacOf(l.attrs.BackendV6Data);
        if (!dev || !mac) {
          out.push({
            id: "peers-v6",
            severity: "critical",
            detail: `${subnet}: ${
              !dev ? `${dev6Name(ctx)} missing` : "the lease has no BackendV6Data VtepMAC"
            }`,
            why: "pods cannot reach this peer's pods over IPv6",
            fix: ["restart the daemon, e.g. systemctl restart flanctl"],
          });
          continue;
        }
        if (!r || r.gateway !== gw || r.dev !== dev.index || !r.flags.includes("onlink")) {
          missing.push(`route ${subnet} via ${gw} dev ${dev.name} onlink`);
          fix.push(ctx.cmd(sh`ip -6 route replace ${subnet} via ${gw} dev ${dev.name} onlink`));
        }
        const n = k.neigh.find((x) => x.index === dev.index && x.dst === gw);
        if (!n || n.lladdr?.toLowerCase() !== mac || !n.state.includes("PERMANENT")) {
          missing.push(`NDP ${gw} lladdr ${mac} permanent`);
          fix.push(ctx.cmd(sh`ip -6 neigh replace ${gw} lladdr ${mac} dev ${dev.name} nud permanent`));
        }
        if (!k.fdb.some((f) => f.index === dev.index && f.mac.toLowerCase() === mac && f.dst === pub)) {
          missing.push(`FDB ${mac} dst ${pub}`);
          fix.push(ctx.cmd(sh`bridge fdb replace ${mac} dev ${dev.name} dst ${pub} self permanent`));
        }
      } else if (ctx.backendType === "wireguard") {
        // flannel-wg-v6 (the one-device modes: flannel-wg) carries the peer (its AllowedIPs: wg-peers); the
        // route is the device's.
        const name = oneDeviceMode(ctx.store.config?.backend.raw ?? {}) ? WG_DEVICE : WG_DEVICE_V6;
        const wg = ctx.link(name)?.index;
        const net6 = network6(ctx)?.toString();
        if (!(r?.dev === wg || routes.some((x) => x.dst === net6 && x.dev === wg))) {
          missing.push(`route ${subnet} via ${gw} dev ${name} onlink`);
          fix.push(ctx.cmd(sh`ip -6 route replace ${subnet} via ${gw} dev ${name} onlink`));
        }
      } else if (!viaPublic) {
        missing.push(`route ${subnet} via ${pub}`);
        fix.push(ctx.cmd(sh`ip -6 route replace ${subnet} via ${pub}`));
      }
      if (missing.length === 0) {
        good++;
        continue;
      }
      out.push({
        id: "peers-v6",
        severity: "critical",
        detail: `peer ${subnet} (PublicIPv6 ${pub}): missing ${missing.join(", ")}`,
        why: "IPv6 pod traffic to this peer is dropped or sent nowhere",
        fix,
        persist: [
          "the daemon repairs these entries on every resync: check it runs (systemctl status flanctl)",
        ],
      });
    }
    if (out.length === 0) out.push(ok("peers-v6", `${good} IPv6 peer(s) have their entries`));
    return out;
  },
};

/** ip6tables-masq: flannel's IPv6 masquerade lines when FLANNEL_IPMASQ=true. */
export const ip6tablesMasq: Check = {
  id: "ip6tables-masq",
  title: "flannel's ip6tables masquerade rules (--ip-masq)",
  run(ctx) {
    const net = network6(ctx);
    if (!net) return [ok("ip6tables-masq", NOT_CONFIGURED)];
    if (!ctx.subnetEnv?.ipMasq) {
      return [ok("ip6tables-masq", "FLANNEL_IPMASQ=false: the CNI plugin masquerades")];
    }
    if (ctx.store.config?.enableNFTables) {
      // nftables mode: nft-rules reads table ip6 flannel-ipv6 (lib/doctor/checks/nftables.ts).
      return [
        ok(
          "ip6tables-masq",
          "EnableNFTables is set: flannel's IPv6 rules are table ip6 flannel-ipv6 (see nft-rules)",
        ),
      ];
    }
    const sub = own6(ctx);
    if (!sub) return [unknown("ip6tables-masq", "no IPv6 subnet in subnet.env or the leases")];
    if (ctx.ip6t.text === null) return [unknown("ip6tables-masq", `ip6tables-save: ${ctx.ip6t.error}`)];
    const t = masqRules(net, sub);
    const have = new Set(ctx.ip6tTable("nat").split("\n").map((l) => l.trim()));
    const missing = [t.jump, ...t.rules].filter((r) => !have.has(r));
    if (missing.length === 0) {
      return [ok("ip6tables-masq", `${t.rules.length} ${t.chain} rules and the jump in place`)];
    }
    return [{
      id: "ip6tables-masq",
      severity: "critical",
      detail: `${missing.length} of flannel's IPv6 nat lines missing, e.g. ${missing[0]}`,
      why: "IPv6 pod traffic leaving the cluster network is not masqueraded (replies never come back), or " +
        "traffic inside it is",
      fix: [
        "restart the daemon (it re-installs the rules within --iptables-resync seconds), e.g. " +
        "systemctl restart flanctl",
      ],
    }];
  },
};

/** The checks of this family. */
export const IPV6_CHECKS: Check[] = [ipv6Forward, ipv6Path, flannelV6Device, peersV6, ip6tablesMasq];
