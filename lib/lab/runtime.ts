/**
 * `lab up --runtime containerd`: one containerd per node (lib/lab/containerd.ts; started with the node's
 * first pod, once its daemon is ready) running with the node's
 * files at the default paths (lib/lab/exec.ts), so its CRI plugin runs the node's conflist from
 * /etc/cni/net.d with the lab's plugins in /opt/cni/bin, exactly as on a real node; pods are created and
 * removed through CRI (crictl runp / stopp + rmp). Each sandbox's network namespace is also given the pod's
 * lab name under /var/run/netns (`ip netns attach`), so `lab exec`, `lab check`, `trace` and the tests reach
 * it as they reach a pod the lab attached itself.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { withNodeFiles } from "./exec.ts";
import { isOurProcess, runCmd } from "./proc.ts";
import { saveState } from "./state.ts";
import {
  buildSandboxImage,
  containerdCommand,
  type ContainerdPaths,
  containerdPaths,
  crictl,
  missingRuntime,
  podSandboxConfig,
  removePodSandbox,
  runPodSandbox,
  startContainerd,
  stopContainerd,
} from "./containerd.ts";
import type { LabState, NodeState, PodState } from "./types.ts";

/** A node's containerd paths (under its lab directory). */
export function nodeContainerd(n: NodeState): ContainerdPaths {
  return containerdPaths(`${n.dir}/containerd`);
}

/** The `what` of a node's containerd in the lab's process list. */
const what = (n: NodeState) => `containerd ${n.name}`;

/** Refuses `--runtime containerd` when a piece is missing, naming it and how to get it. */
export function checkRuntime(): void {
  const missing = missingRuntime();
  if (missing.length) {
    throw new FlanctlError(
      `--runtime containerd needs ${
        missing.join(", ")
      } (./install.sh --dev installs them); or use --runtime none`,
      1,
    );
  }
}

/** Starts `n`'s containerd (recorded in the state first) and imports the sandbox image. */
export async function startNodeRuntime(s: LabState, n: NodeState): Promise<void> {
  const tar = `${s.dir}/pause.tar`;
  try {
    Deno.statSync(tar);
  } catch {
    await buildSandboxImage(tar);
  }
  const p = nodeContainerd(n);
  const wrap = (cmd: string[]) => withNodeFiles(s, n.netns, n.dir, cmd);
  const proc = {
    pid: 0,
    what: what(n),
    cmd: containerdCommand(n.netns, p, wrap),
    netns: n.netns,
    log: p.log,
  };
  s.procs.push(proc);
  saveState(s);
  proc.pid = await startContainerd(n.netns, p, {
    cniBinDir: "/opt/cni/bin",
    cniConfDir: "/etc/cni/net.d",
    imageTar: tar,
    wrap,
  });
  saveState(s);
}

/**
 * Starts `n`'s containerd unless it runs: with the node's first pod (after its daemon is ready, as pods
 * are), so `lab up`'s order of nodes and pods is the same for both runtimes.
 */
export async function ensureNodeRuntime(s: LabState, n: NodeState): Promise<void> {
  const p = s.procs.find((x) => x.what === what(n));
  if (p?.pid && isOurProcess(p.pid, "containerd")) return;
  if (p) s.procs = s.procs.filter((x) => x !== p);
  await startNodeRuntime(s, n);
}

/** Stops every node's containerd of `s` (its sandboxes removed through CRI first, so their DEL runs). */
export async function stopNodeRuntimes(s: LabState): Promise<number> {
  let n = 0;
  for (const p of s.procs.filter((x) => x.what.startsWith("containerd "))) {
    const node = s.nodes.find((x) => what(x) === p.what);
    if (!node || !p.pid) continue;
    await stopContainerd(p.pid, nodeContainerd(node));
    n++;
  }
  return n;
}

/**
 * Creates `pod` on `n` through CRI (its port mappings as the sandbox's port_mappings: containerd passes
 * them to portmap as capability args), names its netns `pod.netns`, and returns its addresses.
 */
export async function criAddPod(
  s: LabState,
  n: NodeState,
  pod: PodState,
): Promise<{ ip: string | null; ipv6: string | null }> {
  const socket = nodeContainerd(n).socket;
  const cfg = podSandboxConfig(pod.name, {
    ports: (pod.ports ?? []).map((m) => ({
      hostPort: m.hostPort,
      containerPort: m.containerPort,
      protocol: m.protocol,
    })),
  });
  const id = await runPodSandbox(socket, cfg, s.dir);
  pod.containerId = id;
  saveState(s);
  const r = await crictl(socket, ["inspectp", "-o", "json", id]);
  if (r.code !== 0) throw new FlanctlError(`crictl inspectp ${id}: ${r.stderr.trim()}`, 1);
  const j = JSON.parse(r.stdout) as {
    status?: { network?: { ip?: string; additionalIps?: { ip?: string }[] } };
    info?: { pid?: number };
  };
  const pid = j.info?.pid;
  if (!pid) throw new FlanctlError(`sandbox ${id} of ${pod.name} has no pid`, 1);
  const attach = await runCmd(["ip", "netns", "attach", pod.netns, String(pid)]);
  if (attach.code !== 0) {
    throw new FlanctlError(`ip netns attach ${pod.netns} ${pid}: ${attach.stderr.trim()}`, 1);
  }
  const ips = [
    j.status?.network?.ip ?? "",
    ...(j.status?.network?.additionalIps ?? []).map((x) => x.ip ?? ""),
  ]
    .filter(Boolean);
  return { ip: ips.find((a) => a.includes(".")) ?? null, ipv6: ips.find((a) => a.includes(":")) ?? null };
}

/** Removes `pod` through CRI (stopp + rmp: containerd runs the conflist DEL) and drops its netns name. */
export async function criDelPod(n: NodeState, pod: PodState): Promise<void> {
  await removePodSandbox(nodeContainerd(n).socket, pod.containerId);
  await runCmd(["ip", "netns", "del", pod.netns]);
}
