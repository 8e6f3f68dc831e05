/**
 * `flanctl install-cni`: what kube-flannel.yml's init containers do, in one idempotent step. It puts the
 * flanctl binary into the CNI bin dir as `flanctl` (or, with `link`, points at an installed one; or, where
 * `deno compile` could not run, a launcher plus the runtime the CNI path needs: the Deno binary and the
 * pre-bundled cni.js, in a directory of their own), makes every name of {@link CNI_PLUGIN_NAMES} a symlink
 * to it, and copies the conflist into the CNI conf dir.
 *
 * Every file appears atomically: written under a temporary name in the same directory, then renamed over
 * the final name, so kubelet (which may exec a plugin at any moment) sees the old file or the new one,
 * never a partial one and never none. A plugin of the same name that is not ours is not overwritten
 * silently: it is kept as `<name>.flanctl-backup` (hard-linked before the rename, so the name never goes
 * missing) and reported. Nothing that is already right is rewritten.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { readCappedBytes, readCappedText } from "../base/capped_read.ts";
import { CNI_PLUGIN_NAMES } from "../cni/names.ts";
import { CNI_DENO_RUN_FLAGS } from "../cni/launch.ts";
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
  runtime?: { deno: string; cniJs: string };
}

/** One thing install-cni did or found in place. */
export interface InstallStep {
  path: string;
  action: "installed" | "updated" | "unchanged" | "replaced-foreign";
  /** For replaced-foreign: where the foreign file was kept. */
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

/** Is the existing entry something flanctl put there (a symlink to any flanctl, or our backup-free copy)? */
function isOurs(p: string, binDir: string): boolean {
  try {
    const t = Deno.readLinkSync(p);
    return t.split("/").pop() === "flanctl" || t === `${binDir}/flanctl`;
  } catch {
    return false;
  }
}

/** Makes `name` in the bin dir a symlink to `target`, atomically, keeping a foreign file as a backup. */
async function linkPlugin(binDir: string, name: string, target: string): Promise<InstallStep> {
  const p = `${binDir}/${name}`;
  const st = lstat(p);
  if (st && isLinkTo(p, target)) return { path: p, action: "unchanged" };
  let backup: string | undefined;
  if (st && !isOurs(p, binDir)) {
    backup = `${p}${BACKUP_SUFFIX}`;
    // Keep the foreign plugin under the backup name first (a hard link: `p` never disappears). An older
    // backup is kept as is: it is the original, the current file may be a second foreign install.
    if (!lstat(backup)) {
      if (st.isSymlink) await Deno.symlink(await Deno.readLink(p), backup);
      else await Deno.link(p, backup);
    }
  }
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
 * Throws {@link InstallError} for a missing source or an unwritable directory.
 */
export async function installCni(o: InstallCniOptions): Promise<InstallStep[]> {
  const steps: InstallStep[] = [];
  if ([o.source, o.link, o.runtime].filter(Boolean).length !== 1) {
    throw new InstallError("give exactly one of a source binary, a link target and a runtime");
  }
  try {
    await Deno.mkdir(o.binDir, { recursive: true });
  } catch (e) {
    throw new InstallError(`--cni-bin-dir ${o.binDir}: cannot create it (${(e as Error).message})`);
  }
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
    steps.push(...await installRuntime(o.binDir, o.runtime));
  } else target = o.link!;
  for (const name of CNI_PLUGIN_NAMES) steps.push(await linkPlugin(o.binDir, name, target));
  if (o.conf && text) {
    await Deno.mkdir(o.confDir, { recursive: true });
    const final = `${o.confDir}/${o.confName ?? DEFAULT_CONFLIST_NAME}`;
    const had = lstat(final);
    if (had && await sameContent(o.conf, final)) steps.push({ path: final, action: "unchanged" });
    else {
      await atomically(final, 0o644, (tmp) => Deno.writeFile(tmp, text));
      steps.push({ path: final, action: had ? "updated" : "installed" });
    }
  }
  return steps;
}

async function digest(path: string): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(path)));
  return Array.from(h.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The environment the launcher of runtime directory `dir` runs cni.js in: its own DENO_DIR (where V8's
 * code cache of the bundle lives), no update check.
 */
function launcherEnv(dir: string): Record<string, string> {
  return { DENO_DIR: `${dir}/cache`, DENO_NO_UPDATE_CHECK: "1" };
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
      env: { ...launcherEnv(dir), FLANCTL_ARGV0: "loopback", CNI_COMMAND: "VERSION" },
      discardOutput: true,
      timeoutMs: 60_000,
    }).catch(() => {/* best effort, see above */});
  try {
    await warmCodeCache(`${dir}/cache`, new URL(`file://${dir}/cni.js`).href, run);
  } catch { /* best effort, see above */ }
}

/**
 * Launcher mode: the runtime goes into `<binDir>/.flanctl-runtime-<hash>/` (made under a temporary name and
 * renamed, so it appears complete), then `<binDir>/flanctl` becomes, atomically, a launcher running it.
 * An older runtime directory is left in place: a plugin call may still be starting from it.
 */
async function installRuntime(binDir: string, rt: { deno: string; cniJs: string }): Promise<InstallStep[]> {
  for (const f of [rt.deno, rt.cniJs]) {
    if (!lstat(f)?.isFile) {
      throw new InstallError(`${f}: not a file; the launcher needs the Deno binary and cni.js`);
    }
  }
  const steps: InstallStep[] = [];
  const dir = `${binDir}/.flanctl-runtime-${(await digest(rt.cniJs)).slice(0, 8)}${
    (await digest(rt.deno)).slice(0, 8)
  }`;
  if (lstat(dir)?.isDirectory) steps.push({ path: dir, action: "unchanged" });
  else {
    const tmp = tmpName(dir);
    try {
      await Deno.mkdir(tmp, { mode: 0o755 });
      await Deno.copyFile(rt.deno, `${tmp}/deno`);
      await Deno.chmod(`${tmp}/deno`, 0o755);
      await Deno.copyFile(rt.cniJs, `${tmp}/cni.js`);
      await Deno.chmod(`${tmp}/cni.js`, 0o644);
      await Deno.rename(tmp, dir);
    } catch (e) {
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      throw e;
    }
    steps.push({ path: dir, action: "installed" });
    await warmRuntimeCache(dir);
  }
  const launcher =
    "#!/bin/sh\n# flanctl CNI launcher, written by `flanctl install-cni` (no compiled binary here).\n" +
    `export ${Object.entries(launcherEnv(dir)).map(([k, v]) => `${k}="${v}"`).join(" ")}\n` +
    `FLANCTL_ARGV0="$0" exec "${dir}/deno" run ${CNI_DENO_RUN_FLAGS.join(" ")} "${dir}/cni.js"\n`;
  const final = `${binDir}/flanctl`;
  const had = lstat(final);
  let same = false;
  try {
    // Only a regular file is read, capped (a FIFO or device put there must not block install-cni).
    same = !!had?.isFile && readCappedText(final, 64 * 1024) === launcher;
  } catch { /* not readable as text: replace */ }
  if (same) steps.push({ path: final, action: "unchanged" });
  else {
    await atomically(final, 0o755, (tmp) => Deno.writeTextFile(tmp, launcher));
    steps.push({ path: final, action: had ? "updated" : "installed" });
  }
  return steps;
}
