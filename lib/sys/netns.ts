/**
 * Network namespace plumbing: resolving a {@link NetnsRef} to its nsfs file, opening it, and running
 * synchronous code with the current thread switched into it (libc `setns`), always switching back.
 * Deno runs JS and synchronous FFI calls on one thread, so a switch covers exactly the code in `fn`.
 * @module
 */
import { FlanctlError, NetnsNotFoundError } from "../base/errors.ts";
import { cstr, errno, libc } from "./ffi.ts";
import { stderrLine } from "../base/warn.ts";
import { ENOENT, O_CLOEXEC, O_NONBLOCK, O_RDONLY } from "./consts.ts";
import { NETNS_RUN_DIR, netnsPath, type NetnsRef } from "../base/netns_id.ts";

export { NETNS_RUN_DIR, netnsPath };
export type { NetnsRef };

const CLONE_NEWNET = 0x40000000;

/** How a reference is named in messages: its name, path or `pid:N`. */
export function netnsLabel(ref: NetnsRef): string {
  return "name" in ref ? ref.name : "path" in ref ? ref.path : `pid:${ref.pid}`;
}

/**
 * Opens the namespace file (O_RDONLY|O_CLOEXEC|O_NONBLOCK: a FIFO given as a namespace path must fail, at
 * setns with EINVAL, not block the open forever); throws {@link NetnsNotFoundError} when it is missing.
 */
export function openNetnsFd(ref: NetnsRef): number {
  const fd = libc().open(cstr(netnsPath(ref)), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const e = errno();
    if (e === ENOENT) throw new NetnsNotFoundError(netnsLabel(ref));
    throw new FlanctlError(`open network namespace '${netnsLabel(ref)}': errno ${e}`);
  }
  return fd;
}

/** Closes a file descriptor from {@link openNetnsFd}. */
export function closeFd(fd: number): void {
  if (fd >= 0) libc().close(fd);
}

function setnsOrThrow(fd: number, what: string): void {
  if (libc().setns(fd, CLONE_NEWNET) !== 0) {
    const e = errno();
    // EINVAL: the file is not a network namespace (e.g. a stale /var/run/netns entry).
    throw new FlanctlError(`setns into ${what}: ${e === 22 ? "not a network namespace" : `errno ${e}`}`);
  }
}

/**
 * Runs the synchronous `fn` with this thread in namespace `ns` and switches back before returning,
 * also when `fn` throws. `ns` null runs `fn` where we are. Keep `fn` synchronous: an `await` inside
 * would let other code run in the wrong namespace.
 */
export function inNetns<T>(ns: NetnsRef | null, fn: () => T): T {
  if (ns === null) return fn();
  const target = openNetnsFd(ns);
  let self = -1;
  try {
    self = libc().open(cstr("/proc/thread-self/ns/net"), O_RDONLY | O_CLOEXEC);
    if (self < 0) throw new FlanctlError(`open /proc/thread-self/ns/net: errno ${errno()}`);
    setnsOrThrow(target, `network namespace '${netnsLabel(ns)}'`);
    try {
      return fn();
    } finally {
      if (libc().setns(self, CLONE_NEWNET) !== 0) {
        // Continuing in the wrong namespace would silently change the wrong kernel state.
        stderrLine(`flanctl: FATAL: cannot switch back to the original network namespace (errno ${errno()})`);
        Deno.exit(70);
      }
    }
  } finally {
    closeFd(self);
    closeFd(target);
  }
}

/** Names of the namespaces in /var/run/netns, sorted (empty when the directory does not exist). */
export function listNamedNetns(): string[] {
  try {
    return [...Deno.readDirSync(NETNS_RUN_DIR)].map((e) => e.name).sort();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
}

/** Identity of a namespace file (`dev:ino`), or null: lib/base/netns_id.ts. */
export { netnsIdentity } from "../base/netns_id.ts";
