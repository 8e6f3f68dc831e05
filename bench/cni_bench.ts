/**
 * CNI benchmark: ADD+DEL per pod, flanctl's plugins against the reference Go bridge+host-local
 * (/usr/lib/cni), measured in the same run: sequential, and 10 pods in parallel; then host-local alone with
 * 250 IPs already allocated. Runs in its own node netns (it re-executes itself there), pods in their own
 * netns; nothing touches the root namespace.
 *
 * flanctl is started the way the installed launcher starts it (`deno run` on main.ts with FLANCTL_ARGV0 set
 * to the plugin name), and also from a pre-bundled main.ts (`deno bundle --code-splitting`, one
 * pre-resolved JavaScript module graph) to show what bundling in install.sh would give.
 *
 *   deno task bench cni          (or: deno run -A bench/cni_bench.ts [--pods N])
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname;
const REF = "/usr/lib/cni";
const SUBNET = "10.96.0.0/24";

function arg(name: string, def: number): number {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : def;
}

async function sh(cmd: string[], stdin?: string): Promise<{ code: number; out: string; err: string }> {
  const p = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const o = await p.output();
  return { code: o.code, out: new TextDecoder().decode(o.stdout), err: new TextDecoder().decode(o.stderr) };
}

if (Deno.env.get("FLANCTL_CNI_BENCH_NODE") === undefined) {
  // Outer process: make a node netns, re-run ourselves inside it, always clean up.
  const node = `fbnode${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 6)}`;
  await sh(["ip", "netns", "add", node]);
  let code = 1;
  try {
    await sh(["ip", "-n", node, "link", "set", "lo", "up"]);
    const p = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        node,
        "env",
        `FLANCTL_CNI_BENCH_NODE=${node}`,
        Deno.execPath(),
        "run",
        "-A",
        "--no-check",
        new URL(import.meta.url).pathname,
        ...Deno.args,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
    code = (await p.status).code;
  } finally {
    const pids = await sh(["ip", "netns", "pids", node]);
    for (const pid of pids.out.split(/\s+/).filter(Boolean)) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
      } catch { /* gone */ }
    }
    await sh(["ip", "netns", "del", node]);
  }
  Deno.exit(code);
}

// ---- inside the node netns ----------------------------------------------------------------------------
const PODS = arg("--pods", 20);
const tmp = Deno.makeTempDirSync({ prefix: "flanctl-cni-bench-" });
const podNs: string[] = [];

type Runner = {
  label: string;
  cmd: (plugin: string) => string[];
  env: (plugin: string) => Record<string, string>;
};

const launcherFlags = ["run", "-A", "--no-check", "--no-prompt", "--quiet"];
const variants: Runner[] = [
  {
    label: "reference bridge+host-local",
    cmd: (p) => [`${REF}/${p}`],
    env: () => ({}),
  },
  {
    label: "flanctl (launcher: deno run main.ts)",
    cmd: () => [Deno.execPath(), ...launcherFlags, "--config", `${ROOT}deno.json`, `${ROOT}main.ts`],
    env: (p) => ({ FLANCTL_ARGV0: p }),
  },
];

function conf(dataDir: string, name = "benchnet"): string {
  return JSON.stringify({
    cniVersion: "0.3.1",
    name,
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ipMasq: false,
    hairpinMode: true,
    mtu: 1450,
    ipam: { type: "host-local", dataDir, ranges: [[{ subnet: SUBNET }]], routes: [{ dst: "10.96.0.0/16" }] },
  });
}

