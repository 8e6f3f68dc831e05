import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { FakeNetlink, fakeRoute } from "../netlink/fake/fake_netlink.ts";
import { IfaceError } from "./iface.ts";
import { selectExternal } from "./iface6.ts";

function kernel() {
  const nl = new FakeNetlink();
  const eth0 = nl.addLink("eth0", { mtu: 1500 });
  const eth1 = nl.addLink("eth1", { mtu: 9000 });
  const add = (i: number, ifname: string, family: 4 | 6, local: string, prefix: number, scope = "global") =>
    nl.addrList.push({ index: i, ifname, family, local, prefix, scope });
  add(eth0.index, "eth0", 4, "192.0.2.11", 24);
  add(eth0.index, "eth0", 6, "fe80::1", 64, "link");
  add(eth0.index, "eth0", 6, "fc00:1::11", 64);
  add(eth1.index, "eth1", 4, "198.51.100.11", 24);
  add(eth1.index, "eth1", 6, "fc00:2::11", 64);
  nl.routeList.push(fakeRoute("default", "192.0.2.1", eth0.index, "eth0"));
  nl.routeList.push(fakeRoute("192.0.2.0/24", null, eth0.index, "eth0"));
  nl.routeList.push({ ...fakeRoute("default", "fc00:2::1", eth1.index, "eth1"), family: 6 });
  nl.routeList.push({ ...fakeRoute("fc00:1::/64", null, eth0.index, "eth0"), family: 6 });
  nl.routeList.push({ ...fakeRoute("fc00:2::/64", null, eth1.index, "eth1"), family: 6 });
  nl.routeList.push({ ...fakeRoute("fc00:9::/64", "fc00:1::1", eth0.index, "eth0"), family: 6 });
  return nl;
}
const NONE = { iface: [], ifaceRegex: [], ifaceCanReach: null, publicIP: null, publicIPv6: null };
const DUAL = { v4: true, v6: true }, V6 = { v4: false, v6: true };

Deno.test("selectExternal: IPv4 only is selectIface; dual stack takes the IPv6 address of the same interface", () => {
  const nl = kernel();
  assertEquals(selectExternal(nl, NONE, { v4: true, v6: false }).ifaceIPv6, undefined);
  const d = selectExternal(nl, NONE, DUAL);
  assertEquals([d.name, d.ifaceIP, d.ifaceIPv6, d.publicIPv6], [
    "eth0",
    "192.0.2.11",
    "fc00:1::11",
    "fc00:1::11",
  ]);
  // --iface giving an IPv6 address names its interface (and that address).
  const byV6 = selectExternal(nl, { ...NONE, iface: ["fc00:2::11"] }, DUAL);
  assertEquals([byV6.name, byV6.ifaceIP, byV6.ifaceIPv6], ["eth1", "198.51.100.11", "fc00:2::11"]);
  // --iface-can-reach with an IPv6 target picks the interface of its IPv6 route.
  const cr = selectExternal(nl, { ...NONE, ifaceCanReach: "fc00:9::5" }, DUAL);
  assertEquals([cr.name, cr.ifaceIP, cr.ifaceIPv6], ["eth0", "192.0.2.11", "fc00:1::11"]);
  // A target only the IPv6 default route reaches: that route's interface.
  assertEquals(selectExternal(nl, { ...NONE, ifaceCanReach: "fc00:77::1" }, DUAL).name, "eth1");
  // --public-ipv6 alone picks the interface owning it; with --iface it may be any (NAT) address.
  assertEquals(selectExternal(nl, { ...NONE, publicIPv6: "fc00:2::11" }, DUAL).name, "eth1");
  const nat = selectExternal(nl, { ...NONE, iface: ["eth0"], publicIPv6: "fc00:0:0:ffff::1" }, DUAL);
  assertEquals([nat.ifaceIPv6, nat.publicIPv6], ["fc00:1::11", "fc00:0:0:ffff::1"]);
  assertThrows(
    () => selectExternal(nl, { ...NONE, publicIPv6: "fc00:dead::1" }, DUAL),
    IfaceError,
    "--public-ipv6: fc00:dead::1 is not an address of this host",
  );
  assertThrows(
    () => selectExternal(nl, { ...NONE, publicIPv6: "10.0.0.1" }, DUAL),
    IfaceError,
    "not an IPv6",
  );
  assertThrows(
    () => selectExternal(nl, { ...NONE, publicIP: "192.0.2.11", publicIPv6: "fc00:2::11" }, DUAL),
    IfaceError,
    "both families must use one interface",
  );
  nl.addrList = nl.addrList.filter((a) => a.local !== "fc00:1::11");
  assertThrows(() => selectExternal(nl, NONE, DUAL), IfaceError, "eth0 has no global IPv6 address");
});

