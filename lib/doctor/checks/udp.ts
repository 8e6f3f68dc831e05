/**
 * UDP backend checks (only when the network config says `udp`; silent otherwise, so other backends'
 * reports are unchanged): flannel0 present, a TUN, up, addressed, its MTU = underlay − 28 = FLANNEL_MTU,
 * held open by a live process (a persistent TUN without its owner drops every packet), and the UDP port
 * not dropped by INPUT.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { tunOwnerPids } from "../../netlink/mod.ts";
import { chainPolicy, chainRules, UDP_DEVICE, udpPort } from "../../observe/probes.ts";

const DEV = UDP_DEVICE;
const OVERHEAD = 28;

function isUdp(ctx: NodeSnapshot): boolean {
  return ctx.backendType === "udp";
}

/** The network namespace inode of the checked namespace (for matching TUN owners). */
function netInode(ctx: NodeSnapshot): number | undefined {
  try {
    return Deno.statSync(ctx.opts.netns ? `/var/run/netns/${ctx.opts.netns}` : "/proc/self/ns/net").ino ??
      undefined;
  } catch {
    return undefined;
  }
}

/** udp-device: flannel0 present, TUN, up, addressed, MTU chain, owned by a live process. */
export const udpDevice: Check = {
  id: "udp-device",
  title: "flannel0 TUN present, up, addressed, MTU, owned by a live daemon",
  run(ctx): Finding[] {
    if (!isUdp(ctx)) return [];
    const dev = ctx.link(DEV);
    const restart =
      "restart the daemon (it re-creates and re-attaches flannel0), e.g. systemctl restart flanctl";
    if (!dev) {
      return [{
        id: "udp-device",
        severity: "critical",
        detail: `${DEV} does not exist`,
        why: "no overlay: pods on this node cannot reach pods on other nodes",
        fix: [restart],
      }];
    }
    const problems: string[] = [];
    const fix: string[] = [];
    if (dev.kind !== "tun") problems.push(`${DEV} is a ${dev.kind ?? "physical"} device, not a TUN`);
    if (!dev.up) {
      problems.push(`${DEV} is down`);
      fix.push(ctx.cmd(`ip link set ${DEV} up`));
    }
    const sub = ctx.nodeSubnet;
    if (sub) {
      const want = `${sub.ip}/32`;
      const addrs = (ctx.kernel?.addrs ?? []).filter((a) => a.index === dev.index && a.family === 4);
      if (!addrs.some((a) => `${a.local}/${a.prefix}` === want)) {
        problems.push(
          `${DEV} has ${addrs.map((a) => `${a.local}/${a.prefix}`).join(", ") || "no address"}, ` +
            `expected ${want}`,
        );
        fix.push(ctx.cmd(`ip addr add ${want} dev ${DEV}`));
      }
    }
    const envMtu = ctx.subnetEnv?.mtu;
    if (envMtu !== undefined && envMtu !== null && envMtu !== dev.mtu) {
      problems.push(`${DEV} MTU ${dev.mtu} != FLANNEL_MTU ${envMtu}`);
    }
    const pub = ctx.ownLease()?.attrs.PublicIP;
    const under = pub ? (ctx.kernel?.addrs ?? []).find((a) => a.local === pub) : undefined;
    const ul = under ? ctx.link(under.index) : null;
    if (ul && ul.mtu - OVERHEAD !== dev.mtu) {
      problems.push(`${DEV} MTU ${dev.mtu} != ${ul.name} MTU ${ul.mtu} − ${OVERHEAD}`);
      fix.push(restart + " (it sets the MTU from the interface)");
    }
    const owners = tunOwnerPids(DEV, netInode(ctx));
    if (owners.length === 0) {
      problems.push(`no process holds ${DEV} open (the daemon is not running: every packet is dropped)`);
      fix.push(restart);
    }
    if (!problems.length) {
      return [
        ok(
          "udp-device",
          `${DEV} TUN up, ${sub ? `${sub.ip}/32` : "?"}, MTU ${dev.mtu}, held by pid ${owners.join(",")}`,
        ),
      ];
    }
    return [{
      id: "udp-device",
      severity: "critical",
      detail: problems.join("; "),
      why:
        "the UDP backend's data path reads and writes flannel0; a TUN nobody reads drops packets, and an MTU " +
        "above underlay − 28 makes large packets vanish",
      fix: fix.length ? [...new Set(fix)] : [restart],
    }];
  },
};

/** udp-port: the UDP port is not dropped or rejected by the INPUT chain. */
export const udpPortCheck: Check = {
  id: "udp-port",
  title: "UDP backend port open in INPUT",
  run(ctx): Finding[] {
    if (!isUdp(ctx)) return [];
    const port = udpPort(ctx);
    if (ctx.ipt.main.text === null) {
      return [ok("udp-port", `UDP ${port}: iptables not readable, not checked`)];
    }
    const filter = ctx.iptTable("filter");
    const input = chainRules(filter, "INPUT");
    const portRe = new RegExp(`--dport ${port}\\b`);
    const drop = input.find((r) => portRe.test(r) && / -j (DROP|REJECT)\b/.test(r));
    const accept = input.find((r) => portRe.test(r) && / -j ACCEPT\b/.test(r));
    const pol = chainPolicy(filter, "INPUT");
    if (drop && input.indexOf(drop) < (accept ? input.indexOf(accept) : Infinity)) {
      return [{
        id: "udp-port",
        severity: "critical",
        detail: `INPUT drops the UDP backend's port: ${drop}`,
        why: "peers send every overlay packet to this port: all cross-node pod traffic is lost",
        fix: [ctx.cmd(`iptables ${drop.replace(/^-A /, "-D ")}`)],
      }];
    }
    if (pol !== null && pol !== "ACCEPT" && !accept) {
      return [{
        id: "udp-port",
        severity: "warning",
        detail: `INPUT policy ${pol} and no ACCEPT rule for UDP ${port}`,
        why: "unless another rule accepts it, overlay traffic from peers is dropped",
        fix: [ctx.cmd(`iptables -I INPUT -p udp --dport ${port} -j ACCEPT`)],
      }];
    }
    return [ok("udp-port", `UDP ${port} not blocked by INPUT`)];
  },
};

/** The UDP backend's checks. */
export const UDP_CHECKS: Check[] = [udpDevice, udpPortCheck];
