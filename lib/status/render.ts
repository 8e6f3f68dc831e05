/**
 * The `flanctl status` screen: one line per area, the daemon first.
 * @module
 */
import type { StatusJson } from "./status.ts";

function dur(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

const n = (v: number | null) => (v === null ? "-" : String(v));

/** Human-readable status. */
export function renderStatus(s: StatusJson): string {
  const d = s.daemon;
  const rows: [string, string][] = [
    [
      "daemon",
      d.running
        ? `up, pid ${d.pid}${d.version ? `, version ${d.version}` : ""}${
          d.uptimeSeconds !== null ? `, uptime ${dur(d.uptimeSeconds)}` : ""
        }`
        : `DOWN (${d.detail})`,
    ],
    [
      "store",
      `${s.store.kind ?? "none"}: ${
        s.store.reachable ? "reachable" : `UNREACHABLE (${s.store.error ?? "?"})`
      }` +
      (s.store.daemonSeesStore === null ? "" : `; daemon sees it ${s.store.daemonSeesStore ? "up" : "DOWN"}`),
    ],
    [
      "lease",
      `${s.lease.subnet ?? "-"} PublicIP ${s.lease.publicIP ?? "-"}, expires ${s.lease.expiration ?? "-"}, ` +
      `renewals ${n(s.lease.renewals)} (errors ${n(s.lease.renewalErrors)})` +
      (s.lease.ipv6Subnet || s.lease.publicIPv6
        ? `; IPv6 ${s.lease.ipv6Subnet ?? "-"} PublicIPv6 ${s.lease.publicIPv6 ?? "-"}`
        : ""),
    ],
    [
      "backend",
      `${s.backend.type ?? "-"}, device ${s.backend.device ?? "-"} ${
        s.backend.deviceUp === null ? "" : s.backend.deviceUp ? "up" : "DOWN"
      }, mtu ${n(s.backend.mtu)}` +
      (s.backend.deviceV6
        ? `; IPv6 device ${s.backend.deviceV6.name} ${s.backend.deviceV6.up ? "up" : "DOWN"}, mtu ${
          n(s.backend.deviceV6.mtu)
        }`
        : ""),
    ],
    [
      "peers",
      `${s.peers.leases} leases: ${s.peers.programmed} programmed, ${s.peers.missing.length} missing` +
      (s.peers.missing.length ? ` (${s.peers.missing.join(", ")})` : "") +
      `, ${s.peers.stale.length} stale` + (s.peers.stale.length ? ` (${s.peers.stale.join(", ")})` : "") +
      (s.peers.daemonPeers === null ? "" : `; daemon programs ${s.peers.daemonPeers}`),
    ],
    ...(s.peers.v6
      ? [[
        "peers v6",
        `${s.peers.v6.leases} leases: ${s.peers.v6.programmed} programmed, ${s.peers.v6.missing.length} missing` +
        (s.peers.v6.missing.length ? ` (${s.peers.v6.missing.join(", ")})` : "") +
        `, ${s.peers.v6.stale.length} stale` +
        (s.peers.v6.stale.length ? ` (${s.peers.v6.stale.join(", ")})` : ""),
      ] as [string, string]]
      : []),
    [
      "reconcile",
      s.reconcile.lastAt
        ? `last ${s.reconcile.lastAt} took ${
          s.reconcile.lastSeconds?.toFixed(3)
        }s, repaired ${s.reconcile.lastRepairs}; ` +
          `${n(s.reconcile.runs)} runs, ${n(s.reconcile.repairsTotal)} repairs, ${
            n(s.reconcile.errors)
          } errors`
        : s.reconcile.runs === null
        ? "- (daemon metrics not available)"
        : `${s.reconcile.runs} runs`,
    ],
    [
      "rules",
      `${s.rules.ok ? "in place" : "PROBLEM"} (${s.rules.mode}); masquerade ${s.rules.masquerade}` +
      (s.rules.masqueradeV6 ? `; IPv6 masquerade ${s.rules.masqueradeV6}` : "") +
      `; forward ${s.rules.forward}`,
    ],
    [
      "health",
      s.health.address
        ? `${s.health.address}: healthz ${n(s.health.healthz)}, readyz ${n(s.health.readyz)}, metrics ${
          s.health.metrics ? "read" : "unavailable"
        }`
        : "-",
    ],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return `node ${s.node}\n` + rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`).join("\n") + "\n";
}
