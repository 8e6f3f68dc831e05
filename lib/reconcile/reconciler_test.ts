import { assert, assertEquals } from "../../tests/assert.ts";
import { IPNet, parseCidr, parseIp, parseMac } from "../base/cidr.ts";
import { Metrics } from "../daemon/metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { FakeNetlink, fakeRoute } from "../netlink/fake/fake_netlink.ts";
import type { DesiredPeer } from "./types.ts";
import { asIp, asMac } from "../../tests/addr.ts";

const quiet = { info() {}, warn() {}, debug() {} };

function vx(subnet: string, mac: string, pub: string): DesiredPeer {
  const gw = parseIp(subnet.split("/")[0]);
  return {
    route: { dst: parseCidr(subnet), via: gw, dev: "flannel.1", onlink: true },
    neigh: { ip: gw, mac: parseMac(mac) },
    fdb: { mac: parseMac(mac), dst: parseIp(pub) },
  };
}

function setup() {
  const nl = new FakeNetlink();
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

Deno.test("reconciler: full pass applies only differences and removes only our stale entries", () => {
  const { nl, r, metrics } = setup();
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

Deno.test("reconciler: a wrong route is replaced; a MAC shared by two peers keeps its FDB entry", () => {
  const { nl, r } = setup();
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

Deno.test("reconciler: an ARP entry with another MAC is replaced; a desired MAC's moved FDB remote is moved back", () => {
  const { nl, r, metrics } = setup();
  const peers = new Map([
    ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
    ["10.244.3.0/24", vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13")],
  ]);
  r.fullPass(() => peers);
  // The kernel's ARP entry for 10.244.2.0 now names another MAC; 02:aa:…:03 now points at another remote
  // (a unicast MAC has one remote: `fdb replace` moves it).
  nl.replaceNeigh({ dev: "flannel.1", dst: asIp("10.244.2.0"), lladdr: asMac("02:cc:00:00:00:02") });
  nl.replaceFdb({ dev: "flannel.1", mac: asMac("02:aa:00:00:00:03"), dst: asIp("192.0.2.77") });
  nl.ops = [];
  const repairs = metrics.repairs;
  const res = r.fullPass(() => peers);
  assertEquals(res, { programmed: 2, removed: 0, errors: 0 }, "the moved remote is repaired, not removed");
  assertEquals(nl.ops, ["replaceNeigh 10.244.2.0", "replaceFdb 02:aa:00:00:00:03"]);
  assertEquals(metrics.repairs - repairs, 2);
  assertEquals(nl.neighList.find((x) => x.dst === "10.244.2.0")?.lladdr, "02:aa:00:00:00:02");
  assertEquals(nl.fdbList.filter((f) => f.mac === "02:aa:00:00:00:03").map((f) => f.dst), ["192.0.2.13"]);
  nl.ops = [];
  assertEquals(r.fullPass(() => peers), { programmed: 0, removed: 0, errors: 0 });
  assertEquals(nl.ops, []);
});

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

/** A logger that keeps each line as "level message" with its fields. */
function recorder() {
  const lines: { line: string; fields: Record<string, unknown> }[] = [];
  const at = (level: string) => (m: string, f: Record<string, unknown> = {}) =>
    lines.push({ line: `${level} ${m}`, fields: f });
  return { lines, log: { info: at("info"), warn: at("warn"), debug: at("debug") } };
}

Deno.test("reconciler: a full pass writes its repairs and removals in one batch, per-entry failures reported", () => {
  const { nl } = setup();
  const { lines, log } = recorder();
  const metrics = new Metrics();
  const r = new Reconciler({
    nl,
    network: IPNet.parse("10.244.0.0/16"),
    overlayDev: "flannel.1",
    log,
    stats: metrics,
  });
  // 10.244.3.0/24 asks for a gateway the kernel cannot reach (not onlink, on no connected subnet): the
  // kernel refuses its route inside the batch. A stale ARP entry's removal fails too.
  const bad = { ...vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13") };
  bad.route = { ...bad.route, onlink: false };
  const peers = new Map([
    ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
    ["10.244.3.0/24", bad],
    ["10.244.4.0/24", vx("10.244.4.0/24", "02:aa:00:00:00:04", "192.0.2.14")],
  ]);
  nl.replaceNeigh({ dev: "flannel.1", dst: asIp("10.244.8.0"), lladdr: asMac("02:bb:00:00:00:08") });
  nl.replaceNeigh({ dev: "flannel.1", dst: asIp("10.244.9.0"), lladdr: asMac("02:bb:00:00:00:09") });
  nl.ops = [];
  nl.failOn = ["deleteNeigh 10.244.8.0"];

  const res = r.fullPass(() => peers);
  assertEquals(res, { programmed: 6, removed: 1, errors: 2 });
  assertEquals(nl.batches, [3 * 3 + 2, 2], "one batch for the pass, one to undo the bad peer's entries");
  const warns = lines.filter((l) => l.line.startsWith("warn"));
  assertEquals(warns.map((w) => [w.line, w.fields.subnet]), [
    ["warn repairing peer failed", "10.244.3.0/24"],
    ["warn removing stale ARP entry failed", "10.244.8.0"],
  ]);
  assert(
    String(warns[0].fields.error).includes(
      "route replace 10.244.3.0/24 via 10.244.3.0 dev flannel.1: Network",
    ),
    String(warns[0].fields.error),
  );
  // The bad peer keeps nothing of the pass; the others have all three entries; the other stale one went.
  assert(!nl.routeList.some((x) => x.dst === "10.244.3.0/24"));
  assert(!nl.neighList.some((x) => x.dst === "10.244.3.0"), "its ARP entry was undone");
  assert(!nl.fdbList.some((x) => x.mac === "02:aa:00:00:00:03"), "its FDB entry was undone");
  for (const p of ["2", "4"]) {
    assert(nl.routeList.some((x) => x.dst === `10.244.${p}.0/24` && x.gateway === `10.244.${p}.0`));
    assertEquals(nl.neighList.find((x) => x.dst === `10.244.${p}.0`)?.lladdr, `02:aa:00:00:00:0${p}`);
    assertEquals(nl.fdbList.find((x) => x.mac === `02:aa:00:00:00:0${p}`)?.dst, `192.0.2.1${p}`);
  }
  assertEquals(nl.neighList.map((x) => x.dst).sort(), ["10.244.2.0", "10.244.4.0", "10.244.8.0"]);
  assertEquals(metrics.reconcileErrors, 2);

  // The next pass retries only what failed.
  nl.ops = [], nl.batches = [], nl.failOn = [];
  assertEquals(r.fullPass(() => peers), { programmed: 0, removed: 1, errors: 1 });
  assertEquals(nl.ops, [
    "replaceNeigh 10.244.3.0",
    "replaceFdb 02:aa:00:00:00:03",
    "replaceRoute 10.244.3.0/24",
    "deleteNeigh 10.244.8.0",
    "deleteNeigh 10.244.3.0",
    "deleteFdb 02:aa:00:00:00:03",
  ]);
});

Deno.test("reconciler: stale routes are found by the route scan and removed next hop by next hop", () => {
  const { nl, r } = setup();
  const eth = nl.link("eth0")!, ov = nl.link("flannel.1")!;
  const peers = new Map([["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")]]);
  r.fullPass(() => peers);
  // Ours and stale: a dst with two next hops (the overlay, and a gateway on eth0 at another metric), and a
  // dst reached twice the same way at two metrics.
  nl.routeList.push(fakeRoute("10.244.7.0/24", "10.244.7.0", ov.index, "flannel.1", true));
  nl.routeList.push(fakeRoute("10.244.7.0/24", "192.0.2.17", eth.index, "eth0", false, { metric: 100 }));
  nl.routeList.push(fakeRoute("10.244.8.0/24", "10.244.8.0", ov.index, "flannel.1", true, { metric: 10 }));
  nl.routeList.push(fakeRoute("10.244.8.0/24", "10.244.8.0", ov.index, "flannel.1", true, { metric: 20 }));
  // Not ours: another table, a blackhole, a kernel route, IPv6, a dst as large as the Network, our subnet.
  const keep = [
    fakeRoute("10.244.9.0/24", "10.244.9.0", ov.index, "flannel.1", true, { table: 100 }),
    fakeRoute("10.244.10.0/24", null, null, null, false, { type: "blackhole" }),
    fakeRoute("10.244.11.0/24", null, ov.index, "flannel.1", false, { protocol: "kernel" }),
    fakeRoute("fd00:244:12::/64", "fd00::1", ov.index, "flannel.1", true, { family: 6 }),
    fakeRoute("10.244.0.0/16", "192.0.2.1", eth.index, "eth0"),
    fakeRoute("10.244.1.0/24", "192.0.2.1", eth.index, "eth0"),
  ];
  nl.routeList.push(...keep);
  nl.ops = [];
  const res = r.fullPass(() => peers);
  assertEquals(res, { programmed: 0, removed: 4, errors: 0 });
  assertEquals(nl.ops, [
    "deleteRoute 10.244.7.0/24",
    "deleteRoute 10.244.7.0/24",
    "deleteRoute 10.244.8.0/24",
    "deleteRoute 10.244.8.0/24",
  ]);
  assert(!nl.routeList.some((x) => x.dst === "10.244.7.0/24" || x.dst === "10.244.8.0/24"));
  for (const k of keep) assert(nl.routeList.includes(k), `${k.dst} stays`);
  assert(nl.routeList.some((x) => x.dst === "10.244.2.0/24"));
});

Deno.test("reconciler: an overlay device that is gone has no entries to read; each peer's writes fail alone", () => {
  const { nl, r } = setup();
  const peers = new Map([
    ["10.244.2.0/24", vx("10.244.2.0/24", "02:aa:00:00:00:02", "192.0.2.12")],
    ["10.244.3.0/24", vx("10.244.3.0/24", "02:aa:00:00:00:03", "192.0.2.13")],
  ]);
  r.fullPass(() => peers);
  nl.deleteLink("flannel.1");
  nl.ops = [];
  assertEquals(r.fullPass(() => peers), { programmed: 0, removed: 0, errors: 2 });
  assertEquals(nl.ops, [], "every write names the missing device: the kernel takes none");
  // The device is back (another ifindex): the next pass reads and programs it.
  const again = nl.addLink("flannel.1", { kind: "vxlan" });
  assertEquals(r.fullPass(() => peers), { programmed: 6, removed: 0, errors: 0 });
  assertEquals(nl.fdbList.filter((f) => f.index === again.index).length, 2);
});
