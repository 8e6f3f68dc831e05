import { assert, assertEquals } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import { Metrics } from "../daemon/metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { FakeNetlink, fakeRoute } from "../netlink/fake/fake_netlink.ts";
import type { DesiredPeer } from "./types.ts";

const quiet = { info() {}, warn() {}, debug() {} };

function vx(subnet: string, mac: string, pub: string): DesiredPeer {
  const gw = subnet.split("/")[0];
  return {
    route: { dst: subnet, via: gw, dev: "flannel.1", onlink: true },
    neigh: { ip: gw, mac },
    fdb: { mac, dst: pub },
  };
}

function setup(scans = false) {
  const nl = new FakeNetlink();
  if (scans) nl.enableScans();
  const eth = nl.addLink("eth0");
  nl.addLink("flannel.1", { kind: "vxlan" });
  nl.routeList.push(fakeRoute("default", "192.0.2.1", eth.index, "eth0"));
  nl.routeList.push(fakeRoute("192.0.2.0/24", null, eth.index, "eth0", false, { protocol: "kernel" }));
  const metrics = new Metrics();
  const r = new Reconciler({
    nl,
    network: IPNet.parse("10.244.0.0/16"),
    overlayDev: "flannel.1",
    log: quiet,
    stats: metrics,
  });
  r.setOwnSubnet(IPNet.parse("10.244.1.0/24"));
  return { nl, r, metrics };
}

Deno.test("reconciler: setPeer adds ARP, FDB, route in that order and removes in reverse", () => {
  const { nl, r } = setup();
  assert(r.setPeer("10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")));
  assertEquals(nl.ops, [
    "replaceNeigh 10.244.2.0",
    "replaceFdb 02:aa:00:00:00:02",
    "replaceRoute 10.244.2.0/24",
  ]);
  nl.ops = [];
  r.setPeer("10.244.2.0/24", null);
  assertEquals(nl.ops, [
    "deleteRoute 10.244.2.0/24",
    "deleteFdb 02:aa:00:00:00:02",
    "deleteNeigh 10.244.2.0",
  ]);
  assertEquals(r.size, 0);
});

Deno.test("reconciler: a failed step undoes what was added", () => {
  const { nl, r, metrics } = setup();
  nl.failOn = ["replaceRoute"];
  assert(!r.setPeer("10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")));
  assertEquals(nl.neighList.length, 0);
  assertEquals(nl.fdbList.length, 0);
  assertEquals(metrics.reconcileErrors, 1);
  // The next full pass retries and succeeds.
  nl.failOn = [];
  const res = r.fullPass();
  assertEquals(res.programmed, 3);
  assertEquals(nl.routeList.filter((x) => x.dst === "10.244.2.0/24").length, 1);
});

for (const scans of [false, true]) {
  Deno.test(`reconciler: full pass applies only differences and removes only our stale entries (${scans ? "compact scans" : "full dumps"})`, () => {
    const { nl, r, metrics } = setup(scans);
    const peers = new Map([
      ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
      ["10.244.3.0/24", vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13")],
    ]);
    let res = r.fullPass(() => peers);
    assertEquals(res, { programmed: 6, removed: 0, errors: 0 });
    nl.ops = [];
    res = r.fullPass(() => peers);
    assertEquals(res, { programmed: 0, removed: 0, errors: 0 });
    assertEquals(nl.ops, [], "nothing rewritten when the kernel matches");

    // Hand-deleted ARP entry: only that is re-added.
    nl.neighList = nl.neighList.filter((n) => n.dst !== "10.244.3.0");
    res = r.fullPass(() => peers);
    assertEquals(nl.ops, ["replaceNeigh 10.244.3.0"]);
    nl.ops = [];

    // Foreign entries stay: a route outside Network, our own subnet's route, a kernel route, a dynamic
    // neighbour, and an FDB entry without remote. Our stale ones go.
    const eth = nl.link("eth0")!;
    nl.routeList.push(fakeRoute("172.16.0.0/16", "192.0.2.1", eth.index, "eth0"));
    nl.routeList.push(fakeRoute("10.244.1.0/24", null, 99, "cni0"));
    nl.routeList.push(fakeRoute("10.244.9.0/24", "10.244.9.0", 11, "flannel.1", true));
    nl.neighList.push({
      family: 4,
      index: 11,
      ifname: "flannel.1",
      dst: "10.244.9.0",
      lladdr: "02:bb:00:00:00:09",
      state: ["PERMANENT"],
    });
    nl.neighList.push({
      family: 4,
      index: 11,
      ifname: "flannel.1",
      dst: "10.244.8.0",
      lladdr: "02:bb:00:00:00:08",
      state: ["REACHABLE"],
    });
    nl.fdbList.push({
      index: 11,
      ifname: "flannel.1",
      mac: "02:bb:00:00:00:09",
      dst: "192.0.2.19",
      master: null,
      flags: ["self"],
      state: ["PERMANENT"],
      vlan: null,
    });
    nl.fdbList.push({
      index: 11,
      ifname: "flannel.1",
      mac: "33:33:00:00:00:01",
      dst: null,
      master: null,
      flags: ["self"],
      state: ["PERMANENT"],
      vlan: null,
    });
    res = r.fullPass(() => peers);
    assertEquals(res.removed, 3);
    assertEquals(nl.ops.sort(), [
      "deleteFdb 02:bb:00:00:00:09",
      "deleteNeigh 10.244.9.0",
      "deleteRoute 10.244.9.0/24",
    ]);
    assert(nl.routeList.some((x) => x.dst === "172.16.0.0/16"));
    assert(nl.routeList.some((x) => x.dst === "10.244.1.0/24"));
    assert(nl.neighList.some((x) => x.dst === "10.244.8.0"));
    assert(nl.fdbList.some((x) => x.mac === "33:33:00:00:00:01"));
    assertEquals(metrics.reconcileRuns, 4);

    // A lease gone from the desired state: its entries are removed by the next pass.
    peers.delete("10.244.3.0/24");
    nl.ops = [];
    res = r.fullPass(() => peers);
    assertEquals(res.removed, 3);
    assert(!nl.routeList.some((x) => x.dst === "10.244.3.0/24"));
  });
}

for (const scans of [false, true]) {
  Deno.test(`reconciler: a wrong route is replaced; a MAC shared by two peers keeps its FDB entry (${scans ? "compact scans" : "full dumps"})`, () => {
    const { nl, r } = setup(scans);
    const eth = nl.link("eth0")!;
    nl.routeList.push(fakeRoute("10.244.2.0/24", "192.0.2.99", eth.index, "eth0"));
    r.fullPass(() => new Map([["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")]]));
    const routes = nl.routeList.filter((x) => x.dst === "10.244.2.0/24");
    assertEquals(routes.length, 1);
    assertEquals(routes[0].gateway, "10.244.2.0");
    // Same node under two subnets (old and re-acquired lease): removing one keeps the shared FDB entry.
    r.setPeer("10.244.5.0/24", vx("10.244.5.0/24", "02:aa:00:00:00:02", "192.0.2.12"));
    r.setPeer("10.244.2.0/24", null);
    assert(nl.fdbList.some((f) => f.mac === "02:aa:00:00:00:02"));
  });
}

