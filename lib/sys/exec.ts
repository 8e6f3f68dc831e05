/**
 * Replacing this process with another program (libc `execve`): the same pid, so a supervisor (systemd's
 * MainPID and sd_notify, a container's PID 1, a lab's recorded pid) keeps following it. The daemon uses it
 * to run itself again with other V8 flags (lib/daemon/run.ts). Deno has no exec of its own: `Deno.Command`
 * always makes a child. Descriptors opened by Deno are close-on-exec. Callers pass strings: no pointer
 * leaves lib/sys.
 * @module
 */
import { cstr, errno, libc } from "./ffi.ts";
import { syscallError } from "./errors.ts";

/** A NULL-terminated `char *[]` of `items`; `keep` holds the strings alive until the call. */
function cArray(items: string[], keep: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const ptrs = new BigUint64Array(items.length + 1);
  items.forEach((s, i) => {
    const b = cstr(s);
    keep.push(b);
    ptrs[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
  });
  return new Uint8Array(ptrs.buffer);
}

/**
 * Replaces this process with `path` run with `argv` (argv[0] included) and exactly `env`. Returns only on
 * failure, by throwing NetlinkError with the errno (ENOENT, EACCES, E2BIG, …); nothing of this process is
 * changed then.
 */
export function execProcess(path: string, argv: string[], env: Record<string, string>): never {
  const keep: Uint8Array[] = [];
  const file = cstr(path);
  const av = cArray(argv, keep);
  const ev = cArray(Object.entries(env).map(([k, v]) => `${k}=${v}`), keep);
  libc().execve(file, av, ev);
  const e = errno();
  keep.length = 0;
  throw syscallError(`execve ${path}`, e);
}
