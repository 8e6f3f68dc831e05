/**
 * What a failed sandbox leaks, judged against the runtime: host-local IPs, host veths and flannel's saved
 * delegate configs held for sandboxes the runtime no longer has (or has only as NOTREADY: stopped, or its
 * network setup failed). The kernel-only checks (lib/doctor/checks/pods.ts) cannot see these: a sandbox
 * whose ADD failed half-way leaves a veth paired with a live netns carrying its IP, which looks like a pod.
 * The runtime is asked over CRI (ListPodSandbox on its socket, lib/doctor/cri.ts); without a socket the
 * finding says what was not compared.
 * @module
 */
import type { Check, CheckId, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import { sh } from "../../base/shell.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { capList, readIpFiles } from "./pods.ts";
import { CriError, type CriSandbox, DEFAULT_CRI_SOCKETS, findCriSocket, listPodSandboxes } from "../cri.ts";

const ID: CheckId = "cri-sandboxes";

/** The socket to ask: `--cri-socket` ("" or "none": do not ask), else the first default that exists. */
export function criSocketOf(ctx: NodeSnapshot): string | null {
  const s = ctx.opts.criSocket;
  if (s === undefined) return findCriSocket();
  if (s === null || s === "" || s === "none") return null;
  return s;
}

/** Files in flannel's data dir named by a container ID (the saved delegate configs). */
function savedConfigs(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].filter((e) => e.isFile && !e.name.startsWith(".")).map((e) => e.name)
      .sort();
  } catch {
    return [];
  }
}

function why(s: CriSandbox | undefined): string {
  return s ? `sandbox ${s.id.slice(0, 13)} is NOTREADY` : "no such sandbox";
}

/** What is held for sandboxes that are not READY: each item with the sandbox ID and its fix by hand. */
interface Leak {
  id: string;
  /** "10.244.1.5 (no such sandbox)". */
  text: string;
  /** The command removing it when the runtime does not know the sandbox. */
  byHand: string;
}

/** The leaks of each kind (IPs, veths, saved configs), judged against `byId`. */
function findLeaks(ctx: NodeSnapshot, byId: Map<string, CriSandbox>): { kind: string; leaks: Leak[] }[] {
  const ready = (id: string) => byId.get(id)?.state === "ready";
  const { files } = readIpFiles(ctx.opts.hostLocalDir);
  const ipOwner = new Map(files.map((f) => [f.ip, f.containerId]));
  const ips = files.filter((f) => f.containerId && !ready(f.containerId)).map((f) => ({
    id: f.containerId,
    text: `${f.ip} (${why(byId.get(f.containerId))})`,
    byHand: sh`rm ${f.path}`,
  }));
  const veths: Leak[] = [];
  for (const v of ctx.cni0Veths()) {
    const ns = ctx.vethPeers.get(v.name)?.netns;
    const pod = ns ? ctx.pods.get(ns) : undefined;
    const dead = (pod?.ips ?? []).map((ip) => ipOwner.get(ip)).find((id) => id && !ready(id));
    if (dead) {
      veths.push({
        id: dead,
        text: `${v.name} (peer in ${ns}, ${why(byId.get(dead))})`,
        byHand: ctx.cmd(sh`ip link del ${v.name}`),
      });
    }
  }
  const dir = ctx.opts.flannelDataDir;
  const saved = savedConfigs(dir).filter((id) => !ready(id)).map((id) => ({
    id,
    text: `${id.slice(0, 13)} (${why(byId.get(id))})`,
    byHand: sh`rm ${`${dir}/${id}`}`,
  }));
  return [
    { kind: "IP(s) held for sandboxes the runtime does not run", leaks: ips },
    { kind: "cni0 veth(s) of such sandboxes", leaks: veths },
    { kind: `saved flannel config(s) in ${dir} of such sandboxes`, leaks: saved },
  ];
}

/** The warning for `found`: the runtime's own teardown for sandboxes it knows, removal by hand for the rest. */
function leakFinding(
  socket: string,
  byId: Map<string, CriSandbox>,
  found: { kind: string; leaks: Leak[] }[],
) {
  const all = found.flatMap((f) => f.leaks);
  const crictl = sh`crictl --runtime-endpoint ${`unix://${socket}`}`;
  const known = [...new Set(all.map((l) => l.id))].filter((id) => byId.has(id));
  return {
    id: ID,
    severity: "warning" as const,
    detail:
      found.filter((f) => f.leaks.length).map((f) =>
        `${f.leaks.length} ${f.kind}: ${capList(f.leaks.map((l) => l.text))}`
      ).join("; ") + " (a sandbox being created right now shows here too: re-run to confirm)",
    why:
      "a failed RunPodSandbox/StopPodSandbox left them: the IPs are never reused (the pool runs out), the " +
      "veths keep MACs on cni0, and a later ADD with a recycled ID reads a wrong saved config",
    fix: [
      ...known.map((id) =>
        `${crictl} ${sh`stopp ${id}`} && ${crictl} ${sh`rmp ${id}`}  # the runtime runs CNI DEL`
      ),
      ...all.filter((l) => !byId.has(l.id)).map((l) => l.byHand),
    ],
    persist: ["find why the sandbox's CNI ADD or DEL failed in the containerd/CRI-O log"],
  };
}

/** cri-sandboxes: IPs, veths and saved configs belong to READY sandboxes of the runtime. */
export const criSandboxes: Check = {
  id: ID,
  title: "IPs, veths and saved CNI configs belong to sandboxes the runtime has",
  async run(ctx): Promise<Finding[]> {
    const socket = criSocketOf(ctx);
    const what = "IPs, veths and saved configs not compared with the runtime's sandboxes";
    if (!socket) {
      const why = ctx.opts.criSocket === undefined
        ? `no CRI socket at ${DEFAULT_CRI_SOCKETS.join(", ")}; --cri-socket PATH`
        : "--cri-socket none";
      return [ok(ID, `not checked (${why}): ${what}`)];
    }
    let sandboxes: CriSandbox[];
    try {
      sandboxes = await listPodSandboxes(socket);
    } catch (e) {
      if (!(e instanceof CriError)) throw e;
      return [unknown(ID, `cannot list the runtime's sandboxes on ${socket}: ${e.message}; ${what}`)];
    }
    const byId = new Map(sandboxes.map((s) => [s.id, s]));
    const found = findLeaks(ctx, byId);
    if (found.some((f) => f.leaks.length)) return [leakFinding(socket, byId, found)];
    const n = sandboxes.filter((s) => s.state === "ready").length;
    const ips = readIpFiles(ctx.opts.hostLocalDir).files.length;
    return [
      ok(
        ID,
        `${ips} IP(s), ${ctx.cni0Veths().length} veth(s) and the saved configs all belong to the runtime's ` +
          `${n} READY sandbox(es) (${socket})`,
      ),
    ];
  },
};

/** The checks of this family. */
export const SANDBOX_CHECKS: Check[] = [criSandboxes];