Deno.test("selectExternal: IPv6-only chooses by IPv6 default route, --iface, regex, can-reach, --public-ipv6", () => {
  const nl = kernel();
  const v = selectExternal(nl, NONE, V6);
  assertEquals([v.name, v.ifaceIP, v.publicIP, v.ifaceIPv6, v.mtu], [
    "eth1",
    "",
    "0.0.0.0",
    "fc00:2::11",
    9000,
  ]);
  assertEquals(selectExternal(nl, { ...NONE, iface: ["fc00:1::11"] }, V6).name, "eth0");
  assertEquals(selectExternal(nl, { ...NONE, iface: ["eth0"] }, V6).ifaceIPv6, "fc00:1::11");
  assertEquals(selectExternal(nl, { ...NONE, ifaceRegex: ["^fc00:1:"] }, V6).name, "eth0");
  // Go's flag groups as the IPv4 selection reads them (one pattern compiler), and its error for a bad one.
  assertEquals(selectExternal(nl, { ...NONE, ifaceRegex: ["(?i)^ETH1$"] }, V6).name, "eth1");
  assertThrows(
    () => selectExternal(nl, { ...NONE, ifaceRegex: ["("] }, V6),
    IfaceError,
    "--iface-regex: '(' is not a valid regular expression",
  );
  assertEquals(selectExternal(nl, { ...NONE, ifaceCanReach: "fc00:9::5" }, V6).name, "eth0");
  assertEquals(selectExternal(nl, { ...NONE, publicIPv6: "fc00:1::11" }, V6).name, "eth0");
  assertThrows(
    () => selectExternal(nl, { ...NONE, publicIPv6: "fc00:dead::1" }, V6),
    IfaceError,
    "--public-ipv6",
  );
  assertThrows(() => selectExternal(nl, { ...NONE, iface: ["192.0.2.11"] }, V6), IfaceError, "--iface");
  assertThrows(
    () => selectExternal(nl, { ...NONE, ifaceCanReach: "192.0.2.9" }, V6),
    IfaceError,
    "IPv6-only",
  );
  nl.routeList = nl.routeList.filter((r) => !(r.family === 6 && r.dst === "default"));
  assertThrows(() => selectExternal(nl, NONE, V6), IfaceError, "no IPv6 default route");
});

Deno.test("selectExternal: candidates that fall through are logged, in every family mode", () => {
  const nl = kernel();
  const logged: string[] = [];
  const log = { info: (_m: string, f?: Record<string, unknown>) => logged.push(String(f?.candidate)) };
  const sel = { ...NONE, iface: ["nosuch", "eth1"] };
  assertEquals(selectExternal(nl, sel, { v4: true, v6: false }, log).name, "eth1");
  assertEquals(selectExternal(nl, sel, DUAL, log).name, "eth1");
  assertEquals(selectExternal(nl, { ...sel, iface: ["fc00:7::1", "eth1"] }, V6, log).name, "eth1");
  assertEquals(logged, ["--iface nosuch", "--iface nosuch", "--iface fc00:7::1"]);
});
