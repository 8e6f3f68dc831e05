/**
 * `flanctl trace <pod> <pod|ip> [port/proto]`: the API's NetworkPolicy verdict for a connection between two
 * pods (or a pod and an address), per address family both have, naming for each side the policies that
 * isolate it and the policy and rule that allow the connection, or that none does — from a fresh list of
 * pods, namespaces and policies.
 * @module
 */
import { IPAddr } from "../base/cidr.ts";
import { UsageError } from "../base/errors.ts";
import type { KubeClient } from "../store/kube/kube_client.ts";
import { type Cluster, type Decision, evaluate, type PacketProto, type Verdict } from "./evaluate.ts";
import { kinds } from "./controller.ts";
import { listAll } from "./watch.ts";
import type { Pod } from "./model.ts";

/** The connection asked about. */
export interface PolicyQuery {
  /** Source pod `namespace/name`. */
  from: string;
  /** Destination pod `namespace/name` or an address. */
  to: string;
  proto: PacketProto;
  port: number;
}

/** The verdict for one family. */
export interface PolicyTrace {
  family: 4 | 6;
  src: string;
  dst: string;
  verdict: Verdict;
}

/** Parses `port/proto` (`80`, `80/tcp`, `53/udp`, `7000/sctp`; default 80/tcp). */
export function parsePortProto(s: string | undefined): { proto: PacketProto; port: number } {
  if (s === undefined) return { proto: "TCP", port: 80 };
  const m = /^(\d{1,5})(?:\/(tcp|udp|sctp))?$/i.exec(s);
  const port = m ? Number(m[1]) : 0;
  if (!m || port < 1 || port > 65535) {
    throw new UsageError(`'${s.slice(0, 40)}' is not PORT[/tcp|udp|sctp]; e.g. 80/tcp or 53/udp`);
  }
  return { proto: (m[2] ?? "tcp").toUpperCase() as PacketProto, port };
}

/** Lists pods, namespaces and policies once. */
export async function listCluster(client: KubeClient): Promise<Cluster> {
  const k = kinds(() => {});
  const [pods, namespaces, policies] = await Promise.all([
    listAll(client, k.pods, "0"),
    listAll(client, k.namespaces, "0"),
    listAll(client, k.policies, "0"),
  ]);
  return { pods: pods.items, namespaces: namespaces.items, policies: policies.items };
}

function pod(c: Cluster, key: string, what: string): Pod {
  const p = c.pods.get(key);
  if (!p) throw new UsageError(`${what}: no pod ${key.slice(0, 120)} (give namespace/name)`);
  if (p.hostNetwork) {
    throw new UsageError(`${what}: ${key} is a hostNetwork pod: NetworkPolicy does not apply`);
  }
  if (p.ips.length === 0) throw new UsageError(`${what}: ${key} has no address yet`);
  return p;
}

/** The verdict of `q` in `c`, per family the two ends share. */
export function explain(c: Cluster, q: PolicyQuery): PolicyTrace[] {
  const src = pod(c, q.from, "source");
  let dsts: IPAddr[];
  if (q.to.includes("/")) dsts = pod(c, q.to, "destination").ips;
  else {
    const ip = IPAddr.tryParse(q.to);
    if (!ip) {
      throw new UsageError(`destination: '${q.to.slice(0, 60)}' is neither namespace/name nor an address`);
    }
    dsts = [ip];
  }
  const out: PolicyTrace[] = [];
  for (const d of dsts) {
    const s = src.ips.find((x) => x.family === d.family);
    if (!s) continue;
    out.push({
      family: d.family,
      src: s.toString(),
      dst: d.toString(),
      verdict: evaluate(c, s, d, q.proto, q.port),
    });
  }
  if (out.length === 0) throw new UsageError(`${q.from} and ${q.to} share no address family`);
  return out;
}

function side(name: string, dir: "egress" | "ingress", d: Decision): string {
  if (!d.isolated) return `${dir} of ${name}: open (no policy selects it for ${dir})`;
  const by = d.by
    ? `allowed by ${d.by.policy} ${dir}[${d.by.rule}]`
    : `denied: no rule of ${d.policies.join(", ")} allows it`;
  return `${dir} of ${name}: ${by} (isolated by ${d.policies.join(", ")})`;
}

/** The report as text. */
export function renderPolicyTrace(q: PolicyQuery, ts: PolicyTrace[]): string {
  const lines: string[] = [];
  for (const t of ts) {
    lines.push(
      `${q.from} (${t.src}) -> ${q.to}${
        q.to.includes("/") ? ` (${t.dst})` : ""
      } ${q.proto.toLowerCase()}/${q.port} ` +
        `IPv${t.family}: ${t.verdict.allowed ? "ALLOWED" : "DENIED"}`,
      `  ${side(q.from, "egress", t.verdict.egress)}`,
      `  ${side(q.to, "ingress", t.verdict.ingress)}`,
    );
  }
  return lines.join("\n") + "\n";
}
