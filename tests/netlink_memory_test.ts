/**
 * Kernel layer, memory: 10,000 read cycles of every object type (links with vxlan and bridge-port data,
 * addresses, routes, neighbours, FDB) must not keep growing the process RSS; a libnl object leaked per read
 * would show up as tens of MiB here.
 */
import { assert } from "./assert.ts";
import { sh, withNetns } from "./netns.ts";
import { openNetlink } from "../lib/netlink/mod.ts";

const ip = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

// struct mallinfo2 mallinfo2(void): ten size_t fields; uordblks (index 7) = bytes in use by malloc.
const libc = Deno.dlopen("libc.so.6", {
  mallinfo2: { parameters: [], result: { struct: Array(10).fill("usize") } },
});

/** Bytes glibc's malloc has handed out and not got back (all arenas). */
function mallocInUse(): number {
  const info = new BigUint64Array((libc.symbols.mallinfo2() as Uint8Array).buffer as ArrayBuffer);
  return Number(info[7]);
}

Deno.test("netlink memory: 10,000 read cycles of all objects keep RSS flat", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("mm");
    await ip(n, "link", "add", "ul0", "type", "veth", "peer", "name", "ul1");
    await ip(
      n,
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
      "10.3.0.1",
      "nolearning",
    );
    await ip(n, "link", "add", "cni0", "type", "bridge");
    await ip(n, "link", "set", "ul1", "master", "cni0");
    for (const l of ["ul0", "ul1", "flannel.1", "cni0"]) await ip(n, "link", "set", l, "up");
    await ip(n, "addr", "add", "10.3.0.1/24", "dev", "ul0");
    await ip(n, "route", "add", "10.244.2.0/24", "via", "10.244.2.0", "dev", "flannel.1", "onlink");
    await ip(
      n,
      "neigh",
      "add",
      "10.244.2.0",
      "lladdr",
      "aa:bb:cc:00:00:02",
      "dev",
      "flannel.1",
      "nud",
      "permanent",
    );
    await sh(
      "bridge",
      "-n",
      n,
      "fdb",
      "append",
      "aa:bb:cc:00:00:02",
      "dev",
      "flannel.1",
      "dst",
      "10.3.0.2",
      "self",
      "permanent",
    );

    const h = openNetlink({ name: n });
    try {
      let objects = 0;
      const cycle = () => {
        objects += h.links().length + h.addrs().length + h.routes().length + h.neighbours().length +
          h.fdb().length;
        h.link("flannel.1");
        // The compact scans (the reconciler's path) too.
        h.scanRoutes!({ family: 4, table: 254 }, () => objects++);
        h.scanNeighbours!({ family: 4, dev: "flannel.1" }, () => objects++);
        h.scanFdb!("flannel.1", () => objects++);
      };
      for (let i = 0; i < 500; i++) cycle(); // warm-up: JIT, libnl's lazily built tables, allocator pools
      // libnl objects live on the C heap: glibc's count of bytes in use (mallinfo2) must stay flat. It is
      // exact and immune to the JS garbage collector, whose timing makes RSS noisy when the suite runs in
      // parallel; RSS gets a looser bound on top.
      const heapBefore = mallocInUse();
      const before = Deno.memoryUsage().rss;
      for (let i = 0; i < 10_000; i++) cycle();
      const heapGrowth = mallocInUse() - heapBefore;
      const rssGrowth = Deno.memoryUsage().rss - before;
      const mib = (b: number) => (b / (1 << 20)).toFixed(2);
      assert(objects > 10_000 * 10, `read ${objects} objects`);
      assert(heapGrowth < 1 << 20, `C heap in use grew by ${mib(heapGrowth)} MiB over 10,000 read cycles`);
      assert(rssGrowth < 32 * (1 << 20), `RSS grew by ${mib(rssGrowth)} MiB over 10,000 read cycles`);
    } finally {
      h.close();
    }
  });
});
