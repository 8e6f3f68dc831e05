/**
 * What a failed sandbox leaks, judged against the runtime: host-local IPs, host veths and flannel's saved
 * delegate configs held for sandboxes the runtime no longer has (or has only as NOTREADY: stopped, or its
 * network setup failed). The kernel-only checks (lib/doctor/checks/pods.ts) cannot see these: a sandbox
 * whose ADD failed half-way leaves a veth paired with a live netns carrying its IP, which looks like a pod.
 * The runtime is asked over CRI (ListPodSandbox on its socket, lib/doctor/cri.ts); without a socket the
 * finding says what was not compared.
 * @module
 */
import type { Check, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { capList, readIpFiles } from "./pods.ts";
import { CriError, type CriSandbox, DEFAULT_CRI_SOCKETS, findCriSocket, listPodSandboxes } from "../cri.ts";

const ID = "cri-sandboxes";

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
    const ready = (id: string) => byId.get(id)?.state === "ready";
    const problems: string[] = [];
    const vethFix: [string, string][] = [];
    const ids = new Set<string>();

    const { files } = readIpFiles(ctx.opts.hostLocalDir);
    const ipOwner = new Map(files.map((f) => [f.ip, f.containerId]));
    const leakedIps = files.filter((f) => f.containerId && !ready(f.containerId));
    if (leakedIps.length) {
      problems.push(
        `${leakedIps.length} IP(s) held for sandboxes the runtime does not run: ${
          capList(leakedIps.map((f) => `${f.ip} (${why(byId.get(f.containerId))})`))
        }`,
      );
      for (const f of leakedIps) ids.add(f.containerId);
    }

    const leakedVeths: string[] = [];
    for (const v of ctx.cni0Veths()) {
      const ns = ctx.vethPeers.get(v.name)?.netns;
      const pod = ns ? ctx.pods.get(ns) : undefined;
      const owners = (pod?.ips ?? []).map((ip) => ipOwner.get(ip)).filter((x): x is string => !!x);
      const dead = owners.find((id) => !ready(id));
      if (dead) {
        leakedVeths.push(`${v.name} (peer in ${ns}, ${why(byId.get(dead))})`);
        ids.add(dead);
        vethFix.push([dead, ctx.cmd(`ip link del ${v.name}`)]);
      }
    }
    if (leakedVeths.length) {
      problems.push(`${leakedVeths.length} cni0 veth(s) of such sandboxes: ${capList(leakedVeths)}`);
    }

    const saved = savedConfigs(ctx.opts.flannelDataDir).filter((id) => !ready(id));
    if (saved.length) {
      problems.push(
        `${saved.length} saved flannel config(s) in ${ctx.opts.flannelDataDir} of such sandboxes: ${
          capList(saved.map((id) => `${id.slice(0, 13)} (${why(byId.get(id))})`))
        }`,
      );
      for (const id of saved) ids.add(id);
    }

    if (!problems.length) {
      const n = sandboxes.filter((s) => s.state === "ready").length;
      return [
        ok(
          ID,
          `${files.length} IP(s), ${ctx.cni0Veths().length} veth(s) and the saved configs all belong to the runtime's ${n} READY sandbox(es) (${socket})`,
        ),
      ];
    }
    // The runtime's own teardown first (it runs the CNI DEL); what it does not know is removed by hand.
    const crictl = `crictl --runtime-endpoint unix://${socket}`;
    const known = [...ids].filter((id) => byId.has(id));
    const gone = [...ids].filter((id) => !byId.has(id));
    const byHand = [
      ...leakedIps.filter((f) => gone.includes(f.containerId)).map((f) => `rm ${f.path}`),
      ...saved.filter((id) => gone.includes(id)).map((id) => `rm ${ctx.opts.flannelDataDir}/${id}`),
    ];
    return [{
      id: ID,
      severity: "warning",
      detail: problems.join("; ") + " (a sandbox being created right now shows here too: re-run to confirm)",
      why:
        "a failed RunPodSandbox/StopPodSandbox left them: the IPs are never reused (the pool runs out), the " +
        "veths keep MACs on cni0, and a later ADD with a recycled ID reads a wrong saved config",
      fix: [
        ...known.map((id) => `${crictl} stopp ${id} && ${crictl} rmp ${id}  # the runtime runs CNI DEL`),
        ...vethFix.filter(([id]) => gone.includes(id)).map(([, cmd]) => cmd),
        ...byHand,
      ],
      persist: ["find why the sandbox's CNI ADD or DEL failed in the containerd/CRI-O log"],
    }];
  },
};

/** The checks of this family. */
export const SANDBOX_CHECKS: Check[] = [criSandboxes];
