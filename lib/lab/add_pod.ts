/**
 * `flanctl lab add-pod NODE [--publish HOSTPORT:PODPORT[/tcp|udp]]` and `flanctl lab del-pod POD`: one pod
 * attached (or detached) through the node's whole conflist (flannel, then portmap with the pod's port
 * mappings as `runtimeConfig.portMappings`), as a kubelet would with hostPort.
 * @module
 */
import { FlanctlError, UsageError } from "../base/errors.ts";
import { buildPod, type Progress } from "./build.ts";
import { podDel } from "./conflist.ts";
import { saveState } from "./state.ts";
import type { LabState, NodeState, PodPort, PodState } from "./types.ts";

/** Parses one `--publish HOSTPORT:PODPORT[/tcp|udp]`. */
export function parsePublish(v: string): PodPort {
  const m = /^(\d{1,5}):(\d{1,5})(?:\/(tcp|udp))?$/.exec(v);
  const ok = (p: string | undefined) => p !== undefined && Number(p) >= 1 && Number(p) <= 65535;
  if (!m || !ok(m[1]) || !ok(m[2])) {
    throw new UsageError(
      `--publish '${v}': give HOSTPORT:PODPORT[/tcp|udp] with ports 1-65535, e.g. 18080:8080`,
    );
  }
  return { hostPort: Number(m[1]), containerPort: Number(m[2]), protocol: (m[3] ?? "tcp") as "tcp" | "udp" };
}

/** Adds a pod to `nodeName` with `ports` published; returns it. */
export async function labAddPod(
  s: LabState,
  nodeName: string,
  ports: PodPort[],
  progress: Progress,
): Promise<PodState> {
  const n = s.nodes.find((x) => x.name === nodeName);
  if (!n) {
    throw new UsageError(
      `NODE '${nodeName}': no such node in lab ${s.name} (${s.nodes.map((x) => x.name).join(", ")})`,
    );
  }
  const used = s.pods.filter((p) => p.node === n.name).map((p) => Number(p.name.split("-pod")[1]) || 0);
  const before = { pods: [...s.pods], netns: [...s.netns] };
  let pod: PodState;
  try {
    pod = await buildPod(s, n, Math.max(0, ...used) + 1, ports);
  } catch (e) {
    await undoFailedPod(s, n, before, progress);
    throw e;
  }
  // Published on the node's address of each family the pod has (portmap maps both in dual stack).
  const hosts = [pod.ip ? n.publicIP : null, pod.ipv6 && n.publicIPv6 ? `[${n.publicIPv6}]` : null]
    .filter((h) => h !== null);
  const pub = ports.flatMap((p) => hosts.map((h) => `${h}:${p.hostPort}->${p.containerPort}/${p.protocol}`))
    .join(", ");
  const ips = [pod.ip, pod.ipv6].filter(Boolean).join(" ");
  progress(`${pod.name}: netns ${pod.netns}, IP ${ips}${pub ? `, published ${pub}` : ""}`);
  return pod;
}

/**
 * A failed ADD, undone as a runtime does: the conflist's DEL for the pod (every plugin, best effort: what
 * ADD made before the failing plugin — veth, IP reservation, masquerade chain — goes), its namespace
 * deleted, and the lab's state back to `before`. What cannot be undone is reported, not thrown: the ADD's
 * error is the one the caller sees.
 */
async function undoFailedPod(
  s: LabState,
  n: NodeState,
  before: { pods: PodState[]; netns: string[] },
  progress: Progress,
): Promise<void> {
  const pod = s.pods.find((p) => !before.pods.includes(p));
  if (pod) {
    const { runCmd } = await import("./proc.ts");
    let left: string[] = [];
    if (s.runtime === "containerd") {
      const { criDelPod } = await import("./runtime.ts");
      try {
        await criDelPod(n, pod);
      } catch (e) {
        left.push((e as Error).message);
      }
    } else {
      left = await podDel(s, n, pod, true);
    }
    // The namespace goes whether or not DEL could run: `ip netns del` of a missing one only fails.
    const del = await runCmd(["ip", "netns", "del", pod.netns]);
    if (del.code !== 0 && !/No such file/.test(del.stderr)) {
      left.push(`ip netns del ${pod.netns}: ${del.stderr.trim()}`);
    }
    if (left.length) progress(`${pod.name}: undoing the failed ADD left: ${left.join("; ")}`);
  }
  s.pods = before.pods;
  s.netns = before.netns;
  saveState(s);
}

/** Runs the conflist DEL for a pod (reverse order), deletes its namespace and forgets it. */
export async function labDelPod(s: LabState, podName: string, progress: Progress): Promise<void> {
  const pod = s.pods.find((p) => p.name === podName);
  if (!pod) throw new UsageError(`POD '${podName}': no such pod in lab ${s.name}`);
  const n = s.nodes.find((x) => x.name === pod.node);
  if (!n) throw new FlanctlError(`pod ${podName}: its node ${pod.node} is not in the lab state`, 1);
  if (s.runtime === "containerd") {
    const { criDelPod } = await import("./runtime.ts");
    await criDelPod(n, pod);
  } else {
    await podDel(s, n, pod);
    const { runCmd } = await import("./proc.ts");
    await runCmd(["ip", "netns", "del", pod.netns]);
  }
  s.pods = s.pods.filter((p) => p !== pod);
  s.netns = s.netns.filter((x) => x !== pod.netns);
  saveState(s);
  progress(
    `${podName}: deleted (${
      s.runtime === "containerd" ? "crictl stopp + rmp" : "conflist DEL"
    }, netns removed)`,
  );
}
