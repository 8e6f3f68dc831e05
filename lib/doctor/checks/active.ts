/**
 * Checks that talk to something: the daemon's readiness endpoint (when `--readyz-url` is given) and,
 * with `--probe`, pings to every peer's public IP and VTEP address to tell underlay from overlay faults.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import { httpGet } from "../../observe/http_get.ts";
import { runProcess } from "../../base/run.ts";
import { sh } from "../../base/shell.ts";

/** readyz: the daemon's /readyz answers 200. */
export const readyz: Check = {
  id: "readyz",
  title: "Daemon readiness endpoint returns 200",
  async run(ctx) {
    const url = ctx.opts.readyzUrl;
    if (!url) return [];
    // Asked from inside the checked namespace: 127.0.0.1 there is the daemon's loopback.
    const r = await httpGet(ctx.opts.netns, url);
    if (r.status === 200) return [ok("readyz", `${url} → 200`)];
    return [{
      id: "readyz",
      severity: "critical",
      detail: `${url} → ${r.status === null ? `no answer (${r.error})` : r.status}`,
      why:
        "the daemon is not running or has not finished setting up (rules, subnet.env): pods on this node " +
        "may have no network",
      fix: ["systemctl status flanctl; journalctl -u flanctl -n 50"],
      persist: ["systemctl enable flanctl"],
    }];
  },
};

/** peer-probe (--probe): ping each peer's PublicIP (underlay) and VTEP address (overlay). */
export const peerProbe: Check = {
  id: "peer-probe",
  title: "Peers answer on the underlay and through the overlay",
  async run(ctx) {
    if (!ctx.opts.probe) return [];
    const peers = ctx.peerLeases();
    if (ctx.store.state !== "ok") {
      return [unknown("peer-probe", `no peers to probe: ${ctx.store.hint ?? ctx.store.error}`)];
    }
    if (!peers.length) return [ok("peer-probe", "no peers to probe")];
    const ping = async (ip: string) => {
      const argv = ["ping", "-c", "2", "-i", "0.2", "-W", "1", "-n", "-q", ip];
      const full = ctx.opts.netns ? ["ip", "netns", "exec", ctx.opts.netns, ...argv] : argv;
      try {
        return (await runProcess(full, { discardOutput: true })).code === 0;
      } catch {
        return false;
      }
    };
    const results = await Promise.all(peers.map(async (l) => {
      const vtep = l.attrs.BackendType === "vxlan" ? l.subnet!.ip.toString() : null;
      const [under, over] = await Promise.all([
        ping(l.attrs.PublicIP),
        vtep ? ping(vtep) : Promise.resolve(true),
      ]);
      return { l, vtep, under, over };
    }));
    const out: Finding[] = [];
    const bad = results.filter((r) => !r.under || !r.over);
    for (const r of bad) {
      const underlay = !r.under;
      out.push({
        id: "peer-probe",
        severity: "critical",
        detail: underlay
          ? `peer ${r.l.subnet}: PublicIP ${r.l.attrs.PublicIP} does not answer (underlay fault)`
          : `peer ${r.l.subnet}: PublicIP ${r.l.attrs.PublicIP} answers, VTEP ${r.vtep} does not (overlay fault)`,
        why: underlay
          ? "the node itself is unreachable: network, firewall or the node is down; the overlay cannot work"
          : "the underlay works but VXLAN does not: UDP port blocked, wrong ARP/FDB, MTU or checksum offload",
        fix: underlay
          ? [ctx.cmd(sh`ip route get ${r.l.attrs.PublicIP}`), ctx.cmd(sh`ping -c 3 ${r.l.attrs.PublicIP}`)]
          : [
            `check vxlan-port, peer-arp, peer-fdb, vxlan-csum-offload on both nodes; ` +
            ctx.cmd(sh`tcpdump -ni any udp port ${ctx.vxlanPort}`),
          ],
      });
    }
    if (!out.length) {
      out.push(ok("peer-probe", `${results.length} peer(s) answer on PublicIP and VTEP address`));
    }
    return out;
  },
};

/** The checks of this family. */
export const ACTIVE_CHECKS: Check[] = [readyz, peerProbe];
