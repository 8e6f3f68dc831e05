/**
 * `flanctl doctor`: read-only node checks with Nagios exit codes. The heavy modules load inside the action.
 * @module
 */
import type { Command } from "commander";
import type { StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions } from "./store_flags.ts";
import { exitWith } from "./exit.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
import { DEFAULT_PATHS } from "../lib/observe/paths.ts";
import { writeOut } from "./stdout.ts";

/** Flags of `flanctl doctor` as commander yields them. */
interface DoctorFlags extends StoreOptions {
  netns?: string;
  subnetFile: string;
  cniConfDir: string;
  cniBinDir: string;
  cniDataDir: string;
  flannelDataDir: string;
  cniResultsDir: string;
  podNetnsPrefix: string;
  criSocket?: string;
  readyzUrl?: string;
  skip?: string;
  output: string;
  probe?: boolean;
  problems?: boolean;
  bundle?: string;
  logFile?: string;
}

/** Registers `flanctl doctor`. */
export function register(program: Command): void {
  const cmd = program.command("doctor")
    .description(
      "check this node (or --netns) for what breaks pod networking; exit 0 ok, 1 warning, 2 critical, 3 unknown",
    )
    .option("--netns <name>", "check the node living in this network namespace (/var/run/netns/NAME)")
    .option("--subnet-file <path>", "subnet.env written by the daemon", DEFAULT_PATHS.subnetFile)
    .option("--cni-conf-dir <dir>", "CNI config dir", DEFAULT_PATHS.cniConfDir)
    .option("--cni-bin-dir <dir>", "CNI plugin dir", DEFAULT_PATHS.cniBinDir)
    .option("--cni-data-dir <dir>", "host-local data dir", DEFAULT_PATHS.hostLocalDir)
    .option("--flannel-data-dir <dir>", "flannel CNI plugin data dir", DEFAULT_PATHS.flannelDataDir)
    .option("--cni-results-dir <dir>", "libcni result cache dir", DEFAULT_PATHS.cniResultsDir)
    .option(
      "--pod-netns-prefix <prefix>",
      "name prefix of runtime pod namespaces under /var/run/netns",
      "cni-",
    )
    .option(
      "--cri-socket <path>",
      "the runtime's CRI socket, asked for its sandboxes to find what failed ones leaked (default: " +
        "containerd's or CRI-O's when present; 'none' to not ask)",
    )
    .option(
      "--readyz-url <url>",
      "daemon readiness URL to check, e.g. http://127.0.0.1:PORT/readyz (the daemon's --healthz-port)",
    )
    .option("--skip <ids>", "comma-separated check ids to skip")
    .option("-o, --output <format>", "table or json", "table")
    .option("--probe", "also ping every peer's public IP and VTEP address (active)")
    .option("--problems", "show only what is not ok (the summary still counts everything)")
    .option(
      "--bundle <file.tar.gz>",
      "also write a bug-report bundle (doctor, status, inspect, rules, subnet.env, CNI configs, log tail, " +
        "versions; secrets redacted)",
    )
    .option("--log-file <path>", "daemon log to include in --bundle (default: journalctl -u flanctl)");
  addSharedStoreOptions(cmd);
  cmd.action(async (flags: DoctorFlags, c: Command) => {
    const { runDoctor, renderJson, renderTable, parseCheckIds } = await import("../lib/doctor/mod.ts");
    const { doctorStore } = await import("../lib/observe/store_select.ts");
    parseOutput(flags.output);
    // Old ids (peer-route-missing, …) stay valid aliases of the current ones.
    const skip = parseCheckIds("--skip", flags.skip ?? "");
    const src = c.getOptionValueSource("storeDir");
    const { open, explicit } = doctorStore(flags, src === "cli" || src === "env");
    const doctorOpts = {
      netns: flags.netns ?? null,
      subnetFile: flags.subnetFile,
      cniConfDir: flags.cniConfDir,
      cniBinDir: flags.cniBinDir,
      hostLocalDir: flags.cniDataDir,
      flannelDataDir: flags.flannelDataDir,
      cniResultsDir: flags.cniResultsDir,
      podNetnsPrefix: flags.podNetnsPrefix,
      criSocket: flags.criSocket,
      readyzUrl: flags.readyzUrl ?? null,
      probe: !!flags.probe,
      openStore: open,
      storeExplicit: explicit,
      skip,
    };
    const report = await runDoctor(doctorOpts);
    if (flags.bundle) await bundle(flags, doctorOpts, report);
    const color = flags.output !== "json" && Deno.stdout.isTerminal() && !Deno.env.get("NO_COLOR");
    const problemsOnly = !!flags.problems;
    const text = flags.output === "json"
      ? renderJson(report, { problemsOnly })
      : renderTable(report, { color, problemsOnly });
    writeOut(text); // a closed pipe (`| head`) ends the output, not the exit code
    exitWith(report.summary.exitCode);
  });
}

/** Writes `--bundle` (a second, identical gathering of the node for status and inspect). */
async function bundle(
  flags: DoctorFlags,
  opts: import("../lib/observe/snapshot.ts").SnapshotOptions,
  report: import("../lib/doctor/types.ts").DoctorReport,
): Promise<void> {
  const { gatherSnapshot } = await import("../lib/observe/snapshot.ts");
  const { writeBundle, kubeconfigTokens } = await import("../lib/bundle/bundle.ts");
  const { readCappedText } = await import("../lib/base/capped_read.ts");
  const read = (p: string | undefined) => {
    if (!p) return "";
    try {
      return readCappedText(p, 1 << 20);
    } catch {
      return "";
    }
  };
  // Every secret this node's flannel could hold: redacted wherever it shows up (logs, configs, status).
  const secrets = [
    flags.etcdPassword ?? "",
    // The file named by --etcd-password-file (or its env variable), and the daemon's own env variable.
    read(flags.etcdPasswordFile).trim(),
    read(Deno.env.get("FLANNELD_ETCD_PASSWORD_FILE")).trim(),
    read("/var/run/secrets/kubernetes.io/serviceaccount/token").trim(),
    ...kubeconfigTokens(read(flags.kubeconfigFile)),
  ];
  try {
    for (const e of Deno.readDirSync(flags.cniConfDir)) {
      if (e.isFile) secrets.push(...kubeconfigTokens(read(`${flags.cniConfDir}/${e.name}`)));
      if (e.isDirectory) {
        for (const f of Deno.readDirSync(`${flags.cniConfDir}/${e.name}`)) {
          if (f.isFile) secrets.push(...kubeconfigTokens(read(`${flags.cniConfDir}/${e.name}/${f.name}`)));
        }
      }
    }
  } catch { /* no CNI dir: nothing to learn */ }
  const ctx = await gatherSnapshot(opts);
  const files = await writeBundle(ctx, report, {
    file: flags.bundle!,
    logFile: flags.logFile ?? null,
    secrets: secrets.filter(Boolean),
    node: flags.netns ?? Deno.hostname(),
  });
  console.error(`flanctl: bundle ${flags.bundle} written (${files.length} files, secrets redacted)`);
}
