/**
 * `flanctl lab status`: the lab's nodes (public IP, subnet from their subnet.env) and pods (IP read from
 * the pod namespace), as a table or as JSON.
 * @module
 */
import { parseSubnetEnv } from "../node/subnet_env.ts";
import { renderTable as table } from "../base/ui/table.ts";
import { isOurProcess, runCmd } from "./proc.ts";
import type { LabDaemonJson, LabState, LabStatusJson, NodeState } from "./types.ts";
import { hasV6, labNetworks, podIPv6, subnet6FromEnv } from "./family.ts";

/** The node's subnet (network/prefix) from its subnet.env, or null. */
export function nodeSubnet(n: NodeState): string | null {
  try {
    const e = parseSubnetEnv(Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`));
    return e.subnet ? e.subnet.net.toString() : null;
  } catch {
    return null;
  }
}

/** The IPv4 address of eth0 in `netns`, or null. */
export async function podIP(netns: string): Promise<string | null> {
  const r = await runCmd(["ip", "-n", netns, "-j", "-4", "addr", "show", "dev", "eth0"]);
  if (r.code !== 0 || !r.stdout.trim()) return null;
  const j = JSON.parse(r.stdout) as { addr_info?: { local: string }[] }[];
  return j[0]?.addr_info?.[0]?.local ?? null;
}

/** The node's daemon: its recorded pid, running when that pid is still the lab's process. */
export function daemonStatus(s: LabState, n: NodeState): LabDaemonJson {
  const pid = n.daemonPid ?? null;
  if (pid === null) return { pid, state: "none" };
  return { pid, state: isOurProcess(pid, `${s.dir}/`) ? "running" : "stopped" };
}

/** Builds the status document. */
export async function labStatus(s: LabState): Promise<LabStatusJson> {
  const v6 = hasV6(s);
  return {
    nodes: s.nodes.map((n) => ({
      name: n.name,
      netns: n.netns,
      publicIP: n.publicIP,
      subnet: nodeSubnet(n),
      daemon: daemonStatus(s, n),
      ...(v6 ? { publicIPv6: n.publicIPv6 ?? null, subnetIPv6: nodeSubnet6(n) } : {}),
    })),
    pods: await Promise.all(
      s.pods.map(async (p) => ({
        name: p.name,
        node: p.node,
        netns: p.netns,
        ip: (await podIP(p.netns)) ?? null,
        ...(v6 ? { ipv6: (await podIPv6(p.netns)) ?? null } : {}),
      })),
    ),
  };
}

/** The node's IPv6 subnet from its subnet.env, or null. */
export function nodeSubnet6(n: NodeState): string | null {
  try {
    return subnet6FromEnv(Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`));
  } catch {
    return null;
  }
}

/** The human summary: a node table and a pod table. */
export function formatStatus(s: LabState, st: LabStatusJson): string {
  const nodes = table(
    ["NODE", "NETNS", "PUBLIC IP", "SUBNET", "DAEMON"],
    st.nodes.map((n) => {
      const d = n.daemon;
      const daemon = d.state === "running"
        ? `pid ${d.pid}`
        : d.state === "stopped"
        ? `stopped (was pid ${d.pid})`
        : "-";
      // Dual/IPv6 labs: both addresses in one cell ("192.168.1.11 fc00:…"), both subnets likewise.
      const both = (a: string | null | undefined, b: string | null | undefined) =>
        [a, b].filter((x) => x && x !== "-").join(" ") || "-";
      return [n.name, n.netns, both(n.publicIP, n.publicIPv6), both(n.subnet, n.subnetIPv6), daemon];
    }),
  );
  const pods = table(
    ["POD", "NODE", "NETNS", "IP"],
    st.pods.map((p) => [p.name, p.node, p.netns, [p.ip, p.ipv6].filter(Boolean).join(" ") || "-"]),
  );
  const fam = hasV6(s) ? `, ip family ${s.ipFamily}` : "";
  const net = labNetworks(s).join(" ");
  return `lab ${s.name}: backend ${s.backend}, store ${s.store}, network ${net}${fam}, underlay ${s.underlay.cidr}\n\n` +
    `${nodes}\n\n${st.pods.length ? pods : "(no pods)"}`;
}
