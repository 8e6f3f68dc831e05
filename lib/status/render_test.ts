import { assertEquals } from "../../tests/assert.ts";
import { commandsLine, neighLine, renderStatus } from "./render.ts";
import { extensionCommands, parseMetrics } from "./status.ts";
import type { StatusJson, StatusNeighTable } from "./status.ts";

const arp: StatusNeighTable = {
  table: "arp_cache",
  family: 4,
  entries: 3474,
  gcThresh1: 128,
  gcThresh2: 512,
  gcThresh3: 1024,
  tableFulls: 82710,
  forcedGcRuns: 83107,
};

const base: StatusJson = {
  node: "n1",
  daemon: {
    running: true,
    pid: 7,
    version: "0.1.0",
    startedAt: null,
    uptimeSeconds: null,
    source: "state-file",
    detail: "",
  },
  store: { kind: "file", reachable: true, daemonSeesStore: null, error: null },
  lease: {
    subnet: "10.244.1.0/24",
    publicIP: "192.0.2.1",
    expiration: "never",
    renewals: null,
    renewalErrors: null,
    ipv6Subnet: null,
    publicIPv6: null,
  },
  backend: { type: "vxlan", device: "flannel.1", deviceUp: true, mtu: 1450, deviceV6: null },
  peers: { leases: 0, programmed: 0, missing: [], stale: [], daemonPeers: null, v6: null },
  reconcile: {
    runs: null,
    lastAt: null,
    lastSeconds: null,
    lastRepairs: null,
    repairsTotal: null,
    errors: null,
  },
  rules: { masquerade: "ok", forward: "ok", ok: true, mode: "iptables", masqueradeV6: null },
  health: { address: null, healthz: null, readyz: null, metrics: false },
  neighbours: [arp, {
    ...arp,
    table: "ndisc_cache",
    family: 6,
    entries: 4,
    tableFulls: 0,
    forcedGcRuns: 0,
  }],
};

Deno.test("status: the neighbour table line (host-wide entries against the thresholds, counters)", () => {
  assertEquals(
    neighLine(arp),
    "arp_cache 3474 entries host-wide, 339% of gc_thresh3 1024 (gc_thresh2 512); table_fulls 82710, " +
      "forced_gc_runs 83107 since boot — PAST gc_thresh2 (see flanctl doctor)",
  );
  assertEquals(
    neighLine({ ...arp, entries: 53, tableFulls: 0, forcedGcRuns: 0 }),
    "arp_cache 53 entries host-wide, 5% of gc_thresh3 1024 (gc_thresh2 512); table_fulls 0, forced_gc_runs 0 " +
      "since boot",
  );
});

Deno.test("status: table view has a neigh row per table, and says when the tables were unreadable", () => {
  const lines = renderStatus(base).split("\n");
  assertEquals(lines.filter((l) => l.startsWith("  neigh")), [
    `  neigh      ${neighLine(arp)}`,
    "  neigh v6   ndisc_cache 4 entries host-wide, 0% of gc_thresh3 1024 (gc_thresh2 512); table_fulls 0, " +
    "forced_gc_runs 0 since boot",
  ]);
  const none = renderStatus({ ...base, neighbours: null }).split("\n").filter((l) => l.startsWith("  neigh"));
  assertEquals(none, ["  neigh      - (neighbour tables not readable)"]);
  // wireguard: how its device is driven.
  const wg = renderStatus({
    ...base,
    backend: {
      type: "wireguard",
      device: "flannel-wg",
      deviceUp: true,
      mtu: 1420,
      deviceV6: null,
      way: "userspace",
    },
  }).split("\n").filter((l) => l.startsWith("  backend"));
  assertEquals(wg, ["  backend    wireguard (userspace), device flannel-wg up, mtu 1420"]);
});

Deno.test("status: the extension commands' runs from the daemon's metrics, the last failure said", () => {
  const body = [
    'flanctl_extension_commands_total{command="PreStartupCommand",result="ok"} 0',
    'flanctl_extension_commands_total{command="PostStartupCommand",result="ok"} 1',
    'flanctl_extension_commands_total{command="SubnetAddCommand",result="ok"} 3',
    'flanctl_extension_commands_total{command="SubnetAddCommand",result="failed"} 1',
    'flanctl_extension_commands_total{command="SubnetAddCommand",result="timeout"} 2',
    'flanctl_extension_commands_total{command="SubnetRemoveCommand",result="ok"} 0',
    'flanctl_extension_commands_total{command="SubnetRemoveCommand",result="skipped"} 1',
    'flanctl_extension_command_last_run_timestamp_seconds{command="PostStartupCommand",result="ok"} 1796420494',
    'flanctl_extension_command_last_run_timestamp_seconds{command="SubnetAddCommand",result="failed"} 1796420495',
  ].join("\n");
  const c = extensionCommands(parseMetrics(body))!;
  assertEquals(
    commandsLine(c),
    "PostStartupCommand 1 ok; SubnetAddCommand 3 ok, 1 failed, 2 timed out (last FAILED); " +
      "SubnetRemoveCommand 0 ok, 1 skipped",
  );
  assertEquals(extensionCommands(parseMetrics("flanctl_peers 2\n")), undefined);
  assertEquals(commandsLine([]), "none ran yet");
});

Deno.test("status: a netpol row only when the daemon enforces NetworkPolicy, with the most drops", () => {
  assertEquals(renderStatus(base).split("\n").filter((l) => l.startsWith("  netpol")), []);
  const on = renderStatus({
    ...base,
    networkPolicy: {
      enforcing: true,
      policies: 3,
      isolatedPods: 2,
      rules: 14,
      repairs: 1,
      dropsByPolicy: {
        "x/a": { ingress: 5, egress: 0 },
        "x/b": { ingress: 0, egress: 0 },
        "y/c": { ingress: 1, egress: 8 },
      },
    },
  }).split("\n").filter((l) => l.startsWith("  netpol"));
  assertEquals(on, [
    "  netpol     enforcing: 3 policies, 2 isolated pods here, 14 rules, 1 repairs; most drops: y/c 9, x/a 5",
  ]);
});
