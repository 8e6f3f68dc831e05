/**
 * `deno task e2e`: Kubernetes' own e2e suite (e2e.test, built by tools/peers/build.sh from the pinned
 * release) against a `flanctl lab up --kube` cluster: flanctl as the network, kube-proxy and CoreDNS.
 *
 *   deno task e2e [--nodes 3] [--focus REGEX] [--skip REGEX] [--name e2e] [--report-dir dist/e2e] [--keep]
 *                 [--dual-stack]
 *   deno task e2e --netpol [--enforcer kube-router|flanctl] [--dual-stack]   # NetworkPolicy tests (issue 36)
 *
 * `--netpol` selects `[sig-network] Netpol` (51 specs in v1.37.2) instead of the default focus; `--enforcer
 * kube-router` starts kube-router's policy controller on every node once the lab is up (tools/kube_router.ts:
 * firewall only, as k3s runs it; `tools/peers/build.sh kube-router`), the reference the verdict matrix and
 * flanctl's own enforcement are held to; `--enforcer flanctl` brings the lab up with `--network-policy` (flanctl's
 * DaemonSet enforces).
 *
 * 1. The images: dist/flanctl-image.tar (deploy/build-image.sh, always: the tree may have changed), the peer
 *    images dist/{kube-proxy,coredns}-image.tar and the suite's own, named exactly as `e2e.test --list-images`
 *    names them under the override (agnhost, glibc-dns-testing: dist/e2e-images/<name>-<tag>.tar), each built
 *    by `build-image.sh --peer` when missing.
 * 2. `lab up --kube --nodes N` with the suite's images imported on every node; `--dual-stack`: a dual-stack
 *    cluster (`--ip-family dual`) and, unless --focus or --netpol is given, the dual-stack selection
 *    {@link DUAL_STACK_FOCUS} ({@link selectFocus}).
 * 3. e2e.test in the lab's underlay namespace (where the API server and the nodes are reachable) with the
 *    admin kubeconfig, `--provider local`, the suite's image-repository override (KUBE_TEST_REPO_LIST: every
 *    registry the suite names becomes `flanctl.local/...`, so agnhost is the local image and nothing is
 *    pulled), the focus and skip; the JUnit report in --report-dir, the whole log beside it.
 * 4. The suite's own summary (Ran N of M, passed, failed, skipped) printed; `lab down` unless --keep.
 * Exit status: e2e.test's.
 * @module
 */
import { parseArgs } from "node:util";

/** The selection of issue 35: sig-network's granular pod checks, Services and DNS conformance, HostPort. */
export const DEFAULT_FOCUS =
  String.raw`\[sig-network\] (Networking Granular Checks: Pods|Services .*\[Conformance\]|` +
  String.raw`DNS .*\[Conformance\]|HostPort)`;
/** The suite's tests tagged for dual stack (`[Feature:IPv6DualStack]`: 23 specs in v1.37.2). */
export const DUAL_STACK_FOCUS = String.raw`\[sig-network\] \[Feature:IPv6DualStack\]`;
/** `--netpol`: the suite's NetworkPolicy tests (issue 36). */
export const NETPOL_FOCUS = String.raw`\[sig-network\] Netpol`;
/**
 * The focus of a run: `--focus` when given; else `--netpol`'s, also on a dual-stack lab (`--dual-stack --netpol`:
 * the Netpol tests on a dual-stack cluster; none of v1.37.2's 51 carries `[Feature:IPv6DualStack]`, so the
 * dual-stack selection adds none of them); else the dual-stack selection on a dual-stack lab; else the default.
 */
export function selectFocus(o: { focus?: string; dual: boolean; netpol: boolean }): string {
  return o.focus ?? (o.netpol ? NETPOL_FOCUS : o.dual ? DUAL_STACK_FOCUS : DEFAULT_FOCUS);
}
/**
 * The NetworkPolicy enforcers of `--enforcer` (none: the lab as it is): kube-router started beside the lab, or
 * flanctl's own (`lab up --network-policy`).
 */
export const ENFORCERS = ["kube-router", "flanctl"] as const;
/**
 * Limits of this machine, each skipped by name with its reason when the machine has it (docs/lab.md,
 * "Kubernetes' e2e suite"): `protocols` is /proc/net/protocols.
 */
export function machineSkips(protocols: string): { skip: string; why: string }[] {
  const out: { skip: string; why: string }[] = [];
  if (!/^SCTP\s/m.test(protocols)) {
    out.push({
      skip: String.raw`Granular Checks: (Pods should function for (intra-pod|node-pod) communication|` +
        String.raw`Services Secondary IP Family \[LinuxOnly\] should function for pod-Service): sctp`,
      why: "no SCTP in this kernel (/proc/net/protocols has none: socket(…, IPPROTO_SCTP) fails " +
        "EPROTONOSUPPORT, agnhost's SCTP server exits)",
    });
    out.push({
      skip: String.raw`Netpol .*\[Feature:SCTPConnectivity\]`,
      why: "no SCTP in this kernel (the Netpol SCTP tests serve and probe SCTP; the two that only write " +
        "'protocol: SCTP' in a policy and probe TCP still run)",
    });
  }
  return out;
}
/** The suite's images the lab builds (deploy/build-image.sh --peer NAME), with the variable naming each. */
export const SUITE_IMAGES: Record<string, string> = {
  "agnhost": "FLANCTL_AGNHOST_REF",
  "glibc-dns-testing": "FLANCTL_GLIBC_DNS_REF",
};
/** Where the override sends every registry the suite names. */
export const LOCAL_REGISTRY = "flanctl.local/e2e";

