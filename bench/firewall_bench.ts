/**
 * Firewall benchmark, in a netns of its own (it re-executes itself there; nothing touches the root
 * namespace):
 *
 * 1. Rule programming: 100 pods' port mappings (one tcp hostPort each) added, then removed — the portmap
 *    plugin as a runtime runs it (one process per pod: ours from this checkout's main.ts, iptables and
 *    nftables backends, against the reference portmap (v1.10.0 from install.sh --dev, else Debian's
 *    /usr/lib/cni/portmap; tests/peers.ts refCniDir), iptables), and the same work
 *    in-process through lib/firewall (what the rule programming itself costs without process start-up).
 * 2. The daemon's rule resync, steady state (nothing drifted) and repair (rules deleted), per mode:
 *    iptables (iptables-save per table, one iptables-restore), nftables (listing via libnftables, one
 *    nft transaction), against the reference flanneld's way of checking its iptables rules (one
 *    `iptables -C` process per rule, as go-iptables' Exists does), measured in the same run.
 *
 *   deno task bench firewall      (or: deno run -A bench/firewall_bench.ts [--pods N] [--rounds N])
 * @module
 */
import { runProcess } from "../lib/base/run.ts";
import { arg, runInOwnNetns } from "./own_netns.ts";
import { Iptables } from "../lib/firewall/iptables.ts";
import { nftDriver } from "../lib/firewall/nft.ts";
import { iptablesAdd, iptablesDel, nftAdd, nftDel, type PortMapSpec } from "../lib/firewall/portmap.ts";
import { FlannelRules, iptablesRules } from "../lib/firewall/flannel.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { pluginCmd } from "../tests/cni_helpers.ts";
import { refCniDir } from "../tests/peers.ts";

const REF_CNI = refCniDir();
const REF = `${REF_CNI.dir}/portmap`;

async function sh(cmd: string[], stdin?: string, env?: Record<string, string>) {
  const r = await runProcess(cmd, { stdin, env });
  if (r.code !== 0) throw new Error(`${cmd.join(" ")}: exit ${r.code}: ${r.stdout} ${r.stderr}`);
  return r.stdout;
}

// Outer process: make a netns of our own, re-run ourselves inside it, always clean up.
await runInOwnNetns("FLANCTL_FW_BENCH_NODE", "fbfw", import.meta.url);

// ---- inside the bench netns ---------------------------------------------------------------------------
const PODS = arg("--pods", 100);
const ROUNDS = arg("--rounds", 20);

function podIP(i: number): string {
  return `10.96.${Math.floor((i + 2) / 250)}.${((i + 2) % 250) + 2}`;
}

function conf(i: number, backend?: string) {
  return JSON.stringify({
    cniVersion: "1.0.0",
    name: "bench",
    type: "portmap",
    ...(backend ? { backend } : {}),
    runtimeConfig: { portMappings: [{ hostPort: 20000 + i, containerPort: 80, protocol: "tcp" }] },
    prevResult: {
      cniVersion: "1.0.0",
      interfaces: [{ name: "eth0", sandbox: "/var/run/netns/x" }],
      ips: [{ interface: 0, address: `${podIP(i)}/16` }],
    },
  });
}

function spec(i: number): PortMapSpec {
  return {
    network: "bench",
    containerId: `pod${i}`,
    family: 4,
    containerAddr: `${podIP(i)}/16`,
    mappings: [{ hostPort: 20000 + i, containerPort: 80, protocol: "tcp" }],
    snat: true,
    masqAll: false,
    markMasqBit: 13,
    conditions: [],
  };
}

async function reset() {
  await runProcess(["iptables", "-t", "nat", "-F"]);
  await runProcess(["iptables", "-t", "nat", "-X"]);
  await runProcess(["nft", "flush", "ruleset"]);
}

/** Our portmap plugin, started as the CNI tests start it (main.ts in symlink mode, no deno.json). */
const ours = pluginCmd();

async function viaPlugin(cmd: string[], backend: string | undefined, env: Record<string, string>) {
  const one = (verb: string, i: number) =>
    sh(cmd, conf(i, backend), {
      ...env,
      CNI_COMMAND: verb,
      CNI_CONTAINERID: `pod${i}`,
      CNI_NETNS: "/x",
      CNI_IFNAME: "eth0",
      CNI_PATH: REF_CNI.dir,
    });
  const t0 = performance.now();
  for (let i = 0; i < PODS; i++) await one("ADD", i);
  const t1 = performance.now();
  for (let i = 0; i < PODS; i++) await one("DEL", i);
  const t2 = performance.now();
  return [t1 - t0, t2 - t1];
}

async function inProcess(add: (i: number) => Promise<void>, del: (i: number) => Promise<void>) {
  const t0 = performance.now();
  for (let i = 0; i < PODS; i++) await add(i);
  const t1 = performance.now();
  for (let i = 0; i < PODS; i++) await del(i);
  const t2 = performance.now();
  return [t1 - t0, t2 - t1];
}

