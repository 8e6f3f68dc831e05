/**
 * `flanctl status`: one view of a node. The daemon's state file says whether it runs (pid, version,
 * uptime, health address); when it runs its /metrics gives the counters (renewals, reconcile passes,
 * repairs, store up); the kernel and the store give the rest either way (lease, device, peers programmed
 * / missing / stale, rules). Read-only.
 * @module
 */
import { httpGet as get } from "../doctor/http_get.ts";
import type { DoctorContext } from "../doctor/context.ts";
import { vtepMacOf } from "../doctor/checks/vxlan.ts";
import { forwardPolicy, masqRules } from "../doctor/checks/iptables.ts";
import { scanForDaemon } from "../doctor/checks/daemon.ts";
import { daemonRunning, daemonStatePath, readDaemonState } from "../daemon_state.ts";
import { IPNet } from "../ip/cidr.ts";

/** The `-o json` view of `flanctl status`. */
export interface StatusJson {
  /** The node (host name, or the --netns name). */
  node: string;
  daemon: {
    running: boolean;
    pid: number | null;
    version: string | null;
    startedAt: string | null;
    uptimeSeconds: number | null;
    /** Where it was found: the state file, a process scan, or nowhere. */
    source: "state-file" | "process" | "none";
    detail: string;
  };
  store: {
    kind: string | null;
    /** Whether this command reached the store itself. */
    reachable: boolean;
    /** The daemon's view (flanctl_store_up), when its metrics were read. */
    daemonSeesStore: boolean | null;
    error: string | null;
  };
  lease: {
    subnet: string | null;
    publicIP: string | null;
    expiration: string | null;
    renewals: number | null;
    renewalErrors: number | null;
  };
  backend: { type: string | null; device: string | null; deviceUp: boolean | null; mtu: number | null };
  peers: {
    /** Peer leases in the store. */
    leases: number;
    /** Peers whose kernel entries match their lease. */
    programmed: number;
    /** Peer subnets (lease) with a missing or wrong route/ARP/FDB entry. */
    missing: string[];
    /** Kernel routes to pod subnets no lease holds. */
    stale: string[];
    /** flanctl_peers of the daemon, when its metrics were read. */
    daemonPeers: number | null;
  };
  reconcile: {
    runs: number | null;
    lastAt: string | null;
    lastSeconds: number | null;
    lastRepairs: number | null;
    repairsTotal: number | null;
    errors: number | null;
  };
  rules: { masquerade: string; forward: string; ok: boolean };
  health: { address: string | null; healthz: number | null; readyz: number | null; metrics: boolean };
}

/** Prometheus text → name (with labels) → value. */
export function parseMetrics(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    const v = Number(line.slice(i + 1));
    if (i > 0 && Number.isFinite(v)) m.set(line.slice(0, i), v);
  }
  return m;
}

/** GET `url` from inside the checked namespace: status code (null: no answer) and body. */
async function httpGet(ctx: DoctorContext, url: string): Promise<{ code: number | null; body: string }> {
  const r = await get(ctx.opts.netns, url);
  return { code: r.status, body: r.body };
}

function peerAccounting(ctx: DoctorContext): { programmed: number; missing: string[]; stale: string[] } {
  const routes = (ctx.kernel?.routes ?? []).filter((r) => r.family === 4 && r.table === 254);
  const dev = ctx.vxlanDevice();
  const missing: string[] = [];
  let programmed = 0;
  const peers = ctx.peerLeases().filter((l) => !!l.attrs.BackendType);
  for (const l of peers) {
    const sub = l.subnet!.toString(), gw = l.subnet!.ip.toString(), pub = l.attrs.PublicIP;
    const r = routes.find((r) => r.dst === sub);
    let ok: boolean;
    if (l.attrs.BackendType === "vxlan" && !(r && r.gateway === pub)) {
      const mac = vtepMacOf(l.attrs.BackendData);
      ok = !!r && !!dev && r.gateway === gw && r.dev === dev.index &&
        !!ctx.kernel?.neigh.some((n) =>
          n.index === dev.index && n.dst === gw && n.lladdr?.toLowerCase() === mac
        ) &&
        !!ctx.kernel?.fdb.some((f) => f.index === dev.index && f.mac.toLowerCase() === mac && f.dst === pub);
    } else ok = !!r && r.gateway === pub;
    if (ok) programmed++;
    else missing.push(sub);
  }
  const net = ctx.network, own = ctx.nodeSubnet;
  const known = new Set(ctx.store.leases.map((l) => l.subnet?.toString()));
  const stale = ctx.store.state !== "ok" ? [] : routes.filter((r) => {
    const n = IPNet.tryParse(r.dst);
    if (!n || !net || !net.contains(n) || n.equals(net) || (own && own.equals(n))) return false;
    return !known.has(r.dst) && (r.gateway !== null || (dev !== null && r.dev === dev.index));
  }).map((r) => r.dst);
  return { programmed, missing, stale };
}

