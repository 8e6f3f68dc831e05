/**
 * Kernel layer, memory: 10,000 read cycles of every object type (links with vxlan and bridge-port data,
 * addresses, routes, neighbours, FDB) must not keep growing the process RSS; a libnl object leaked per read
 * would show up as tens of MiB here.
 */
import { needsRoot } from "./root.ts";
import { assert } from "./assert.ts";
import { run, sh, withNetns } from "./netns.ts";

needsRoot.test("netlink memory: 10,000 read cycles of all objects keep RSS flat", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("mm");
    // The VXLAN node of one peer: underlay veth, flannel.1, cni0 with a port, and the peer's triplet.
    const batch = [
      "link add ul0 type veth peer name ul1",
      "link add flannel.1 type vxlan id 1 dstport 8472 local 10.3.0.1 nolearning",
      "link add cni0 type bridge",
      "link set ul1 master cni0",
      ...["ul0", "ul1", "flannel.1", "cni0"].map((l) => `link set ${l} up`),
      "addr add 10.3.0.1/24 dev ul0",
      "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink",
      "neigh add 10.244.2.0 lladdr aa:bb:cc:00:00:02 dev flannel.1 nud permanent",
    ];
    const r = await run(["ip", "-n", n, "-batch", "-"], { stdin: batch.join("\n") + "\n" });
    assert(r.code === 0, r.stderr);
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

    // In a process of its own: see the probe's comment.
    const probe = new URL("./fixtures/netlink_memory_probe.ts", import.meta.url).pathname;
    const out = await sh(Deno.execPath(), "run", "-A", "--no-check", probe, n);
    const { objects, heapGrowth, rssGrowth } = JSON.parse(out) as Record<string, number>;
    const mib = (b: number) => (b / (1 << 20)).toFixed(2);
    assert(objects > 10_000 * 10, `read ${objects} objects`);
    // libnl objects live on the C heap: glibc's count of bytes in use must stay flat (one leaked object per
    // cycle is > 1 MiB here); RSS, which the JS heap's one-time growth also moves, gets a looser bound.
    assert(heapGrowth < 1 << 20, `C heap in use grew by ${mib(heapGrowth)} MiB over 10,000 read cycles`);
    assert(rssGrowth < 32 * (1 << 20), `RSS grew by ${mib(rssGrowth)} MiB over 10,000 read cycles`);
  });
});
