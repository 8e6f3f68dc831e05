/**
 * Kernel layer, writing: every write operation of NetlinkHandle is done with the library in throwaway
 * namespaces and checked with `ip -j` / `bridge -j` (iproute2 is the oracle); errors carry the operation
 * and libnl's code; namespaces are switched and restored.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes, assertThrows } from "./assert.ts";
import { ipJson, nsSh, sh, withNetns } from "./netns.ts";
import { genlFamilyId, NetlinkError, openNetlink } from "../lib/netlink/mod.ts";
import { inNetns, netnsPath } from "../lib/os/mod.ts";
import { FlanctlError, NetnsNotFoundError, ParseError } from "../lib/base/errors.ts";
import { asCidr, asIp, asMac } from "./addr.ts";

// deno-lint-ignore no-explicit-any
type J = any;

const link = async (ns: string, name: string): Promise<J> =>
  (await ipJson<J[]>(ns, "-d", "link", "show", "dev", name))[0];

needsRoot.test("netlink write: bridge, vxlan, veth (peer in another netns), up/mtu/mac/master/hairpin, move, delete", async () => {
  await withNetns(async (fx) => {
    const n1 = await fx.add("wl"), n2 = await fx.add("wl"), n3 = await fx.add("wl");
    const h = openNetlink({ name: n1 });
    try {
      h.createVeth("ul0", "ul1", { mtu: 1500, mac: "02:00:00:00:01:01", peerMac: "02:00:00:00:01:02" });
      h.setUp("ul0", true);
      h.setUp("ul1", true);
      h.addAddr("ul0", "192.168.50.1/24");
      h.createVxlan("flannel.1", {
        vni: 1,
        port: 8472,
        local: "192.168.50.1",
        dev: "ul0",
        learning: false,
        mtu: 1450,
        mac: asMac("0e:00:00:00:00:01"),
      });
      h.createVxlan("vxg", { vni: 77, gbp: true, learning: true, local: "fd00::7" });
      h.createBridge("cni0", { mtu: 1450, mac: "0e:00:00:00:00:02" });
      h.setUp("cni0", true);
      h.createVeth("veth0", "eth0", { peerNetns: { name: n2 }, mtu: 1450 });
      h.setMaster("veth0", "cni0");
      h.setHairpin("veth0", true);
      h.setUp("veth0", true);

      const ul0 = await link(n1, "ul0"), ul1 = await link(n1, "ul1");
      assertEquals([ul0.address, ul1.address, ul0.mtu], ["02:00:00:00:01:01", "02:00:00:00:01:02", 1500]);
      assert(ul0.flags.includes("UP") && ul1.flags.includes("UP"));
      const vx = await link(n1, "flannel.1");
      assertEquals(vx.linkinfo.info_kind, "vxlan");
      const d = vx.linkinfo.info_data;
      assertEquals([d.id, d.port, d.local, d.link, d.learning], [1, 8472, "192.168.50.1", "ul0", false]);
      assertEquals([vx.mtu, vx.address], [1450, "0e:00:00:00:00:01"]);
      const vxg = await link(n1, "vxg");
      assertEquals([
        vxg.linkinfo.info_data.id,
        vxg.linkinfo.info_data.gbp,
        vxg.linkinfo.info_data.learning,
        vxg.linkinfo.info_data.local6,
      ], [
        77,
        true,
        true,
        "fd00::7",
      ]);
      assertEquals(h.link("vxg")?.vxlan?.local, "fd00::7");
      const br = await link(n1, "cni0");
      assertEquals([br.linkinfo.info_kind, br.mtu, br.address], ["bridge", 1450, "0e:00:00:00:00:02"]);
      const v0 = await link(n1, "veth0");
      assertEquals([v0.master, v0.mtu, v0.linkinfo.info_slave_data.hairpin], ["cni0", 1450, true]);
      const e0 = await link(n2, "eth0");
      assertEquals([e0.linkinfo.info_kind, e0.mtu, e0.link_index], ["veth", 1450, v0.ifindex]);
      assertEquals(v0.link_index, e0.ifindex);
      // The library reads back what it wrote.
      const mine = h.link("veth0")!;
      assertEquals(mine.bridgePort, { hairpin: true });
      assertEquals(mine.master, br.ifindex);

      h.setHairpin("veth0", false);
      assertEquals((await link(n1, "veth0")).linkinfo.info_slave_data.hairpin, false);
      h.setMtu("cni0", 1400);
      h.setMac(v0.ifindex, "0e:00:00:00:00:03");
      h.setUp("veth0", false);
      const v0b = await link(n1, "veth0");
      assertEquals([v0b.address, v0b.flags.includes("UP")], ["0e:00:00:00:00:03", false]);
      assertEquals((await link(n1, "cni0")).mtu, 1400);
      h.setMaster("veth0", null);
      assertEquals((await link(n1, "veth0")).master, undefined);

      // Move (with rename) after creation, then delete.
      h.moveToNetns("ul1", { name: n3 }, "moved0");
      assertEquals((await ipJson<J[]>(n1, "link", "show")).some((l: J) => l.ifname === "ul1"), false);
      const moved = await link(n3, "moved0");
      assertEquals(moved.link_index, ul0.ifindex);
      h.deleteLink("veth0");
      assertEquals(
        (await ipJson<J[]>(n2, "link", "show")).some((l: J) => l.ifname === "eth0"),
        false,
        "peer gone too",
      );
      h.deleteLink("vxg");
      assertEquals(h.link("vxg"), null);
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink write: createDummy where the kernel supports it", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("wd");
    const probe = await new Deno.Command("ip", { args: ["-n", n, "link", "add", "probe0", "type", "dummy"] })
      .output();
    const h = openNetlink({ name: n });
    try {
      if (!probe.success) {
        // No dummy module in this kernel: the library reports exactly what the kernel said.
        const e = assertThrows(() => h.createDummy("dm0"), NetlinkError) as NetlinkError;
        assertStringIncludes(e.message, "link add dm0 type dummy: Operation not supported");
        assertEquals(e.errno, 95);
        return;
      }
      h.createDummy("dm0", { mtu: 1300 });
      const l = await link(n, "dm0");
      assertEquals([l.linkinfo.info_kind, l.mtu], ["dummy", 1300]);
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink write: createWireguard makes the link, or EOPNOTSUPP where the kernel has no module", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("ww");
    const probe = await new Deno.Command("ip", {
      args: ["-n", n, "link", "add", "probe0", "type", "wireguard"],
    })
      .output();
    const h = openNetlink({ name: n });
    try {
      if (!probe.success) {
        // This machine's case: the kernel knows no "wireguard" link kind (checked with iproute2 above).
        const e = assertThrows(() => h.createWireguard("wg0"), NetlinkError) as NetlinkError;
        assertStringIncludes(e.message, "link add wg0 type wireguard: Operation not supported");
        assertEquals([e.errno, e.kernelMessage], [95, "Unknown device type"]);
        assertEquals(h.link("wg0"), null);
        return;
      }
      h.createWireguard("wg0", { mtu: 1420 });
      const l = await link(n, "wg0");
      assertEquals([l.linkinfo.info_kind, l.mtu], ["wireguard", 1420]);
      assertEquals(h.link("wg0")?.kind, "wireguard");
    } finally {
      h.close();
    }
  });
});

needsRoot.test("wgkernel: generic netlink in a namespace: the controller resolves, wireguard as the kernel has it", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("wg");
    assertEquals(genlFamilyId("nlctrl", { name: n }), 0x10);
    const wg = genlFamilyId(undefined, { name: n });
    let loaded = false;
    try {
      Deno.statSync("/sys/module/wireguard");
      loaded = true;
    } catch { /* not loaded: this machine */ }
    assertEquals(wg !== null, loaded);
    // A missing namespace is refused before any socket is opened.
    assertThrows(() => genlFamilyId("nlctrl", { name: `${n}-none` }), NetnsNotFoundError);
  });
});

