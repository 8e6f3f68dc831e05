/**
 * Kernel layer, compact scans (scanRoutes/scanNeighbours/scanFdb, the reconciler's read path) and the
 * ethtool TX checksum calls, in throwaway namespaces: the scans must yield exactly what the full readers
 * (routes/neighbours/fdb, themselves checked against iproute2 in netlink_read_test.ts) return for the same
 * filter, and ethtool -k must agree with getTxChecksum/setTxChecksum.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertThrows } from "./assert.ts";
import { nsRun, sh, withNetns } from "./netns.ts";
import { NetlinkError, openNetlink } from "../lib/netlink/mod.ts";
import { getTxChecksum, setTxChecksum } from "../lib/os/mod.ts";

const ip = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

needsRoot.test("netlink scan: routes, neighbours and FDB of one device equal the full readers' view", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("sc");
    await ip(ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p");
    await ip(ns, "link", "set", "eth0p", "up");
    await ip(ns, "addr", "add", "192.0.2.10/24", "dev", "eth0");
    await ip(ns, "link", "set", "eth0", "up");
    await ip(ns, "link", "add", "vx0", "type", "vxlan", "id", "1", "dstport", "8472", "nolearning");
    await ip(ns, "link", "set", "vx0", "up");
    await ip(ns, "link", "add", "vx1", "type", "vxlan", "id", "2", "dstport", "4789", "nolearning");
    await ip(ns, "link", "set", "vx1", "up");
    await ip(ns, "route", "add", "default", "via", "192.0.2.1");
    await ip(ns, "route", "add", "198.51.100.0/24", "via", "192.0.2.1", "metric", "7");
    await ip(ns, "route", "add", "203.0.113.0/24", "table", "100", "dev", "eth0");
    await ip(ns, "route", "add", "10.8.0.0/16", "nexthop", "via", "192.0.2.2", "nexthop", "via", "192.0.2.3");
    for (let i = 0; i < 5; i++) {
      const gw = `10.244.${i}.0`,
        mac = `02:00:00:00:${(i >> 8).toString(16).padStart(2, "0")}:${
          (i & 255).toString(16).padStart(2, "0")
        }`;
      await ip(ns, "neigh", "replace", gw, "lladdr", mac, "dev", "vx0", "nud", "permanent");
      await ip(ns, "route", "replace", `10.244.${i}.0/24`, "via", gw, "dev", "vx0", "onlink");
      await sh("bridge", "-n", ns, "fdb", "append", mac, "dev", "vx0", "dst", `192.0.2.${i + 20}`);
    }
    // Enough routes for a multi-part dump (several recv() buffers).
    const batch = Array.from({ length: 3000 }, (_, i) => `route add 10.245.${i >> 8}.${i & 255}/32 dev vx0`);
    const r = await nsRun(ns, ["ip", "-batch", "-"], { stdin: batch.join("\n") + "\n" });
    assertEquals(r.code, 0, r.stderr);
    await ip(
      ns,
      "neigh",
      "replace",
      "10.244.9.0",
      "lladdr",
      "02:00:00:00:09:09",
      "dev",
      "vx1",
      "nud",
      "permanent",
    );
    await ip(
      ns,
      "neigh",
      "replace",
      "192.0.2.99",
      "lladdr",
      "02:00:00:00:99:99",
      "dev",
      "eth0",
      "nud",
      "reachable",
    );
    await sh("bridge", "-n", ns, "fdb", "append", "02:00:00:00:09:09", "dev", "vx1", "dst", "192.0.2.250");

    const h = openNetlink({ name: ns });
    try {
      const names = new Map(h.links().map((l) => [l.index, l.name]));
      for (const opts of [{ family: 4 as const, table: 254 }, { family: 4 as const, table: 100 }, {}]) {
        const full = h.routes(opts).map((x) =>
          [x.family, x.dst, x.gateway, x.devName, x.flags.includes("onlink"), x.table, x.metric].join(" ")
        );
        const scanned: string[] = [];
        h.scanRoutes(opts, (x) => {
          scanned.push(
            [
              x.family,
              x.dst,
              x.gateway,
              x.dev === null ? null : names.get(x.dev),
              x.onlink,
              x.table,
              x.metric,
            ]
              .join(" "),
          );
        });
        assertEquals(scanned.sort(), full.sort(), JSON.stringify(opts));
      }
      assert(h.routes({ family: 4, table: 254 }).length > 3000, "a multi-buffer dump");
      const viaVx0: string[] = [];
      h.scanRoutes({ family: 4, table: 254, dev: "vx0" }, (x) => viaVx0.push(x.dst));
      assertEquals(
        viaVx0.sort(),
        h.routes({ family: 4, table: 254 }).filter((x) => x.devName === "vx0").map((x) => x.dst).sort(),
      );
      // Multipath: one entry per next hop.
      const mp: string[] = [];
      h.scanRoutes({ family: 4 }, (x) => x.dst === "10.8.0.0/16" && mp.push(x.gateway!));
      assertEquals(mp.sort(), ["192.0.2.2", "192.0.2.3"]);

      for (const dev of ["vx0", "vx1", "eth0"]) {
        const full = h.neighbours(4).filter((n) => n.ifname === dev)
          .map((n) => `${n.dst} ${n.lladdr} ${n.state.includes("PERMANENT")}`);
        const scanned: string[] = [];
        h.scanNeighbours(
          { family: 4, dev },
          (n) => scanned.push(`${n.dst} ${n.lladdr} ${(n.state & 0x80) !== 0}`),
        );
        assertEquals(scanned.sort(), full.sort(), dev);
        const fdbFull = h.fdb().filter((f) => f.ifname === dev).map((f) => `${f.mac} ${f.dst}`);
        const fdbScan: string[] = [];
        h.scanFdb(dev, (f) => fdbScan.push(`${f.mac} ${f.dst}`));
        assertEquals(fdbScan.sort(), fdbFull.sort(), `fdb ${dev}`);
      }
      assertThrows(() => h.scanFdb("nope0", () => {}), NetlinkError, "Cannot find device");
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink ethtool: TX checksum offload read and switched as ethtool -k shows it", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("et");
    await ip(ns, "link", "add", "flannel.1", "type", "vxlan", "id", "1", "dstport", "8472", "nolearning");
    const shown = async () =>
      /tx-checksum-ip-generic:\s+(on|off)/.exec((await nsRun(ns, ["ethtool", "-k", "flannel.1"])).stdout)
        ?.[1];
    assertEquals(await shown(), "on", "a new vxlan device has offload on");
    const h = openNetlink({ name: ns });
    try {
      assertEquals(h.txChecksum("flannel.1"), true);
      h.setTxChecksum("flannel.1", false);
      assertEquals(await shown(), "off");
      assertEquals(getTxChecksum({ name: ns }, "flannel.1"), false);
      setTxChecksum({ name: ns }, "flannel.1", true);
      assertEquals(await shown(), "on");
      assertThrows(() => h.txChecksum("nope0"), NetlinkError, "No such device");
    } finally {
      h.close();
    }
  });
});
