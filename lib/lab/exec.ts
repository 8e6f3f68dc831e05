/**
 * "As if on that node": a command in a node's (or pod's) namespace that also sees the node's own files at
 * the default paths. `ip netns exec` already runs the command in a private mount namespace whose mounts
 * do not propagate back (it makes `/` a recursive slave); inside it we bind-mount the node's directories
 * from the lab dir over /run/flannel, /etc/cni/net.d, /var/lib/cni and /var/lib/flanctl, then exec the
 * command. Nothing is mounted in the root mount namespace; only empty mount-point directories are
 * created there when missing (recorded, and removed by the last `lab down`).
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { flagEnv } from "../base/goflag.ts";
import { STORE_FLAGS } from "../store/flags.ts";
import { runAttached } from "../base/run.ts";
import { labRoot, NODE_PATHS, nodeMounts } from "./paths.ts";
import { pathExists } from "../base/exists.ts";
import { shq } from "./proc.ts";
import type { LabState } from "./types.ts";

/** The lab's file store directory, or null for etcd. */
export function fileStoreDir(s: LabState): string | null {
  return s.store === "file" ? `${s.dir}/store` : null;
}

/**
 * The argv that runs `cmd` in `netns` with the files of the node whose directory is `nodeDir` mounted at
 * the default paths (see {@link nodeMounts}).
 */
export function withNodeFiles(s: LabState, netns: string, nodeDir: string, cmd: string[]): string[] {
  const mounts = nodeMounts(nodeDir, fileStoreDir(s)).map(([src, dst]) =>
    `mount --bind ${shq(src)} ${shq(dst)}`
  );
  const script = `${mounts.join(" && ")} && exec "$@"`;
  return ["ip", "netns", "exec", netns, "sh", "-c", script, "sh", ...cmd];
}

const MOUNTPOINTS_FILE = "mountpoints.txt";
const MOUNTPOINTS_LOCK = "mountpoints.lock";

/**
 * Takes the exclusive lock that serializes creating, recording and removing the shared mount points
 * across processes (an flock on `root`/mountpoints.lock), creating `root` when missing. The last `lab
 * down` removes the lock file with the root while holding it, so after locking we check that the file we
 * hold is still the one at the path, and start over when it is not.
 */
function lockMountPoints(root: string): Deno.FsFile {
  const path = `${root}/${MOUNTPOINTS_LOCK}`;
  for (;;) {
    Deno.mkdirSync(root, { recursive: true });
    let f: Deno.FsFile;
    try {
      f = Deno.openSync(path, { create: true, write: true });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) continue; // the root went meanwhile
      throw e;
    }
    try {
      f.lockSync(true);
      const held = f.statSync();
      const now = Deno.statSync(path);
      if (held.ino === now.ino && held.dev === now.dev) return f;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        f.close();
        throw e;
      }
    }
    f.close(); // removed or replaced while we waited: releases it, try again
  }
}

/** Runs `fn` holding the mount-point lock of `root`. */
function withMountPointsLock<T>(root: string, fn: () => T): T {
  const f = lockMountPoints(root);
  try {
    return fn();
  } finally {
    f.close(); // releases the lock
  }
}

/**
 * Creates the missing mount-point directories (empty) on the host and records them in a file shared by
 * all labs under `root`, so the last `lab down` removes exactly those. Holds the lock of `root` (see
 * {@link removeIfLastLab}): a lab whose directory exists when this runs keeps its mount points.
 */
export function ensureMountPoints(paths: readonly string[] = NODE_PATHS, root: string = labRoot()): void {
  withMountPointsLock(root, () => {
    const created: string[] = [];
    for (const dst of paths) {
      if (pathExists(dst)) continue;
      // Create the parents one by one so every directory we add is recorded (deepest last).
      let p = "";
      for (const part of dst.split("/").filter(Boolean)) {
        p += `/${part}`;
        if (pathExists(p)) continue;
        Deno.mkdirSync(p);
        created.push(p);
      }
    }
    if (created.length) {
      Deno.writeTextFileSync(`${root}/${MOUNTPOINTS_FILE}`, created.join("\n") + "\n", { append: true });
    }
  });
}

/**
 * Removes the recorded mount-point directories of `root` (only those still empty, deepest first); the
 * records of those that could not be removed are kept. Called when no lab is left.
 */
export function removeMountPoints(root: string = labRoot()): void {
  withMountPointsLock(root, () => removeRecorded(root));
}

