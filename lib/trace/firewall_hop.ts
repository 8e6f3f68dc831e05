/**
 * The remote node's INPUT for the overlay datagram: the VXLAN packet from the sending node's PublicIP to
 * the remote's port, walked through every base chain of its INPUT hook (the packet-path evaluator), so a
 * trace broken by a firewall names the rule that drops it.
 * @module
 */
import {
  evaluate,
  FORWARD_HOOKS,
  overlayIn,
  type Packet,
  ruleset4,
  ruleset6,
  verdictText,
} from "../observe/packet_path/mod.ts";
import { safeText } from "../base/capped_read.ts";
import { IPAddr } from "../base/cidr.ts";
import type { NodeSnapshot } from "../observe/snapshot.ts";
import { network6 } from "../observe/probes.ts";
import { type Finding, FORWARD_WHY, forwardAccept, pathFinding, vxlanAccept } from "../doctor/mod.ts";
import type { Path } from "./path.ts";
import type { TraceNode } from "./types.ts";

/**
 * Adds the `remote-input` hop for VXLAN from `from` (the sender's PublicIP; null: every peer of the
 * remote node) and returns false when the remote's INPUT drops it. No hop when there is nothing to walk.
 */
export function remoteInputHop(peer: TraceNode, from: string | null, leaseText: string, p: Path): boolean {
  const pc = peer.ctx;
  const port = pc.vxlanPort;
  const rs = ruleset4(pc);
  const all = overlayIn(pc, rs, port, "VXLAN", null);
  const checks = from ? all.filter((c) => c.packet.src.toString() === from) : all;
  if (!checks.length) return true;
  const why = "the peer's VXLAN datagrams never reach flannel.1: all pod traffic between the nodes is lost";
  const f = pathFinding(pc, "vxlan-port", rs, checks, vxlanAccept(port), why);
  const ok = f.severity !== "critical";
  p.add({
    node: peer.name,
    step: "remote-input",
    ok,
    entry: `${checks[0].label}: ${verdictText(checks[0].verdict)}`,
    detail: ok
      ? f.severity === "unknown" ? safeText(f.detail, 300) : `INPUT lets VXLAN to UDP ${port} through`
      : "INPUT drops the VXLAN datagrams before flannel.1 decapsulates them",
    lease: leaseText,
  }, ok ? null : { why: f.why ?? f.detail, fix: f.fix ?? [], check: "vxlan-port" });
  return ok;
}

/**
 * forward-policy's finding for the traced packet itself — an ICMP (ICMPv6) echo request, what `--probe`
 * sends, from `src` to `dst`, in on `iif`, out on `oif` — walked through FORWARD; null when it cannot be
 * built (no source of the family, no network), then the caller falls back to the check's own packets.
 */
export function tracedForward(
  ctx: NodeSnapshot,
  src: string | null,
  dst: string,
  iif: string,
  oif: string,
): Finding | null {
  const s = src ? IPAddr.tryParse(src) : null, d = IPAddr.tryParse(dst);
  if (!s || !d || s.family !== d.family) return null;
  const v6 = s.family === 6;
  const net = v6 ? network6(ctx) : ctx.network;
  if (!net) return null;
  const rs = v6 ? ruleset6(ctx) : ruleset4(ctx);
  const packet: Packet = {
    family: s.family,
    src: s,
    dst: d,
    iif,
    oif,
    proto: v6 ? 58 : 1,
    sport: null,
    dport: null,
    icmpType: v6 ? 128 : 8,
    srcLocal: false,
    dstLocal: false,
  };
  const check = {
    label: `ICMP${v6 ? "v6" : ""} echo ${s} → ${d} (${iif} → ${oif})`,
    packet,
    hooks: FORWARD_HOOKS,
    verdict: evaluate(rs, packet, FORWARD_HOOKS),
  };
  return pathFinding(ctx, "forward-policy", rs, [check], forwardAccept(String(net), s.family), FORWARD_WHY);
}
