/**
 * Store benchmark: acquire rate (leases/s) and watch fan-out latency (a lease written → seen by every one
 * of W watchers) with 1,000 and 5,000 existing leases, for the file store and the etcd store (a throwaway
 * etcd on loopback). There is no external reference for stores, so the two are compared with each other.
 *
 * `deno task bench store` (or `deno run -A bench/store_bench.ts [--quick] [--sizes 1000,5000] [--acquires N]`).
 * @module
 */
import { FileStore } from "../lib/store/file/file.ts";
import { EtcdStore } from "../lib/store/etcd/etcd.ts";
import { encodeLeaseAttrs, leaseKey } from "../lib/lease/wire.ts";
import { IPAddr, IPNet } from "../lib/base/cidr.ts";
import type { LeaseAttrsWire, SubnetStore } from "../lib/store/types.ts";
import { EtcdFixture } from "../tests/store_helpers.ts";

const QUICK = Deno.args.includes("--quick");
const flag = (name: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const SIZES = flag("--sizes")?.split(",").map(Number) ?? (QUICK ? [1000] : [1000, 5000]);
const ACQUIRES = Number(flag("--acquires") ?? (QUICK ? 50 : 200));
const WATCHERS = 10;
const WARMUP = 3;
const FANOUT_ROUNDS = QUICK ? 10 : 30;
const NETCONF = JSON.stringify({ Network: "10.0.0.0/8", SubnetLen: 24, Backend: { Type: "vxlan" } });

const attrs = (i: number): LeaseAttrsWire => ({
  PublicIP: new IPAddr(4, 0xac100000n + BigInt(i)).toString(),
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "0e:00:00:00:00:01" },
});
const subnetN = (i: number) => new IPNet(new IPAddr(4, 0x0a000000n + BigInt(i + 1) * 256n), 24);

/** Fills the store with `n` leases quickly (bypassing the allocator: this is setup, not measured). */
async function populate(kind: "file" | "etcd", s: SubnetStore, n: number, dir?: string): Promise<void> {
  if (kind === "file") {
    const exp = JSON.stringify(new Date(Date.now() + 86400e3).toISOString());
    for (let i = 0; i < n; i++) {
      await Deno.writeTextFile(
        `${dir}/subnets/${leaseKey(subnetN(i))}`,
        `{"lease":${encodeLeaseAttrs(attrs(100000 + i))},"expiration":${exp},"seq":0}\n`,
      );
    }
    await Deno.writeTextFile(`${dir}/seq`, "1\n");
    return;
  }
  const e = s as EtcdStore;
  const lease = await e.client.grant(86400);
  for (let i = 0; i < n; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, n - i) }, (_, j) =>
        e.client.txnPut(
          `${e.prefix}/subnets/${leaseKey(subnetN(i + j))}`,
          encodeLeaseAttrs(attrs(100000 + i + j)),
          lease,
          null,
        )),
    );
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

interface Row {
  store: string;
  existing: number;
  acquirePerSec: number;
  fanoutP50: number;
  fanoutP99: number;
}

async function measure(kind: "file" | "etcd", n: number, etcdUrl?: string): Promise<Row> {
  const dir = kind === "file" ? await Deno.makeTempDir({ prefix: "flanctl-bench-" }) : undefined;
  const prefix = `/bench${n}/coreos.com/network`;
  const open = (): SubnetStore =>
    kind === "file" ? new FileStore({ dir: dir! }) : new EtcdStore({ endpoints: [etcdUrl!], prefix });
  const s = open();
  const watchers: SubnetStore[] = [];
  try {
    await s.setNetworkConfig(NETCONF);
    await populate(kind, s, n, dir);
    await s.listLeases(); // warm caches (file cache, etcd lease expiries) as a running daemon would have

    // Acquire rate: sequential acquires of new nodes from one client.
    const t0 = performance.now();
    for (let i = 0; i < ACQUIRES; i++) await s.acquireLease(attrs(i));
    const acquirePerSec = ACQUIRES / ((performance.now() - t0) / 1000);

    // Fan-out: W independent store instances watching; one writer renews one lease (a single-key write,
    // no listing); time from the start of the write until every watcher has seen the update.
    const mine = await s.acquireLease(attrs(40000));
    const mineKey = String(mine.subnet);
    const ac = new AbortController();
    const seen: number[][] = [];
    const ready: Promise<void>[] = [];
    for (let w = 0; w < WATCHERS; w++) {
      const ws = open();
      watchers.push(ws);
      const m: number[] = [];
      seen.push(m);
      ready.push((async () => {
        const { cursor } = await ws.listLeases();
        (async () => {
          for await (const evs of ws.watchLeases(cursor, ac.signal)) {
            const now = performance.now();
            for (const e of evs) if (e.type === "added" && String(e.lease.subnet) === mineKey) m.push(now);
          }
        })().catch(() => {});
      })());
    }
    await Promise.all(ready);
    await new Promise((r) => setTimeout(r, 1000)); // let every watch stream open and settle
    const lat: number[] = [];
    for (let r = 0; r < WARMUP + FANOUT_ROUNDS; r++) {
      const t = performance.now();
      await s.renewLease(mine);
      const deadline = Date.now() + 10_000;
      while (!seen.every((m) => m.length > r)) {
        if (Date.now() > deadline) throw new Error(`${kind}: watchers missed update ${r} of ${mineKey}`);
        await new Promise((res) => setTimeout(res, 1));
      }
      if (r >= WARMUP) lat.push(Math.max(...seen.map((m) => m[r])) - t);
    }
    ac.abort();
    return { store: kind, existing: n, acquirePerSec, fanoutP50: pct(lat, 50), fanoutP99: pct(lat, 99) };
  } finally {
    for (const w of watchers) await w.close();
    await s.close();
    if (dir) await Deno.remove(dir, { recursive: true });
  }
}

const etcd = new EtcdFixture(); // the tests' etcd: loopback ports, temp data dir
await etcd.start();
const rows: Row[] = [];
try {
  for (const n of SIZES) {
    rows.push(await measure("file", n));
    rows.push(await measure("etcd", n, etcd.url));
  }
} finally {
  await etcd.cleanup();
}

console.log(
  `store benchmark: ${ACQUIRES} sequential acquires; fan-out to ${WATCHERS} watchers (lease renewal ` +
    `written → seen by all), ` +
    `${FANOUT_ROUNDS} rounds. Reference: the etcd store (no external reference exists for stores).`,
);
console.log("store  existing  acquire/s  fan-out p50 ms  fan-out p99 ms");
for (const r of rows) {
  console.log(
    `${r.store.padEnd(5)}  ${String(r.existing).padStart(8)}  ${r.acquirePerSec.toFixed(1).padStart(9)}  ` +
      `${r.fanoutP50.toFixed(2).padStart(14)}  ${r.fanoutP99.toFixed(2).padStart(14)}`,
  );
}
for (const n of SIZES) {
  const f = rows.find((r) => r.store === "file" && r.existing === n)!;
  const e = rows.find((r) => r.store === "etcd" && r.existing === n)!;
  console.log(
    `ratio file/etcd at ${n}: acquire rate ×${(f.acquirePerSec / e.acquirePerSec).toFixed(2)}, ` +
      `fan-out p50 ×${(f.fanoutP50 / e.fanoutP50).toFixed(2)}`,
  );
}
