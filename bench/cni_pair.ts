/**
 * Two CNI installs against each other, paired: each round runs ADD then DEL of one pod (bridge +
 * host-local, the bench conf of bench/cni_bench.ts) with install A and with install B, the order swapped
 * every round, and reports each install's medians and the medians of the per-round differences A − B. On
 * this shared 2-core machine the paired difference is what resolves a change of ~1 ms in a ~70 ms ADD+DEL;
 * the per-install medians of cni_bench.ts move by more than that between runs. Runs in a netns of its own
 * (re-executes itself there), the pod in another; nothing touches the root namespace.
 *
 *   deno run -A bench/cni_pair.ts A_CNI_BIN_DIR B_CNI_BIN_DIR [--rounds 300]
 *
 * An install of a given tree into a private prefix, to compare two commits:
 * `FLANCTL_PREFIX=/tmp/x CNI_BIN_DIR=/tmp/x/cni ./install.sh` (run from a copy of that tree).
 * @module
 */
import { runProcess } from "../lib/base/run.ts";
import { arg, runInOwnNetns } from "./own_netns.ts";
import { bridgeBenchConf } from "./cni_conf.ts";
import { refCniDir } from "../tests/peers.ts";

await runInOwnNetns("FLANCTL_CNI_PAIR_NODE", "fpnode", import.meta.url);

const dirs = Deno.args.filter((a, i) => !a.startsWith("--") && !Deno.args[i - 1]?.startsWith("--"));
if (dirs.length !== 2) {
  console.error("usage: deno run -A bench/cni_pair.ts A_CNI_BIN_DIR B_CNI_BIN_DIR [--rounds 300]");
  Deno.exit(2);
}
const ROUNDS = arg("--rounds", 300);
/** The reference plugins (v1.10.0 from install.sh --dev, else /usr/lib/cni): the CNI_PATH for host-local. */
const REF = refCniDir().dir;
const tmp = Deno.makeTempDirSync({ prefix: "flanctl-cni-pair-" });
const pod = `fppod${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 5)}`;

/** Variant `k`'s config (bench/cni_conf.ts). */
function conf(k: number): string {
  return bridgeBenchConf("pairnet", "cnip", 97, k, tmp);
}

/** One plugin call as a runtime makes it; resolves to its wall time in ms. */
async function call(k: number, command: string, cid: string): Promise<number> {
  const t0 = performance.now();
  const p = new Deno.Command(`${dirs[k]}/bridge`, {
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: cid,
      CNI_NETNS: `/var/run/netns/${pod}`,
      CNI_IFNAME: "eth0",
      CNI_PATH: REF,
    },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(conf(k)));
  await w.close();
  const o = await p.output();
  const ms = performance.now() - t0;
  if (o.code !== 0) {
    const d = new TextDecoder();
    throw new Error(`${dirs[k]}/bridge ${command} failed: ${d.decode(o.stdout)}${d.decode(o.stderr)}`);
  }
  return ms;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x: number) => x.toFixed(2).padStart(7);

const add: number[][] = [[], []], del: number[][] = [[], []];
await runProcess(["ip", "netns", "add", pod]);
try {
  for (const k of [0, 1]) { // warm-up: bridges created, caches read once
    await call(k, "ADD", "warm");
    await call(k, "DEL", "warm");
  }
  for (let i = 0; i < ROUNDS; i++) {
    for (const k of i % 2 ? [1, 0] : [0, 1]) {
      add[k].push(await call(k, "ADD", `p${i}`));
      del[k].push(await call(k, "DEL", `p${i}`));
    }
  }
} finally {
  await runProcess(["ip", "netns", "del", pod]);
  Deno.removeSync(tmp, { recursive: true });
}
for (const k of [0, 1]) {
  const pair = add[k].map((a, i) => a + del[k][i]);
  console.log(
    `${"AB"[k]} ${dirs[k].padEnd(30)} ADD ${f(median(add[k]))} DEL ${f(median(del[k]))} ADD+DEL ${
      f(median(pair))
    } ms (medians)`,
  );
}
const dAdd = add[0].map((a, i) => a - add[1][i]), dDel = del[0].map((d, i) => d - del[1][i]);
console.log(
  `A - B, medians of the per-round differences over ${ROUNDS} rounds: ADD ${f(median(dAdd))} DEL ${
    f(median(dDel))
  } ADD+DEL ${f(median(dAdd.map((a, i) => a + dDel[i])))} ms`,
);
