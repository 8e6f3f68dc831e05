/**
 * The CNI latency a user sees, under a real runtime: flanctl's plugins against the reference plugins
 * (v1.10.0 built by install.sh --dev, else Debian's /usr/lib/cni: tests/peers.ts refCniDir) in the same
 * run, interleaved pod by pod:
 *
 * - containerd (Debian 1.6, one per variant in this bench's node netns, lib/lab/containerd.ts) driven by
 *   crictl: `runp` and `stopp`+`rmp` per pod, without and with a hostPort. containerd runs loopback and
 *   then the conflist on runp, and the whole chain's DEL on stopp and again on rmp.
 * - the seeds' conflist (flannel → bridge → host-local, then portmap) through cnitool (libcni v1.3.0,
 *   built by `tools/peers/build.sh cnitool` into the --dev cache): ADD+DEL without ports
 *   and with two port mappings. The reference chain is bridge + host-local with flannel's delegate config
 *   (as flanctl's flannel renders it from the same subnet.env), then the reference portmap.
 *
 * Ours are the installed plugins: CNI_BIN_DIR (install.sh's variable; default /opt/cni/bin). Medians of
 * `--pods N` (default 15). CNI_RT_ALSO=<bin dir> measures a second install of ours in the same rounds (an
 * older tree, to say what a change gained under the same load) and prints its ratio to the reference too. Also prints a bare `deno run` (the floor of any Deno plugin process) and how
 * many plugin processes each operation starts, to say where the time goes.
 *
 *   deno task bench cni_runtime   (or: CNI_BIN_DIR=/tmp/x deno run -A bench/cni_runtime_bench.ts)
 * @module
 */
import { runProcess } from "../lib/base/run.ts";
import { arg, runInOwnNetns } from "./own_netns.ts";
import { CNI_DENO_RUN_FLAGS } from "../lib/cni/launch.ts";
import {
  buildSandboxImage,
  containerdPaths,
  crictl,
  missingRuntime,
  podSandboxConfig,
  startContainerd,
  stopContainerd,
} from "../lib/lab/containerd.ts";
import { findPeer, peerBinDir, refCniDir } from "../tests/peers.ts";

const REF = refCniDir();
const OURS = Deno.env.get("CNI_BIN_DIR") ?? "/opt/cni/bin";
const ALSO = Deno.env.get("CNI_RT_ALSO");
/** libcni's cnitool from the --dev cache (FLANCTL_PEER_CNITOOL overrides). */
const CNITOOL = findPeer("cnitool");

await runInOwnNetns("FLANCTL_CNI_RT_BENCH_NODE", "fbrt", import.meta.url);

const missing = missingRuntime();
if (!CNITOOL) missing.push(`cnitool (not in ${peerBinDir("cnitool")}: tools/peers/build.sh cnitool)`);
if (!CNITOOL || missing.length) {
  console.log(`cni_runtime_bench: SKIPPED, missing ${missing.join(", ")}`);
  Deno.exit(0);
}

