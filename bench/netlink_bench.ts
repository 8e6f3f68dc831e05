/**
 * Kernel layer benchmark (`deno task bench netlink`).
 *
 * 1. Programs 1000 and 5000 VXLAN peers (onlink route + permanent ARP + FDB entry each, flannel's
 *    per-node triplet) on a vxlan device in a fresh namespace with the library — one call per entry, and
 *    pipelined through `writeMany` (what the daemon's reconciler uses) — and the same entries in another
 *    fresh namespace with `ip -batch` (routes, ARP) and `bridge -batch` (FDB). Prints the times and the
 *    ratios (goals: pipelined <= 0.8x iproute2 at 1000, <= 1.0x at 5000).
 * 2. Reads back 10,000 routes: library `routes()` vs `ip -j route show` (goal <= 1.0x).
 *
 * Each measurement is the median of several rounds in fresh namespaces, the variants interleaved round
 * by round (load changes hit all alike). Nothing touches the root namespace.
 * @module
 */
import { mustRun } from "../lib/lab/proc.ts";
import { type NetlinkWrite, openNetlink } from "../lib/netlink/mod.ts";
import { type Cidr, type Ip, type Mac, parseCidr, parseIp, parseMac } from "../lib/base/cidr.ts";

const PEERS = [1000, 5000];
const READ_ROUTES = 10_000;
const ROUNDS = 5;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const run = (cmd: string[], stdin?: string) => mustRun(cmd, { stdin });
const out = (cmd: string[]) => mustRun(cmd);

let seq = 0;
async function freshNs(): Promise<string> {
  const name = `fbench${Deno.pid}x${seq++}`;
  await run(["ip", "netns", "add", name]);
  return name;
}

async function delNs(name: string): Promise<void> {
  await run(["ip", "netns", "del", name]).catch(() => {});
}

/** Underlay (dummy where the kernel has it, else a veth) + flannel.1 vxlan, all up. */
async function underlay(ns: string): Promise<void> {
  const ip = (...a: string[]) => run(["ip", "-n", ns, ...a]);
  await ip("link", "set", "lo", "up");
  try {
    await ip("link", "add", "ul0", "type", "dummy");
  } catch {
    await ip("link", "add", "ul0", "type", "veth", "peer", "name", "ul1");
    await ip("link", "set", "ul1", "up");
  }
  await ip("link", "set", "ul0", "up");
  await ip("addr", "add", "10.50.0.1/16", "dev", "ul0");
  await ip(
    "link",
    "add",
    "flannel.1",
    "type",
    "vxlan",
    "id",
    "1",
    "dstport",
    "8472",
    "local",
    "10.50.0.1",
    "dev",
    "ul0",
    "nolearning",
  );
  await ip("link", "set", "flannel.1", "up");
}

interface Peer {
  subnet: Cidr;
  gw: Ip;
  mac: Mac;
  underlay: Ip;
}

function peers(n: number): Peer[] {
  return Array.from({ length: n }, (_, i) => {
    const a = 200 + (i >> 8), b = i & 255;
    const hex = (x: number) => x.toString(16).padStart(2, "0");
    return {
      subnet: parseCidr(`10.${a}.${b}.0/24`),
      gw: parseIp(`10.${a}.${b}.0`),
      mac: parseMac(`0e:00:00:00:${hex(i >> 8)}:${hex(b)}`),
      underlay: parseIp(`10.50.${1 + (i >> 8)}.${b}`),
    };
  });
}

async function counts(ns: string): Promise<string> {
  const r = JSON.parse(await out(["ip", "-n", ns, "-j", "route", "show", "dev", "flannel.1"])).length;
  const a = JSON.parse(await out(["ip", "-n", ns, "-j", "neigh", "show", "dev", "flannel.1"])).length;
  const f = JSON.parse(await out(["bridge", "-n", ns, "-j", "fdb", "show", "dev", "flannel.1"]))
    .filter((e: { dst?: string }) => e.dst).length;
  return `${r} routes, ${a} ARP, ${f} FDB`;
}

async function programLibrary(ps: Peer[], pipelined: boolean): Promise<{ ms: number; counts: string }> {
  const ns = await freshNs();
  try {
    await underlay(ns);
    const h = openNetlink({ name: ns });
    try {
      const t = performance.now();
      if (pipelined) {
        const writes: NetlinkWrite[] = [];
        for (const p of ps) {
          writes.push(
            { op: "replaceNeigh", neigh: { dev: "flannel.1", dst: p.gw, lladdr: p.mac } },
            { op: "replaceFdb", fdb: { dev: "flannel.1", mac: p.mac, dst: p.underlay } },
            { op: "replaceRoute", route: { dst: p.subnet, via: p.gw, dev: "flannel.1", onlink: true } },
          );
        }
        const failed = h.writeMany(writes).filter((e) => e !== null);
        if (failed.length) throw failed[0];
      } else {
        for (const p of ps) {
          h.replaceRoute({ dst: p.subnet, via: p.gw, dev: "flannel.1", onlink: true });
          h.replaceNeigh({ dev: "flannel.1", dst: p.gw, lladdr: p.mac });
          h.replaceFdb({ dev: "flannel.1", mac: p.mac, dst: p.underlay });
        }
      }
      const ms = performance.now() - t;
      return { ms, counts: await counts(ns) };
    } finally {
      h.close();
    }
  } finally {
    await delNs(ns);
  }
}

