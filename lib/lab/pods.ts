/**
 * Attaching a pod namespace to its node: the node's conflist (flannel, then portmap; lib/lab/conflist.ts)
 * run in the node namespace with the node's files at the default paths, exactly as a kubelet would.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { PLUGINS } from "../cni/plugins.ts";
import { flanctlCommand } from "./proc.ts";
import { podAdd } from "./conflist.ts";
import type { LabState, NodeState, PodState } from "./types.ts";

/** The CNI plugin failed for a pod. */
export class PodAttachError extends FlanctlError {
  constructor(pod: string, detail: string) {
    super(`attaching pod ${pod} through the CNI conflist failed: ${detail}`, 1);
  }
}

/**
 * Writes the lab's CNI_PATH directory: one launcher per plugin name, running this flanctl with
 * FLANCTL_ARGV0 (main.ts dispatches on it), so a delegate exec'd from CNI_PATH runs the same build.
 */
export function writeCniBin(s: LabState): void {
  const dir = `${s.dir}/cni-bin`;
  Deno.mkdirSync(dir, { recursive: true });
  const argv = flanctlCommand();
  const launcher = argv.length === 1 ? installedLauncher(argv[0]) : null;
  if (launcher) {
    // An installed flanctl: links named after the plugins, as install.sh makes them, take the launcher's
    // CNI fast path (the CNI bundle with its code cache) instead of the whole CLI.
    for (const name of Object.keys(PLUGINS)) Deno.symlinkSync(launcher, `${dir}/${name}`);
    return;
  }
  const cmd = argv.map((w) => `'${w.replaceAll("'", `'\\''`)}'`).join(" ");
  for (const name of Object.keys(PLUGINS)) {
    Deno.writeTextFileSync(`${dir}/${name}`, `#!/bin/sh\nFLANCTL_ARGV0=${name} exec ${cmd} "$@"\n`, {
      mode: 0o755,
    });
  }
}

/** `path` when it is install.sh's launcher (a shell script that dispatches on its name), else null. */
function installedLauncher(path: string): string | null {
  try {
    const head = Deno.readTextFileSync(path).slice(0, 200);
    return head.startsWith("#!/bin/sh\n# flanctl launcher") ? path : null;
  } catch {
    return null;
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
