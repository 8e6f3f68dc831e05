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
import { tunOwnerPids } from "../../os/mod.ts";
import { checkedNetns, udpPort } from "../../observe/probes.ts";
import { overlayIn, ruleset4 } from "../../observe/packet_path/mod.ts";
import { type AcceptSpec, pathFinding } from "./firewall_path.ts";
import { UDP_DEVICE } from "../../backend/config.ts";
import { sh } from "../../base/shell.ts";

const DEV = UDP_DEVICE;
const OVERHEAD = 28;

function isUdp(ctx: NodeSnapshot): boolean {
  return ctx.backendType === "udp";
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
        fix.push(ctx.cmd(sh`ip addr add ${want} dev ${DEV}`));
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
    const owners = tunOwnerPids(DEV, checkedNetns(ctx));
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
    // The datagrams each peer's daemon sends from its port to ours, through every base chain of INPUT.
    const rs = ruleset4(ctx);
    const checks = overlayIn(ctx, rs, port, "udp backend datagrams", port);
    const spec: AcceptSpec = {
      ipt: [`-p udp --dport ${port}`],
      nft: [`udp dport ${port}`],
      ufw: [`ufw allow ${port}/udp`],
      firewalld: [`firewall-cmd --add-port=${port}/udp`],
      comment: "flannel udp",
    };
    if (!checks.length) return [ok("udp-port", `UDP ${port}: no peer leases to walk through INPUT`)];
    const why = "peers send every overlay packet to this port: all cross-node pod traffic is lost";
    return [pathFinding(ctx, "udp-port", rs, checks, spec, why)];
  },
};

/**
 * udp-leftover: a `flannel<N>` TUN that no process holds open, beside the backend's own. flanctl's udp
 * device is persistent: after a rollback to flanneld without `flanctl reset`, flanneld opens `flannel%d` and
 * gets flannel1 while the ownerless flannel0 keeps the Network route, and every pair into or out of the node
 * fails. (flannel0 alone without an owner, in udp mode, is the udp-device check's "daemon not running".)
 */
export const udpLeftover: Check = {
  id: "udp-leftover",
  title: "No flannel TUN left behind that no process holds",
  run(ctx): Finding[] {
    const ns = checkedNetns(ctx);
    const tuns = (ctx.kernel?.links ?? []).filter((l) => l.kind === "tun" && /^flannel\d+$/.test(l.name));
    if (!tuns.length) return [];
    const owned = new Map(tuns.map((t) => [t.name, tunOwnerPids(t.name, ns)]));
    const orphans = tuns.filter((t) => !owned.get(t.name)!.length);
    const held = tuns.filter((t) => owned.get(t.name)!.length);
    if (!orphans.length) return [ok("udp-leftover", "no flannel TUN without an owner")];
    if (isUdp(ctx) && !held.length && orphans.length === 1 && orphans[0].name === DEV) return [];
    const names = orphans.map((t) => t.name);
    const routes = (ctx.kernel?.routes ?? []).filter((r) => r.devName !== null && names.includes(r.devName));
    const heldBy = held.map((t) => `${t.name} (pid ${owned.get(t.name)!.join(",")})`);
    return [{
      id: "udp-leftover",
      severity: routes.length ? "critical" : "warning",
      detail: `${names.join(", ")}: TUN device${names.length > 1 ? "s" : ""} no process holds open` +
        (heldBy.length ? `, while ${heldBy.join(", ")} serves the udp backend` : "") +
        (routes.length
          ? `; ${routes.map((r) => `${r.dst} dev ${r.devName}`).join(", ")} send${
            routes.length > 1 ? "" : "s"
          } traffic into it, where it is dropped`
          : ""),
      why:
        "flanctl's udp device is persistent (it survives a restart); after a rollback to flanneld it stays " +
        "behind: flanneld opens flannel%d and gets the next name, and the leftover keeps the Network route, so " +
        "pods on this node cannot reach other nodes",
      fix: [
        "stop the daemon, then: flanctl reset (removes every device, route, rule and file flanctl made)",
        ...names.map((n) => ctx.cmd(`ip link del ${n}`)),
        "then restart flanneld (it opens flannel0 again)",
      ],
    }];
  },
};

/** The udp backend's checks. */
export const UDP_CHECKS: Check[] = [udpDevice, udpPortCheck, udpLeftover];
