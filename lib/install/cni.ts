/**
 * `flanctl install-cni`: what kube-flannel.yml's init containers do, in one idempotent step. It puts the
 * flanctl binary into the CNI bin dir as `flanctl` (or, with `link`, points at an installed one; or, where
 * `deno compile` could not run, a launcher plus the runtime the CNI path needs: the Deno binary, the
 * pre-bundled cni.js and the shared libraries the plugins dlopen (libnl-3, libnl-route-3; libnftables and
 * its libraries when present), in a directory of their own), makes every name of {@link CNI_PLUGIN_NAMES} a
 * symlink to it, and copies the conflist into the CNI conf dir. In launcher mode the host then needs only the
 * kernel, glibc, libgcc_s and /bin/sh; a compiled binary is copied alone, so the host needs libnl too
 * (docs/deploy.md, "What a node must have").
 *
 * Every file appears atomically: written under a temporary name in the same directory, then renamed over
 * the final name, so kubelet (which may exec a plugin at any moment) sees the old file or the new one,
 * never a partial one and never none. Runs are serialized by a lock file in the bin dir (DaemonSet pods of
 * a rollout, install.sh beside them). A file that is not flanctl's (told by its content, never by the name
 * of a link's target) is never overwritten silently: it is kept as `<name>.flanctl-backup`, then
 * `.flanctl-backup.1`, `.2`, … (hard-linked before the rename, so the name never goes missing), and
 * reported; a conflist it replaces is kept the same way. Nothing that is already right is rewritten.
 *
 * Upgrades in launcher mode: a new runtime directory is made beside the old one and the launcher switched
 * to it in one rename; every CNI call holds a shared lock on its runtime's `in-use.lock` while it runs
 * (lib/cni/launch.ts), and a later run removes an old directory once it was retired for a grace period and
 * nothing holds that lock.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { readCappedBytes, readCappedText } from "../base/capped_read.ts";
import { CNI_PLUGIN_NAMES } from "../cni/names.ts";
import { CNI_DENO_RUN_FLAGS, CNI_WARM_ENV, earlyDelSh, RUNTIME_LOCK } from "../cni/launch.ts";
import { DELETED_DIR_ENV } from "../cni/deleted.ts";
import { earlyAddSh } from "../cni/early_add.ts";
import { CNI_LIBRARIES, RUNTIME_LIB_DIR } from "../os/mod.ts";
import { runProcess } from "../base/run.ts";
import { warmCodeCache } from "./code_cache.ts";

/** Suffix of the copy kept of a foreign plugin that was replaced. */
export const BACKUP_SUFFIX = ".flanctl-backup";
/** Default conflist name, as kube-flannel.yml's install-cni container writes it. */
export const DEFAULT_CONFLIST_NAME = "10-flannel.conflist";

/** What to install. */
export interface InstallCniOptions {
  /** CNI bin dir (default /opt/cni/bin). */
  binDir: string;
  /** CNI conf dir (default /etc/cni/net.d); used with `conf`. */
  confDir: string;
  /** The conflist to copy (kube-flannel.yml: /etc/kube-flannel/cni-conf.json), or null for none. */
  conf: string | null;
  /** Conflist file name in `confDir`. */
  confName?: string;
  /** The flanctl binary to copy into `binDir` as `flanctl` (a compiled binary). */
  source?: string;
  /** Instead of copying: make the plugin names symlinks to this installed flanctl (install.sh). */
  link?: string;
  /**
   * No compiled binary (install.sh's launcher mode): install this Deno binary and the pre-bundled CNI entry
   * point (install.sh's cni.js) and, as `flanctl`, a launcher that runs them.
   */
  runtime?: RuntimeSource;
  /** Launcher mode: how long a superseded runtime directory is kept at least (default 30 s). */
  retiredGraceMs?: number;
}

/** What launcher mode installs. */
export interface RuntimeSource {
  deno: string;
  cniJs: string;
  /** Where to look for the libraries of {@link CNI_LIBRARIES} (default: the system's library dirs). */
  libDirs?: string[];
}

