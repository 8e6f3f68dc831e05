/**
 * A real container runtime per lab node: one containerd (Debian's 1.6) inside the node's namespaces, with
 * its own root, state and socket under the node's directory and the node's CNI dirs, driven through CRI by
 * crictl (sigs.k8s.io/cri-tools, built by install.sh --dev). Measured facts this follows
 * (docs/lab.md): the CRI plugin mounts sandbox netns under /run/netns, so containerd gets a private
 * directory bound over it, and so over /var/lib/cni (libcni's default cache dir, where it keeps each
 * sandbox's CNI result) unless the caller mounts the node's own there; `ip netns exec` mounts a fresh
 * sysfs that hides the cgroup v1 hierarchies, so each is mounted again before containerd starts; the
 * machine lacks CAP_SYS_RESOURCE, so `restrict_oom_score_adj = true`. No registry: the sandbox image is a
 * docker archive made here from busybox-static and imported with ctr.
 *
 * Used by tests (tests/cni_containerd_test.ts) and meant for `lab up --runtime containerd` / `--kube`.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { runCmd, shq, sleep, spawnDetached, stopProcess } from "./proc.ts";
import type { CmdResult } from "./proc.ts";

/** Debian's containerd and ctr. */
export const CONTAINERD_BIN = "/usr/bin/containerd";
export const CTR_BIN = "/usr/bin/ctr";
/** busybox-static's binary: the whole sandbox image. */
export const BUSYBOX_BIN = "/bin/busybox";
/** The sandbox image's name (never pulled: imported from {@link buildSandboxImage}'s archive). */
export const SANDBOX_IMAGE = "flanctl.local/pause:busybox";
/** crictl as install.sh --dev builds it (FLANCTL_PEER_CRICTL overrides; else PATH). */
export const CRICTL_CACHE = `${
  Deno.env.get("FLANCTL_DEV_CACHE") || "/var/cache/flanctl-dev"
}/crictl-v1.37.0/bin/crictl`;

/** A runtime failure (start, import, CRI call), with the command's output. */
export class RuntimeError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** Where one node's containerd keeps everything. */
export interface ContainerdPaths {
  dir: string;
  root: string;
  state: string;
  socket: string;
  config: string;
  log: string;
  /** Bound over /run/netns in containerd's mount namespace. */
  netnsDir: string;
  /** Bound over /var/lib/cni in containerd's mount namespace when no `wrap` brings the node's own. */
  cniDir: string;
}

/** The paths under `dir` (a node's directory + /containerd). */
export function containerdPaths(dir: string): ContainerdPaths {
  return {
    dir,
    root: `${dir}/root`,
    state: `${dir}/state`,
    socket: `${dir}/containerd.sock`,
    config: `${dir}/config.toml`,
    log: `${dir}/containerd.log`,
    netnsDir: `${dir}/netns`,
    cniDir: `${dir}/cni`,
  };
}

function toml(s: string): string {
  return JSON.stringify(s);
}

/** containerd's config: own root/state/socket, the CRI plugin on the node's CNI dirs. */
export function containerdConfig(p: ContainerdPaths, cniBinDir: string, cniConfDir: string): string {
  return [
    "version = 2",
    `root = ${toml(p.root)}`,
    `state = ${toml(p.state)}`,
    "[grpc]",
    `  address = ${toml(p.socket)}`,
    "[ttrpc]",
    `  address = ${toml(`${p.socket}.ttrpc`)}`,
    '[plugins."io.containerd.grpc.v1.cri"]',
    "  restrict_oom_score_adj = true",
    `  sandbox_image = ${toml(SANDBOX_IMAGE)}`,
    "  enable_selinux = false",
    '  [plugins."io.containerd.grpc.v1.cri".containerd]',
    '    snapshotter = "overlayfs"',
    '  [plugins."io.containerd.grpc.v1.cri".cni]',
    `    bin_dir = ${toml(cniBinDir)}`,
    `    conf_dir = ${toml(cniConfDir)}`,
    "    max_conf_num = 1",
    "",
  ].join("\n");
}

/** Shell commands re-mounting the cgroup hierarchies of `mounts` (/proc/self/mounts text) under /sys/fs/cgroup. */
export function cgroupMountScript(mounts: string): string[] {
  const out = ["mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup"];
  for (const line of mounts.split("\n")) {
    const [, dir, type, opts] = line.split(" ");
    if ((type !== "cgroup" && type !== "cgroup2") || !dir?.startsWith("/sys/fs/cgroup/")) continue;
    if (!/^[A-Za-z0-9_=,.\/-]+$/.test(dir + opts)) continue;
    out.push(`mkdir -p ${shq(dir)}`, `mount -t ${type} -o ${shq(opts)} ${type} ${shq(dir)}`);
  }
  return out;
}

/**
 * The host's mounts, as PID 1 sees them: a caller already inside `ip netns exec` (a bench) has the fresh
 * sysfs without the cgroup hierarchies in its own /proc/self/mounts.
 */