const rows: [string, number, number][] = [];
const measure = async (label: string, f: () => Promise<number[]>) => {
  await reset();
  const [a, d] = await f();
  rows.push([label, a, d]);
};

console.log(`portmap: ${PODS} pods, one tcp hostPort each, ADD all then DEL all (sequential)`);
const refOk = (await runProcess([REF], { env: { CNI_COMMAND: "VERSION" }, stdin: "{}" })).code === 0;
if (refOk) {
  await measure(
    `reference portmap ${
      REF_CNI.source === "debian" ? "1.1.1 (Debian)" : `(${REF_CNI.dir})`
    } (iptables, process per pod)`,
    () => viaPlugin([REF], undefined, {}),
  );
}
await measure(
  "flanctl portmap iptables (process per pod)",
  () => viaPlugin(ours, "iptables", { FLANCTL_ARGV0: "portmap" }),
);
await measure(
  "flanctl portmap nftables (process per pod)",
  () => viaPlugin(ours, "nftables", { FLANCTL_ARGV0: "portmap" }),
);
const ipt = new Iptables(4);
await measure(
  "lib/firewall iptables (in-process)",
  () =>
    inProcess((i) => iptablesAdd(ipt, spec(i)), (i) => iptablesDel(ipt, "bench", `pod${i}`).then(() => {})),
);
const nft = nftDriver();
await measure(
  `lib/firewall nftables via ${nft.via} (in-process)`,
  () => inProcess((i) => nftAdd(nft, spec(i)), (i) => nftDel(nft, `pod${i}`).then(() => {})),
);
await reset();

const ref = rows[0];
const pad = (s: string, n: number) => s.padEnd(n);
console.log(`${pad("", 56)} ${pad("ADD ms/pod", 11)} ${pad("DEL ms/pod", 11)} vs reference (ADD, DEL)`);
for (const [label, a, d] of rows) {
  const ratio = refOk ? `${(a / ref[1]).toFixed(2)}x, ${(d / ref[2]).toFixed(2)}x` : "n/a";
  console.log(
    `${pad(label, 56)} ${pad((a / PODS).toFixed(2), 11)} ${pad((d / PODS).toFixed(2), 11)} ${ratio}`,
  );
}

// ---- daemon rule resync ------------------------------------------------------------------------------
const SPEC = {
  ipMasq: true,
  forward: true,
  network: IPNet.parse("10.244.0.0/16"),
  subnet: IPNet.parse("10.244.1.0/24"),
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timeIt(n: number, f: () => Promise<unknown>, before?: () => Promise<unknown>) {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    if (before) await before();
    const t0 = performance.now();
    await f();
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

console.log(`\ndaemon rule resync (median of ${ROUNDS}): masquerade + forward rules, one IPv4 network`);
const res: [string, number, number | null][] = [];
{
  await reset();
  const r = new FlannelRules("iptables");
  r.set(SPEC);
  await r.ensure();
  const steady = await timeIt(ROUNDS, () => r.ensure());
  const repair = await timeIt(
    ROUNDS,
    () => r.ensure(),
    () => sh(["iptables", "-t", "nat", "-F", "FLANNEL-POSTRTG"]),
  );
  res.push(["flanctl iptables (iptables-save per table, one restore)", steady, repair]);
  // flanneld checks each rule with its own `iptables -C` (go-iptables Exists), jumps included.
  const checks = iptablesRules(SPEC).flatMap((t) =>
    [t.jump, ...t.rules].map((l) => ["iptables", "-w", "5", "-t", t.table, "-C", ...splitRule(l.slice(3))])
  );
  const flannelStyle = await timeIt(ROUNDS, async () => {
    for (const c of checks) await sh(c);
  });
  res.push([`reference flanneld-style check (${checks.length} x iptables -C)`, flannelStyle, null]);
}
{
  await reset();
  const r = new FlannelRules("nftables", { nft });
  r.set(SPEC);
  await r.ensure();
  const steady = await timeIt(ROUNDS, () => r.ensure());
  const repair = await timeIt(
    ROUNDS,
    () => r.ensure(),
    () => sh(["nft", "delete", "table", "ip", "flannel-ipv4"]),
  );
  res.push([`flanctl nftables (list via ${nft.via}, one transaction)`, steady, repair]);
}
await reset();
const base = res.find((x) => x[0].startsWith("reference"))![1];
console.log(`${pad("", 60)} ${pad("check ms", 9)} ${pad("repair ms", 10)} check vs reference`);
for (const [label, s, r] of res) {
  console.log(
    `${pad(label, 60)} ${pad(s.toFixed(2), 9)} ${pad(r === null ? "-" : r.toFixed(2), 10)} ${
      (s / base).toFixed(2)
    }x`,
  );
}

/** Splits an iptables-save rule into argv words (double-quoted comments kept whole). */
function splitRule(s: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(s); m; m = re.exec(s)) out.push(m[1] !== undefined ? m[1].replace(/\\"/g, '"') : m[2]);
  return out;
}
