/**
 * The lab's small container runtime: runs a node's whole conflist as libcni does. ADD runs the plugins in
 * order, each getting the list's `name` and `cniVersion`, the previous plugin's result as `prevResult`
 * and a `runtimeConfig` holding only the capabilities it declares (`portMappings`); the final result is
 * cached under the node's /var/lib/cni/results. DEL runs the plugins in reverse order (with the cached
 * result as `prevResult` from cniVersion 0.4.0 on, as libcni).
 * Plugins run as `flanctl cni <type>` in the node's namespace with the node's files at the default paths.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { withNodeFiles } from "./exec.ts";
import { runCmd } from "./proc.ts";
import type { LabState, NodeState, PodPort, PodState } from "./types.ts";

/** A conflist: name, version and the plugin configs in order. */
export interface Conflist {
  name: string;
  cniVersion: string;
  plugins: Record<string, unknown>[];
}

/** What the runtime knows of a sandbox (libcni's RuntimeConf). */
export interface RuntimeConf {
  containerId: string;
  netns: string;
  ifname: string;
  /** Capability arguments, e.g. { portMappings: [...] }. */
  capabilityArgs: Record<string, unknown>;
}

/** Runs one plugin: (type, verb, config) → parsed stdout (null when empty); throws on failure. */
export type PluginRunner = (
  type: string,
  command: "ADD" | "DEL",
  conf: Record<string, unknown>,
) => Promise<Record<string, unknown> | null>;

/** A plugin of the conflist failed. */
export class ConflistError extends FlanctlError {
  constructor(type: string, command: string, detail: string) {
    super(`CNI plugin ${type} ${command} failed: ${detail}`, 1);
  }
}

function versionAtLeast(v: string, min: string): boolean {
  const a = v.split(".").map(Number), b = min.split(".").map(Number);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
}

/** The config libcni gives `plugin` of `list` (runtimeConfig from declared capabilities only). */
export function pluginConf(
  list: Conflist,
  plugin: Record<string, unknown>,
  rt: RuntimeConf,
  prevResult: unknown,
): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin, name: list.name, cniVersion: list.cniVersion };
  const caps = (plugin.capabilities ?? {}) as Record<string, unknown>;
  const rc: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rt.capabilityArgs)) if (caps[k] === true) rc[k] = v;
  if (Object.keys(rc).length) conf.runtimeConfig = rc;
  if (prevResult !== undefined && prevResult !== null) conf.prevResult = prevResult;
  return conf;
}

/** ADD: every plugin in order, chaining results. Returns the last result. */
export async function conflistAdd(list: Conflist, rt: RuntimeConf, run: PluginRunner) {
  let prev: Record<string, unknown> | null = null;
  for (const p of list.plugins) {
    prev = await run(String(p.type), "ADD", pluginConf(list, p, rt, prev)) ?? prev;
  }
  return prev ?? {};
}

/**
 * DEL: every plugin in reverse order (the cached result as prevResult from 0.4.0 on). With `bestEffort`
 * (undoing a failed ADD, as a runtime does) every plugin runs even when one fails; the errors are returned.
 */
export async function conflistDel(
  list: Conflist,
  rt: RuntimeConf,
  cached: unknown,
  run: PluginRunner,
  bestEffort = false,
): Promise<string[]> {
  const prev = versionAtLeast(list.cniVersion, "0.4.0") ? cached : undefined;
  const errors: string[] = [];
  for (const p of [...list.plugins].reverse()) {
    try {
      await run(String(p.type), "DEL", pluginConf(list, p, rt, prev));
    } catch (e) {
      if (!bestEffort) throw e;
      errors.push((e as Error).message);
    }
  }
  return errors;
}

// ---- the lab's nodes -----------------------------------------------------------------------------

