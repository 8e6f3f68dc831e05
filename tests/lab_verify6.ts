/**
 * IPv6 checks of a running dual/ipv6 lab (for the end-to-end tests): the IPv6 entries each node should
 * hold for its peers (peer IPv6 subnet from its subnet.env, its flannel-v6.1 MAC, its public IPv6) compared
 * with the kernel's (`ip -6 -j` / `bridge -j`), pings to every pod's IPv6, and TCP over IPv6.
 * @module
 */
import { IPNet } from "../lib/base/cidr.ts";
import { LAB_IPV6_NETWORK } from "../lib/lab/family.ts";
import { nodeSubnet6 } from "../lib/lab/status.ts";
import { inNs, mustRun, runCmd } from "../lib/lab/proc.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";
import { linkMac, waitUntil } from "./lab_verify.ts";

/** The IPv6 VXLAN device of the lab (VNI 1). */
export const V6_DEV = "flannel-v6.1";

async function ipJson<T>(netns: string, args: string[], tool = "ip"): Promise<T[]> {
  const out = await mustRun([tool, "-n", netns, "-j", ...args]);
  return out.trim() ? JSON.parse(out) as T[] : [];
}

/** The IPv6 lines node `n` must hold for `peers`, sorted (same shapes as {@link actualEntries6}). */
export async function expectedLines6(s: LabState, peers: NodeState[]): Promise<string[]> {
  const lines: string[] = [];
  for (const p of peers) {
    const subnet = nodeSubnet6(p);
    if (!subnet || !p.publicIPv6) throw new Error(`${p.name} has no IPv6 subnet or public IPv6`);
    const addr = IPNet.parse(subnet).ip.toString();
    if (s.backend === "vxlan") {
      const mac = await linkMac(p.netns, V6_DEV);
      lines.push(`route ${subnet} via ${addr} dev ${V6_DEV} onlink`);
      lines.push(`neigh ${addr} lladdr ${mac} PERMANENT`);
      lines.push(`fdb ${mac} dst ${p.publicIPv6}`);
    } else {
      lines.push(`route ${subnet} via ${p.publicIPv6} dev eth0`);
    }
  }
  return lines.sort();
}

/** The node's IPv6 flannel entries as sorted lines, read from the kernel. */
export async function actualEntries6(s: LabState, n: NodeState): Promise<string[]> {
  const net = IPNet.parse(LAB_IPV6_NETWORK);
  const lines: string[] = [];
  const routes = await ipJson<{ dst: string; gateway?: string; dev?: string; flags?: string[] }>(
    n.netns,
    ["-6", "route", "show"],
  );
  for (const r of routes) {
    const d = IPNet.tryParse(r.dst.includes("/") ? r.dst : `${r.dst}/128`);
    if (!r.gateway || !d || !net.contains(d) || d.prefix <= net.prefix) continue;
    lines.push(`route ${r.dst} via ${r.gateway} dev ${r.dev}${r.flags?.includes("onlink") ? " onlink" : ""}`);
  }
  if (s.backend === "vxlan") {
    const neigh = await ipJson<{ dst: string; lladdr?: string; state?: string[] }>(
      n.netns,
      ["-6", "neigh", "show", "dev", V6_DEV],
    ).catch(() => []);
    for (const x of neigh) {
      if (x.state?.includes("PERMANENT")) lines.push(`neigh ${x.dst} lladdr ${x.lladdr} PERMANENT`);
    }
    const fdb = await ipJson<{ mac: string; dst?: string }>(n.netns, ["fdb", "show", "dev", V6_DEV], "bridge")
      .catch(() => []);
    for (const x of fdb) if (x.dst) lines.push(`fdb ${x.mac} dst ${x.dst}`);
  }
  return lines.sort();
}

/** Waits until node `n` holds exactly the IPv6 entries for `peers`. */
export async function waitEntries6(s: LabState, n: NodeState, peers: NodeState[], timeoutMs = 30_000) {
  const want = await expectedLines6(s, peers);
  await waitUntil(`${n.name}'s IPv6 flannel entries`, async () => {
    const got = await actualEntries6(s, n);
    if (JSON.stringify(got) === JSON.stringify(want)) return true;
    return `want ${JSON.stringify(want)} got ${JSON.stringify(got)}`;
  }, timeoutMs);
}

/** Every pod pings every pod's IPv6 on other nodes (in parallel); throws listing the failures. */
export async function pingAllPods6(s: LabState): Promise<number> {
  const jobs: Promise<string | null>[] = [];
  for (const a of s.pods) {
    for (const b of s.pods) {
      if (a.node === b.node || !b.ipv6) continue;
      jobs.push(
        runCmd(inNs(a.netns, ["ping", "-6", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1", b.ipv6]))
          .then((r) => r.code === 0 ? null : `${a.name} -> ${b.name} (${b.ipv6})`),
      );
    }
  }
  const bad = (await Promise.all(jobs)).filter((x) => x !== null);
  if (bad.length) throw new Error(`IPv6 pings failed: ${bad.join(", ")}`);
  return jobs.length;
}

/** A TCP connection over IPv6 from pod `from` to pod `to` (netcat-openbsd, port 5002); checks the bytes. */
export async function tcpAcross6(s: LabState, from: string, to: string): Promise<void> {
  const a = s.pods.find((p) => p.name === from)!;
  const b = s.pods.find((p) => p.name === to)!;
  const msg = `hello6 from ${from} ${crypto.randomUUID()}`;
  const argv = inNs(b.netns, ["timeout", "60", "nc", "-6", "-l", "5002"]);
  const server = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" }).spawn();
  try {
    await waitUntil(
      "nc listening",
      async () => {
        const r = await runCmd(inNs(b.netns, ["ss", "-Htln", "sport", "= :5002"]));
        return r.stdout.includes("5002");
      },
      30_000,
      50,
    );
    await mustRun(inNs(a.netns, ["timeout", "10", "nc", "-N", "-w", "5", b.ipv6!, "5002"]), {
      stdin: msg + "\n",
    });
    const got = new TextDecoder().decode((await server.output()).stdout).trim();
    if (got !== msg) throw new Error(`TCP6 ${from} -> ${to}: got '${got}', want '${msg}'`);
  } finally {
    try {
      server.kill("SIGKILL");
    } catch { /* done */ }
  }
}