for (const scans of [false, true]) {
  Deno.test(`reconciler: an ARP entry with another MAC is replaced; a desired MAC's other FDB remote is removed (${scans ? "compact scans" : "full dumps"})`, () => {
    const { nl, r } = setup(scans);
    const peers = new Map([
      ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
      ["10.244.3.0/24", vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13")],
    ]);
    r.fullPass(() => peers);
    // The kernel's ARP entry for 10.244.2.0 now names another MAC; 02:aa:…:03 gains a second remote.
    const n = nl.neighList.find((x) => x.dst === "10.244.2.0")!;
    n.lladdr = "02:cc:00:00:00:02";
    nl.fdbList.push({
      index: 11,
      ifname: "flannel.1",
      mac: "02:aa:00:00:00:03",
      dst: "192.0.2.77",
      master: null,
      flags: ["self"],
      state: ["PERMANENT"],
      vlan: null,
    });
    nl.ops = [];
    const res = r.fullPass(() => peers);
    assertEquals(res, { programmed: 1, removed: 1, errors: 0 });
    assertEquals(nl.ops.sort(), ["deleteFdb 02:aa:00:00:00:03", "replaceNeigh 10.244.2.0"]);
    assertEquals(nl.neighList.find((x) => x.dst === "10.244.2.0")?.lladdr, "02:aa:00:00:00:02");
    assertEquals(
      nl.fdbList.filter((f) => f.mac === "02:aa:00:00:00:03").map((f) => f.dst),
      ["192.0.2.13"],
      "the desired remote stays",
    );
    nl.ops = [];
    assertEquals(r.fullPass(() => peers), { programmed: 0, removed: 0, errors: 0 });
    assertEquals(nl.ops, []);
  });
}

Deno.test("reconciler: a peer's first programming is not logged as a repair; a later fix is", () => {
  const { nl } = setup();
  const lines: string[] = [];
  const log = {
    info: (m: string) => lines.push(`info ${m}`),
    warn: (m: string) => lines.push(`warn ${m}`),
    debug: (m: string) => lines.push(`debug ${m}`),
  };
  const r2 = new Reconciler({
    nl,
    network: IPNet.parse("10.244.0.0/16"),
    overlayDev: "flannel.1",
    log,
    stats: new Metrics(),
  });
  r2.setOwnSubnet(IPNet.parse("10.244.1.0/24"));

  const peers = new Map([
    ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
    ["10.244.3.0/24", vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13")],
  ]);
  // Start: every peer is new, its entries programmed for the first time.
  assertEquals(r2.fullPass(() => peers).programmed, 6);
  assertEquals(lines.filter((l) => l.startsWith("info")), []);
  assertEquals(lines.filter((l) => l === "debug programmed peer").length, 2);
  // A re-list brings one more peer: only that one is new.
  lines.length = 0;
  const more = new Map([...peers, ["10.244.4.0/24", vx("10.244.4.0/24", "02:aa:00:00:00:04", "192.0.2.14")]]);
  assertEquals(r2.fullPass(() => more).programmed, 3);
  assertEquals(lines, ["debug programmed peer"]);
  // Someone deletes a known peer's route: that is a repair.
  lines.length = 0;
  nl.routeList = nl.routeList.filter((x) => x.dst !== "10.244.2.0/24");
  assertEquals(r2.fullPass(() => more).programmed, 1);
  assertEquals(lines, ["info repaired peer entries"]);
});
