/**
 * The deleted records that let a launcher answer a repeated DEL without starting Deno (docs/cni.md, "A
 * repeated DEL"). containerd (like most runtimes) runs a pod's whole chain of DELs twice, at stop and again
 * at remove, and the spec allows any number of DELs; the second finds nothing to do, yet paid a Deno start
 * per plugin.
 *
 * One record per plugin and attachment ((CNI_CONTAINERID, CNI_IFNAME): the spec's identity of an
 * attachment), a file `<plugin>:<ifname>:<containerID>` in the directory the launcher names in
 * {@link DELETED_DIR_ENV}. Not empty means: this plugin holds nothing for the attachment — its DEL of it
 * succeeded (its config accepted), or its ADD succeeded having made nothing (portmap without port mappings)
 * — and no ADD of it has started since. Empty or absent means nothing. So:
 *
 * - ADD empties it before its first change (an ADD that cannot make sure of that fails before any change),
 *   and fills it again only when it succeeded having made nothing;
 * - DEL fills it only after its plugin's DEL succeeded;
 * - each holds an exclusive flock on the file for its whole run, so an ADD and a DEL of one attachment never
 *   overlap even when a runtime breaks the spec's rule against parallel calls (the holder checks after
 *   locking that the path still names the locked inode, as lib/cni/container_lock.ts; pruning locks too);
 * - the launcher ({@link earlyDelSh}) answers a DEL itself (exit 0, no output, as the full DEL on a deleted
 *   attachment) only when the record is not empty, the environment is one the full path accepts, and the
 *   netns is gone or not given (or the plugin is portmap, whose DEL never looks at it) — so nothing in it
 *   could have been touched by the full DEL either.
 *
 * A node upgraded from a version without records has none: every DEL runs in full until one succeeded. An
 * install that switches the launcher empties the directory first (lib/install/cni.ts, install.sh), so a
 * record from before a downgrade cannot outlive ADDs of the version that kept none.
 * @module
 */
import { CNI_PLUGIN_NAMES } from "./names.ts";

/** The environment variable a launcher sets to the records' directory; without it no record is kept. */
export const DELETED_DIR_ENV = "FLANCTL_CNI_DELETED_DIR";

/** A record older than this may be removed (then a later DEL runs in full: slower, never wrong). */
export const RECORD_KEEP_MS = 60 * 60_000;
/** How often a DEL looks for records to prune (a stamp file's mtime). */
export const PRUNE_EVERY_MS = 10 * 60_000;
const PRUNE_STAMP = ".pruned";

/** How often {@link openRecord} opens a record again that was removed while it waited for the lock. */
const MAX_REOPENS = 16;

/** The plugin names, container IDs and interface names a launcher can look a record up for. */
const SAFE = /^[A-Za-z0-9_.-]+$/;

/**
 * The record's file name for `plugin`'s attachment (`containerId`, `ifname`), or null when there is none:
 * a name the launcher cannot check (characters other than letters, digits, `_`, `.`, `-`; `.` or `..`) or
 * longer than a file name may be. No record means every DEL of it runs in full.
 */
export function recordName(plugin: string, containerId: string, ifname: string): string | null {
  for (const s of [plugin, containerId, ifname]) {
    if (!SAFE.test(s) || s === "." || s === "..") return null;
  }
  const name = `${plugin}:${ifname}:${containerId}`;
  return name.length <= 255 ? name : null;
}

/** A record, locked; {@link openRecord}. */
export interface DeletedRecord {
  /** ADD: empties it (before the first change). Throws when it cannot. */
  clear(): void;
  /**
   * After the plugin's DEL succeeded, or its ADD succeeded having made nothing: fills it. Best effort (without
   * it the next DEL runs in full).
   */
  markDeleted(): void;
  /** Releases the lock. */
  close(): void;
}

/**
 * Opens (creating it empty) and locks the record `name` in `dir`; null when it cannot be opened (no
 * directory and none can be made, not writable) or locked (a file system without flock), or when it was
 * pruned under us more than {@link MAX_REOPENS} times in a row. Blocks while another call of the attachment
 * holds it. `lock` is for tests.
 */
export function openRecord(
  dir: string,
  name: string,
  lock: (f: Deno.FsFile) => void = (f) => f.lockSync(true),
): DeletedRecord | null {
  const path = `${dir}/${name}`;
  for (let tries = 0; tries < MAX_REOPENS; tries++) {
    let f: Deno.FsFile;
    try {
      f = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o644 });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) return null;
      try {
        Deno.mkdirSync(dir, { recursive: true, mode: 0o755 });
        f = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o644 });
      } catch {
        return null;
      }
    }
    try {
      lock(f);
    } catch {
      f.close();
      return null; // no flock here: no record, every call runs in full
    }
    try {
      if (Deno.statSync(path).ino !== f.statSync().ino) { // pruned while we waited: lock the new one
        f.close();
        continue;
      }
    } catch {
      f.close();
      continue; // removed while we waited
    }
    return {
      clear() {
        f.truncateSync(0);
      },
      markDeleted() {
        try {
          f.writeSync(DELETED);
          pruneIfDue(dir);
        } catch { /* the next DEL runs in full */ }
      },
      close() {
        f.close();
      },
    };
  }
  return null;
}

const DELETED = new TextEncoder().encode("deleted\n");

/** Whether `name` is a record's file name: one of our plugins', and an ID and interface name it could be for. */
function isRecordName(name: string): boolean {
  const [plugin, ifname, id, ...rest] = name.split(":");
  return rest.length === 0 && CNI_PLUGIN_NAMES.includes(plugin) &&
    recordName(plugin, id ?? "", ifname ?? "") === name;
}

/**
 * Removes records older than {@link RECORD_KEEP_MS}, at most once per {@link PRUNE_EVERY_MS}. Only records:
 * the directory comes from the environment, and nothing else in it is ours to remove.
 */
export function pruneIfDue(dir: string, now = Date.now()): void {
  const stamp = `${dir}/${PRUNE_STAMP}`;
  try {
    if (now - (Deno.statSync(stamp).mtime?.getTime() ?? 0) < PRUNE_EVERY_MS) return;
  } catch { /* never pruned */ }
  try {
    Deno.writeFileSync(stamp, new Uint8Array());
  } catch {
    return;
  }
  for (const e of Deno.readDirSync(dir)) {
    if (!e.isFile || !isRecordName(e.name)) continue;
    const path = `${dir}/${e.name}`;
    try {
      using f = Deno.openSync(path, { read: true, write: true });
      const st = f.statSync();
      if (now - (st.mtime?.getTime() ?? now) < RECORD_KEEP_MS || !f.tryLockSync(true)) continue;
      if (Deno.statSync(path).ino === st.ino) Deno.removeSync(path); // still ours: a waiter re-checks
    } catch { /* gone meanwhile */ }
  }
}
