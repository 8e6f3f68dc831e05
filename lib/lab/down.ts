/**
 * `flanctl lab down`: stops every process, deletes every namespace (which removes every link, address,
 * route and rule inside it) and removes the lab directory. Idempotent and robust to partial state: it
 * works from the state file when there is one, and also from the namespace naming scheme when the state
 * is missing or incomplete (a crash between creating something and recording it cannot happen — things
 * are recorded first — but a hand-deleted state file can).
 * @module
 */
import type { LabState } from "./types.ts";
import { removeIfLastLab } from "./exec.ts";
import { labDir, labNetnsPattern, validateLabName } from "./paths.ts";
import { isOurProcess, runCmd, stopProcess } from "./proc.ts";
import { readState } from "./state.ts";
import { restoreTuning } from "./host_size.ts";

/** What `lab down` removed. */
export interface DownReport {
  processes: number;
  namespaces: number;
  dirRemoved: boolean;
}

/**
 * Lists the host's named network namespaces. Reads /var/run/netns directly: `ip netns list` also
 * resolves each one's nsid and fails when another process deletes a namespace meanwhile.
 */
export function listNetns(): Promise<string[]> {
  try {
    return Promise.resolve([...Deno.readDirSync("/var/run/netns")].map((e) => e.name).sort());
  } catch {
    return Promise.resolve([]);
  }
}

/** Stops every node's containerd of `s` (lib/lab/runtime.ts); returns how many. Never throws. */
async function stopRuntimes(s: LabState, progress: (l: string) => void): Promise<number> {
  const { stopNodeRuntimes } = await import("./runtime.ts");
  return await stopNodeRuntimes(s).catch((e) => {
    progress(`warning: stopping containerd: ${(e as Error).message}`);
    return 0;
  });
}

/** Removes lab `name` completely. Never throws for missing pieces. */
export async function labDown(name: string, progress: (l: string) => void = () => {}): Promise<DownReport> {
  validateLabName(name);
  const dir = labDir(name);
  let state = null;
  try {
    state = readState(name);
  } catch (e) {
    progress(`warning: ${(e as Error).message}; cleaning up by name`);
  }
  // Each node's containerd (--runtime containerd) removes its sandboxes through CRI first (their CNI DEL
  // runs, their processes and namespaces go), then it is stopped.
  const runtimes = state?.runtime === "containerd" ? await stopRuntimes(state, progress) : 0;
  const report: DownReport = { processes: runtimes, namespaces: 0, dirRemoved: false };

  // 0. Containers of a kube lab (lab up --kube): their processes live in pod namespaces, their root under
  //    the lab's directory (containerd's state there): killed first, so no shim restarts them.
  report.processes += killRootedUnder(`${dir}/`);
  // 1. Processes: daemons first (they may still talk to etcd), etcd last.
  const procs = [...(state?.procs ?? [])].sort((a, b) =>
    (a.what === "etcd" ? 1 : 0) - (b.what === "etcd" ? 1 : 0)
  );
  for (const p of procs) {
    if (isOurProcess(p.pid, `${dir}/`)) {
      await stopProcess(p.pid, `${dir}/`);
      report.processes++;
    }
  }
  // 2. Namespaces: recorded ones plus any that match the lab's naming scheme; anything still running in
  //    them (a restarted daemon, a user's `lab exec` shell) is killed first.
  const pattern = labNetnsPattern(name);
  const all = new Set([...(state?.netns ?? []), ...(await listNetns()).filter((n) => pattern.test(n))]);
  const ordered = [...all].sort((a, b) => rank(b) - rank(a));
  for (const ns of ordered) {
    const pids = await runCmd(["ip", "netns", "pids", ns]);
    for (const pid of pids.stdout.split(/\s+/).filter(Boolean)) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
        report.processes++;
      } catch { /* gone */ }
    }
    const r = await runCmd(["ip", "netns", "del", ns]);
    if (r.code === 0) report.namespaces++;
  }
  // 3. Host sysctls `lab up --tune-host` raised (the lab's entries are gone with its namespaces).
  if (state) (await restoreTuning(state)).forEach(progress);
  // 4. Files.
  try {
    Deno.removeSync(dir, { recursive: true });
    report.dirRemoved = true;
  } catch { /* already gone */ }
  // 5. Mount points and the root dir, when this was the last lab (under the lock ensureMountPoints takes).
  removeIfLastLab();
  progress(
    `lab ${name} down: ${report.processes} processes stopped, ${report.namespaces} namespaces deleted` +
      (report.dirRemoved ? `, ${dir} removed` : ""),
  );
  return report;
}

/** SIGKILLs every process whose root directory is under `dir` (a container of a kube lab); returns how many. */
function killRootedUnder(dir: string): number {
  let n = 0;
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (!`${Deno.readLinkSync(`/proc/${e.name}/root`)}/`.startsWith(dir)) continue;
      Deno.kill(Number(e.name), "SIGKILL");
      n++;
    } catch { /* gone, or not ours to read */ }
  }
  return n;
}

/** Pods before nodes before the underlay. */
function rank(ns: string): number {
  if (/-pod\d+$/.test(ns)) return 2;
  if (/-node\d+$/.test(ns)) return 1;
  return 0;
}
