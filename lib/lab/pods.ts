/**
 * Attaching a pod namespace to its node: the node's conflist (flannel, then portmap; lib/lab/conflist.ts)
 * run in the node namespace with the node's files at the default paths, exactly as a kubelet would.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { PLUGINS } from "../cni/plugins.ts";
import { flanctlCommand, shq } from "./proc.ts";
import { podAdd } from "./conflist.ts";
import type { LabState, NodeState, PodState } from "./types.ts";

/** The CNI plugin failed for a pod. */
export class PodAttachError extends FlanctlError {
  constructor(pod: string, detail: string) {
    super(`attaching pod ${pod} through the CNI conflist failed: ${detail}`, 1);
  }
}

/**
 * Writes the lab's CNI_PATH directory: one entry per plugin name that runs this flanctl as that plugin, so
 * a delegate exec'd from CNI_PATH (or `lab exec <node> /opt/cni/bin/<plugin>`) runs the same build. When
 * flanctl is one executable (`argv` of one word: install.sh's launcher, which sets FLANCTL_ARGV0 from its
 * own `$0` and takes its CNI fast path — the CNI bundle with its code cache — by that name, or a compiled
 * binary, which reads argv[0]), links named after the plugins, as install.sh makes them; when it is Deno
 * running a checkout's main.ts, a script passing the name in FLANCTL_ARGV0 (main.ts dispatches on it).
 * Entries of an earlier run are replaced.
 */
export function writeCniBin(s: LabState, argv: string[] = flanctlCommand()): void {
  const dir = `${s.dir}/cni-bin`;
  Deno.mkdirSync(dir, { recursive: true });
  const words = argv.map(shq).join(" ");
  for (const name of Object.keys(PLUGINS)) {
    const path = `${dir}/${name}`;
    try {
      Deno.removeSync(path);
    } catch { /* not there yet */ }
    if (argv.length === 1) Deno.symlinkSync(argv[0], path);
    else {
      Deno.writeTextFileSync(path, `#!/bin/sh\nFLANCTL_ARGV0=${name} exec ${words} "$@"\n`, { mode: 0o755 });
    }
  }
}

/**
 * Attaches a pod through the node's conflist (flannel, then portmap: lib/lab/conflist.ts); returns its IPv4
 * and IPv6 addresses (without prefix, null when the result has none). A result without any address is a
 * {@link PodAttachError}.
 */
export async function attachPod(
  s: LabState,
  n: NodeState,
  pod: PodState,
): Promise<{ ip: string | null; ipv6: string | null }> {
  let res: Record<string, unknown>;
  try {
    res = await podAdd(s, n, pod);
  } catch (e) {
    throw new PodAttachError(pod.name, (e as Error).message);
  }
  const ips = ((res.ips ?? []) as { address?: string }[]).map((i) => i.address ?? "");
  // 0.1.0/0.2.0 shape: ip4.ip / ip6.ip
  const legacy4 = (res.ip4 as { ip?: string } | undefined)?.ip;
  const legacy6 = (res.ip6 as { ip?: string } | undefined)?.ip;
  const ip4 = ips.find((a) => a.includes(".")) ?? legacy4;
  const ip6 = ips.find((a) => a.includes(":")) ?? legacy6;
  if (!ip4 && !ip6) {
    throw new PodAttachError(pod.name, `result has no IP address: ${JSON.stringify(res).slice(0, 300)}`);
  }
  return { ip: ip4 ? ip4.split("/")[0] : null, ipv6: ip6 ? ip6.split("/")[0] : null };
}
