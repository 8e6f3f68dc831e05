/**
 * The daemon as install.sh installs it, for tests and benches: cli/daemon_entry.ts bundled into daemon.js
 * the way install.sh bundles it, and the `deno run` command its launcher runs that with — the DAEMON_*
 * settings read from install.sh itself, so neither drifts from the installer.
 * @module
 */
import { ROOT } from "./netns.ts";
import { BUNDLE_DENO_RUN_FLAGS } from "../lib/cni/launch.ts";

/** install.sh's `NAME="…"` line in the checkout at `root` (the launcher is generated from these). */
export function installSetting(name: string, root = ROOT): string {
  const m = new RegExp(`^${name}="([^"]*)"$`, "m").exec(Deno.readTextFileSync(`${root}install.sh`));
  if (!m) throw new Error(`install.sh has no ${name}="…" line`);
  return m[1];
}

/** How install.sh's launcher runs the daemon: DAEMON_DENO_FLAGS, DAEMON_V8_FLAGS and DAEMON_ENV. */
export interface LauncherSettings {
  flags: string[];
  v8: string;
  env: Record<string, string>;
}

/** The {@link LauncherSettings} of the checkout at `root` (env with DENO_NO_UPDATE_CHECK=1 as the launcher). */
export function launcherSettings(root = ROOT): LauncherSettings {
  const env: Record<string, string> = { DENO_NO_UPDATE_CHECK: "1" };
  for (const kv of installSetting("DAEMON_ENV", root).split(/\s+/).filter(Boolean)) {
    const i = kv.indexOf("=");
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return {
    flags: installSetting("DAEMON_DENO_FLAGS", root).split(/\s+/).filter(Boolean),
    v8: installSetting("DAEMON_V8_FLAGS", root),
    env,
  };
}

/** Bundles `root`'s cli/daemon_entry.ts into `out` with install.sh's `deno bundle` flags; throws with its stderr. */
export async function bundleDaemon(out: string, root = ROOT): Promise<void> {
  const b = await new Deno.Command(Deno.execPath(), {
    args: [
      ...["bundle", "--quiet", "--platform", "deno", "--minify", "--keep-names"],
      ...["-o", out, `${root}cli/daemon_entry.ts`],
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!b.success) {
    throw new Error(`deno bundle of ${root}cli/daemon_entry.ts: ${new TextDecoder().decode(b.stderr)}`);
  }
}

/**
 * install.sh's daemon in `dir`: daemon.js bundled there and `dir`/src a link to this checkout (the
 * launcher's FLANCTL_LIBDIR: udp data-path workers load from its src/), with the launcher's command for it
 * and this checkout's DAEMON_V8_FLAGS.
 */
export async function installDaemonInto(dir: string): Promise<{ js: string; cmd: string[]; v8: string }> {
  const js = `${dir}/daemon.js`;
  await bundleDaemon(js);
  await Deno.symlink(ROOT.replace(/\/$/, ""), `${dir}/src`);
  return { js, cmd: installedDaemonCmd(js), v8: installSetting("DAEMON_V8_FLAGS") };
}

/**
 * The launcher's command for the bundle `js`: `deno run` with its fixed flags, then `flags` and `v8` (default:
 * this checkout's DAEMON_DENO_FLAGS and DAEMON_V8_FLAGS; an empty `v8` passes no --v8-flags).
 */
export function installedDaemonCmd(js: string, o: { flags?: string[]; v8?: string } = {}): string[] {
  const l = o.flags && o.v8 !== undefined ? null : launcherSettings();
  const v8 = o.v8 ?? l!.v8;
  return [
    Deno.execPath(),
    "run",
    ...BUNDLE_DENO_RUN_FLAGS,
    ...(o.flags ?? l!.flags),
    ...(v8 ? [`--v8-flags=${v8}`] : []),
    js,
  ];
}