/** Builds the status of the node `ctx` was gathered for. */
export async function nodeStatus(ctx: DoctorContext, node: string): Promise<StatusJson> {
  // The daemon.
  const path = daemonStatePath(ctx.opts.subnetFile);
  let detail: string;
  let state = null;
  try {
    state = readDaemonState(path);
  } catch (e) {
    detail = (e as Error).message;
  }
  let running = state ? daemonRunning(state) : false;
  let elsewhere = "";
  if (running === null && state) {
    // The daemon lives in another pid namespace (a container): its endpoint, else a process here, says.
    running = state.health
      ? (await httpGet(ctx, `http://${state.health}/healthz`)).code === 200
      : scanForDaemon(ctx) !== null;
    elsewhere = " in another pid namespace";
  }
  const scan = !state ? scanForDaemon(ctx) : null;
  detail = state
    ? (running
      ? `running${elsewhere} (${path})`
      : `not running: pid ${state.pid}${elsewhere} from ${path} is gone (killed or crashed)`)
    : scan
    ? `running (process scan: ${scan.cmd}; no ${path})`
    : `not running (no ${path}, no daemon process)`;
  const startedAt = running && state?.startedAt ? state.startedAt : null;

  // Its endpoints.
  const health = running ? state?.health ?? null : null;
  let metrics: Map<string, number> | null = null;
  let healthz: number | null = null, readyz: number | null = null;
  if (health) {
    healthz = (await httpGet(ctx, `http://${health}/healthz`)).code;
    readyz = (await httpGet(ctx, `http://${health}/readyz`)).code;
    const m = await httpGet(ctx, `http://${health}/metrics`);
    if (m.code === 200) metrics = parseMetrics(m.body);
  }
  const mv = (k: string) => metrics?.get(k) ?? null;

  // Lease, backend, peers, rules.
  const own = ctx.ownLease();
  const dev = ctx.backendType === "vxlan" || ctx.backendType === null ? ctx.vxlanDevice() : null;
  const masq = (await masqRules.run(ctx))[0];
  const fwd = (await forwardPolicy.run(ctx))[0];
  const peers = peerAccounting(ctx);
  const lastAt = mv("flanctl_last_reconcile_timestamp_seconds");
  return {
    node,
    daemon: {
      running: running || !!scan,
      pid: running ? state!.pid : scan?.pid ?? null,
      version: running ? state!.version : null,
      startedAt,
      uptimeSeconds: startedAt ? Math.max(0, Math.round((Date.now() - Date.parse(startedAt)) / 1000)) : null,
      source: state ? "state-file" : scan ? "process" : "none",
      detail,
    },
    store: {
      kind: ctx.store.kind,
      reachable: ctx.store.state === "ok",
      daemonSeesStore: metrics ? mv("flanctl_store_up") === 1 : null,
      error: ctx.store.state === "ok" ? null : (ctx.store.error ?? ctx.store.hint),
    },
    lease: {
      subnet: ctx.nodeSubnet?.toString() ?? null,
      publicIP: own?.attrs.PublicIP ?? null,
      expiration: own ? (own.expiration?.toISOString() ?? "never") : null,
      renewals: mv("flanctl_lease_renewals_total"),
      renewalErrors: mv("flanctl_lease_renewal_errors_total"),
    },
    backend: {
      type: ctx.backendType,
      device: dev?.name ?? (ctx.backendType === "vxlan" ? ctx.vxlanName : ctx.underlay()?.link.name ?? null),
      deviceUp: dev ? dev.up : (ctx.backendType === "vxlan" ? false : ctx.underlay()?.link.up ?? null),
      mtu: dev?.mtu ?? ctx.subnetEnv?.mtu ?? null,
    },
    peers: { leases: ctx.peerLeases().length, ...peers, daemonPeers: mv("flanctl_peers") },
    reconcile: {
      runs: mv("flanctl_reconcile_runs_total"),
      lastAt: lastAt ? new Date(lastAt * 1000).toISOString() : null,
      lastSeconds: lastAt ? mv("flanctl_last_reconcile_duration_seconds") : null,
      lastRepairs: lastAt ? mv("flanctl_last_reconcile_repairs") : null,
      repairsTotal: mv("flanctl_reconcile_repairs_total"),
      errors: mv("flanctl_reconcile_errors_total"),
    },
    rules: {
      masquerade: `${masq.severity}: ${masq.detail}`,
      forward: `${fwd.severity}: ${fwd.detail}`,
      ok: masq.severity === "ok" && fwd.severity === "ok",
    },
    health: { address: health, healthz, readyz, metrics: metrics !== null },
  };
}