/** {@link removeMountPoints} with the lock held. */
function removeRecorded(root: string): void {
  const file = `${root}/${MOUNTPOINTS_FILE}`;
  let text = "";
  try {
    text = Deno.readTextFileSync(file);
  } catch {
    return;
  }
  const dirs = [...new Set(text.split("\n").filter(Boolean))].sort((a, b) => b.length - a.length);
  const kept: string[] = [];
  for (const d of dirs) {
    try {
      Deno.removeSync(d); // fails (and is kept) when not empty
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) kept.push(d);
    }
  }
  if (kept.length) Deno.writeTextFileSync(file, kept.reverse().join("\n") + "\n");
  else {
    try {
      Deno.removeSync(file);
    } catch { /* gone */ }
  }
}

/**
 * `lab down`'s last step: when `root` holds no lab directory, removes the mount points and the root
 * (when nothing else is left in it); returns whether no lab was left. All under the lock that
 * {@link ensureMountPoints} takes, so a lab starting meanwhile either has its directory counted here or
 * creates its mount points (and the root) again after this.
 */
export function removeIfLastLab(root: string = labRoot()): boolean {
  try {
    Deno.statSync(root);
  } catch {
    return true; // no root: nothing recorded, nothing to lock
  }
  return withMountPointsLock(root, () => {
    let others = 0;
    for (const e of Deno.readDirSync(root)) if (e.isDirectory) others++;
    if (others > 0) return false;
    removeRecorded(root);
    try {
      Deno.statSync(`${root}/${MOUNTPOINTS_FILE}`); // left only with kept records: the root stays
      return true;
    } catch { /* no records left */ }
    try {
      Deno.removeSync(`${root}/${MOUNTPOINTS_LOCK}`);
      Deno.removeSync(root); // fails when something else is left; the lock file is recreated on demand
    } catch { /* not empty or gone */ }
    return true;
  });
}

/** A lab target that does not exist. */
export class LabTargetError extends FlanctlError {
  constructor(lab: string, target: string, known: string[]) {
    super(`lab '${lab}' has no node or pod '${target}' (known: ${known.join(", ") || "none"})`, 1);
  }
}

/** Resolves a node or pod name to its namespace and its node's directory. */
export function resolveTarget(s: LabState, target: string): { netns: string; nodeDir: string } {
  const node = s.nodes.find((n) => n.name === target);
  if (node) return { netns: node.netns, nodeDir: node.dir };
  const pod = s.pods.find((p) => p.name === target);
  if (pod) {
    const n = s.nodes.find((x) => x.name === pod.node);
    if (n) return { netns: pod.netns, nodeDir: n.dir };
  }
  throw new LabTargetError(s.name, target, [...s.nodes.map((n) => n.name), ...s.pods.map((p) => p.name)]);
}

/**
 * The environment a node's commands see: with etcd, the endpoints as flannel's FLANNELD_ETCD_ENDPOINTS,
 * so `flanctl lease list`, `flanctl doctor` or a hand-started daemon find the lab's store with no flags;
 * the file store is mounted at /var/lib/flanctl and chosen with FLANNELD_STORE_DIR (without a store flag
 * flanctl, as flanneld, would use etcd on 127.0.0.1).
 */
export function storeEnv(s: LabState): Record<string, string> {
  const env: Record<string, string> = {};
  for (let i = 0; i + 1 < s.storeFlags.length; i += 2) {
    if (s.storeFlags[i] === "--store-dir") {
      env.FLANNELD_STORE_DIR = "/var/lib/flanctl";
      continue;
    }
    // The variable the flag's own table gives it (FLANNELD_<FLAG>, or its own, e.g. FLANCTL_LEASE_TTL).
    const spec = STORE_FLAGS.find((f) => `--${f.name}` === s.storeFlags[i]);
    const name = spec ? flagEnv(spec) : null;
    if (name) env[name] = s.storeFlags[i + 1];
  }
  return env;
}

/** Runs `cmd` on a node or pod with the terminal attached; returns its exit code. */
export async function labExec(s: LabState, target: string, cmd: string[]): Promise<number> {
  const { netns, nodeDir } = resolveTarget(s, target);
  ensureMountPoints();
  const argv = withNodeFiles(s, netns, nodeDir, cmd);
  // The terminal belongs to the command; Ctrl-C too (runAttached waits for it instead of dying first).
  const st = await runAttached(argv, { env: storeEnv(s) });
  return st.signal ? 128 + signalNumber(st.signal) : st.code;
}

function signalNumber(sig: Deno.Signal): number {
  const table: Partial<Record<Deno.Signal, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return table[sig] ?? 1;
}
