/**
 * The `flanctl status` screen: one line per area, the daemon first.
 * @module
 */
import type { StatusJson, StatusNeighTable } from "./status.ts";
import { escapeControl } from "../base/ui/table.ts";

function dur(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

const n = (v: number | null) => (v === null ? "-" : String(v));

/** Human-readable status. */
export function renderStatus(s: StatusJson): string {
  const rows: [string, string][] = [
    ["daemon", daemonLine(s.daemon)],
    ["store", storeLine(s.store)],
    ["lease", leaseLine(s.lease)],
    ["backend", backendLine(s.backend)],
    ...(s.backend.commands ? [["commands", commandsLine(s.backend.commands)] as [string, string]] : []),
    [
      "peers",
      peersLine(s.peers) + (s.peers.daemonPeers === null ? "" : `; daemon programs ${s.peers.daemonPeers}`),
    ],
    ...(s.peers.v6 ? [["peers v6", peersLine(s.peers.v6)] as [string, string]] : []),
    ["reconcile", reconcileLine(s.reconcile)],
    ["rules", rulesLine(s.rules)],
    ["health", healthLine(s.health)],
    ...(s.networkPolicy ? [["netpol", netpolLine(s.networkPolicy)] as [string, string]] : []),
    ...(s.neighbours === null
      ? [["neigh", "- (neighbour tables not readable)"] as [string, string]]
      : s.neighbours.map((t) => [t.family === 4 ? "neigh" : "neigh v6", neighLine(t)] as [string, string])),
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return escapeControl(`node ${s.node}\n` + rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`).join("\n")) + "\n";
}

function daemonLine(d: StatusJson["daemon"]): string {
  return d.running
    ? `up, pid ${d.pid}${d.version ? `, version ${d.version}` : ""}${
      d.uptimeSeconds !== null ? `, uptime ${dur(d.uptimeSeconds)}` : ""
    }`
    : `DOWN (${d.detail})`;
}

function storeLine(st: StatusJson["store"]): string {
  return `${st.kind ?? "none"}: ${st.reachable ? "reachable" : `UNREACHABLE (${st.error ?? "?"})`}` +
    (st.daemonSeesStore === null ? "" : `; daemon sees it ${st.daemonSeesStore ? "up" : "DOWN"}`);
}

function leaseLine(l: StatusJson["lease"]): string {
  return `${l.subnet ?? "-"} PublicIP ${l.publicIP ?? "-"}, expires ${l.expiration ?? "-"}, ` +
    `renewals ${n(l.renewals)} (errors ${n(l.renewalErrors)})` +
    (l.ipv6Subnet || l.publicIPv6 ? `; IPv6 ${l.ipv6Subnet ?? "-"} PublicIPv6 ${l.publicIPv6 ?? "-"}` : "");
}

function backendLine(b: StatusJson["backend"]): string {
  return `${b.type ?? "-"}${b.way ? ` (${b.way})` : ""}, device ${b.device ?? "-"} ${
    b.deviceUp === null ? "" : b.deviceUp ? "up" : "DOWN"
  }, mtu ${n(b.mtu)}` +
    (b.deviceV6
      ? `; IPv6 device ${b.deviceV6.name} ${b.deviceV6.up ? "up" : "DOWN"}, mtu ${n(b.deviceV6.mtu)}`
      : "");
}

/** extension: each command's runs ("SubnetAddCommand 3 ok, 1 failed (last failed)"). */
export function commandsLine(c: NonNullable<StatusJson["backend"]["commands"]>): string {
  if (!c.length) return "none ran yet";
  return c.map((x) => {
    const parts = [
      `${x.ok} ok`,
      ...(x.failed ? [`${x.failed} failed`] : []),
      ...(x.timeout ? [`${x.timeout} timed out`] : []),
      ...(x.skipped ? [`${x.skipped} skipped`] : []),
    ];
    return `${x.command} ${parts.join(", ")}${x.last === "failed" ? " (last FAILED)" : ""}`;
  }).join("; ");
}

/** One family's peer accounting: leases, programmed, missing and stale (each listed when there are any). */
function peersLine(p: { leases: number; programmed: number; missing: string[]; stale: string[] }): string {
  return `${p.leases} leases: ${p.programmed} programmed, ${p.missing.length} missing` +
    (p.missing.length ? ` (${p.missing.join(", ")})` : "") +
    `, ${p.stale.length} stale` + (p.stale.length ? ` (${p.stale.join(", ")})` : "");
}

function reconcileLine(r: StatusJson["reconcile"]): string {
  return r.lastAt
    ? `last ${r.lastAt} took ${r.lastSeconds?.toFixed(3)}s, repaired ${r.lastRepairs}; ` +
      `${n(r.runs)} runs, ${n(r.repairsTotal)} repairs, ${n(r.errors)} errors`
    : r.runs === null
    ? "- (daemon metrics not available)"
    : `${r.runs} runs`;
}

function rulesLine(r: StatusJson["rules"]): string {
  return `${r.ok ? "in place" : "PROBLEM"} (${r.mode}); masquerade ${r.masquerade}` +
    (r.masqueradeV6 ? `; IPv6 masquerade ${r.masqueradeV6}` : "") +
    `; forward ${r.forward}`;
}

function netpolLine(p: NonNullable<StatusJson["networkPolicy"]>): string {
  const drops = Object.entries(p.dropsByPolicy).map(([k, d]) => [k, d.ingress + d.egress] as const)
    .filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).slice(0, 3);
  return `${p.enforcing ? "enforcing" : "NOT YET ENFORCING (waiting for the first lists)"}: ${p.policies} ` +
    `policies, ${p.isolatedPods} isolated pods here, ${p.rules} rules, ${p.repairs} repairs` +
    (drops.length ? `; most drops: ${drops.map(([k, n]) => `${k} ${n}`).join(", ")}` : "");
}

function healthLine(h: StatusJson["health"]): string {
  return h.address
    ? `${h.address}: healthz ${n(h.healthz)}, readyz ${n(h.readyz)}, metrics ${
      h.metrics ? "read" : "unavailable"
    }`
    : "-";
}

/** A neighbour table: entries against gc_thresh3 (and 2), overflow counters since boot. */
export function neighLine(t: StatusNeighTable): string {
  const pct = t.gcThresh3 > 0 ? Math.round((t.entries / t.gcThresh3) * 100) : 0;
  return `${t.table} ${t.entries} entries host-wide, ${pct}% of gc_thresh3 ${t.gcThresh3} ` +
    `(gc_thresh2 ${t.gcThresh2}); table_fulls ${t.tableFulls}, forced_gc_runs ${t.forcedGcRuns} since boot` +
    (t.entries > t.gcThresh2 ? " — PAST gc_thresh2 (see flanctl doctor)" : "");
}
