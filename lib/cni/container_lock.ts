/**
 * Per-container locking of the flannel plugin's saved delegate configs. Runtimes retry an ADD after a
 * timeout, so several ADDs (and a DEL) for one container can run at once; the read of the previous config,
 * the save, the delegate call and the restore-on-failure must happen as one step, or a failing duplicate
 * removes the config the winning ADD saved and the later DEL finds nothing to delete.
 *
 * The lock is an exclusive `flock` on `<dataDir>/.locks/<containerID>` (a sub-directory, so it never looks
 * like a saved config). The file is removed when the container's config goes (DEL, a failed first ADD);
 * a holder checks after locking that the path still names the inode it locked, and retries otherwise, so a
 * removal can never let two holders in.
 * @module
 */

/** The lock directory inside `dataDir`. */
export function lockDir(dataDir: string): string {
  return `${dataDir}/.locks`;
}

/** A held container lock. */
export interface ContainerLock {
  /** Removes the lock file (while still holding it); the next locker creates a fresh one. */
  discard(): void;
}

/** Runs `fn` holding the exclusive lock of `containerId` in `dataDir`. */
export async function withContainerLock<T>(
  dataDir: string,
  containerId: string,
  fn: (lock: ContainerLock) => Promise<T>,
): Promise<T> {
  const dir = lockDir(dataDir);
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = `${dir}/${containerId}`;
  for (;;) {
    // Synchronous open and flock (as host-local's store): a CNI process has nothing else to do while it
    // waits, and the async variants start Deno's blocking thread pool (a cost on every flannel call).
    const f = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o600 });
    try {
      f.lockSync(true);
      let same = false;
      try {
        same = Deno.statSync(path).ino === f.statSync().ino;
      } catch { /* removed while we waited */ }
      if (!same) continue; // the file we locked was discarded by the previous holder: lock the new one
      let discarded = false;
      return await fn({
        discard() {
          if (discarded) return;
          discarded = true;
          try {
            Deno.removeSync(path);
          } catch { /* already gone */ }
        },
      });
    } finally {
      f.close(); // releases the flock
    }
  }
}
