/**
 * CNI benchmark: ADD+DEL per pod, flanctl's plugins against the reference Go bridge+host-local
 * (v1.10.0 built by install.sh --dev, else Debian's /usr/lib/cni: tests/peers.ts refCniDir), measured in
 * the same run: sequential, and 10 pods in parallel; then host-local alone with
 * 250 IPs already allocated. Runs in its own node netns (it re-executes itself there), pods in their own
 * netns; nothing touches the root namespace.
 *
 * The main flanctl row runs exactly what is installed: `/opt/cni/bin/<plugin>` (a symlink to the
 * /usr/local/bin/flanctl launcher, which execs the pinned Deno on the pre-bundled
 * /usr/local/lib/flanctl/cni.js without deno.json or lockfile; see install.sh). It warns when that bundle is
 * older than the sources (run ./install.sh to refresh it). A second row runs this checkout's main.ts with
 * `deno run` (FLANCTL_ARGV0 set to the plugin name), the source path. The same run also measures a bare
 * `deno run` of an empty script with the CNI launcher's flags (lib/cni/launch.ts: the runtime's own
 * start-up, the floor for any Deno process) and traces ADD and DEL of each bundle row (FLANCTL_CNI_TRACE=1:
 * the wall-clock time of each step since the spawn, medians of 7; "runtime started" is Deno's time origin,
 * "exited" when the exit was seen) to show where the time goes.
 *
 *   deno task bench cni          (or: deno run -A bench/cni_bench.ts [--pods N])
 *
 * FLANCTL_PREFIX and CNI_BIN_DIR (as install.sh takes them) point the "installed" row at another install,
 * e.g. a checkout installed with `FLANCTL_PREFIX=/tmp/p CNI_BIN_DIR=/tmp/cni ./install.sh`; CNI_BENCH_ALSO
 * (comma-separated CNI bin dirs) adds a row per directory, measured interleaved with the others (an
 * install of another commit, to compare before and after in the same run).
 * @module
 */

import { runProcess } from "../lib/base/run.ts";
import { arg, runInOwnNetns } from "./own_netns.ts";
import { CNI_DENO_RUN_FLAGS } from "../lib/cni/launch.ts";
import { bridgeBenchConf } from "./cni_conf.ts";
import { refCniDir } from "../tests/peers.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const REF_CNI = refCniDir();
const REF = REF_CNI.dir;
const SUBNET = "10.96.0.0/24";