needsRoot.test("netlink write: addresses, routes (replace/onlink/scope/table/metric), neighbours, FDB", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("wr");
    const h = openNetlink({ name: n });
    try {
      h.createVeth("ul0", "ul1");
      h.setUp("ul0", true);
      h.setUp("ul1", true);
      h.createVxlan("flannel.1", { vni: 1, port: 8472, learning: false });
      h.setUp("flannel.1", true);

      h.addAddr("ul0", "10.7.0.1/24");
      h.addAddr("ul0", "10.7.9.9/32", { scope: "link" });
      h.addAddr("ul0", "fd07::1/64", { noprefixroute: true });
      const addrs = (await ipJson<J[]>(n, "addr", "show", "dev", "ul0"))[0].addr_info;
      const a = (ip: string) => addrs.find((x: J) => x.local === ip);
      assertEquals([a("10.7.0.1").prefixlen, a("10.7.0.1").scope], [24, "global"]);
      assertEquals(a("10.7.9.9").scope, "link");
      assertEquals(a("fd07::1").noprefixroute, true);
      h.delAddr("ul0", "10.7.9.9/32");
      h.delAddr("ul0", "fd07::1/64");
      const after = (await ipJson<J[]>(n, "addr", "show", "dev", "ul0"))[0].addr_info.map((x: J) => x.local);
      assert(!after.includes("10.7.9.9") && !after.includes("fd07::1") && after.includes("10.7.0.1"));

      // The VXLAN triplet for one peer, then replace it (idempotent), then change it.
      h.replaceRoute({
        dst: asCidr("10.244.2.0/24"),
        via: asIp("10.244.2.0"),
        dev: "flannel.1",
        onlink: true,
      });
      h.replaceRoute({
        dst: asCidr("10.244.2.0/24"),
        via: asIp("10.244.2.0"),
        dev: "flannel.1",
        onlink: true,
      });
      h.replaceNeigh({ dev: "flannel.1", dst: asIp("10.244.2.0"), lladdr: asMac("aa:bb:cc:dd:ee:02") });
      h.replaceNeigh({ dev: "flannel.1", dst: asIp("10.244.2.0"), lladdr: asMac("aa:bb:cc:dd:ee:02") });
      h.replaceFdb({ dev: "flannel.1", mac: asMac("aa:bb:cc:dd:ee:02"), dst: asIp("10.7.0.2") });
      h.replaceFdb({ dev: "flannel.1", mac: asMac("aa:bb:cc:dd:ee:02"), dst: asIp("10.7.0.2") });
      let routes = await ipJson<J[]>(n, "route", "show", "10.244.2.0/24");
      assertEquals(routes.length, 1);
      assertEquals([routes[0].gateway, routes[0].dev, routes[0].flags, routes[0].protocol ?? "boot"], [
        "10.244.2.0",
        "flannel.1",
        ["onlink"],
        "boot",
      ]);
      let neigh = await ipJson<J[]>(n, "neigh", "show", "dev", "flannel.1");
      assertEquals(neigh.map((x: J) => [x.dst, x.lladdr, x.state]), [["10.244.2.0", "aa:bb:cc:dd:ee:02", [
        "PERMANENT",
      ]]]);
      let fdb = JSON.parse(await sh("bridge", "-n", n, "-j", "fdb", "show", "dev", "flannel.1"));
      assertEquals(fdb.map((x: J) => [x.mac, x.dst, x.flags, x.state]), [["aa:bb:cc:dd:ee:02", "10.7.0.2", [
        "self",
      ], "permanent"]]);
      // Library reads its own writes the same way.
      assertEquals(
        h.fdb().filter((f) => f.ifname === "flannel.1").map((f) => [f.mac, f.dst, f.flags, f.state]),
        [
          ["aa:bb:cc:dd:ee:02", "10.7.0.2", ["self"], ["PERMANENT"]],
        ],
      );

      h.replaceRoute({ dst: asCidr("10.244.2.0/24"), via: asIp("10.7.0.2"), dev: "ul0", metric: 0 });
      h.replaceNeigh({
        dev: "flannel.1",
        dst: asIp("10.244.2.0"),
        lladdr: asMac("aa:bb:cc:dd:ee:03"),
        state: "reachable",
      });
      h.replaceFdb({ dev: "flannel.1", mac: asMac("aa:bb:cc:dd:ee:02"), dst: asIp("10.7.0.3") });
      routes = await ipJson<J[]>(n, "route", "show", "10.244.2.0/24");
      assertEquals([routes.length, routes[0].gateway, routes[0].dev, routes[0].flags], [
        1,
        "10.7.0.2",
        "ul0",
        [],
      ]);
      neigh = await ipJson<J[]>(n, "neigh", "show", "dev", "flannel.1");
      assertEquals(neigh.map((x: J) => x.lladdr), ["aa:bb:cc:dd:ee:03"]);
      fdb = JSON.parse(await sh("bridge", "-n", n, "-j", "fdb", "show", "dev", "flannel.1"));
      assertEquals(fdb.map((x: J) => x.dst), ["10.7.0.3"]);

      // Scope, table, metric, protocol, src, IPv6 and default routes.
      h.replaceRoute({
        dst: asCidr("10.9.0.0/16"),
        dev: "ul0",
        scope: "link",
        table: 100,
        metric: 20,
        protocol: "static",
        src: asIp("10.7.0.1"),
      });
      h.replaceRoute({ dst: asCidr("10.10.0.0/16"), dev: "ul0" });
      h.replaceRoute({ dst: "default", via: asIp("10.7.0.254") });
      h.addAddr("ul0", "fd07::1/64");
      h.replaceRoute({ dst: asCidr("fd08::/64"), via: asIp("fd07::2"), dev: "ul0" });
      const t100 = await ipJson<J[]>(n, "route", "show", "table", "100");
      assertEquals(t100.map((r: J) => [r.dst, r.dev, r.scope, r.metric, r.protocol, r.prefsrc]), [
        ["10.9.0.0/16", "ul0", "link", 20, "static", "10.7.0.1"],
      ]);
      const main = await ipJson<J[]>(n, "route", "show");
      assert(main.some((r: J) => r.dst === "default" && r.gateway === "10.7.0.254"));
      assert(
        main.some((r: J) => r.dst === "10.10.0.0/16" && r.scope === "link"),
        "dev-only route gets scope link like ip",
      );
      assert(
        (await ipJson<J[]>(n, "-6", "route", "show")).some((r: J) =>
          r.dst === "fd08::/64" && r.gateway === "fd07::2"
        ),
      );

      // Deletes.
      h.deleteRoute({ dst: "10.9.0.0/16", table: 100 });
      h.deleteRoute({ dst: "10.244.2.0/24" });
      h.deleteRoute({ dst: "fd08::/64", via: "fd07::2", dev: "ul0" });
      h.deleteNeigh({ dev: "flannel.1", dst: "10.244.2.0" });
      h.deleteFdb({ dev: "flannel.1", mac: "aa:bb:cc:dd:ee:02", dst: "10.7.0.3" });
      assertEquals(await ipJson(n, "route", "show", "table", "100"), []);
      assertEquals(await ipJson(n, "route", "show", "10.244.2.0/24"), []);
      assert(!(await ipJson<J[]>(n, "-6", "route", "show")).some((r: J) => r.dst === "fd08::/64"));
      assertEquals(await ipJson(n, "neigh", "show", "dev", "flannel.1"), []);
      assertEquals(JSON.parse(await sh("bridge", "-n", n, "-j", "fdb", "show", "dev", "flannel.1")), []);
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink errors: operation + iproute2 text + libnl code; bad input; missing netns; close", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("we");
    const h = openNetlink({ name: n });
    try {
      h.createVxlan("flannel.1", { vni: 1, port: 8472 });
      h.setUp("flannel.1", true);
      h.replaceRoute({
        dst: asCidr("10.244.2.0/24"),
        via: asIp("10.244.2.0"),
        dev: "flannel.1",
        onlink: true,
      });
      const nle = (fn: () => unknown) => assertThrows(fn, NetlinkError) as NetlinkError;
      let e = nle(() => h.createBridge("flannel.1"));
      assertEquals(e.message, "link add flannel.1 type bridge: File exists");
      assertEquals([e.code, e.op, e.libnlMessage, e.exists], [
        -6,
        "link add flannel.1 type bridge",
        "Object exists",
        true,
      ]);
      assert(e instanceof FlanctlError);
      h.addAddr("flannel.1", "10.1.1.1/24");
      e = nle(() => h.addAddr("flannel.1", "10.1.1.1/24"));
      assert(e.message.startsWith("address add 10.1.1.1/24 dev flannel.1: File exists"), e.message);
      e = nle(() =>
        h.replaceRoute({
          dst: asCidr("10.244.3.0/24"),
          via: asIp("10.244.3.0"),
          dev: "nosuch0",
          onlink: true,
        })
      );
      assertEquals(
        e.message,
        'route replace 10.244.3.0/24 via 10.244.3.0 dev nosuch0 onlink: Cannot find device "nosuch0"',
      );
      assert(e.notFound);
      e = nle(() => h.deleteRoute({ dst: "10.99.0.0/24" }));
      assertEquals(e.message, "route del 10.99.0.0/24: No such process");
      assertEquals([e.errno, e.code, e.notFound], [3, -12, true]);
      e = nle(() => h.deleteNeigh({ dev: "flannel.1", dst: "10.99.0.1" }));
      assertStringIncludes(e.message, "neigh del 10.99.0.1 dev flannel.1: ");
      e = nle(() => h.setMaster("flannel.1", 999));
      assertStringIncludes(e.message, "link set dev flannel.1 master 999: ");
      // The kernel's own explanation (extended ack) is kept, as iproute2 prints it.
      e = nle(() => h.replaceRoute({ dst: asCidr("10.250.0.0/24"), via: asIp("10.99.0.1") }));
      assertEquals(e.errno, 101);
      assertStringIncludes(e.message, "route replace 10.250.0.0/24 via 10.99.0.1: Network is unreachable");
      e = nle(() => h.replaceRoute({ dst: asCidr("10.250.0.1/24"), dev: "flannel.1" }));
      assertStringIncludes(e.message, "Invalid argument (Invalid prefix for given prefix length)");
      assertEquals(e.kernelMessage, "Invalid prefix for given prefix length");
      assertThrows(
        () => h.replaceRoute({ dst: asCidr("10.244.2.0/33"), dev: "flannel.1" }),
        ParseError,
        "dst",
      );
      assertThrows(
        () => h.replaceRoute({ dst: asCidr("10.244.2.0/24"), via: asIp("fd00::1") }),
        ParseError,
        "via",
      );
      assertThrows(
        () => h.replaceNeigh({ dev: "flannel.1", dst: asIp("10.1.1.2"), lladdr: asMac("zz") }),
        ParseError,
        "lladdr",
      );
      assertThrows(() => h.createVxlan("vx9", { vni: 1 << 24 }), ParseError, "vni");
      assertThrows(() => h.createBridge("this-name-is-too-long"), ParseError, "name");
      assertThrows(() => h.setMtu("flannel.1", 10), ParseError, "mtu");
      assertEquals((await ipJson<J[]>(n, "link", "show")).length, 2, "no half-made state from bad input");
    } finally {
      h.close();
      h.close(); // idempotent
    }
    assertThrows(() => h.links(), FlanctlError, "after close");
    const missing = assertThrows(() => openNetlink({ name: "flanctl-no-such-ns" }), NetnsNotFoundError);
    assertStringIncludes(missing.message, "flanctl-no-such-ns");
    assertThrows(
      () => openNetlink({ name: n }).createVeth("x0", "x1", { peerNetns: { name: "flanctl-no-such-ns" } }),
      NetnsNotFoundError,
    );
    assertEquals(netnsPath({ name: n }), `/var/run/netns/${n}`);
    assertEquals(netnsPath({ pid: 1 }), "/proc/1/ns/net");
  });
});

