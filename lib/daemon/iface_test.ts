import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import { FakeNetlink, fakeRoute } from "../netlink/fake/fake_netlink.ts";
import { IfaceError, type IfaceSelection, selectIface } from "./iface.ts";

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
const NONE: IfaceSelection = { iface: [], ifaceRegex: [], ifaceCanReach: null, publicIP: null };

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
  assertEquals(selectIface(nl, { ...NONE, ifaceRegex: ["^eth[0-9]{1,2}$"] }).name, "eth0");
  assertEquals(selectIface(nl, { ...NONE, ifaceRegex: ["(?i)^ETH1$"] }).name, "eth1", "Go's (?i)");
  assertEquals(selectIface(nl, { ...NONE, ifaceCanReach: "203.0.113.9" }).name, "eth1");
  // --public-ip with a selection flag: announced as given (behind NAT).
  const nat = selectIface(nl, { ...NONE, iface: ["eth0"], publicIP: "203.0.113.50" });
  assertEquals([nat.name, nat.ifaceIP, nat.publicIP], ["eth0", "192.0.2.11", "203.0.113.50"]);
  assertThrows(
    () => selectIface(nl, { ...NONE, iface: ["nosuch"] }),
    IfaceError,
    "--iface nosuch: no interface named nosuch",
  );
  assertThrows(
    () => selectIface(nl, { ...NONE, ifaceRegex: ["("] }),
    IfaceError,
    "--iface-regex: '(' is not a valid",
  );
  assertThrows(() => selectIface(nl, { ...NONE, publicIP: "x" }), IfaceError, "--public-ip");
  nl.routeList = nl.routeList.filter((r) => r.dst !== "default");
  assertThrows(() => selectIface(nl, NONE), IfaceError, "no default route");
});

Deno.test("selectIface: --public-ip alone selects the interface that has it, as flanneld", () => {
  const nl = kernel();
  const e = selectIface(nl, { ...NONE, publicIP: "198.51.100.11" });
  assertEquals([e.name, e.ifaceIP, e.publicIP], ["eth1", "198.51.100.11", "198.51.100.11"]);
  // Not the default route's interface; and an address no interface has is an error with the NAT hint.
  assertThrows(
    () => selectIface(nl, { ...NONE, publicIP: "203.0.113.50" }),
    IfaceError,
    "no interface has the address 203.0.113.50; --public-ip alone selects the interface that has it; behind NAT also pass --iface NAME",
  );
});

Deno.test("selectIface: --iface, then --iface-regex, then --iface-can-reach, each falling through", () => {
  const nl = kernel();
  const eth2 = nl.addLink("eth2", { mtu: 1400 }); // exists, but no address: falls through
  const logged: string[] = [];
  const log = { info: (_m: string, f?: Record<string, unknown>) => logged.push(String(f?.candidate)) };
  const sel = (s: Partial<IfaceSelection>) => selectIface(nl, { ...NONE, ...s }, log);
  assertEquals(sel({ iface: ["nosuch", "eth2"], ifaceRegex: ["^eth1$"] }).name, "eth1");
  assertEquals(logged, ["--iface nosuch", "--iface eth2"]);
  assertEquals(sel({ iface: ["nosuch"], ifaceRegex: ["^wlan"], ifaceCanReach: "203.0.113.9" }).name, "eth1");
  assertEquals(sel({ iface: ["10.9.9.9"], ifaceCanReach: "192.0.2.77" }).name, "eth0");
  // A regex is tried on addresses of every interface before names.
  nl.addrList.push({
    index: eth2.index,
    ifname: "eth2",
    family: 4,
    local: "169.254.3.3",
    prefix: 16,
    scope: "link",
  });
  assertEquals(
    sel({ ifaceRegex: ["eth2|^192\\.0\\.2\\."] }).name,
    "eth0",
    "address match wins over a name match",
  );
  assertEquals(sel({ ifaceRegex: ["^eth2$"] }).ifaceIP, "169.254.3.3", "a link-local address is usable");
  // Loopback addresses are never usable: lo matched by name has no address and falls through.
  assertEquals(sel({ ifaceRegex: ["^lo$", "^eth0$"] }).name, "eth0");
  nl.routeList = nl.routeList.filter((r) => r.dst !== "default");
  const e = assertThrows(
    () => sel({ iface: ["nosuch"], ifaceRegex: ["^wlan"], ifaceCanReach: "10.1.1.1" }),
    IfaceError,
  );
  assertEquals(
    e.message.startsWith(
      "no interface matches --iface/--iface-regex/--iface-can-reach (--iface nosuch: no interface named nosuch; " +
        "--iface-regex ^wlan: no interface name or address matches",
    ),
    true,
    e.message,
  );
  assertStringIncludes(
    e.message,
    "; --iface-can-reach 10.1.1.1: no route to 10.1.1.1); see 'ip addr' and fix the flags",
  );
});