async function sh(cmd: string[], stdin?: string): Promise<{ code: number; out: string; err: string }> {
  const r = await runProcess(cmd, { stdin });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

// Outer process: make a netns of our own, re-run ourselves inside it, always clean up.
await runInOwnNetns("FLANCTL_CNI_BENCH_NODE", "fbnode", import.meta.url);

// ---- inside the node netns ----------------------------------------------------------------------------
const PODS = arg("--pods", 20);
const tmp = Deno.makeTempDirSync({ prefix: "flanctl-cni-bench-" });
const podNs: string[] = [];

type Runner = {
  label: string;
  cmd: (plugin: string) => string[];
  env: (plugin: string) => Record<string, string>;
};

/** How the installed launcher runs main.ts (the source path, any verb). */
const SOURCE_FLAGS = ["run", "-A", "--no-check", "--no-prompt", "--quiet"];
/** The CNI launchers' `deno run` flags (lib/cni/launch.ts). */
const launcherFlags = ["run", ...CNI_DENO_RUN_FLAGS];
/** What install.sh installs (see the module doc). */
const INSTALLED_DIR = Deno.env.get("CNI_BIN_DIR") ?? "/opt/cni/bin";
const INSTALLED_BUNDLE = `${Deno.env.get("FLANCTL_PREFIX") ?? "/usr/local"}/lib/flanctl/cni.js`;
const ALSO = (Deno.env.get("CNI_BENCH_ALSO") ?? "").split(",").filter(Boolean);
const variants: Runner[] = [
  {
    label: "reference bridge+host-local",
    cmd: (p) => [`${REF}/${p}`],
    env: () => ({}),
  },
  {
    label: `flanctl installed (${INSTALLED_DIR}, cni.js)`,
    cmd: (p) => [`${INSTALLED_DIR}/${p}`],
    env: () => ({}),
  },
  ...ALSO.map((dir): Runner => ({
    label: `flanctl also (${dir})`,
    cmd: (p) => [`${dir}/${p}`],
    env: () => ({}),
  })),
  {
    label: "flanctl source (deno run main.ts)",
    cmd: () => [Deno.execPath(), ...SOURCE_FLAGS, "--config", `${ROOT}deno.json`, `${ROOT}main.ts`],
    env: (p) => ({ FLANCTL_ARGV0: p }),
  },
];

/** Warns when the installed CNI path is missing or older than the sources it was bundled from. */
function checkInstalled(): void {
  let bundled: number;
  try {
    Deno.statSync(`${INSTALLED_DIR}/bridge`);
    bundled = Deno.statSync(INSTALLED_BUNDLE).mtime?.getTime() ?? 0;
  } catch {
    throw new Error(
      `flanctl is not installed (${INSTALLED_DIR}/bridge, ${INSTALLED_BUNDLE}): run ./install.sh`,
    );
  }
  const stale: string[] = [];
  for (const dir of ["lib/cni", "lib/netlink", "lib/ip", "cli"]) {
    for (const e of Deno.readDirSync(`${ROOT}${dir}`)) {
      if (!e.isFile || !e.name.endsWith(".ts") || e.name.endsWith("_test.ts")) continue;
      if ((Deno.statSync(`${ROOT}${dir}/${e.name}`).mtime?.getTime() ?? 0) > bundled) {
        stale.push(`${dir}/${e.name}`);
      }
    }
  }
  if (stale.length) {
    console.log(
      `WARNING: ${INSTALLED_BUNDLE} is older than ${stale.join(", ")}: run ./install.sh to measure them`,
    );
  }
}

/** Variant `k`'s config (bench/cni_conf.ts). */
function confFor(k: number): string {
  return bridgeBenchConf("benchnet", "cnib", 96, k, tmp);
}

/**
 * Runs `r`'s plugin `plugin` once as a container runtime does: a clean environment with the CNI variables
 * for `command` on container `cid` in `netns` (plus `extraEnv`), `stdin` as its config; resolves to its output.
 */
async function spawnPlugin(
  r: Runner,
  plugin: string,
  command: string,
  cid: string,
  netns: string,
  stdin: string,
  extraEnv: Record<string, string> = {},
  stdout: "piped" | "null" = "piped",
): Promise<Deno.CommandOutput> {
  const [exe, ...args] = r.cmd(plugin);
  const p = new Deno.Command(exe, {
    args,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      ...r.env(plugin),
      ...extraEnv,
      CNI_COMMAND: command,
      CNI_CONTAINERID: cid,
      CNI_NETNS: netns,
      CNI_IFNAME: "eth0",
      CNI_PATH: REF,
    },
    stdin: "piped",
    stdout,
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(stdin));
  await w.close();
  return await p.output();
}

async function call(
  r: Runner,
  plugin: string,
  command: string,
  cid: string,
  netns: string,
  stdin: string,
): Promise<number> {
  const t0 = performance.now();
  const o = await spawnPlugin(r, plugin, command, cid, netns, stdin);
  const ms = performance.now() - t0;
  if (o.code !== 0) {
    throw new Error(`${r.label} ${plugin} ${command} failed: ${new TextDecoder().decode(o.stdout)}`);
  }
  return ms;
}

/**
 * One traced call (FLANCTL_CNI_TRACE=1): [step, ms since the spawn] for each trace line (its wall-clock
 * `@epoch`), with "runtime started" (Deno's time origin) first and "exited" (the parent saw the exit) last.
 */
async function tracedCall(r: Runner, verb: string, cid: string, stdin: string): Promise<[string, number][]> {
  const wall = () => performance.timeOrigin + performance.now();
  const t0 = wall();
  const o = await spawnPlugin(r, "bridge", verb, cid, `/var/run/netns/${podNs[0]}`, stdin, {
    FLANCTL_CNI_TRACE: "1",
  }, "null");
  const out: [string, number][] = [];
  for (const l of new TextDecoder().decode(o.stderr).split("\n")) {
    const m = l.match(/^trace ([\d.]+) ms (.*) @([\d.]+)$/);
    if (!m) continue;
    if (!out.length) out.push(["runtime started", Number(m[3]) - Number(m[1]) - t0]);
    out.push([m[2], Number(m[3]) - t0]);
  }
  out.push(["exited", wall() - t0]);
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x: number) => x.toFixed(1).padStart(7);

async function newPods(n: number) {
  while (podNs.length < n) {
    const name = `fbpod${podNs.length}x${
      crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5)
    }`;
    await sh(["ip", "netns", "add", name]);
    podNs.push(name);
  }
}

/** Sequential ADD then DEL of one pod, variants interleaved pod by pod (load changes hit all alike). */
async function sequential(vs: Runner[]) {
  const add: number[][] = vs.map(() => []), del: number[][] = vs.map(() => []);
  const ns = `/var/run/netns/${podNs[0]}`;
  for (let i = 0; i < PODS; i++) {
    for (const [k, v] of vs.entries()) {
      add[k].push(await call(v, "bridge", "ADD", `seq${i}`, ns, confFor(k)));
      del[k].push(await call(v, "bridge", "DEL", `seq${i}`, ns, confFor(k)));
    }
  }
  return vs.map((_, k) => ({ add: median(add[k]), del: median(del[k]) }));
}

/** 10 pods at once (ADD all, then DEL all): wall ms per pod, variants interleaved round by round. */
async function parallel(vs: Runner[]) {
  const rounds = 3;
  const total = vs.map(() => 0);
  const pods = podNs.slice(0, 10).map((ns) => `/var/run/netns/${ns}`);
  for (let round = 0; round < rounds; round++) {
    for (const [k, v] of vs.entries()) {
      const c = confFor(k);
      const t0 = performance.now();
      await Promise.all(pods.map((ns, i) => call(v, "bridge", "ADD", `par${round}-${i}`, ns, c)));
      await Promise.all(pods.map((ns, i) => call(v, "bridge", "DEL", `par${round}-${i}`, ns, c)));
      total[k] += performance.now() - t0;
    }
  }
  return total.map((t) => t / rounds / 10);
}

/** host-local alone with 250 of 253 addresses taken (files in the reference format), interleaved. */
async function hostLocal250(vs: Runner[]) {
  const confs = vs.map((_, k) => {
    const dataDir = `${tmp}/hl${k}`;
    Deno.mkdirSync(`${dataDir}/hl250`, { recursive: true });
    for (let i = 2; i < 252; i++) {
      Deno.writeTextFileSync(`${dataDir}/hl250/10.96.0.${i}`, `filler${i}\r\neth0`, { mode: 0o600 });
    }
    return JSON.stringify({
      cniVersion: "0.3.1",
      name: "hl250",
      type: "host-local",
      ipam: { type: "host-local", dataDir, ranges: [[{ subnet: SUBNET }]] },
    });
  });
  const add: number[][] = vs.map(() => []), del: number[][] = vs.map(() => []);
  for (let i = 0; i < PODS; i++) {
    for (const [k, v] of vs.entries()) {
      add[k].push(await call(v, "host-local", "ADD", `hl${i}`, "/nonexistent", confs[k]));
      del[k].push(await call(v, "host-local", "DEL", `hl${i}`, "/nonexistent", confs[k]));
    }
  }
  return vs.map((_, k) => ({ add: median(add[k]), del: median(del[k]) }));
}

try {
  checkInstalled();
  await newPods(10);
  // Warm-up (module cache, bridge creation) outside the measurement.
  for (const [k, v] of variants.entries()) {
    await call(v, "bridge", "ADD", "warm", `/var/run/netns/${podNs[0]}`, confFor(k));
    await call(v, "bridge", "DEL", "warm", `/var/run/netns/${podNs[0]}`, confFor(k));
  }
  const seq = await sequential(variants);
  const par = await parallel(variants);
  const hl = await hostLocal250(variants);
  console.log(`CNI ADD+DEL per pod, ${PODS} pods sequential (median ms), 10 in parallel (wall ms per pod)`);
  console.log(`reference plugins: ${REF_CNI.label}`);
  console.log(
    `${"variant".padEnd(42)}     ADD     DEL ADD+DEL  ratio | par/pod  ratio | hl250 ADD     DEL  ratio`,
  );
  for (const [k, v] of variants.entries()) {
    const pair = seq[k].add + seq[k].del, refPair = seq[0].add + seq[0].del;
    const hlPair = hl[k].add + hl[k].del, refHl = hl[0].add + hl[0].del;
    const r = (x: number) => `${x.toFixed(2).padStart(5)}x`;
    console.log(
      `${v.label.padEnd(42)} ${f(seq[k].add)} ${f(seq[k].del)} ${f(pair)} ${r(pair / refPair)} |` +
        ` ${f(par[k])} ${r(par[k] / par[0])} | ${f(hl[k].add)} ${f(hl[k].del)} ${r(hlPair / refHl)}`,
    );
  }
  for (const [k, v] of variants.entries()) {
    if (k === 0) continue;
    console.log(
      `host-local ADD with 250 IPs allocated: reference ${hl[0].add.toFixed(1)} ms, ${v.label} ` +
        `${hl[k].add.toFixed(1)} ms (${(hl[k].add / hl[0].add).toFixed(2)}x)`,
    );
  }
  // The allocation itself, in-process (no start-up): flat in the number of allocated IPs.
  const { allocate, loadConf, release } = await import("../lib/cni/host_local.ts");
  for (const taken of [0, 250, 4000]) {
    const dataDir = `${tmp}/inproc${taken}`;
    Deno.mkdirSync(`${dataDir}/ip`, { recursive: true });
    for (let i = 0; i < taken; i++) {
      Deno.writeTextFileSync(`${dataDir}/ip/10.97.${(i + 2) >> 8}.${(i + 2) & 255}`, `f${i}\r\neth0`);
    }
    const c = loadConf(
      { name: "ip", ipam: { dataDir, ranges: [[{ subnet: "10.97.0.0/16" }]] } },
      "1.0.0",
      "",
    );
    const ts: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      await allocate(c, { containerId: `p${i}`, ifname: "eth0" });
      ts.push(performance.now() - t0);
      await release(c, { containerId: `p${i}`, ifname: "eth0" });
    }
    console.log(
      `flanctl host-local allocate() in-process with ${taken} IPs taken: ${median(ts).toFixed(2)} ms`,
    );
  }
  // Where the time goes.
  const empty = `${tmp}/empty.js`;
  Deno.writeTextFileSync(empty, "");
  const floor: number[] = [];
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now();
    await new Deno.Command(Deno.execPath(), {
      args: [...launcherFlags, empty],
    }).output();
    floor.push(performance.now() - t0);
  }
  const fl = median(floor), refPair = seq[0].add + seq[0].del;
  console.log(
    `bare 'deno run' of an empty script (launcher flags): ${fl.toFixed(1)} ms (median of 15); ` +
      `two of them (ADD + DEL) alone are ${(2 * fl / refPair).toFixed(2)}x the reference ADD+DEL ` +
      `(${refPair.toFixed(1)} ms): the floor for any Deno plugin`,
  );
  // Traced calls (FLANCTL_CNI_TRACE=1): each step's wall-clock time since the spawn, medians of
  // TRACE_RUNS ADD/DEL pairs per flanctl bundle row; "runtime started" is Deno's time origin.
  const TRACE_RUNS = 7;
  for (const [k, v] of variants.entries()) {
    if (k === 0 || v.label.startsWith("flanctl source")) continue;
    for (const verb of ["ADD", "DEL"]) {
      const steps = new Map<string, number[]>();
      for (let i = 0; i < TRACE_RUNS; i++) {
        if (verb === "DEL") {
          await call(v, "bridge", "ADD", `traced${i}`, `/var/run/netns/${podNs[0]}`, confFor(k));
        }
        for (const [label, ms] of await tracedCall(v, verb, `traced${i}`, confFor(k))) {
          (steps.get(label) ?? steps.set(label, []).get(label)!).push(ms);
        }
        if (verb === "ADD") {
          await call(v, "bridge", "DEL", `traced${i}`, `/var/run/netns/${podNs[0]}`, confFor(k));
        }
      }
      const line = [...steps].map(([label, ms]) => `${median(ms).toFixed(1)} ${label}`).join(" | ");
      console.log(`${v.label} bridge ${verb}, ms since spawn (median of ${TRACE_RUNS}): ${line}`);
    }
  }
} finally {
  for (const ns of podNs) await sh(["ip", "netns", "del", ns]);
  Deno.removeSync(tmp, { recursive: true });
}
