/**
 * `flanctl doctor`: gathers a node's state once, runs every check family against it and returns the
 * report with its Nagios exit code (0 ok, 1 warning, 2 critical, 3 could not check). Read-only.
 * @module
 */
import type { Check, DoctorReport, Finding, Summary } from "./types.ts";
import { SEVERITY_ORDER } from "./types.ts";
import { type DoctorOptions, gatherContext } from "./context.ts";
import { SYSCTL_CHECKS } from "./checks/sysctl.ts";
import { IPTABLES_CHECKS } from "./checks/iptables.ts";
import { VXLAN_CHECKS } from "./checks/vxlan.ts";
import { UDP_CHECKS } from "./checks/udp.ts";
import { PEER_CHECKS } from "./checks/peers.ts";
import { CONFIG_CHECKS } from "./checks/config.ts";
import { LEASE_CHECKS } from "./checks/leases.ts";
import { CNI_CHECKS } from "./checks/cni.ts";
import { POD_CHECKS } from "./checks/pods.ts";
import { ACTIVE_CHECKS } from "./checks/active.ts";
import { HOST_CHECKS } from "./checks/host.ts";

export type { Check, DoctorReport, Finding, Severity, Summary } from "./types.ts";
export { DEFAULT_PATHS, type DoctorOptions } from "./context.ts";
export { renderJson, renderTable } from "./render.ts";

/** Every check, in the order they run (output is re-sorted by severity). */
export const ALL_CHECKS: Check[] = [
  ...SYSCTL_CHECKS,
  ...IPTABLES_CHECKS,
  ...VXLAN_CHECKS,
  ...UDP_CHECKS,
  ...PEER_CHECKS,
  ...CONFIG_CHECKS,
  ...LEASE_CHECKS,
  ...CNI_CHECKS,
  ...POD_CHECKS,
  ...HOST_CHECKS,
  ...ACTIVE_CHECKS,
];

/** Ids of every check (for `--skip` validation and the README). */
export const CHECK_IDS: string[] = ALL_CHECKS.map((c) => c.id);

/** Runs the doctor. Never throws for node problems: they become findings or a fatal (exit 3) summary. */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorReport> {
  const ctx = await gatherContext(opts);
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
  findings.sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity]);
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
