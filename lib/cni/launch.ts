/**
 * How launchers run the pre-bundled entry points (cli/cni_main.ts as cni.js, cli/daemon_entry.ts as
 * daemon.js): the `deno run` flags that install.sh's launcher and `flanctl install-cni`'s launcher put
 * before a bundle's path, and the tests and benches use. The one list: change them here.
 *
 * `--v8-flags=--no-lazy` is there for V8's code cache. Deno keeps the code cache of a module in DENO_DIR
 * (v8_code_cache_v2), made right after the module is compiled, so it holds only what V8 compiled eagerly:
 * with lazy compilation that is the top level, and every function a CNI call runs was still parsed and
 * compiled on every call. With `--no-lazy` the whole bundle is compiled at once and the cache holds all of
 * it: a call deserializes it instead of compiling anything. V8 rejects a
 * cache made under other flags (it checks a hash of them), so every run of the bundle must use the same
 * flags: the cache is written by the first run after the bundle changes (install.sh and install-cni make
 * that run themselves, again until the cache is there, then checkpoint the cache database:
 * lib/install/code_cache.ts) and only read after that. Without a cache (DENO_DIR not writable) a call compiles
 * the whole bundle eagerly (measured: docs/performance.md, "The CNI bundle's V8 flags").
 *
 * `--jitless` (no Sparkplug, Maglev or TurboFan, no executable code pages): a CNI call runs only cached
 * bytecode once, so the compilers' set-up is pure cost. It is in the flag hash the code cache is checked
 * against, so install makes the cache under this same list. What each flag gained, and the ones that gained
 * nothing: docs/performance.md, "The CNI bundle's V8 flags".
 * @module
 */

/**
 * `deno run` flags of every pre-bundled entry point a launcher runs (cni.js, and install.sh's daemon.js
 * before its DAEMON_DENO_FLAGS and --v8-flags): no type check, config, lockfile or download — a bundle
 * resolves nothing — and no prompt.
 */
export const BUNDLE_DENO_RUN_FLAGS: readonly string[] = [
  "-A",
  "--no-check",
  "--no-config",
  "--no-lock",
  "--cached-only",
  "--quiet",
  "--no-prompt",
];

/** `deno run` flags of the CNI launchers, before the bundle path. */
export const CNI_DENO_RUN_FLAGS: readonly string[] = [
  ...BUNDLE_DENO_RUN_FLAGS,
  "--v8-flags=--no-lazy,--jitless",
];

/**
 * Set to 1 in install's warm-up runs of the CNI bundle (CNI VERSION until the code cache is written,
 * lib/install/code_cache.ts): the run then also starts a child process through lib/base/run.ts, as
 * portmap's firewall tools do, so the code cache of the Deno modules that loads (process, streams,
 * node:timers: ~1.1 MiB) is written at install too. Otherwise the node's first hostPort pod wrote it, into
 * the write-ahead log of the cache database every later plugin call opens and SQLite reads whole on open
 * (docs/performance.md, "The CNI code cache").
 */
export const CNI_WARM_ENV = "FLANCTL_CNI_WARM";

/**
 * The lock file in a runtime directory of `flanctl install-cni` (`<cni bin dir>/.flanctl-runtime-<hash>/`):
 * every CNI call started from that directory holds it shared while it runs ({@link holdRuntime}), and
 * install-cni removes a superseded directory only when it can take the lock exclusively (lib/install/cni.ts).
 */
export const RUNTIME_LOCK = "in-use.lock";

let held: Deno.FsFile | null = null;

/**
 * Takes a shared lock on {@link RUNTIME_LOCK} beside the running Deno, kept until the process exits, so
 * install-cni does not remove the runtime (its libraries are loaded later) while this call runs. Nothing
 * when the Deno is not an install-cni runtime's (no lock file there). Never blocks: a removal holding the
 * lock exclusively is the only other holder.
 */
export function holdRuntime(): void {
  const exe = Deno.execPath();
  try {
    held = Deno.openSync(`${exe.slice(0, exe.lastIndexOf("/"))}/${RUNTIME_LOCK}`, { read: true });
    held.tryLockSync(false);
  } catch { /* not an install-cni runtime, or not readable: nothing to hold */ }
}

/** `s` as one single-quoted POSIX sh word. */
export function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The POSIX sh lines a CNI launcher runs before starting Deno (builtins only, no process started): a DEL
 * of an attachment whose deleted record in `dir` is not empty (lib/cni/deleted.ts) is answered here, exit 0
 * and no output — what the plugin's DEL answers then — when the environment is one the full path accepts
 * (CNI_CONTAINERID, CNI_IFNAME and CNI_PATH set; the ID and name of letters, digits, `_`, `.`, `-`) and
 * CNI_NETNS is empty or names nothing (not even a dangling link), so the full DEL would not have touched a
 * namespace either — or the plugin is portmap, whose DEL never looks at the netns. Everything else falls
 * through to the exec that follows, as does a plugin name (the basename of `$0`) without a record. The
 * answer reads stdin to its end first, as the plugin does, so the runtime never writes into a closed pipe. The
 * plugin name must be one of ours; the launcher's `case` makes sure.
 */
export function earlyDelSh(dir: string): string {
  return [
    "flanctl_id=${CNI_CONTAINERID:-} flanctl_if=${CNI_IFNAME:-}",
    'case "$flanctl_id" in [!A-Za-z0-9]*|*[!A-Za-z0-9_.-]*) flanctl_id= ;; esac',
    'case "$flanctl_if" in .|..|*[!A-Za-z0-9_.-]*) flanctl_if= ;; esac',
    'if [ "${CNI_COMMAND:-}" = DEL ] && [ -n "$flanctl_id" ] && [ -n "$flanctl_if" ] && [ -n "${CNI_PATH:-}" ] &&',
    '  { [ -z "${CNI_NETNS:-}" ] || [ "${0##*/}" = portmap ] || { [ ! -e "$CNI_NETNS" ] && [ ! -L "$CNI_NETNS" ]; }; } &&',
    `  [ -s ${shQuote(dir)}/"\${0##*/}:$flanctl_if:$flanctl_id" ]; then`,
    // The config is read to its end (builtins) as the plugin would: a runtime writing it after the launcher
    // exited would get EPIPE (Go's os/exec ignores it; others need not).
    "  while read -r flanctl_l; do :; done; exit 0",
    "fi",
  ].join("\n");
}