/** KUBE_TEST_REPO_LIST: each registry key of the suite's image config pointed at the local name. */
export function repoList(): string {
  const keys = [
    "gcAuthenticatedRegistry",
    "gcEtcdRegistry",
    "privateRegistry",
    "sigStorageRegistry",
    "invalidRegistry",
    "promoterE2eRegistry",
    "buildImageRegistry",
    "dockerLibraryRegistry",
    "cloudProviderGcpRegistry",
    "gcrReleaseRegistry",
    "gcRegistry",
    "sigRegistry",
    "dockerGluster",
    "e2eRegistry",
    "e2eVolumeRegistry",
    "microsoftRegistry",
  ];
  return keys.map((k) => `${k}: ${LOCAL_REGISTRY}`).join("\n") + "\n";
}

/** For each of {@link SUITE_IMAGES}, the newest reference `--list-images` names under the override. */
export function suiteRefs(listImages: string): Map<string, string> {
  const refs = new Map<string, string>();
  const num = (tag: string) => tag.split(/[.-]/).map((x) => Number(x) || 0);
  const newer = (a: string, b: string) => {
    const [x, y] = [num(a), num(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
    }
    return false;
  };
  for (const line of listImages.split("\n")) {
    const m = /^flanctl\.local\/e2e\/([a-z0-9-]+):([A-Za-z0-9._-]{1,40})$/.exec(line.trim());
    if (!m || !(m[1] in SUITE_IMAGES)) continue;
    const had = refs.get(m[1]);
    if (!had || newer(m[2], had.split(":")[1])) refs.set(m[1], `${m[0]}`);
  }
  return refs;
}

/** The suite's summary lines from its output ("Ran N of M Specs…", "SUCCESS!/FAIL! -- …"), and the failures. */
export function summary(log: string): string[] {
  const esc = String.fromCharCode(27);
  const lines = log.split("\n").map((l) => l.replaceAll(new RegExp(`${esc}\\[[0-9;]*m`, "g"), ""));
  const out = lines.filter((l) =>
    /^Ran \d+ of \d+ Specs/.test(l) || /^(SUCCESS|FAIL)! -- \d+ Passed/.test(l) || /^\s*\[FAIL\] /.test(l)
  );
  return [...new Set(out)].slice(0, 200);
}

async function sh(cmd: string[], env: Record<string, string> = {}): Promise<number> {
  const p = new Deno.Command(cmd[0], { args: cmd.slice(1), env, stdin: "null" }).spawn();
  return (await p.status).code;
}

async function main(): Promise<number> {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      nodes: { type: "string", default: "3" },
      focus: { type: "string" },
      "dual-stack": { type: "boolean", default: false },
      netpol: { type: "boolean", default: false },
      enforcer: { type: "string", default: "" },
      skip: { type: "string", default: "" },
      name: { type: "string", default: "e2e" },
      "report-dir": { type: "string", default: "dist/e2e" },
      keep: { type: "boolean", default: false },
    },
  });
  const dual = v["dual-stack"]!;
  const focus = selectFocus({ focus: v.focus, dual, netpol: v.netpol! });
  if (v.enforcer && !(ENFORCERS as readonly string[]).includes(v.enforcer)) {
    console.error(`e2e: --enforcer: one of ${ENFORCERS.join(", ")}`);
    return 2;
  }
  const root = new URL("..", import.meta.url).pathname;
  const { findProgram, kubePaths, underlayNetns } = await import("../lib/lab/mod.ts");
  const e2e = findProgram("e2e.test");
  const kubectl = findProgram("kubectl");
  if (!e2e || !kubectl) {
    console.error(
      "e2e: e2e.test or kubectl not built: tools/peers/build.sh e2e kubernetes (./install.sh --dev)",
    );
    return 2;
  }
  const dist = `${root}dist`;
  const say = (l: string) => console.log(`e2e: ${l}`);
  const t0 = Date.now();
  if (await sh([`${root}deploy/build-image.sh`, `${dist}/flanctl-image.tar`]) !== 0) return 1;
  const reportDir = v["report-dir"]!.startsWith("/") ? v["report-dir"]! : `${root}${v["report-dir"]}`;
  await Deno.mkdir(reportDir, { recursive: true });
  const repo = `${reportDir}/repo-list.yaml`;
  await Deno.writeTextFile(repo, repoList());
  const listed = await new Deno.Command(e2e, {
    args: ["--list-images"],
    env: { KUBE_TEST_REPO_LIST: repo },
    stdout: "piped",
    stderr: "null",
  }).output();
  const refs = suiteRefs(new TextDecoder().decode(listed.stdout));
  const builds: [string, string, Record<string, string>][] = [
    ["kube-proxy", `${dist}/kube-proxy-image.tar`, {}],
    ["coredns", `${dist}/coredns-image.tar`, {}],
  ];
  const suiteArchives: string[] = [];
  for (const [peer, envName] of Object.entries(SUITE_IMAGES)) {
    const ref = refs.get(peer);
    if (!ref) {
      console.error(`e2e: e2e.test --list-images names no ${LOCAL_REGISTRY}/${peer}`);
      return 2;
    }
    const out = `${dist}/e2e-images/${peer}-${ref.split(":")[1]}.tar`;
    builds.push([peer, out, { [envName]: ref }]);
    suiteArchives.push(out);
  }
  for (const [peer, out, env] of builds) {
    try {
      Deno.statSync(out);
    } catch {
      if (await sh([`${root}deploy/build-image.sh`, "--peer", peer, out], env) !== 0) return 1;
    }
  }
  say(`images ready in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const flanctl = [Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${root}main.ts`, "lab"];
  const t1 = Date.now();
  const up = await sh([
    ...flanctl,
    "up",
    "--kube",
    "--nodes",
    v.nodes!,
    "--name",
    v.name!,
    "--image",
    `${dist}/flanctl-image.tar`,
    "--manifest",
    `${root}deploy/kube-flanctl.yml`,
    "--kube-proxy-image",
    `${dist}/kube-proxy-image.tar`,
    "--coredns-image",
    `${dist}/coredns-image.tar`,
    ...suiteArchives.flatMap((a) => ["--import-image", a]),
    ...(dual ? ["--ip-family", "dual"] : []),
    ...(v.enforcer === "flanctl" ? ["--network-policy"] : []),
  ]);
  if (up !== 0) {
    if (!v.keep) await sh([...flanctl, "down", "--name", v.name!]);
    return 1;
  }
  say(
    `lab up --kube --nodes ${v.nodes}${dual ? " --ip-family dual" : ""}: ${
      ((Date.now() - t1) / 1000).toFixed(1)
    } s`,
  );
  let enforcer: { stop(): Promise<void> } | undefined;
  if (v.enforcer === "kube-router") {
    const { findKubeRouter, startKubeRouter } = await import("./kube_router.ts");
    const bin = findKubeRouter();
    try {
      if (!bin) {
        throw new Error("kube-router not built: tools/peers/build.sh kube-router (./install.sh --dev)");
      }
      const t = Date.now();
      enforcer = await startKubeRouter(v.name!, Number(v.nodes), bin);
      say(`kube-router (firewall only) programming every node: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    } catch (e) {
      console.error(`e2e: ${(e as Error).message}`);
      if (!v.keep) await sh([...flanctl, "down", "--name", v.name!]);
      return 1;
    }
  }
  const log = `${reportDir}/e2e.log`;
  let protocols = "";
  try {
    protocols = await Deno.readTextFile("/proc/net/protocols");
  } catch { /* not Linux: nothing known to skip */ }
  const skips = machineSkips(protocols);
  for (const s of skips) say(`skipping '${s.skip}': ${s.why}`);
  const skip = [...skips.map((s) => s.skip), ...(v.skip ? [v.skip] : [])].join("|");
  const t2 = Date.now();
  let code = 1;
  try {
    const args = [
      "ip",
      "netns",
      "exec",
      underlayNetns(v.name!),
      "env",
      `KUBE_TEST_REPO_LIST=${repo}`,
      e2e,
      `--kubeconfig=${kubePaths(v.name!).admin}`,
      "--provider=local",
      `--kubectl-path=${kubectl}`,
      `--report-dir=${reportDir}`,
      `--ginkgo.focus=${focus}`,
      ...(skip ? [`--ginkgo.skip=${skip}`] : []),
      "--ginkgo.no-color",
      "--ginkgo.timeout=2h",
    ];
    say(`e2e.test --ginkgo.focus='${focus}'${skip ? ` --ginkgo.skip='${skip}'` : ""} (log: ${log})`);
    code = await sh(["sh", "-c", `"$@" >${JSON.stringify(log)} 2>&1`, "sh", ...args]);
    const text = await Deno.readTextFile(log);
    for (const l of summary(text)) console.log(l);
    say(`e2e.test exited ${code} after ${((Date.now() - t2) / 1000).toFixed(0)} s; JUnit in ${reportDir}`);
  } finally {
    if (!v.keep) await enforcer?.stop();
    if (!v.keep) await sh([...flanctl, "down", "--name", v.name!]);
  }
  return code;
}

if (import.meta.main) Deno.exit(await main());