needsRoot.test("inNetns: runs in the namespace (sysctl write), always switches back", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("ws");
    const before = Deno.readTextFileSync("/proc/sys/net/ipv4/ip_forward");
    const self = Deno.statSync("/proc/thread-self/ns/net").ino;
    inNetns({ name: n }, () => Deno.writeTextFileSync("/proc/sys/net/ipv4/ip_forward", "1"));
    assertEquals((await nsSh(n, "sysctl", "-n", "net.ipv4.ip_forward")).trim(), "1");
    assertEquals(Deno.readTextFileSync("/proc/sys/net/ipv4/ip_forward"), before, "root namespace untouched");
    assertThrows(
      () =>
        inNetns({ name: n }, () => {
          throw new Error("boom");
        }),
      Error,
      "boom",
    );
    assertEquals(Deno.statSync("/proc/thread-self/ns/net").ino, self, "switched back after a throw");
    const inside = inNetns({ name: n }, () => Deno.statSync("/proc/thread-self/ns/net").ino);
    assertEquals(inside, Deno.statSync(`/var/run/netns/${n}`).ino);
    assertEquals(inNetns(null, () => 42), 42);
    assertThrows(() => inNetns({ name: "flanctl-no-such-ns" }, () => 1), NetnsNotFoundError);
  });
});
