/**
 * netpol: NetworkPolicy enforcement on this node against the API. With the kube store, the pods, namespaces
 * and policies are listed once and this node's plan compiled (lib/netpol) — the same plan the daemon's
 * `--network-policy` programs; then the kernel's `inet flanctl-netpol` table (`nft list table`) must
 * hold every pod chain and verdict-map entry of that plan, and nothing else. A policy that isolates a pod
 * here with no table at all is critical: nothing enforces it.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { nftTable, own6 } from "../../observe/probes.ts";
import { withStoreTimeout } from "../../store/util.ts";
import type { KubeClient } from "../../store/kube/kube_client.ts";
import type { Cluster } from "../../netpol/evaluate.ts";
import { listCluster } from "../../netpol/explain.ts";
import { compile, type MapName, type Plan } from "../../netpol/plan.ts";
import { TABLE } from "../../netpol/render.ts";
import type { IPNet } from "../../base/cidr.ts";
import { errText } from "../../base/errors.ts";

const MAPS: readonly MapName[] = ["in4", "in6", "eg4", "eg6"];

/** This node's name in the API: the node of the pods holding addresses of our subnet (most of them). */
export function nodeOfSubnet(c: Cluster, subnets: readonly IPNet[]): string | null {
  const votes = new Map<string, number>();
  for (const p of c.pods.values()) {
    if (!p.node || p.hostNetwork || !p.ips.some((ip) => subnets.some((s) => s.contains(ip)))) continue;
    votes.set(p.node, (votes.get(p.node) ?? 0) + 1);
  }
  return [...votes].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
}

/** The kernel table's pod chains and map entries (`map in4` lines `addr : goto chain`). */
export function tableView(
  lines: string[],
): { chains: Set<string>; maps: Record<MapName, Map<string, string>> } {
  const chains = new Set<string>();
  const maps = { in4: new Map(), in6: new Map(), eg4: new Map(), eg6: new Map() } as Record<
    MapName,
    Map<string, string>
  >;
  let map: MapName | null = null;
  for (const l of lines) {
    const c = /^chain ((?:in|eg)-[0-9a-f-]+) \{$/.exec(l);
    if (c) chains.add(c[1]);
    const m = /^map (in4|in6|eg4|eg6) \{$/.exec(l);
    if (m) map = m[1] as MapName;
    else if (l === "}") map = null;
    if (map) {
      for (const e of l.matchAll(/([0-9a-f.:]+) : goto ((?:in|eg)-[0-9a-f-]+)/g)) maps[map].set(e[1], e[2]);
    }
  }
  return { chains, maps };
}

/** What differs between the plan and the kernel's table (each list capped by the caller). */
export function drift(plan: Plan, lines: string[]): string[] {
  const k = tableView(lines);
  const out: string[] = [];
  for (const name of plan.chains.keys()) {
    if (!k.chains.has(name)) out.push(`chain ${name} (${plan.chains.get(name)!.pod}) missing`);
  }
  for (const name of k.chains) if (!plan.chains.has(name)) out.push(`chain ${name} not in the API's plan`);
  for (const m of MAPS) {
    for (const [ip, c] of plan.maps[m]) if (k.maps[m].get(ip) !== c) out.push(`${m} ${ip} should go to ${c}`);
    for (const ip of k.maps[m].keys()) {
      if (!plan.maps[m].has(ip)) out.push(`${m} ${ip} not in the API's plan`);
    }
  }
  return out;
}

async function clusterOf(ctx: NodeSnapshot): Promise<Cluster> {
  const store = await withStoreTimeout(ctx.opts.openStore!(), 5000, "opening the store");
  try {
    const client = (store as { client?: KubeClient }).client;
    if (!client) throw new Error("the kube store has no API client");
    return await withStoreTimeout(listCluster(client), 15_000, "listing pods, namespaces and policies");
  } finally {
    await store.close().catch(() => {});
  }
}

/** netpol: the kernel enforces what the API's policies ask on this node. */
export const netpolCheck: Check = {
  id: "netpol",
  title: "NetworkPolicy enforced as the API asks",
  async run(ctx): Promise<Finding[]> {
    if (ctx.store.kind !== "kube" || ctx.store.state !== "ok" || !ctx.opts.openStore) {
      return [ok("netpol", "not checked: NetworkPolicy is enforced in kube mode only")];
    }
    const sub = ctx.nodeSubnet;
    if (!sub) return [unknown("netpol", "this node's subnet is unknown (no subnet.env)")];
    let c: Cluster;
    try {
      c = await clusterOf(ctx);
    } catch (e) {
      return [unknown("netpol", `cannot list pods, namespaces and policies: ${errText(e)}`)];
    }
    const subnets = [sub, own6(ctx)].filter((x): x is IPNet => x !== null);
    const node = nodeOfSubnet(c, subnets);
    // Our table only (the snapshot's listing holds flannel's tables): read here, in the checked namespace.
    const listed = await ctx.exec.run(["nft", "list", "table", "inet", TABLE]);
    if (listed.code !== 0 && !/No such file or directory|does not exist/.test(listed.stderr)) {
      return [unknown("netpol", `cannot list table inet ${TABLE}: ${listed.stderr.trim().slice(0, 200)}`)];
    }
    const table = listed.code === 0 ? nftTable(listed.stdout, "inet", TABLE) : null;
    if (!node) {
      return [ok("netpol", `no pod of ${sub} in the API${table ? `; table inet ${TABLE} present` : ""}`)];
    }
    const plan = compile({ cluster: c, node, podCidrs: subnets });
    const isolated = new Set([...plan.chains.values()].map((x) => x.pod));
    if (!table) {
      if (isolated.size === 0) {
        return [ok("netpol", `no policy isolates a pod of ${node}; no table (not enforcing)`)];
      }
      return [{
        id: "netpol",
        severity: "critical",
        detail:
          `${isolated.size} pod(s) of ${node} isolated by NetworkPolicy (e.g. ${[...isolated][0]}) but no ` +
          `table inet ${TABLE}: nothing enforces their policies`,
        why: "without enforcement every pod a policy isolates is open to all traffic",
        fix: ["run the daemon with --network-policy (DaemonSet: FLANNELD_NETWORK_POLICY=true)"],
      }];
    }
    const d = drift(plan, table);
    if (d.length === 0) {
      return [
        ok(
          "netpol",
          `table inet ${TABLE} matches the API: ${isolated.size} isolated pod(s), ${plan.chains.size} chain(s)`,
        ),
      ];
    }
    return [{
      id: "netpol",
      severity: "warning",
      detail:
        `table inet ${TABLE} differs from the API's policies in ${d.length} place(s): ${
          d.slice(0, 5).join("; ")
        }` +
        (d.length > 5 ? "; …" : ""),
      why: "the kernel enforces other verdicts than the policies ask (a daemon behind its watch, or an edit)",
      fix: ["wait one --iptables-resync (the daemon rewrites a drifted table), else restart the daemon"],
    }];
  },
};

/** The family's checks. */
export const NETPOL_CHECKS: Check[] = [netpolCheck];
