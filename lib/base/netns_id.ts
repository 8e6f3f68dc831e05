/**
 * Telling network namespaces apart without entering them: two namespace files (`/proc/PID/ns/net`, a bind
 * mount under /var/run/netns) name one namespace when the device and inode of their nsfs inode match, as
 * namespaces(7) says. A stat, no FFI: the daemon process scan (lib/node) and the veth pairing (lib/observe,
 * through lib/sys/netns.ts) use it alike; and the file a {@link NetnsRef} names, checked, for both.
 * @module
 */
import { FlanctlError } from "./errors.ts";

/** Which network namespace to operate in. */
export type NetnsRef =
  | { name: string } // /var/run/netns/NAME
  | { path: string } // any nsfs file, e.g. /proc/123/ns/net
  | { pid: number }; // /proc/PID/ns/net

/** Directory of named namespaces (`ip netns add NAME`). */
export const NETNS_RUN_DIR = "/var/run/netns";

/** The nsfs path of a namespace reference. Throws {@link FlanctlError} for a malformed name. */
export function netnsPath(ref: NetnsRef): string {
  if ("name" in ref) {
    if (!ref.name || ref.name.includes("/") || ref.name === "." || ref.name === "..") {
      throw new FlanctlError(`invalid network namespace name '${ref.name}' (a name from 'ip netns list')`, 2);
    }
    return `${NETNS_RUN_DIR}/${ref.name}`;
  }
  if ("path" in ref) return ref.path;
  if (!Number.isInteger(ref.pid) || ref.pid <= 0) {
    throw new FlanctlError(`invalid pid ${ref.pid} for a network namespace`, 2);
  }
  return `/proc/${ref.pid}/ns/net`;
}

/** Identity of a namespace file: `dev:ino` of the nsfs inode, or null if it cannot be stat'ed. */
export function netnsIdentity(path: string): string | null {
  try {
    const st = Deno.statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}