/** One thing install-cni did or found in place. */
export interface InstallStep {
  path: string;
  action:
    | "installed"
    | "updated"
    | "unchanged"
    | "replaced-foreign"
    | "retired"
    | "removed"
    | "kept-in-use";
  /** For replaced-foreign (and an updated conflist): where the file it replaced was kept. */
  backup?: string;
}

/** Installing failed; names the path and the fix. */
export class InstallError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

function lstat(p: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(p);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

function tmpName(final: string): string {
  const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36);
  const dir = final.slice(0, final.lastIndexOf("/") + 1);
  return `${dir}.${final.slice(dir.length)}.flanctl-tmp-${Deno.pid}-${rnd}`;
}

async function sameContent(a: string, b: string): Promise<boolean> {
  const [sa, sb] = [lstat(a), lstat(b)];
  if (!sa || !sb || !sa.isFile || !sb.isFile || sa.size !== sb.size) return false;
  const [da, db] = await Promise.all([Deno.readFile(a), Deno.readFile(b)]);
  return da.every((x, i) => x === db[i]);
}

/** Writes `final` atomically from `fill(tmp)`: temp name in the same directory, mode, fsync, rename. */
async function atomically(final: string, mode: number, fill: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = tmpName(final);
  try {
    await fill(tmp);
    await Deno.chmod(tmp, mode);
    const f = await Deno.open(tmp, { read: true });
    try {
      await f.sync();
    } finally {
      f.close();
    }
    await Deno.rename(tmp, final);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}

/** Is `p` (a plugin name in the bin dir) already ours: a symlink to `target`? */
function isLinkTo(p: string, target: string): boolean {
  try {
    return Deno.readLinkSync(p) === target;
  } catch {
    return false;
  }
}

/** First lines of the launchers install.sh and install-cni write: how flanctl's own files are told. */
const LAUNCHER_MARKERS = ["# flanctl launcher", "# flanctl CNI launcher"];

/** Does regular file `f` carry a flanctl launcher's marker in its first 4 KiB? */
function hasLauncherMarker(f: string): boolean {
  try {
    using h = Deno.openSync(f, { read: true });
    if (!h.statSync().isFile) return false;
    const buf = new Uint8Array(4096);
    const n = h.readSync(buf) ?? 0;
    const head = new TextDecoder().decode(buf.subarray(0, n));
    return LAUNCHER_MARKERS.some((m) => head.includes(`\n${m}`));
  } catch {
    return false;
  }
}

/**
 * Is the existing plugin entry `p` flanctl's own? Told by content, never by a name: a symlink (or file) whose
 * file is a flanctl launcher, or byte for byte the flanctl this run installs or finds installed in the bin
 * dir. A foreign binary that happens to be called `flanctl` is not ours.
 */
async function isOurs(p: string, binDir: string, target: string): Promise<boolean> {
  let file = p;
  try {
    const t = Deno.readLinkSync(p);
    file = t.startsWith("/") ? t : `${binDir}/${t}`;
  } catch { /* not a symlink: its own content */ }
  if (hasLauncherMarker(file)) return true;
  for (const ours of new Set([target, `${binDir}/flanctl`])) {
    if (file !== ours && await sameContent(file, ours)) return true;
  }
  return false;
}

/** Is `a` the same entry as `b`: symlinks with one target, or regular files with the same bytes? */
function sameEntry(a: string, b: string): Promise<boolean> {
  const [sa, sb] = [lstat(a), lstat(b)];
  if (!sa || !sb) return Promise.resolve(false);
  if (sa.isSymlink || sb.isSymlink) {
    return Promise.resolve(sa.isSymlink && sb.isSymlink && Deno.readLinkSync(a) === Deno.readLinkSync(b));
  }
  return sameContent(a, b);
}

/**
 * Keeps foreign entry `p` under the first free backup name (`<p>.flanctl-backup`, then `.1`, `.2`, …),
 * unless one of the backups already holds the same entry. A hard link (or a copy of the symlink): `p`
 * itself never disappears. Returns the backup's path.
 */
async function keepBackup(p: string, st: Deno.FileInfo): Promise<string> {
  for (let n = 0;; n++) {
    const b = n === 0 ? `${p}${BACKUP_SUFFIX}` : `${p}${BACKUP_SUFFIX}.${n}`;
    if (lstat(b)) {
      if (await sameEntry(p, b)) return b;
      continue;
    }
    if (st.isSymlink) await Deno.symlink(await Deno.readLink(p), b);
    else await Deno.link(p, b);
    return b;
  }
}

/** Makes `name` in the bin dir a symlink to `target`, atomically, keeping a foreign file as a backup. */
async function linkPlugin(binDir: string, name: string, target: string): Promise<InstallStep> {
  const p = `${binDir}/${name}`;
  const st = lstat(p);
  if (st && isLinkTo(p, target)) return { path: p, action: "unchanged" };
  const backup = st && !await isOurs(p, binDir, target) ? await keepBackup(p, st) : undefined;
  const tmp = tmpName(p);
  await Deno.symlink(target, tmp);
  try {
    await Deno.rename(tmp, p);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
  if (backup) return { path: p, action: "replaced-foreign", backup };
  return { path: p, action: st ? "updated" : "installed" };
}

/** Reads and checks `--cni-conf` (capped, regular file, a CNI network config). */
function readConf(path: string): Uint8Array {
  let text: Uint8Array;
  try {
    text = readCappedBytes(path);
  } catch (e) {
    throw new InstallError(`--cni-conf ${path}: cannot read it (${(e as Error).message})`);
  }
  try {
    const doc = JSON.parse(new TextDecoder().decode(text));
    if (typeof doc?.name !== "string" || !(Array.isArray(doc.plugins) || typeof doc.type === "string")) {
      throw new Error("no name, or neither plugins nor type");
    }
  } catch (e) {
    throw new InstallError(
      `--cni-conf ${path}: not a CNI network config (${
        (e as Error).message
      }); give the cni-conf.json of the ConfigMap`,
    );
  }
  return text;
}

/**
 * Installs the binary (or link target), the plugin names and the conflist. Returns what was done, in order.
 * Throws {@link InstallError} (one line, naming the path) for a missing source, an unwritable directory or
 * any other failure; concurrent runs on one bin dir wait for each other.
 */
export async function installCni(o: InstallCniOptions): Promise<InstallStep[]> {
  if ([o.source, o.link, o.runtime].filter(Boolean).length !== 1) {
    throw new InstallError("give exactly one of a source binary, a link target and a runtime");
  }
  try {
    await Deno.mkdir(o.binDir, { recursive: true });
  } catch (e) {
    throw new InstallError(`--cni-bin-dir ${o.binDir}: cannot create it (${oneLine(e)})`);
  }
  let lock: Deno.FsFile;
  try {
    lock = await Deno.open(`${o.binDir}/${INSTALL_LOCK}`, { read: true, write: true, create: true });
  } catch (e) {
    throw new InstallError(`--cni-bin-dir ${o.binDir}: cannot write in it (${oneLine(e)})`);
  }
  try {
    await lock.lock(true);
    return await installLocked(o);
  } catch (e) {
    if (e instanceof FlanctlError) throw e;
    throw new InstallError(`${oneLine(e)}; nothing half-made is left: run install-cni again`);
  } finally {
    lock.close();
  }
}

/** Lock file in the bin dir that serializes install-cni runs. */
export const INSTALL_LOCK = ".flanctl-install.lock";

/** An error's message on one line (Deno's messages name the paths). */
function oneLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, "; ");
}

