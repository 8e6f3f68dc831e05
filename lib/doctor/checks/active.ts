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
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { overlayIn, ruleset4, verdictText } from "../../observe/packet_path/mod.ts";
import { pathFinding } from "./firewall_path.ts";
import { vxlanAccept } from "./vxlan.ts";

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

/** One ping from the checked namespace; `df` sends `size` bytes of payload with Don't Fragment. */
async function ping(ctx: NodeSnapshot, ip: string, df?: number): Promise<boolean> {
  const argv = df === undefined
    ? ["ping", "-c", "2", "-i", "0.2", "-W", "1", "-n", "-q", ip]
    : ["ping", "-c", "1", "-W", "1", "-n", "-q", "-M", "do", "-s", String(df), ip];
  const full = ctx.opts.netns ? ["ip", "netns", "exec", ctx.opts.netns, ...argv] : argv;
  try {
    return (await runProcess(full, { discardOutput: true })).code === 0;
  } catch {
    return false;
  }
}

/** ICMP echo overhead: the payload of a `size`-byte IPv4 packet is size − 28. */
const ICMP_OVERHEAD = 28;

/**
 * The path MTU to `ip` through the overlay: null when a DF probe of `mtu` − 28 bytes of payload passes,
 * else the largest packet that passes (bisected, at most 18 probes; 0 when none does).
 */
export async function pathMtu(
  probe: (payload: number) => Promise<boolean>,
  mtu: number,
): Promise<number | null> {
  let hi = mtu - ICMP_OVERHEAD;
  if (await probe(hi)) return null;
  let lo = 0;
  if (!await probe(lo)) return 0;
  for (let i = 0; i < 16 && hi - lo > 1; i++) {
    const mid = Math.floor((lo + hi) / 2);
    if (await probe(mid)) lo = mid;
    else hi = mid;
  }
  return lo + ICMP_OVERHEAD;
}

/** Why the overlay does not answer, from this node's side: does our INPUT drop the peer's VXLAN? */
function overlayWhy(ctx: NodeSnapshot, publicIP: string): { text: string; fix: string[] } {
  const rs = ruleset4(ctx);
  const c = overlayIn(ctx, rs, ctx.vxlanPort, "VXLAN", null).find((c) =>
    c.packet.src.toString() === publicIP
  );
  if (!c) return { text: "", fix: [] };
  if (c.verdict.verdict === "drop") {
    const f = pathFinding(ctx, "vxlan-port", rs, [c], vxlanAccept(ctx.vxlanPort), "");
    return { text: `; the replies are dropped here: ${verdictText(c.verdict)}`, fix: f.fix ?? [] };
  }
  if (c.verdict.verdict === "unknown") {
    return { text: `; this node's INPUT: ${verdictText(c.verdict)}`, fix: [] };
  }
  return {
    text: `; this node's firewall passes VXLAN from ${publicIP} (${verdictText(c.verdict)}): look at the ` +
      "peer's INPUT (flanctl doctor there names the rule), ARP/FDB, MTU or checksum offload",
    fix: [],
  };
}

/**
 * peer-probe (--probe): ping each peer's PublicIP (underlay) and VTEP address (overlay); an overlay fault
 * is explained by the packet-path evaluator (does this node's INPUT drop the peer's VXLAN?); then DF
 * probes of FLANNEL_MTU bytes through the overlay find the path MTU to each peer that answers.
 */
export const peerProbe: Check = {
  id: "peer-probe",
  title: "Peers answer on the underlay and through the overlay, at FLANNEL_MTU",
  async run(ctx) {
    if (!ctx.opts.probe) return [];
    const peers = ctx.peerLeases();
    if (ctx.store.state !== "ok") {
      return [unknown("peer-probe", `no peers to probe: ${ctx.store.hint ?? ctx.store.error}`)];
    }
    if (!peers.length) return [ok("peer-probe", "no peers to probe")];
    const mtu = ctx.subnetEnv?.mtu ?? 0;
    const results = await Promise.all(peers.map(async (l) => {
      const vtep = l.attrs.BackendType === "vxlan" ? l.subnet!.ip.toString() : null;
      const [under, over] = await Promise.all([
        ping(ctx, l.attrs.PublicIP),
        vtep ? ping(ctx, vtep) : Promise.resolve(true),
      ]);
      const pmtu = vtep && over && mtu > ICMP_OVERHEAD ? await pathMtu((n) => ping(ctx, vtep, n), mtu) : null;
      return { l, vtep, under, over, pmtu };
    }));
    const out: Finding[] = [];
    for (const r of results.filter((r) => !r.under || !r.over)) {
      const underlay = !r.under;
      const ex = underlay ? { text: "", fix: [] } : overlayWhy(ctx, r.l.attrs.PublicIP);
      out.push({
        id: "peer-probe",
        severity: "critical",
        detail: underlay
          ? `peer ${r.l.subnet}: PublicIP ${r.l.attrs.PublicIP} does not answer (underlay fault)`
          : `peer ${r.l.subnet}: PublicIP ${r.l.attrs.PublicIP} answers, VTEP ${r.vtep} does not (overlay fault)` +
            ex.text,
        why: underlay
          ? "the node itself is unreachable: network, firewall or the node is down; the overlay cannot work"
          : "the underlay works but VXLAN does not: UDP port blocked, wrong ARP/FDB, MTU or checksum offload",
        fix: underlay
          ? [ctx.cmd(sh`ip route get ${r.l.attrs.PublicIP}`), ctx.cmd(sh`ping -c 3 ${r.l.attrs.PublicIP}`)]
          : ex.fix.length
          ? ex.fix
          : [
            `check vxlan-port, peer-arp, peer-fdb, vxlan-csum-offload on both nodes; ` +
            ctx.cmd(sh`tcpdump -ni any udp port ${ctx.vxlanPort}`),
          ],
      });
    }
    for (const r of results.filter((r) => r.pmtu !== null)) {
      out.push({
        id: "peer-probe",
        severity: "critical",
        detail: `peer ${r.l.subnet}: a DF probe of ${mtu} bytes (FLANNEL_MTU) to VTEP ${r.vtep} is lost; ` +
          (r.pmtu ? `the path MTU through the overlay is ${r.pmtu}` : "no DF probe passes"),
        why:
          "pods send packets up to FLANNEL_MTU: larger ones vanish between the nodes (a PMTU black hole: " +
          "small requests work, large replies and TLS handshakes hang)",
        fix: [
          ctx.cmd(sh`ip route get ${r.l.attrs.PublicIP}`) + "  # the underlay's MTU toward the peer",
          `make the underlay carry FLANNEL_MTU + 50 bytes (VXLAN) to ${r.l.attrs.PublicIP}, or lower the ` +
          "network's MTU (the daemon's --iface MTU − 50) on every node",
        ],
      });
    }
    if (!out.length) {
      const df = mtu > ICMP_OVERHEAD && results.some((r) => r.vtep) ? `; DF probes of ${mtu} bytes pass` : "";
      out.push(ok("peer-probe", `${results.length} peer(s) answer on PublicIP and VTEP address${df}`));
    }
    return out;
  },
};

/** The checks of this family. */
export const ACTIVE_CHECKS: Check[] = [readyz, peerProbe];
