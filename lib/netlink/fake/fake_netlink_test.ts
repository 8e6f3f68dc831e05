/**
 * The fake handle answers as the kernel does where the reconciler relies on it; each case here was checked
 * against the libnl handle in a namespace (kernel 6.18), see the module doc of fake_netlink.ts.
 */
import { assert, assertEquals, assertThrows } from "../../../tests/assert.ts";
import { NetlinkError } from "../mod.ts";
import { FakeNetlink, fakeRoute } from "./fake_netlink.ts";
import { asCidr, asIp, asMac } from "../../../tests/addr.ts";

function kernel() {
  const nl = new FakeNetlink();
  const ul = nl.addLink("ul0");
  const vx = nl.addLink("vx0", { kind: "vxlan" });
  nl.routeList.push(fakeRoute("10.50.0.0/16", null, ul.index, "ul0", false, { protocol: "kernel" }));
  return { nl, ul, vx };
}

const text = (e: Error | null) => e === null ? null : e.message;

Deno.test("fake netlink: route replace and del match as the kernel's; refusals carry errno and operation", () => {
  const { nl, vx } = kernel();
  const res = nl.writeMany([
    { op: "replaceRoute", route: { dst: asCidr("10.9.9.0/24"), via: asIp("10.9.9.0"), dev: "vx0" } },
    { op: "replaceRoute", route: { dst: asCidr("10.9.7.0/24"), via: asIp("10.50.3.3"), dev: "ul0" } },
    { op: "replaceRoute", route: { dst: asCidr("10.9.7.0/24"), via: asIp("10.50.3.4"), dev: "ul0" } },
    {
      op: "replaceRoute",
      route: { dst: asCidr("10.9.7.0/24"), via: asIp("10.9.7.0"), dev: "vx0", onlink: true, metric: 5 },
    },
    { op: "deleteRoute", route: { dst: "10.9.7.0/24", via: "10.50.3.3", dev: "ul0" } },
    { op: "deleteRoute", route: { dst: "10.9.6.0/24" } },
    {
      op: "replaceNeigh",
      neigh: { dev: "nope0", dst: asIp("10.9.9.0"), lladdr: asMac("02:00:00:00:00:01") },
    },
    { op: "deleteNeigh", neigh: { dev: "vx0", dst: "10.9.9.1" } },
  ]);
  assertEquals(res.map(text), [
    "route replace 10.9.9.0/24 via 10.9.9.0 dev vx0: Network is unreachable (Nexthop has invalid gateway)",
    null,
    null,
    null,
    "route del 10.9.7.0/24 via 10.50.3.3 dev ul0: No such process",
    "route del 10.9.6.0/24: No such process",
    'neigh replace 10.9.9.0 lladdr 02:00:00:00:00:01 dev nope0 nud permanent: Cannot find device "nope0"',
    "neigh del 10.9.9.1 dev vx0: No such file or directory",
  ]);
  const e = res[0] as NetlinkError;
  assert(e instanceof NetlinkError);
  assertEquals([e.errno, e.kernelMessage], [101, "Nexthop has invalid gateway"]);
  assert((res[6] as NetlinkError).notFound && (res[7] as NetlinkError).notFound);
  // The replace of the same dst and metric took the first route's place; another metric is another route.
  assertEquals(
    nl.routeList.filter((r) => r.dst === "10.9.7.0/24").map((r) => [r.gateway, r.devName, r.metric]),
    [["10.50.3.4", "ul0", null], ["10.9.7.0", "vx0", 5]],
  );
  // Delete takes the first route matching what is given: here the metric picks the overlay one.
  nl.deleteRoute({ dst: "10.9.7.0/24", metric: 5 });
  assertEquals(nl.routeList.filter((r) => r.dst === "10.9.7.0/24").map((r) => r.dev), [
    nl.link("ul0")!.index,
  ]);
  assertEquals(nl.batches, [8]);
  assertEquals(vx.index, nl.link("vx0")!.index);
});