async function call(
  r: Runner,
  plugin: string,
  command: string,
  cid: string,
  netns: string,
  stdin: string,
): Promise<number> {
  const [exe, ...args] = r.cmd(plugin);
  const t0 = performance.now();
  const p = new Deno.Command(exe, {
    args,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      ...r.env(plugin),
      CNI_COMMAND: command,
      CNI_CONTAINERID: cid,
      CNI_NETNS: netns,
      CNI_IFNAME: "eth0",
      CNI_PATH: REF,
    },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(stdin));
  await w.close();
  const o = await p.output();
  const ms = performance.now() - t0;
  if (o.code !== 0) {
    throw new Error(`${r.label} ${plugin} ${command} failed: ${new TextDecoder().decode(o.stdout)}`);
  }
  return ms;
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

async function sequential(r: Runner, dataDir: string) {
  const add: number[] = [], del: number[] = [];
  const c = conf(dataDir);
  for (let i = 0; i < PODS; i++) {
    const ns = `/var/run/netns/${podNs[0]}`;
    add.push(await call(r, "bridge", "ADD", `seq${i}`, ns, c));
    del.push(await call(r, "bridge", "DEL", `seq${i}`, ns, c));
  }
  return { add: median(add), del: median(del) };
}

async function parallel(r: Runner, dataDir: string) {
  const c = conf(dataDir);
  const rounds = 3;
  let total = 0;
  for (let round = 0; round < rounds; round++) {
    const t0 = performance.now();
    await Promise.all(
      podNs.slice(0, 10).map((ns, i) =>
        call(r, "bridge", "ADD", `par${round}-${i}`, `/var/run/netns/${ns}`, c)
      ),
    );
    await Promise.all(
      podNs.slice(0, 10).map((ns, i) =>
        call(r, "bridge", "DEL", `par${round}-${i}`, `/var/run/netns/${ns}`, c)
      ),
    );
    total += performance.now() - t0;
  }
  return total / rounds / 10; // wall ms per pod (ADD+DEL) with 10 in flight
}

/** host-local alone with 250 of 253 addresses taken (files in the reference format). */
async function hostLocal250(r: Runner, dataDir: string) {
  const dir = `${dataDir}/hl250`;
  Deno.mkdirSync(dir, { recursive: true });
  for (let i = 2; i < 252; i++) {
    Deno.writeTextFileSync(`${dir}/10.96.0.${i}`, `filler${i}\r\neth0`, { mode: 0o600 });
  }
  const c = JSON.stringify({
    cniVersion: "0.3.1",
    name: "hl250",
    type: "host-local",
    ipam: { type: "host-local", dataDir, ranges: [[{ subnet: SUBNET }]] },
  });
  const add: number[] = [], del: number[] = [];
  for (let i = 0; i < PODS; i++) {
    add.push(await call(r, "host-local", "ADD", `hl${i}`, "/nonexistent", c));
    del.push(await call(r, "host-local", "DEL", `hl${i}`, "/nonexistent", c));
  }
  return { add: median(add), del: median(del) };
}

try {
  // Optional: a pre-bundled main.ts (what install.sh could install for the CNI fast path).
  const bundleDir = `${tmp}/bundle`;
  const b = await sh([
    Deno.execPath(),
    "bundle",
    "--quiet",
    "--platform",
    "deno",
    "--code-splitting",
    "--outdir",
    bundleDir,
    `${ROOT}main.ts`,
  ]);
  if (b.code === 0) {
    variants.push({
      label: "flanctl (pre-bundled main.js)",
      cmd: () => [
        Deno.execPath(),
        ...launcherFlags,
        "--no-config",
        "--no-lock",
        "--cached-only",
        `${bundleDir}/main.js`,
      ],
      env: (p) => ({ FLANCTL_ARGV0: p }),
    });
  } else {
    console.log(`(deno bundle failed, bundled variant skipped: ${b.err.trim().split("\n").pop()})`);
  }
  await newPods(10);
  const res: Record<
    string,
    { seq: { add: number; del: number }; par: number; hl: { add: number; del: number } }
  > = {};
  for (const v of variants) {
    const dataDir = `${tmp}/${v.label.replace(/\W+/g, "_")}`;
    // Warm-up (module cache, bridge creation) outside the measurement.
    await call(v, "bridge", "ADD", "warm", `/var/run/netns/${podNs[0]}`, conf(dataDir));
    await call(v, "bridge", "DEL", "warm", `/var/run/netns/${podNs[0]}`, conf(dataDir));
    res[v.label] = {
      seq: await sequential(v, dataDir),
      par: await parallel(v, dataDir),
      hl: await hostLocal250(v, dataDir),
    };
    await sh(["ip", "link", "del", "cni0"]);
  }
  const ref = res[variants[0].label];
  console.log(`CNI ADD+DEL per pod, ${PODS} pods sequential (median ms), 10 in parallel (wall ms per pod)`);
  console.log(
    `${"variant".padEnd(38)}     ADD     DEL ADD+DEL  ratio | par/pod  ratio | hl250 ADD  DEL  ratio`,
  );
  for (const v of variants) {
    const x = res[v.label];
    const pair = x.seq.add + x.seq.del, refPair = ref.seq.add + ref.seq.del;
    const hlPair = x.hl.add + x.hl.del, refHl = ref.hl.add + ref.hl.del;
    console.log(
      `${v.label.padEnd(38)} ${f(x.seq.add)} ${f(x.seq.del)} ${f(pair)} ${
        (pair / refPair).toFixed(2).padStart(5)
      }x |` +
        ` ${f(x.par)} ${(x.par / ref.par).toFixed(2).padStart(5)}x | ${f(x.hl.add)} ${f(x.hl.del)} ${
          (hlPair / refHl).toFixed(2).padStart(5)
        }x`,
    );
  }
  const hlOurs = res[variants[variants.length - 1].label].hl;
  console.log(
    `host-local with 250 IPs allocated, ADD only: reference ${ref.hl.add.toFixed(1)} ms, flanctl ${
      hlOurs.add.toFixed(1)
    } ms (${(hlOurs.add / ref.hl.add).toFixed(2)}x)`,
  );
} finally {
  for (const ns of podNs) await sh(["ip", "netns", "del", ns]);
  Deno.removeSync(tmp, { recursive: true });
}