async function programIproute2(ps: Peer[]): Promise<{ ms: number; counts: string }> {
  const ns = await freshNs();
  try {
    await underlay(ns);
    const ipBatch = ps.map((p) =>
      `route replace ${p.subnet} via ${p.gw} dev flannel.1 onlink\nneigh replace ${p.gw} lladdr ${p.mac} dev flannel.1 nud permanent`
    ).join("\n") + "\n";
    const brBatch = ps.map((p) =>
      `fdb replace ${p.mac} dev flannel.1 dst ${p.underlay} self permanent`
    ).join("\n") +
      "\n";
    const t0 = performance.now();
    await run(["ip", "-n", ns, "-batch", "-"], "");
    await run(["bridge", "-n", ns, "-batch", "-"], "");
    startup = Math.min(startup, performance.now() - t0);
    const t = performance.now();
    await run(["ip", "-n", ns, "-batch", "-"], ipBatch);
    await run(["bridge", "-n", ns, "-batch", "-"], brBatch);
    const ms = performance.now() - t;
    return { ms, counts: await counts(ns) };
  } finally {
    await delNs(ns);
  }
}

async function readBack(): Promise<{ lib: number; ip: number; n: number }> {
  const ns = await freshNs();
  try {
    await underlay(ns);
    const batch = Array.from({ length: READ_ROUTES }, (_, i) =>
      `route add 10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}/32 via 10.50.0.2 dev ul0`).join("\n") +
      "\n";
    await run(["ip", "-n", ns, "-batch", "-"], batch);
    const h = openNetlink({ name: ns });
    try {
      const lib: number[] = [], ipMs: number[] = [];
      let n = 0;
      for (let r = 0; r < ROUNDS; r++) {
        let t = performance.now();
        n = h.routes({ family: 4 }).length;
        lib.push(performance.now() - t);
        t = performance.now();
        JSON.parse(await out(["ip", "-n", ns, "-j", "route", "show"]));
        ipMs.push(performance.now() - t);
      }
      return { lib: median(lib), ip: median(ipMs), n };
    } finally {
      h.close();
    }
  } finally {
    await delNs(ns);
  }
}

/** Best time of `ip -batch` + `bridge -batch` on empty input (process start + netns switch). */
let startup = Infinity;
for (const count of PEERS) {
  const ps = peers(count);
  const rounds = count > 1000 ? 3 : ROUNDS;
  const calls: number[] = [], piped: number[] = [], ipb: number[] = [];
  let libCounts = "", pipeCounts = "", ipCounts = "";
  for (let r = 0; r < rounds; r++) {
    const a = await programLibrary(ps, false);
    const p = await programLibrary(ps, true);
    const b = await programIproute2(ps);
    calls.push(a.ms), piped.push(p.ms), ipb.push(b.ms);
    libCounts = a.counts, pipeCounts = p.counts, ipCounts = b.counts;
  }
  const [c, p, i] = [median(calls), median(piped), median(ipb)];
  const goal = count > 1000 ? "1.00" : "0.80";
  console.log(`program ${count} VXLAN peers (route+ARP+FDB), median of ${rounds} interleaved rounds:`);
  console.log(`  library, one call per entry   ${c.toFixed(1).padStart(8)} ms   [${libCounts}]`);
  console.log(`  library, writeMany pipelined  ${p.toFixed(1).padStart(8)} ms   [${pipeCounts}]`);
  console.log(`  ip -batch + bridge -batch     ${i.toFixed(1).padStart(8)} ms   [${ipCounts}]`);
  console.log(`  ratio calls/iproute2          ${(c / i).toFixed(2).padStart(8)}x`);
  console.log(`  ratio pipelined/iproute2      ${(p / i).toFixed(2).padStart(8)}x   (goal <= ${goal}x)`);
}
console.log(`  (iproute2 process start-up, empty batches, best: ${startup.toFixed(1)} ms)`);
const rb = await readBack();
console.log(`read back ${rb.n} routes, median of ${ROUNDS}:`);
console.log(`  library routes()           ${rb.lib.toFixed(1).padStart(8)} ms`);
console.log(`  ip -j route show           ${rb.ip.toFixed(1).padStart(8)} ms`);
console.log(`  ratio library/iproute2     ${(rb.lib / rb.ip).toFixed(2).padStart(8)}x   (goal <= 1.00x)`);
