/**
 * The daemon's state file, `flanctl.json` next to subnet.env (default /run/flannel/flanctl.json): pid,
 * start time, version, health address, node name and store (kind and how to reach it, never a secret),
 * written at start-up and removed at a clean exit. `flanctl doctor` and `flanctl status` read it to find
 * the daemon and tell a running one from a dead one (a file left by a killed daemon names a pid that is
 * gone or belongs to another process); with no store flag, `doctor`, `status`, `trace` and `lease` open
 * the store it records.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { readCappedText } from "../base/capped_read.ts";
import { parseStoreRecord, type StoreRecord } from "../store/record.ts";

/** The file's contents. */
export interface DaemonStateFile {
  /** Process id. */
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/PID/stat field 22): tells pid reuse apart. */
  procStart: number | null;
  /** Wall-clock start time (ISO 8601). */
  startedAt: string;
  version: string;
  /** `host:port` of /healthz, /readyz and /metrics, or null when the daemon serves none. */
  health: string | null;
  /** The subnet.env the daemon writes. */
  subnetFile: string;
  /**
   * The daemon's pid namespace (`pid:[4026…]`): a daemon in a container (kube-flannel's DaemonSet has no
   * hostPID) writes a pid that means nothing in the host's namespace.
   */
  pidNs: string | null;
  /** The Kubernetes node name in kube mode (once known), else null. */
  nodeName: string | null;
  /** The store the daemon uses (null in a file written by an older daemon). */
  store: StoreRecord | null;
}

/** The state file is unreadable or malformed. */
export class DaemonStateError extends FlanctlError {
  constructor(path: string, detail: string) {
    super(`${path}: ${detail}`, 1);
  }
}

/** Path of the state file that belongs to `subnetFile` (same directory). */
export function daemonStatePath(subnetFile: string): string {
  const i = subnetFile.lastIndexOf("/");
  return `${i < 0 ? "." : subnetFile.slice(0, i) || "/"}/flanctl.json`;
}

/** Start time of process `pid` in clock ticks since boot, or null when there is no such process. */
export function procStartTicks(pid: number): number | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // comm (field 2) may hold spaces and parentheses: fields after the last ')' start at field 3.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const v = Number(rest[22 - 3]);
    return Number.isFinite(v) ? v : null;
  } catch {
    return null;
  }
}

/** Writes the state file atomically (temporary file + rename). */
export function writeDaemonState(path: string, s: DaemonStateFile): void {
  const tmp = `${path}.tmp-${Deno.pid}`;
  Deno.writeTextFileSync(tmp, JSON.stringify(s, null, 2) + "\n", { mode: 0o644 });
  try {
    Deno.renameSync(tmp, path);
  } catch (e) {
    try {
      Deno.removeSync(tmp);
    } catch { /* gone */ }
    throw e;
  }
}

/** Removes the state file if it is still ours (another daemon may have taken over the path). */
export function removeDaemonState(path: string, pid = Deno.pid): void {
  try {
    const s = readDaemonState(path);
    if (s && s.pid !== pid) return;
    Deno.removeSync(path);
  } catch { /* already gone or unreadable: nothing to undo */ }
}

/** Reads the state file; null when it does not exist. Throws {@link DaemonStateError} when malformed. */
export function readDaemonState(path: string): DaemonStateFile | null {
  let text: string;
  try {
    // A few hundred bytes when the daemon wrote it; anything else (a FIFO, a huge file, a symlink: the
    // daemon writes it as a file, renamed into place) is refused.
    text = readCappedText(path, 64 * 1024, "none");
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw new DaemonStateError(path, `cannot read: ${(e as Error).message}`);
  }
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text);
  } catch {
    throw new DaemonStateError(path, "not JSON");
  }
  if (typeof o !== "object" || o === null || !Number.isInteger(o.pid) || (o.pid as number) <= 0) {
    throw new DaemonStateError(path, "field pid: missing or not a positive integer");
  }
  return {
    pid: o.pid as number,
    procStart: typeof o.procStart === "number" ? o.procStart : null,
    startedAt: typeof o.startedAt === "string" ? o.startedAt : "",
    version: typeof o.version === "string" ? o.version : "",
    health: typeof o.health === "string" ? o.health : null,
    subnetFile: typeof o.subnetFile === "string" ? o.subnetFile : "",
    pidNs: typeof o.pidNs === "string" ? o.pidNs : null,
    nodeName: typeof o.nodeName === "string" && /^[A-Za-z0-9._:-]{1,253}$/.test(o.nodeName)
      ? o.nodeName
      : null,
    store: parseStoreRecord(o.store),
  };
}

/**
 * The store recorded in the state file next to `subnetFile`, with that file's path; null when there is no
 * readable state file or it records no store (a command then falls back to its flags' defaults).
 */
export function recordedStore(subnetFile: string): { record: StoreRecord; path: string } | null {
  const path = daemonStatePath(subnetFile);
  try {
    const s = readDaemonState(path);
    return s?.store ? { record: s.store, path } : null;
  } catch {
    return null;
  }
}

/** This process's pid namespace, or null. */
export function ownPidNs(): string | null {
  try {
    return Deno.readLinkSync("/proc/self/ns/pid");
  } catch {
    return null;
  }
}

/**
 * True when the process the file names is running and is the one that wrote it (no pid reuse); false
 * when it is gone; null when the pid cannot be checked from here (the daemon lives in another pid
 * namespace: ask its health endpoint instead).
 */
export function daemonRunning(s: DaemonStateFile): boolean | null {
  if (s.pidNs !== null && ownPidNs() !== null && s.pidNs !== ownPidNs()) return null;
  const start = procStartTicks(s.pid);
  if (start === null) return false;
  if (s.procStart !== null && start !== s.procStart) return false;
  // A zombie (killed, not yet reaped) is not running.
  try {
    const stat = Deno.readTextFileSync(`/proc/${s.pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** The state this process writes at start-up. */
export function ownDaemonState(
  version: string,
  health: string | null,
  subnetFile: string,
  nodeName: string | null = null,
  store: StoreRecord | null = null,
): DaemonStateFile {
  return {
    pid: Deno.pid,
    procStart: procStartTicks(Deno.pid),
    startedAt: new Date().toISOString(),
    version,
    health,
    subnetFile,
    pidNs: ownPidNs(),
    nodeName,
    store,
  };
}
