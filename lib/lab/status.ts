/**
 * `flanctl lab status`: the lab's nodes (public IP, subnet from their subnet.env) and pods (IP read from
 * the pod namespace), as a table or as JSON.
 * @module
 */
import { parseSubnetEnv } from "../subnet_env.ts";
import { renderTable as table } from "../ui/table.ts";
import { isOurProcess, runCmd } from "./proc.ts";
import type { LabDaemonJson, LabState, LabStatusJson, NodeState } from "./types.ts";

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
  return {
    nodes: s.nodes.map((n) => ({
      name: n.name,
      netns: n.netns,
      publicIP: n.publicIP,
      subnet: nodeSubnet(n),
      daemon: daemonStatus(s, n),
    })),
    pods: await Promise.all(
      s.pods.map(async (p) => ({
        name: p.name,
        node: p.node,
        netns: p.netns,
        ip: (await podIP(p.netns)) ?? null,
      })),
    ),
  };
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
      return [n.name, n.netns, n.publicIP, n.subnet ?? "-", daemon];
    }),
  );
  const pods = table(
    ["POD", "NODE", "NETNS", "IP"],
    st.pods.map((p) => [p.name, p.node, p.netns, p.ip ?? "-"]),
  );
  return `lab ${s.name}: backend ${s.backend}, store ${s.store}, network ${s.network}, underlay ${s.underlay.cidr}\n\n` +
    `${nodes}\n\n${st.pods.length ? pods : "(no pods)"}`;
}
