import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { FakeNetlink, fakeRoute } from "../../tests/fake_netlink.ts";
import { IfaceError, selectIface } from "./iface.ts";

function kernel() {
  const nl = new FakeNetlink();
  const lo = nl.addLink("lo");
  const eth0 = nl.addLink("eth0", { mtu: 1500 });
  const eth1 = nl.addLink("eth1", { mtu: 9000 });
  nl.addrList.push({
    index: lo.index,
    ifname: "lo",
    family: 4,
    local: "127.0.0.1",
    prefix: 8,
    scope: "host",
  });
  nl.addrList.push({
    index: eth0.index,
    ifname: "eth0",
    family: 4,
    local: "192.0.2.11",
    prefix: 24,
    scope: "global",
  });
  nl.addrList.push({
    index: eth1.index,
    ifname: "eth1",
    family: 4,
    local: "198.51.100.11",
    prefix: 24,
    scope: "global",
  });
  nl.routeList.push(fakeRoute("default", "192.0.2.1", eth0.index, "eth0"));
  nl.routeList.push(fakeRoute("192.0.2.0/24", null, eth0.index, "eth0"));
  nl.routeList.push(fakeRoute("198.51.100.0/24", null, eth1.index, "eth1"));
  nl.routeList.push(fakeRoute("203.0.113.0/24", "198.51.100.1", eth1.index, "eth1"));
  return nl;
}
const NONE = { iface: [], ifaceRegex: [], ifaceCanReach: null, publicIP: null };

Deno.test("selectIface: default route, --iface by name/IP, regex, can-reach, public IP", () => {
  const nl = kernel();
  assertEquals(selectIface(nl, NONE), {
    name: "eth0",
    index: nl.link("eth0")!.index,
    mtu: 1500,
    ifaceIP: "192.0.2.11",
    publicIP: "192.0.2.11",
  });
  assertEquals(selectIface(nl, { ...NONE, iface: ["nosuch", "eth1"] }).name, "eth1");
  assertEquals(selectIface(nl, { ...NONE, iface: ["198.51.100.11"] }).ifaceIP, "198.51.100.11");
  assertEquals(selectIface(nl, { ...NONE, ifaceRegex: ["^eth1$"] }).mtu, 9000);
  assertEquals(selectIface(nl, { ...NONE, ifaceRegex: ["^198\\.51\\."] }).name, "eth1");
  assertEquals(selectIface(nl, { ...NONE, ifaceCanReach: "203.0.113.9" }).name, "eth1");
  assertEquals(selectIface(nl, { ...NONE, publicIP: "203.0.113.50" }).publicIP, "203.0.113.50");
  assertThrows(() => selectIface(nl, { ...NONE, iface: ["nosuch"] }), IfaceError, "--iface");
  assertThrows(() => selectIface(nl, { ...NONE, ifaceRegex: ["("] }), IfaceError, "--iface-regex");
  assertThrows(() => selectIface(nl, { ...NONE, publicIP: "x" }), IfaceError, "--public-ip");
  nl.routeList = nl.routeList.filter((r) => r.dst !== "default");
  assertThrows(() => selectIface(nl, NONE), IfaceError, "no default route");
});
