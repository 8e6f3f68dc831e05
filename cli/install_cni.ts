/**
 * `flanctl install-cni`: installs the flanctl binary, the CNI plugin names and the conflist into the host's
 * CNI directories (the kube-flanctl.yml init container; install.sh uses it with --link). Atomic and
 * idempotent; foreign plugins of the same name are kept as backups and reported. See lib/install/cni.ts.
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/base/errors.ts";
import type { InstallStep } from "../lib/install/cni.ts";

interface Flags {
  cniBinDir: string;
  cniConfDir: string;
  cniConf?: string;
  source?: string;
  link?: string;
}

/** The running binary when it is a compiled flanctl (not `deno` running main.ts). */
function selfBinary(): string | null {
  const exe = Deno.execPath();
  return /(^|\/)deno$/.test(exe) ? null : exe;
}

/** One line of output per step of lib/install/cni.ts. */
export function stepLine(s: InstallStep): string {
  switch (s.action) {
    case "replaced-foreign":
      return `replaced ${s.path}: it was not flanctl's; the original is kept as ${s.backup}`;
    case "retired":
      return `retired ${s.path} (superseded; removed by a later install-cni once unused)`;
    case "kept-in-use":
      return `kept ${s.path}: a plugin started from it still runs; a later install-cni removes it`;
    case "removed":
      return `removed ${s.path} (superseded and unused)`;
    default:
      return s.backup
        ? `${s.action} ${s.path} (the previous one is kept as ${s.backup})`
        : `${s.action} ${s.path}`;
  }
}

/** Registers `install-cni`. */
export function register(program: Command): void {
  program
    .command("install-cni")
    .description(
      "install flanctl, the CNI plugin names and the conflist into the CNI dirs (atomic, idempotent)",
    )
    .option("--cni-bin-dir <dir>", "CNI plugin directory", "/opt/cni/bin")
    .option("--cni-conf-dir <dir>", "CNI network config directory", "/etc/cni/net.d")
    .option(
      "--cni-conf <file>",
      "conflist to install as 10-flannel.conflist (kube-flanctl.yml's cni-conf.json)",
    )
    .option(
      "--source <file>",
      "flanctl binary to copy (default: this binary when compiled; under install.sh's launcher its runtime)",
    )
    .option("--link <path>", "do not copy: make the plugin names symlinks to this installed flanctl")
    .action(async (f: Flags) => {
      const { installCni } = await import("../lib/install/cni.ts");
      if (f.source && f.link) throw new UsageError("--link: conflicts with --source; give only one of them");
      const source = f.link ? undefined : f.source ?? selfBinary();
      // install.sh's launcher (no compiled binary): the runtime it runs the CNI path with.
      const libdir = Deno.env.get("FLANCTL_LIBDIR");
      const runtime = !f.link && !source && libdir
        ? { deno: Deno.execPath(), cniJs: `${libdir}/cni.js` }
        : undefined;
      if (!f.link && !source && !runtime) {
        throw new UsageError(
          "--source: required here (this flanctl runs under deno from a checkout, not installed); " +
            "give --source FILE (a compiled flanctl) or --link PATH (a flanctl installed on this host)",
        );
      }
      const steps = await installCni({
        binDir: f.cniBinDir,
        confDir: f.cniConfDir,
        conf: f.cniConf ?? null,
        source: source ?? undefined,
        link: f.link,
        runtime,
      });
      for (const s of steps) console.log(stepLine(s));
    });
}
