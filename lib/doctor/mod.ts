/**
 * `flanctl doctor`: gathers a node's state once, runs every check family against it and returns the
 * report with its Nagios exit code (0 ok, 1 warning, 2 critical, 3 could not check). Read-only.
 * @module
 */
import type { Check, DoctorReport, Finding, Summary } from "./types.ts";
import { SEVERITY_ORDER } from "./types.ts";
import { CHECK_IDS } from "./ids.ts";
import { gatherSnapshot, type SnapshotOptions } from "../observe/snapshot.ts";
import { SYSCTL_CHECKS } from "./checks/sysctl.ts";
import { IPTABLES_CHECKS } from "./checks/iptables.ts";
import { NFTABLES_CHECKS } from "./checks/nftables.ts";
import { NETPOL_CHECKS } from "./checks/netpol.ts";
import { VXLAN_CHECKS } from "./checks/vxlan.ts";
import { UDP_CHECKS } from "./checks/udp.ts";
import { WG_CHECKS } from "./checks/wireguard.ts";
import { PEER_CHECKS } from "./checks/peers.ts";
import { CONFIG_CHECKS } from "./checks/config.ts";
import { LEASE_CHECKS } from "./checks/leases.ts";
import { CNI_CHECKS } from "./checks/cni.ts";
import { POD_CHECKS } from "./checks/pods.ts";
import { ACTIVE_CHECKS } from "./checks/active.ts";
import { HOST_CHECKS } from "./checks/host.ts";
import { DAEMON_CHECKS, pointToDaemon, pointToRoot } from "./checks/daemon.ts";
import { IPV6_CHECKS } from "./checks/ipv6.ts";
import { SANDBOX_CHECKS } from "./checks/sandboxes.ts";

export type { Check, DoctorReport, Finding, Severity, Summary } from "./types.ts";
export { CHECK_IDS, type CheckId, checkId, type FindingId, OLD_IDS, parseCheckIds } from "./ids.ts";
export { DEFAULT_PATHS, type SnapshotOptions } from "../observe/snapshot.ts";
export { renderJson, renderTable } from "./render.ts";
/**
 * The checks `flanctl trace` and `flanctl status` judge a hop or a line with: the doctor's own findings,
 * reached through this module (nothing outside lib/doctor imports lib/doctor/checks).
 */
export { daemonCheck } from "./checks/daemon.ts";
export { FORWARD_WHY, forwardAccept, forwardFinding, forwardPolicy, masqRules } from "./checks/iptables.ts";
export { flannelV6Device, ip6tablesMasq } from "./checks/ipv6.ts";
export { nftFamilyFinding, nftRules } from "./checks/nftables.ts";
export { udpDevice, udpPortCheck } from "./checks/udp.ts";
export { deviceState as wgDeviceState, judgeHandshake, wgDevice } from "./checks/wireguard.ts";
export { pathFinding } from "./checks/firewall_path.ts";
export { vxlanAccept } from "./checks/vxlan.ts";
export { unseenPods, unseenReason } from "./checks/pods.ts";

/** Every check, in the order they run (output is re-sorted by severity). */
export const ALL_CHECKS: Check[] = [
  ...DAEMON_CHECKS,
  ...SYSCTL_CHECKS,
  ...IPTABLES_CHECKS,
  ...NFTABLES_CHECKS,
  ...NETPOL_CHECKS,
  ...VXLAN_CHECKS,
  ...UDP_CHECKS,
  ...WG_CHECKS,
  ...PEER_CHECKS,
  ...CONFIG_CHECKS,
  ...LEASE_CHECKS,
  ...CNI_CHECKS,
  ...POD_CHECKS,
  ...SANDBOX_CHECKS,
  ...HOST_CHECKS,
  ...IPV6_CHECKS,
  ...ACTIVE_CHECKS,
];

/** Runs the doctor. Never throws for node problems: they become findings or a fatal (exit 3) summary. */
export async function runDoctor(opts: SnapshotOptions): Promise<DoctorReport> {
  const ctx = await gatherSnapshot(opts);
  if (Deno.uid() !== 0) {
    ctx.fatal.unshift("not running as root: kernel state, iptables and /var/lib/cni are not fully readable");
  }
  const findings: Finding[] = [];
  if (ctx.fatal.length) {
    for (const f of ctx.fatal) findings.push({ id: "doctor", severity: "unknown", detail: f, fix: [] });
  }
  if (!ctx.fatal.some((f) => f.startsWith("network namespace"))) {
    for (const c of ALL_CHECKS) {
      if (opts.skip.has(c.id)) continue;
      try {
        findings.push(...await c.run(ctx));
      } catch (e) {
        findings.push({ id: c.id, severity: "unknown", detail: `check failed: ${(e as Error).message}` });
      }
    }
  }
  // A dead daemon is the root cause: first among the criticals, and the findings it explains name it. A
  // finding marked as a root cause (a leftover flannel CNI config) comes first too, and the daemon's
  // findings are marked as its consequences.
  const rank = (f: Finding) => SEVERITY_ORDER[f.severity] * 3 + (f.rootCause ? 0 : f.id === "daemon" ? 1 : 2);
  findings.splice(0, findings.length, ...pointToRoot(pointToDaemon(findings)));
  findings.sort((a, b) => rank(a) - rank(b));
  const count = (s: string) => findings.filter((f) => f.severity === s).length;
  const critical = count("critical"), warning = count("warning");
  const exitCode = ctx.fatal.length ? 3 : critical ? 2 : warning ? 1 : 0;
  const summary: Summary = {
    status: (["OK", "WARNING", "CRITICAL", "UNKNOWN"] as const)[exitCode],
    ok: count("ok"),
    warning,
    critical,
    unknown: count("unknown"),
    skipped: CHECK_IDS.filter((id) => opts.skip.has(id)),
    exitCode,
    netns: opts.netns,
  };
  return { summary, checks: findings };
}
