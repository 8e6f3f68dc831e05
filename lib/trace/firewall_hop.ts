/**
 * The remote node's INPUT for the overlay datagram: the VXLAN packet from the sending node's PublicIP to
 * the remote's port, walked through every base chain of its INPUT hook (the packet-path evaluator), so a
 * trace broken by a firewall names the rule that drops it.
 * @module
 */
import { overlayIn, ruleset4, verdictText } from "../observe/packet_path/mod.ts";
import { safeText } from "../base/capped_read.ts";
import { pathFinding, vxlanAccept } from "../doctor/mod.ts";
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
