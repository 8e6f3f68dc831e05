/**
 * Telling network namespaces apart without entering them: two namespace files (`/proc/PID/ns/net`, a bind
 * mount under /var/run/netns) name one namespace when the device and inode of their nsfs inode match, as
 * namespaces(7) says. A stat, no FFI: the daemon process scan (lib/node) and the veth pairing (lib/observe,
 * through lib/sys/netns.ts) use it alike.
 * @module
 */

/** Identity of a namespace file: `dev:ino` of the nsfs inode, or null if it cannot be stat'ed. */
export function netnsIdentity(path: string): string | null {
  try {
    const st = Deno.statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}