/** Removes temporary entries a killed run left behind (under the lock no other run has any). */
async function removeStaleTemps(dir: string): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    if (e.name.includes(".flanctl-tmp-")) {
      await Deno.remove(`${dir}/${e.name}`, { recursive: true }).catch(() => {});
    }
  }
}

async function installLocked(o: InstallCniOptions): Promise<InstallStep[]> {
  const steps: InstallStep[] = [];
  await removeStaleTemps(o.binDir);
  // The conflist first (a FIFO, device or bad JSON is refused before anything is installed).
  const text = o.conf ? readConf(o.conf) : null;
  let target: string;
  if (o.source) {
    const src = lstat(o.source);
    if (!src?.isFile) throw new InstallError(`${o.source}: not a file; point --source at the flanctl binary`);
    target = `${o.binDir}/flanctl`;
    const before = lstat(target);
    if (await sameContent(o.source, target) && ((before!.mode ?? 0) & 0o777) === 0o755) {
      steps.push({ path: target, action: "unchanged" });
    } else {
      await atomically(target, 0o755, (tmp) => Deno.copyFile(o.source!, tmp));
      steps.push({ path: target, action: before ? "updated" : "installed" });
    }
  } else if (o.runtime) {
    target = `${o.binDir}/flanctl`;
    steps.push(...await installRuntime(o.binDir, o.runtime, o.retiredGraceMs ?? 30_000));
  } else target = o.link!;
  for (const name of CNI_PLUGIN_NAMES) steps.push(await linkPlugin(o.binDir, name, target));
  if (o.conf && text) {
    await Deno.mkdir(o.confDir, { recursive: true });
    await removeStaleTemps(o.confDir);
    const final = `${o.confDir}/${o.confName ?? DEFAULT_CONFLIST_NAME}`;
    const had = lstat(final);
    if (had && await sameContent(o.conf, final)) steps.push({ path: final, action: "unchanged" });
    else {
      // The conflist it replaces (an operator's, another network's, or an older ConfigMap's) is kept.
      const backup = had ? await keepBackup(final, had) : undefined;
      await atomically(final, 0o644, (tmp) => Deno.writeFile(tmp, text));
      steps.push({ path: final, action: had ? "updated" : "installed", ...(backup ? { backup } : {}) });
    }
  }
  return steps;
}