const PODS = arg("--pods", 15);
const tmp = Deno.makeTempDirSync({ prefix: "flanctl-cni-rt-bench-" });
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
async function must(cmd: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await runProcess(cmd, { env });
  if (r.code !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

interface Variant {
  label: string;
  bin: string;
  conf: string;
  net: string;
  socket: string;
  pid: number;
}

/**
 * A variant's conflist: ours (flannel + portmap; the second install of ours on its own bridge and subnet)
 * or the reference chain with flannel's delegate config.
 */
function writeConf(k: "ours" | "ref" | "also", dir: string): string {
  const conf = `${dir}/net.d`;
  Deno.mkdirSync(conf, { recursive: true });
  const portmap = { type: "portmap", capabilities: { portMappings: true } };
  const list = k !== "ref"
    ? {
      name: k === "ours" ? "cbr0" : "cbr2",
      cniVersion: "1.0.0",
      plugins: [
        {
          type: "flannel",
          subnetFile: `${dir}/subnet.env`,
          dataDir: `${dir}/flannel`,
          ipam: { dataDir: `${dir}/networks` },
          delegate: { hairpinMode: true, isDefaultGateway: true, bridge: k === "ours" ? "cni0" : "cni2" },
        },
        portmap,
      ],
    }
    : {
      name: "cbr1",
      cniVersion: "1.0.0",
      plugins: [
        {
          // What flannel renders from FLANNEL_SUBNET=10.244.2.1/24, MTU 1450, IPMASQ true.
          type: "bridge",
          bridge: "cni1",
          hairpinMode: true,
          isDefaultGateway: true,
          isGateway: true,
          ipMasq: false,
          mtu: 1450,
          ipam: {
            type: "host-local",
            dataDir: `${dir}/networks`,
            ranges: [[{ subnet: "10.244.2.0/24" }]],
            routes: [{ dst: "10.244.0.0/16" }],
          },
        },
        portmap,
      ],
    };
  Deno.writeTextFileSync(
    `${dir}/subnet.env`,
    `FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.${k === "also" ? 3 : 1}.1/24\nFLANNEL_MTU=1450\n` +
      "FLANNEL_IPMASQ=true\n",
  );
  Deno.writeTextFileSync(`${conf}/10-${list.name}.conflist`, JSON.stringify(list));
  return conf;
}

const variants: Variant[] = [];
const podNs: string[] = [];
try {
  // libcni's result cache (cnitool) goes to /var/lib/cni: a private copy in this bench's mount namespace.
  Deno.mkdirSync(`${tmp}/varlibcni`);
  await must(["mount", "--bind", `${tmp}/varlibcni`, "/var/lib/cni"]);
  await buildSandboxImage(`${tmp}/pause.tar`);
  const kinds: ["ref" | "ours" | "also", string, string][] = [
    ["ref", "reference plugins", REF.dir],
    ["ours", `flanctl (${OURS})`, OURS],
    ...(ALSO ? [["also", `flanctl (${ALSO})`, ALSO] as ["also", string, string]] : []),
  ];
  for (const [k, label, bin] of kinds) {
    const dir = `${tmp}/${k}`;
    Deno.mkdirSync(dir);
    const conf = writeConf(k, dir);
    const p = containerdPaths(`${dir}/containerd`);
    const node = Deno.env.get("FLANCTL_CNI_RT_BENCH_NODE")!;
    const pid = await startContainerd(node, p, {
      cniBinDir: bin,
      cniConfDir: conf,
      imageTar: `${tmp}/pause.tar`,
    });
    variants.push({
      label,
      bin,
      conf,
      net: { ours: "cbr0", ref: "cbr1", also: "cbr2" }[k],
      socket: p.socket,
      pid,
    });
  }

  const t = async (f: () => Promise<unknown>) => {
    const t0 = performance.now();
    await f();
    return performance.now() - t0;
  };
  const crictlOk = async (v: Variant, args: string[]) => {
    const r = await crictl(v.socket, args);
    if (r.code !== 0) throw new Error(`${v.label}: crictl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout.trim();
  };

  /** One pod through containerd on variant `k`: [runp, stopp+rmp] ms. */
  const runtimeOnce = async (k: number, i: number, ports: boolean): Promise<number[]> => {
    const v = variants[k];
    const cfg = `${tmp}/pod-${k}-${i}-${ports}.json`;
    const name = `p${i}${ports ? "h" : ""}`;
    Deno.writeTextFileSync(
      cfg,
      podSandboxConfig(name, { ports: ports ? [{ hostPort: 18080 + k, containerPort: 80 }] : [] }),
    );
    let id = "";
    const a = await t(async () => id = (await crictlOk(v, ["runp", cfg])).split("\n").pop()!);
    const b = await t(async () => {
      await crictlOk(v, ["stopp", id]);
      await crictlOk(v, ["rmp", id]);
    });
    return [a, b];
  };

  const cnitoolPod = `fbrtpod${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5)}`;
  await must(["ip", "netns", "add", cnitoolPod]);
  podNs.push(cnitoolPod);
  /** The whole conflist through cnitool on variant `k`: [ADD, DEL] ms. */
  const cnitoolOnce = async (k: number, ports: boolean): Promise<number[]> => {
    const v = variants[k];
    const caps = {
      portMappings: [
        { hostPort: 18090 + 4 * k, containerPort: 80, protocol: "tcp" },
        { hostPort: 18092 + 4 * k, containerPort: 53, protocol: "udp" },
      ],
    };
    const env: Record<string, string> = {
      NETCONFPATH: v.conf,
      CNI_PATH: v.bin,
      ...(ports ? { CAP_ARGS: JSON.stringify(caps) } : {}),
    };
    const a = await t(() => must([CNITOOL, "add", v.net, `/var/run/netns/${cnitoolPod}`], env));
    const b = await t(() => must([CNITOOL, "del", v.net, `/var/run/netns/${cnitoolPod}`], env));
    return [a, b];
  };

  // Every case and variant in every round (load changes hit all alike); the order alternates by round.
  const cases: {
    label: string;
    parts: [string, string];
    goals: [string, string];
    once: (k: number, i: number) => Promise<number[]>;
  }[] = [
    {
      label: "no ports",
      parts: ["containerd runp", "containerd stopp+rmp"],
      goals: ["<= 1.25x", "<= 1.5x"],
      once: (k, i) => runtimeOnce(k, i, false),
    },
    {
      label: "with a hostPort",
      parts: ["containerd runp", "containerd stopp+rmp"],
      goals: ["<= 1.25x", "<= 1.5x"],
      once: (k, i) => runtimeOnce(k, i, true),
    },
    {
      label: "no ports",
      parts: ["cnitool conflist ADD", "cnitool conflist DEL"],
      goals: ["", ""],
      once: (k) => cnitoolOnce(k, false),
    },
    {
      label: "two port mappings",
      parts: ["cnitool conflist ADD", "cnitool conflist DEL"],
      goals: ["", ""],
      once: (k) => cnitoolOnce(k, true),
    },
  ];
  const ms = cases.map(() => variants.map(() => [[], []] as number[][]));
  const load0 = Deno.loadavg()[0];
  for (let i = -1; i < PODS; i++) {
    for (const [c, kase] of cases.entries()) {
      const order = variants.map((_, k) => k);
      for (const k of i % 2 ? order : order.reverse()) {
        const [a, b] = await kase.once(k, i);
        if (i >= 0) ms[c][k][0].push(a), ms[c][k][1].push(b); // round -1 warms up
      }
    }
  }
  const f = (x: number) => x.toFixed(1).padStart(7);
  const r = (x: number, y: number) => `${(x / y).toFixed(2).padStart(5)}x`;
  console.log(
    `CNI under a real runtime, ${PODS} rounds (median ms), every case and variant in every round; ` +
      `load average ${load0.toFixed(1)} at the start, ${Deno.loadavg()[0].toFixed(1)} at the end`,
  );
  console.log(`reference plugins: ${REF.label}; cnitool: ${CNITOOL}`);
  if (ALSO) console.log(`also: ${variants[2].label}, its columns last`);
  const also = ALSO ? `${"also".padStart(10)}  ratio` : "";
  console.log(
    `${"".padEnd(42)}${"reference".padStart(10)}${"flanctl".padStart(10)}  ratio   goal    ${also}`,
  );
  for (const [c, kase] of cases.entries()) {
    const m = (k: number, part: number) => median(ms[c][k][part]);
    for (const part of [0, 1]) {
      const more = ALSO ? `   ${f(m(2, part))}  ${r(m(2, part), m(0, part))}` : "";
      console.log(
        `${`${kase.parts[part]} (${kase.label})`.padEnd(42)}${f(m(0, part))}   ${f(m(1, part))}  ${
          r(m(1, part), m(0, part))
        }  ${kase.goals[part].padEnd(8)}${more}`,
      );
    }
    const pair = (k: number) => median(ms[c][k][0].map((x, j) => x + ms[c][k][1][j]));
    const more = ALSO ? `${"".padEnd(8)}   ${f(pair(2))}  ${r(pair(2), pair(0))}` : "";
    console.log(
      `${`  both (${kase.label})`.padEnd(42)}${f(pair(0))}   ${f(pair(1))}  ${r(pair(1), pair(0))}  ${more}`,
    );
  }
  // Where the time goes: each plugin call is a process; ours are Deno processes.
  const empty = `${tmp}/empty.js`;
  Deno.writeTextFileSync(empty, "");
  const floor: number[] = [];
  for (let i = 0; i < 15; i++) {
    floor.push(
      await t(() =>
        new Deno.Command(Deno.execPath(), { args: ["run", ...CNI_DENO_RUN_FLAGS, empty] }).output()
      ),
    );
  }
  console.log(
    `bare 'deno run' of an empty script: ${
      median(floor).toFixed(1)
    } ms (median of 15). Plugin processes per ` +
      "operation (containerd 1.6): runp 3 (loopback, flannel with bridge and host-local in-process, portmap), " +
      "of which portmap's ADD without a port mapping is answered by our installed launchers with one awk, " +
      "without starting Deno (lib/cni/early_add.ts: 2 Deno starts then); " +
      "stopp 3 (the chain's DEL in reverse, then loopback) and rmp the same 3 DELs again, which our installed " +
      "launchers answer without starting Deno (lib/cni/deleted.ts), as they answer portmap's DEL when its ADD " +
      "had no port mapping (stopp 2 then); cnitool ADD 2, DEL 2 (1 without ports). The reference " +
      "chain starts one more process per ADD/DEL (bridge execs host-local).",
  );
} finally {
  for (const v of variants) {
    const k = { cbr0: "ours", cbr1: "ref", cbr2: "also" }[v.net];
    await stopContainerd(v.pid, containerdPaths(`${tmp}/${k}/containerd`));
  }
  for (const ns of podNs) await runProcess(["ip", "netns", "del", ns]);
  await runProcess(["umount", "/var/lib/cni"]);
  Deno.removeSync(tmp, { recursive: true });
}