Deno.test("fake netlink: writeMany runs its writes in order, one slot each, a failure stopping nothing", () => {
  const { nl } = kernel();
  const route = { dst: asCidr("10.9.9.0/24"), via: asIp("10.9.9.0"), dev: "vx0", onlink: true };
  const res = nl.writeMany([
    { op: "deleteRoute", route },
    { op: "replaceRoute", route },
    { op: "deleteRoute", route },
    { op: "deleteRoute", route },
    { op: "replaceRoute", route },
  ]);
  assertEquals(res.map((e) => e === null), [false, true, true, false, true]);
  assertEquals(nl.routeList.filter((r) => r.dst === route.dst).length, 1);
  nl.failOn = ["replaceNeigh 10.9.9.0"];
  const [a, b] = nl.writeMany([
    { op: "replaceNeigh", neigh: { dev: "vx0", dst: asIp("10.9.9.0"), lladdr: asMac("02:00:00:00:00:01") } },
    { op: "replaceNeigh", neigh: { dev: "vx0", dst: asIp("fd00::1"), lladdr: asMac("02:00:00:00:00:02") } },
  ]);
  assertEquals([text(a), b], ["injected failure: replaceNeigh 10.9.9.0", null]);
  assertEquals(nl.neighList.map((n) => [n.family, n.dst, n.state]), [[6, "fd00::1", ["PERMANENT"]]]);
});
Deno.test("fake netlink: one remote per unicast VXLAN MAC: replace moves it, del of another remote changes nothing", () => {
  const nl = new FakeNetlink();
  nl.addLink("flannel.1", { kind: "vxlan" });
  const remotes = (mac: string) => nl.fdbList.filter((f) => f.mac === mac).map((f) => f.dst);
  nl.replaceFdb({ dev: "flannel.1", mac: asMac("02:aa:00:00:00:03"), dst: asIp("192.0.2.13") });
  nl.replaceFdb({ dev: "flannel.1", mac: asMac("02:aa:00:00:00:03"), dst: asIp("192.0.2.77") });
  assertEquals(remotes("02:aa:00:00:00:03"), ["192.0.2.77"]);
  nl.deleteFdb({ dev: "flannel.1", mac: "02:aa:00:00:00:03", dst: "192.0.2.13" });
  assertEquals(remotes("02:aa:00:00:00:03"), ["192.0.2.77"], "del of another remote: no change, no error");
  nl.replaceFdb({ dev: "flannel.1", mac: asMac("00:00:00:00:00:00"), dst: asIp("192.0.2.1") });
  nl.replaceFdb({ dev: "flannel.1", mac: asMac("00:00:00:00:00:00"), dst: asIp("192.0.2.2") });
  assertEquals(remotes("00:00:00:00:00:00"), ["192.0.2.1", "192.0.2.2"], "the all-zero MAC floods to many");
  const [e] = nl.writeMany([{ op: "deleteFdb", fdb: { dev: "flannel.1", mac: "02:aa:00:00:00:09" } }]);
  assertEquals(e?.message, "fdb del 02:aa:00:00:00:09 dev flannel.1 self: No such file or directory");
});

Deno.test("fake netlink: the compact scans filter as strict dumps do and reuse one entry", () => {
  const { nl, vx } = kernel();
  nl.routeList.push(fakeRoute("10.9.9.0/24", "10.9.9.0", vx.index, "vx0", true, { table: 100 }));
  nl.routeList.push(fakeRoute("10.50.0.1", null, 10, "ul0", false, { table: 255, type: "local" }));
  nl.routeList.push(fakeRoute("fd00::/64", null, vx.index, "vx0", false, { family: 6 }));
  nl.replaceNeigh({ dev: "vx0", dst: asIp("10.9.9.0"), lladdr: asMac("02:AA:00:00:00:01") });
  nl.replaceNeigh({
    dev: "ul0",
    dst: asIp("10.50.0.2"),
    lladdr: asMac("02:aa:00:00:00:02"),
    state: "reachable",
  });
  const seen: object[] = [];
  const dsts: string[] = [];
  nl.scanRoutes(
    { family: 4 },
    (r) => (seen.push(r), dsts.push(`${r.dst} ${r.table} ${r.type} ${r.protocol}`)),
  );
  assertEquals(dsts, ["10.50.0.0/16 254 1 2", "10.9.9.0/24 100 1 3"], "the local table only when asked for");
  assertEquals(new Set(seen).size, 1, "one entry object, refilled");
  const main: string[] = [];
  nl.scanRoutes({ table: 254, dev: "vx0" }, (r) => main.push(r.dst));
  assertEquals(main, ["fd00::/64"]);
  const neigh: string[] = [];
  nl.scanNeighbours({ dev: vx.index }, (n) => neigh.push(`${n.dst} ${n.lladdr} ${n.state}`));
  assertEquals(neigh, ["10.9.9.0 02:aa:00:00:00:01 128"]);
  nl.scanNeighbours({ dev: 99 }, () => neigh.push("none expected"));
  assertEquals(neigh.length, 1, "an ifindex nothing has: no entries");
  assertThrows(
    () => nl.scanFdb("nope0", () => {}),
    NetlinkError,
    'fdb show dev nope0: Cannot find device "nope0"',
  );
  assertThrows(() => nl.txChecksum("nope0"), NetlinkError, "ethtool -k nope0: No such device");
});

Deno.test("fake netlink: createWireguard as a kernel with the module, and as one without (EOPNOTSUPP)", () => {
  const nl = new FakeNetlink();
  nl.createWireguard("wg0", { mtu: 1420 });
  assertEquals([nl.link("wg0")?.kind, nl.link("wg0")?.mtu, nl.link("wg0")?.up], ["wireguard", 1420, false]);
  const dup = assertThrows(() => nl.createWireguard("wg0"), NetlinkError) as NetlinkError;
  assertEquals(dup.errno, 17);
  nl.kinds.delete("wireguard");
  const e = assertThrows(() => nl.createWireguard("wg1"), NetlinkError) as NetlinkError;
  assertEquals([e.errno, e.kernelMessage], [95, "Unknown device type"]);
  assert(e.message.includes("link add wg1 type wireguard"), e.message);
  assertEquals(nl.link("wg1"), null);
  assertEquals(nl.ops, ["createWireguard wg0", "createWireguard wg0", "createWireguard wg1"]);
});