function hostMounts(): string {
  try {
    return Deno.readTextFileSync("/proc/1/mounts");
  } catch {
    return Deno.readTextFileSync("/proc/self/mounts");
  }
}

/**
 * The argv that starts containerd in `netns`: the cgroup hierarchies mounted again, a private /run/netns,
 * then containerd. `wrap` puts the node's own files at the default paths first (lib/lab/exec.ts), its
 * /var/lib/cni among them; without it containerd gets a private /var/lib/cni ({@link ContainerdPaths}'
 * cniDir), so that the sandboxes' cached CNI results are never the host's.
 */
export function containerdCommand(
  netns: string,
  p: ContainerdPaths,
  wrap?: (cmd: string[]) => string[],
): string[] {
  const ownCni = wrap ? [] : [
    `mkdir -p ${shq(p.cniDir)} /var/lib/cni`,
    `mount --bind ${shq(p.cniDir)} /var/lib/cni`,
  ];
  const script = [
    ...cgroupMountScript(hostMounts()),
    `mkdir -p ${shq(p.netnsDir)} /run/netns`,
    `mount --bind ${shq(p.netnsDir)} /run/netns`,
    ...ownCni,
    `exec ${CONTAINERD_BIN} --config ${shq(p.config)}`,
  ].join(" && ");
  const cmd = ["sh", "-c", script];
  return wrap ? wrap(cmd) : ["ip", "netns", "exec", netns, ...cmd];
}

/** crictl's path: FLANCTL_PEER_CRICTL, the --dev cache, else PATH. */
export function crictlPath(): string {
  const env = Deno.env.get("FLANCTL_PEER_CRICTL");
  if (env) return env;
  try {
    if (Deno.statSync(CRICTL_CACHE).isFile) return CRICTL_CACHE;
  } catch { /* PATH */ }
  return "crictl";
}

/** What is missing to run a node's containerd (empty when nothing). */
export function missingRuntime(): string[] {
  const out: string[] = [];
  for (
    const [bin, pkg] of [[CONTAINERD_BIN, "containerd"], [CTR_BIN, "containerd"], [
      BUSYBOX_BIN,
      "busybox-static",
    ]]
  ) {
    try {
      Deno.statSync(bin);
    } catch {
      out.push(`${bin} (apt-get install ${pkg})`);
    }
  }
  try {
    if (!Deno.statSync("/usr/sbin/runc").isFile) throw 0;
  } catch {
    out.push("/usr/sbin/runc (apt-get install runc)");
  }
  const c = crictlPath();
  if (c === "crictl") out.push(`crictl (./install.sh --dev builds it into ${CRICTL_CACHE})`);
  return out;
}

/**
 * Writes the sandbox image as a docker archive at `tar`: one layer with busybox-static (and the applets a
 * test pod needs), entrypoint `sleep` for ever. Deterministic (fixed mtime, owner, order).
 */