/** sha256 of the files, in order, each with its length (16 hex digits name a runtime directory). */
async function digest(paths: string[]): Promise<string> {
  const parts: Uint8Array[] = [];
  for (const p of paths) {
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(p)));
    parts.push(d);
  }
  const all = new Uint8Array(parts.length * 32);
  parts.forEach((d, i) => all.set(d, i * 32));
  const h = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return Array.from(h.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The system's library directories, for this machine's architecture (Debian's multiarch first). */
export function systemLibDirs(): string[] {
  const triplet = Deno.build.arch === "aarch64" ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  return [`/usr/lib/${triplet}`, `/lib/${triplet}`, "/usr/lib64", "/lib64", "/usr/lib", "/lib"];
}

/**
 * The shared libraries to lay down beside the runtime, soname -> file found in `dirs`: libnl-3 and
 * libnl-route-3 (required: the plugins cannot run without them), and libnftables with every library it
 * needs when all are there (portmap's nftables backend; without it portmap needs iptables on the host).
 */
export function findCniLibraries(dirs: string[]): Map<string, string> {
  const find = (soname: string) => {
    for (const d of dirs) {
      try {
        if (Deno.statSync(`${d}/${soname}`).isFile) return `${d}/${soname}`;
      } catch { /* next */ }
    }
    return null;
  };
  const out = new Map<string, string>();
  for (const lib of CNI_LIBRARIES) {
    const group = [...lib.needs, lib.soname].map((n) => [n, find(n)] as const);
    const missing = group.filter(([, f]) => !f).map(([n]) => n);
    if (missing.length && lib.soname.startsWith("libnl")) {
      throw new InstallError(
        `${missing.join(", ")}: not found in ${dirs.join(", ")}; install-cni copies it next to the runtime ` +
          `(install the Debian package ${lib.pkg} where install-cni runs: the image has it)`,
      );
    }
    if (!missing.length) { for (const [n, f] of group) out.set(n, f!); }
  }
  return out;
}

/**
 * The environment the launcher of runtime directory `dir` runs cni.js in: its own DENO_DIR (where V8's
 * code cache of the bundle lives), no update check, and the directory of its deleted records
 * (lib/cni/deleted.ts: `<dir>/deleted`, a runtime directory's own, emptied whenever a launcher switches to
 * it).
 */
function launcherEnv(dir: string): Record<string, string> {
  return { DENO_DIR: `${dir}/cache`, DENO_NO_UPDATE_CHECK: "1", [DELETED_DIR_ENV]: deletedDir(dir) };
}

/** The deleted records of runtime directory `dir` (lib/cni/deleted.ts). */
function deletedDir(dir: string): string {
  return `${dir}/deleted`;
}

/**
 * Runs the new runtime's cni.js (CNI VERSION), with the launcher's flags and DENO_DIR, until V8's code cache
 * of the bundle is written (lib/cni/launch.ts), so no pod's ADD pays for compiling it, then checkpoints it
 * out of SQLite's write-ahead log, so no call reads the whole log (lib/install/code_cache.ts). Best effort:
 * without it the first plugin call writes the cache.
 */
async function warmRuntimeCache(dir: string): Promise<void> {
  const run = () =>
    runProcess([`${dir}/deno`, "run", ...CNI_DENO_RUN_FLAGS, `${dir}/cni.js`], {
      env: { ...launcherEnv(dir), FLANCTL_ARGV0: "loopback", CNI_COMMAND: "VERSION", [CNI_WARM_ENV]: "1" },
      discardOutput: true,
      timeoutMs: 60_000,
    }).catch(() => {/* best effort, see above */});
  try {
    await warmCodeCache(`${dir}/cache`, new URL(`file://${dir}/cni.js`).href, run);
  } catch { /* best effort, see above */ }
}

/** The marker a superseded runtime directory gets; its mtime is when the launcher stopped pointing at it. */
const RETIRED = "retired";
const RUNTIME_PREFIX = ".flanctl-runtime-";

/**
 * Launcher mode: the runtime (Deno, cni.js, the libraries of {@link findCniLibraries} in
 * {@link RUNTIME_LIB_DIR}, an empty {@link RUNTIME_LOCK}) goes into `<binDir>/.flanctl-runtime-<hash>/`
 * (made under a temporary name and renamed, so it appears complete; a racing run that made it first wins),
 * then `<binDir>/flanctl` becomes, atomically, a launcher running it. Older runtime directories are retired
 * and removed once unused ({@link removeUnused}).
 */
async function installRuntime(binDir: string, rt: RuntimeSource, graceMs: number): Promise<InstallStep[]> {
  for (const f of [rt.deno, rt.cniJs]) {
    if (!lstat(f)?.isFile) {
      throw new InstallError(`${f}: not a file; the launcher needs the Deno binary and cni.js`);
    }
  }
  const libs = findCniLibraries(rt.libDirs ?? systemLibDirs());
  const steps: InstallStep[] = [];
  const dir = `${binDir}/${RUNTIME_PREFIX}${await digest([rt.deno, rt.cniJs, ...libs.values()])}`;
  if (lstat(dir)?.isDirectory) {
    steps.push({ path: dir, action: "unchanged" });
    await Deno.remove(`${dir}/${RETIRED}`).catch(() => {}); // current again (a downgrade back to it)
  } else {
    const tmp = tmpName(dir);
    try {
      await Deno.mkdir(`${tmp}/${RUNTIME_LIB_DIR}`, { recursive: true, mode: 0o755 });
      await Deno.chmod(tmp, 0o755);
      await Deno.copyFile(rt.deno, `${tmp}/deno`);
      await Deno.chmod(`${tmp}/deno`, 0o755);
      await Deno.copyFile(rt.cniJs, `${tmp}/cni.js`);
      await Deno.chmod(`${tmp}/cni.js`, 0o644);
      for (const [soname, file] of libs) {
        await Deno.copyFile(file, `${tmp}/${RUNTIME_LIB_DIR}/${soname}`);
        await Deno.chmod(`${tmp}/${RUNTIME_LIB_DIR}/${soname}`, 0o644);
      }
      await Deno.writeFile(`${tmp}/${RUNTIME_LOCK}`, new Uint8Array(), { mode: 0o644 });
      await Deno.rename(tmp, dir);
      steps.push({ path: dir, action: "installed" });
    } catch (e) {
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      // Another run (not under our lock: an older install-cni) made the same directory first: same bytes.
      if (!lstat(dir)?.isDirectory) throw e;
      steps.push({ path: dir, action: "unchanged" });
    }
    await warmRuntimeCache(dir);
  }
  const exec = `FLANCTL_ARGV0="$0" exec "${dir}/deno" run ${CNI_DENO_RUN_FLAGS.join(" ")} "${dir}/cni.js"`;
  const launcher =
    "#!/bin/sh\n# flanctl CNI launcher, written by `flanctl install-cni` (no compiled binary here).\n" +
    `export ${Object.entries(launcherEnv(dir)).map(([k, v]) => `${k}="${v}"`).join(" ")}\n` +
    // A repeated DEL (lib/cni/deleted.ts) and portmap's ADD without port mappings (lib/cni/early_add.ts)
    // are answered here, without starting Deno.
    `case "\${0##*/}" in\n  ${CNI_PLUGIN_NAMES.join("|")})\n${earlyDelSh(deletedDir(dir))}\n` +
    `${earlyAddSh(deletedDir(dir), exec)}\n;;\nesac\n${exec}\n`;
  const final = `${binDir}/flanctl`;
  const had = lstat(final);
  let same = false;
  try {
    // Only a regular file is read, capped (a FIFO or device put there must not block install-cni).
    same = !!had?.isFile && readCappedText(final, 64 * 1024) === launcher;
  } catch { /* not readable as text: replace */ }
  if (same) steps.push({ path: final, action: "unchanged" });
  else {
    // Records from before a switch away and back (a downgrade to a version that keeps none, then this one
    // again) could name attachments that version added since: gone before the launcher reads them.
    await Deno.remove(deletedDir(dir), { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
    await atomically(final, 0o755, (tmp) => Deno.writeTextFile(tmp, launcher));
    steps.push({ path: final, action: had ? "updated" : "installed" });
  }
  // Made here, not by the first full call: the launcher answers portmap's ADD only into a directory that
  // exists (lib/cni/early_add.ts), so the node's first pod needs no Deno start for it either.
  await Deno.mkdir(deletedDir(dir), { recursive: true, mode: 0o755 });
  steps.push(...await removeUnused(binDir, dir, graceMs));
  return steps;
}

/**
 * The runtime directories other than `current`: each is marked retired (the launcher no longer names it)
 * and, once retired for `graceMs` (a call that read the old launcher just before the switch has taken its
 * lock by then) and with nobody holding its {@link RUNTIME_LOCK} (an exclusive try-lock succeeds: no plugin
 * started from it still runs), renamed away and removed. One in use is kept for a later run.
 */
async function removeUnused(binDir: string, current: string, graceMs: number): Promise<InstallStep[]> {
  const steps: InstallStep[] = [];
  for await (const e of Deno.readDir(binDir)) {
    const dir = `${binDir}/${e.name}`;
    if (!e.isDirectory || !e.name.startsWith(RUNTIME_PREFIX) || dir === current) continue;
    const marker = lstat(`${dir}/${RETIRED}`);
    if (!marker) {
      await Deno.writeFile(`${dir}/${RETIRED}`, new Uint8Array());
      steps.push({ path: dir, action: "retired" });
      if (graceMs > 0) continue;
    } else if (Date.now() - (marker.mtime?.getTime() ?? 0) < graceMs) continue;
    // Runtimes of older install-cni versions have no lock file: their calls took no lock; the grace covers them.
    const lock = await Deno.open(`${dir}/${RUNTIME_LOCK}`, { read: true, write: true, create: true });
    try {
      if (!await lock.tryLock(true)) {
        steps.push({ path: dir, action: "kept-in-use" });
        continue;
      }
      const gone = tmpName(dir);
      await Deno.rename(dir, gone);
      await Deno.remove(gone, { recursive: true });
      steps.push({ path: dir, action: "removed" });
    } finally {
      lock.close();
    }
  }
  return steps;
}