/** kube-flannel's conflist: flannel, then portmap (nftables backend when the lab runs flannel so). */
export function labConflist(nftables = false): Conflist {
  return {
    name: "cbr0",
    cniVersion: "0.3.1",
    plugins: [
      { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
      { type: "portmap", capabilities: { portMappings: true }, ...(nftables ? { backend: "nftables" } : {}) },
    ],
  };
}

/** Path of a node's conflist. */
export function conflistPath(n: NodeState): string {
  return `${n.dir}/etc/cni/net.d/10-flannel.conflist`;
}

/** The node's conflist as written at `lab up`/`add-node`. */
export function readConflist(n: NodeState): Conflist {
  return JSON.parse(Deno.readTextFileSync(conflistPath(n))) as Conflist;
}

function cachePath(n: NodeState, list: Conflist, pod: PodState): string {
  return `${n.dir}/var/lib/cni/results/${list.name}-${pod.containerId}-eth0`;
}

/** The runner executing plugins on node `n` (flannel gets the node's subnet.env and data dir). */
export function nodeRunner(s: LabState, n: NodeState, pod: PodState): PluginRunner {
  return async (type, command, conf) => {
    if (type === "flannel") {
      conf = {
        ...conf,
        subnetFile: `${n.dir}/run/flannel/subnet.env`,
        dataDir: `${n.dir}/var/lib/cni/flannel`,
      };
    }
    // The plugin from CNI_PATH, as a kubelet runs it (with an installed flanctl: the CNI bundle's fast path).
    const argv = withNodeFiles(s, n.netns, n.dir, [`${s.dir}/cni-bin/${type}`]);
    const r = await runCmd(argv, {
      stdin: JSON.stringify(conf),
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: pod.containerId,
        CNI_NETNS: `/var/run/netns/${pod.netns}`,
        CNI_IFNAME: "eth0",
        CNI_PATH: `${s.dir}/cni-bin`,
      },
    });
    let out: Record<string, unknown> | null = null;
    try {
      out = r.stdout.trim() ? JSON.parse(r.stdout) : null;
    } catch {
      throw new ConflistError(
        type,
        command,
        `exit ${r.code}, stdout not JSON: ${r.stdout.slice(0, 200)} ${r.stderr}`,
      );
    }
    if (r.code !== 0) {
      throw new ConflistError(
        type,
        command,
        `exit ${r.code}: ${String(out?.msg ?? "")} ${String(out?.details ?? "")}`,
      );
    }
    return out;
  };
}

function rtOf(pod: PodState): RuntimeConf {
  const ports: PodPort[] = pod.ports ?? [];
  return {
    containerId: pod.containerId,
    netns: `/var/run/netns/${pod.netns}`,
    ifname: "eth0",
    capabilityArgs: ports.length ? { portMappings: ports } : {},
  };
}

/** Runs the node's conflist ADD for `pod`, caches and returns the result. */
export async function podAdd(s: LabState, n: NodeState, pod: PodState): Promise<Record<string, unknown>> {
  const list = readConflist(n);
  const res = await conflistAdd(list, rtOf(pod), nodeRunner(s, n, pod));
  const file = cachePath(n, list, pod);
  Deno.mkdirSync(file.slice(0, file.lastIndexOf("/")), { recursive: true });
  Deno.writeTextFileSync(file, JSON.stringify(res));
  return res;
}

/**
 * Runs the node's conflist DEL for `pod` (reverse order) and drops the cached result. `bestEffort`: as
 * {@link conflistDel}; returns the plugins' errors.
 */
export async function podDel(
  s: LabState,
  n: NodeState,
  pod: PodState,
  bestEffort = false,
): Promise<string[]> {
  const list = readConflist(n);
  const file = cachePath(n, list, pod);
  let cached: unknown;
  try {
    cached = JSON.parse(Deno.readTextFileSync(file));
  } catch { /* no cache: DEL without prevResult */ }
  const errors = await conflistDel(list, rtOf(pod), cached, nodeRunner(s, n, pod), bestEffort);
  try {
    Deno.removeSync(file);
  } catch { /* gone */ }
  return errors;
}