export async function buildSandboxImage(tar: string, busybox = BUSYBOX_BIN): Promise<void> {
  const work = Deno.makeTempDirSync({ prefix: "flanctl-pause-" });
  try {
    Deno.mkdirSync(`${work}/rootfs/bin`, { recursive: true });
    Deno.copyFileSync(busybox, `${work}/rootfs/bin/busybox`);
    Deno.chmodSync(`${work}/rootfs/bin/busybox`, 0o755);
    for (const a of ["sh", "sleep", "nc", "ip", "ping", "cat", "ls", "httpd"]) {
      Deno.symlinkSync("busybox", `${work}/rootfs/bin/${a}`);
    }
    await must([
      "tar",
      "--sort=name",
      "--owner=0",
      "--group=0",
      "--numeric-owner",
      "--mtime=@0",
      "-C",
      `${work}/rootfs`,
      "-cf",
      `${work}/layer.tar`,
      "bin",
    ]);
    const digest = await crypto.subtle.digest("SHA-256", Deno.readFileSync(`${work}/layer.tar`));
    const diff = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    Deno.writeTextFileSync(
      `${work}/config.json`,
      JSON.stringify({
        architecture: "amd64",
        os: "linux",
        config: { Entrypoint: ["/bin/sleep", "2147483647"], Env: ["PATH=/bin"] },
        rootfs: { type: "layers", diff_ids: [`sha256:${diff}`] },
        history: [{ created_by: "flanctl lab (busybox-static)" }],
      }),
    );
    Deno.writeTextFileSync(
      `${work}/manifest.json`,
      JSON.stringify([{ Config: "config.json", RepoTags: [SANDBOX_IMAGE], Layers: ["layer.tar"] }]),
    );
    // Made beside and renamed: nodes starting at once may build it together.
    const part = `${tar}.${crypto.randomUUID().slice(0, 8)}`;
    await must(["tar", "--mtime=@0", "-C", work, "-cf", part, "manifest.json", "config.json", "layer.tar"]);
    Deno.renameSync(part, tar);
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
}

async function must(cmd: string[], stdin?: string): Promise<string> {
  const r = await runCmd(cmd, stdin === undefined ? {} : { stdin });
  if (r.code !== 0) {
    throw new RuntimeError(
      `'${cmd.join(" ")}' exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-400)}`,
    );
  }
  return r.stdout;
}

/**
 * Starts containerd for a node (config written, process detached, socket answering), imports the sandbox
 * image from `imageTar`, and returns the pid. On failure the process is stopped again.
 */
export async function startContainerd(
  netns: string,
  p: ContainerdPaths,
  opts: { cniBinDir: string; cniConfDir: string; imageTar: string; wrap?: (cmd: string[]) => string[] },
): Promise<number> {
  Deno.mkdirSync(p.dir, { recursive: true, mode: 0o700 });
  Deno.writeTextFileSync(p.config, containerdConfig(p, opts.cniBinDir, opts.cniConfDir));
  const pid = await spawnDetached(containerdCommand(netns, p, opts.wrap), p.log);
  try {
    let up = false;
    for (let i = 0; i < 200 && !up; i++) {
      up = (await runCmd([CTR_BIN, "--address", p.socket, "version"])).code === 0;
      if (!up) await sleep(100);
    }
    if (!up) throw new RuntimeError(`containerd in ${netns} did not answer on ${p.socket}; see ${p.log}`);
    await must([CTR_BIN, "--address", p.socket, "-n", "k8s.io", "images", "import", opts.imageTar]);
    return pid;
  } catch (e) {
    await stopContainerd(pid, p);
    throw e;
  }
}

/** Runs crictl against `socket` (a 60 s timeout per call). */
export function crictl(socket: string, args: string[]): Promise<CmdResult> {
  const ep = `unix://${socket}`;
  return runCmd(
    [crictlPath(), "--runtime-endpoint", ep, "--image-endpoint", ep, "--timeout", "60s", ...args],
    {
      env: { CRI_CONFIG_FILE: "/dev/null" },
    },
  );
}

/** A pod's hostPort. */
export interface HostPortSpec {
  hostPort: number;
  containerPort: number;
  protocol?: "tcp" | "udp" | "sctp";
}

/** The PodSandboxConfig crictl runp reads (protobuf JSON). */
export function podSandboxConfig(name: string, opts: { ports?: HostPortSpec[]; uid?: string } = {}): string {
  const proto = { tcp: 0, udp: 1, sctp: 2 };
  return JSON.stringify({
    metadata: { name, namespace: "default", uid: opts.uid ?? crypto.randomUUID(), attempt: 0 },
    hostname: name,
    port_mappings: (opts.ports ?? []).map((m) => ({
      protocol: proto[m.protocol ?? "tcp"],
      container_port: m.containerPort,
      host_port: m.hostPort,
    })),
    linux: {},
  });
}

/** `crictl runp`: the new sandbox's ID, or a RuntimeError with crictl's message. */
export async function runPodSandbox(socket: string, configJson: string, dir: string): Promise<string> {
  const f = `${dir}/pod-${crypto.randomUUID()}.json`;
  Deno.writeTextFileSync(f, configJson);
  try {
    const r = await crictl(socket, ["runp", f]);
    if (r.code !== 0) throw new RuntimeError(`crictl runp: ${(r.stderr || r.stdout).trim().slice(-600)}`);
    return r.stdout.trim().split("\n").pop() ?? "";
  } finally {
    Deno.removeSync(f);
  }
}

/** `crictl stopp` then `crictl rmp` (each runs a CNI DEL in containerd 1.6). */
export async function removePodSandbox(socket: string, id: string): Promise<void> {
  for (const verb of ["stopp", "rmp"]) {
    const r = await crictl(socket, [verb, id]);
    if (r.code !== 0) {
      throw new RuntimeError(`crictl ${verb} ${id}: ${(r.stderr || r.stdout).trim().slice(-600)}`);
    }
  }
}

/** The runtime's sandboxes as crictl lists them (id → state). */
export async function listSandboxes(socket: string): Promise<{ id: string; state: string; name: string }[]> {
  const r = await crictl(socket, ["pods", "-o", "json"]);
  if (r.code !== 0) throw new RuntimeError(`crictl pods: ${r.stderr.trim()}`);
  const items = (JSON.parse(r.stdout).items ?? []) as {
    id: string;
    state: string;
    metadata?: { name?: string };
  }[];
  return items.map((i) => ({ id: i.id, state: i.state, name: i.metadata?.name ?? "" }));
}

/**
 * Stops a node's containerd: every sandbox stopped and removed through CRI (their CNI DEL runs), then
 * containerd, then any shim of this containerd left (found by its socket on the command line).
 */
export async function stopContainerd(pid: number, p: ContainerdPaths): Promise<void> {
  await crictl(p.socket, ["rmp", "--all", "--force"]).catch(() => null);
  await stopProcess(pid, CONTAINERD_BIN);
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    let cmd = "";
    try {
      cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
    } catch {
      continue;
    }
    if (cmd.includes("containerd-shim") && cmd.includes(p.socket)) {
      try {
        Deno.kill(Number(e.name), "SIGKILL");
      } catch { /* gone */ }
    }
  }
}
