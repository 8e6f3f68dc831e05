import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { ConfigError } from "../config/netconf.ts";
import { IPNet } from "../base/cidr.ts";
import { FakeNetlink, fakeRoute } from "../netlink/fake/fake_netlink.ts";
import { lookupRoute, type UnderlayRoute } from "../base/route_lookup.ts";
import { parseVxlanOptions } from "./config.ts";
import { HostGwBackend } from "./hostgw.ts";
import { keepTxChecksumOffload } from "./mod.ts";
import { VxlanBackend } from "./vxlan.ts";
import type { ExternalIface } from "./types.ts";

const EXT: ExternalIface = {
  name: "eth0",
  index: 0,
  mtu: 1500,
  ifaceIP: "192.0.2.11",
  publicIP: "192.0.2.11",
};
const OWN = IPNet.parse("10.244.1.0/24");

function setup() {
  const nl = new FakeNetlink();
  const eth = nl.addLink("eth0");
  const ext = { ...EXT, index: eth.index };
  return { nl, ext, dir: Deno.makeTempDirSync() };
}

Deno.test("vxlan: creates flannel.1 (learning off, MTU-50, /32 address), persists and reuses the MAC", () => {
  const { nl, ext, dir } = setup();
  try {
    const opts = parseVxlanOptions({ type: "vxlan", raw: { Type: "vxlan" } });
    assertEquals(opts, { vni: 1, port: 0, gbp: false, learning: false, directRouting: false, mtu: 0 });
    const b = new VxlanBackend(nl, opts, ext, dir);
    b.prepare();
    const mac = b.mac;
    assertEquals(parseInt(mac.slice(0, 2), 16) & 3, 2);
    assertEquals(b.backendData(), { VNI: 1, VtepMAC: mac });
    assertEquals(b.ensure(OWN), ["created", "address 10.244.1.0/32", "up"]);
    const l = nl.link("flannel.1")!;
    assertEquals([l.mtu, l.mac, l.vxlan?.learning, l.vxlan?.local, l.vxlan?.dev], [
      1450,
      mac,
      false,
      "192.0.2.11",
      ext.index,
    ]);
    assertEquals(b.ensure(OWN), [], "idempotent");
    assertEquals(Deno.readTextFileSync(`${dir}/flannel.1.mac`).trim(), mac);

    // Without prepare() the MAC is still the persisted one, never "" in the lease or on the device.
    const b1 = new VxlanBackend(nl, opts, ext, dir);
    assertEquals(b1.backendData(), { VNI: 1, VtepMAC: mac });

    // A restart reuses the persisted MAC; an incompatible device is recreated with it.
    const b2 = new VxlanBackend(nl, { ...opts, gbp: true }, ext, dir);
    b2.prepare();
    assertEquals(b2.mac, mac);
    const ch = b2.ensure(OWN);
    assert(ch[0].startsWith("recreated (gbp"), ch.join());
    assertEquals(nl.link("flannel.1")!.mac, mac);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("vxlan: peer entries, DirectRouting, and refusals", () => {
  const { nl, ext, dir } = setup();
  try {
    const under: UnderlayRoute[] = [
      { net: IPNet.parse("0.0.0.0/0"), gateway: "192.0.2.1", devName: "eth0", metric: 0 },
      { net: IPNet.parse("192.0.2.0/24"), gateway: null, devName: "eth0", metric: 0 },
    ];
    const reach = (ip: string) => lookupRoute(under, ip);
    const peer = (pub: string, data: unknown = { VNI: 1, VtepMAC: "02:AA:00:00:00:02" }) => ({
      subnet: IPNet.parse("10.244.2.0/24"),
      publicIP: pub,
      backendType: "vxlan",
      backendData: data,
    });
    const b = new VxlanBackend(nl, parseVxlanOptions({ type: "vxlan", raw: {} }), ext, dir);
    assertEquals(b.peer(peer("192.0.2.12"), reach), {
      route: { dst: "10.244.2.0/24", via: "10.244.2.0", dev: "flannel.1", onlink: true },
      neigh: { ip: "10.244.2.0", mac: "02:aa:00:00:00:02" },
      fdb: { mac: "02:aa:00:00:00:02", dst: "192.0.2.12" },
    });
    assert(typeof b.peer(peer("192.0.2.12", { VNI: 1 }), reach) === "string");
    // flanneld's encoding/json takes the key in any case: so does the daemon (lib/lease/backend_data.ts).
    assertEquals(b.peer(peer("192.0.2.12", { VNI: 1, vtepmac: "02:AA:00:00:00:03" }), reach), {
      route: { dst: "10.244.2.0/24", via: "10.244.2.0", dev: "flannel.1", onlink: true },
      neigh: { ip: "10.244.2.0", mac: "02:aa:00:00:00:03" },
      fdb: { mac: "02:aa:00:00:00:03", dst: "192.0.2.12" },
    });
    assert(typeof b.peer({ ...peer("192.0.2.12"), backendType: "host-gw" }, reach) === "string");
    // Its FDB entry would name an underlay IP that is none: refused with the reason, no entries.
    assertEquals(b.peer(peer("192.0.2.312"), reach), `its PublicIP "192.0.2.312" is not an IP address`);
    // A hostile lease is quoted bounded and escaped, never whole.
    for (
      const why of [
        b.peer(peer("x".repeat(1e5)), reach),
        b.peer(peer("192.0.2.12", { p: "y".repeat(1e5) }), reach),
      ]
    ) {
      assert(typeof why === "string" && why.length < 300, `${String(why).length} chars`);
    }

    const d = new VxlanBackend(
      nl,
      parseVxlanOptions({ type: "vxlan", raw: { directrouting: true } }),
      ext,
      dir,
    );
    assertEquals(d.peer(peer("192.0.2.12"), reach), {
      route: { dst: "10.244.2.0/24", via: "192.0.2.12", dev: "eth0", onlink: false },
      neigh: null,
      fdb: null,
    });
    assertEquals((d.peer(peer("198.51.100.7"), reach) as { route: { dev: string } }).route.dev, "flannel.1");

    const h = new HostGwBackend(ext);
    assertEquals(h.mtu, 1500);
    const hp = { ...peer("192.0.2.12"), backendType: "host-gw" };
    assertEquals((h.peer(hp, reach) as { route: { via: string } }).route.via, "192.0.2.12");
    const far = h.peer({ ...hp, publicIP: "198.51.100.7" }, reach);
    assert(typeof far === "string" && far.includes("only via gateway 192.0.2.1"), String(far));
    assertEquals(h.peer({ ...hp, publicIP: "" }, reach), `its PublicIP "" is not an IP address`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("backend options: validation names the field", () => {
  assertThrows(() => parseVxlanOptions({ type: "vxlan", raw: { VNI: -1 } }), ConfigError, "Backend.VNI");
  assertThrows(() => parseVxlanOptions({ type: "vxlan", raw: { Port: 70000 } }), ConfigError, "Backend.Port");
  assertThrows(
    () => parseVxlanOptions({ type: "vxlan", raw: { DirectRouting: "yes" } }),
    ConfigError,
    "DirectRouting",
  );
  const nl = new FakeNetlink();
  assertThrows(
    () => new VxlanBackend(nl, parseVxlanOptions({ type: "vxlan", raw: { MTU: 100 } }), EXT, "/nonexistent"),
    ConfigError,
    "Backend.MTU",
  );
  assertThrows(() => new HostGwBackend({ ...EXT, publicIP: "198.51.100.1" }), ConfigError, "--public-ip");
  // An unused route helper keeps the fake's route shape honest.
  assertEquals(fakeRoute("default", "192.0.2.1", 1, "eth0").table, 254);
});

Deno.test("vxlan: TX checksum offload switched off on ensure (again when turned on), kept with the option", () => {
  const { nl, ext, dir } = setup();
  try {
    const opts = parseVxlanOptions({ type: "vxlan", raw: {} });
    const b = new VxlanBackend(nl, opts, ext, dir);
    b.prepare();
    b.ensure(OWN);
    nl.txCsum.set("flannel.1", true); // the kernel's default for a new device, or someone's ethtool -K
    assertEquals(b.ensure(OWN), ["tx checksum offload off"]);
    assertEquals(nl.txChecksum("flannel.1"), false);
    assertEquals(b.ensure(OWN), [], "idempotent");

    const keep = new VxlanBackend(nl, opts, ext, dir, { txChecksumOffload: true });
    keep.prepare();
    nl.txCsum.set("flannel.1", true);
    assertEquals(keep.ensure(OWN), []);
    assertEquals(nl.txChecksum("flannel.1"), true);

    nl.failOn = ["setTxChecksum"];
    const ch = b.ensure(OWN);
    assert(ch.length === 1 && ch[0].startsWith("tx checksum offload could not be switched off"), ch.join());
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("vxlan: TX checksum offload auto = off only behind NAT (public IP not the interface's)", () => {
  const ext: ExternalIface = {
    name: "eth0",
    index: 2,
    mtu: 1500,
    ifaceIP: "192.0.2.10",
    publicIP: "192.0.2.10",
  };
  assertEquals(keepTxChecksumOffload("auto", ext), true);
  assertEquals(keepTxChecksumOffload("auto", { ...ext, publicIP: "203.0.113.7" }), false);
  assertEquals(keepTxChecksumOffload(false, ext), false);
  assertEquals(keepTxChecksumOffload(true, { ...ext, publicIP: "203.0.113.7" }), true);
});

Deno.test("vxlan v6: flannel-v6.1 (MTU-70, local IPv6, /128), own MAC; v6 peers, DirectRouting; host-gw v6", () => {
  const { nl, ext: e4, dir } = setup();
  try {
    const ext = { ...e4, ifaceIPv6: "fc00:99::11", publicIPv6: "fc00:99::11" };
    const opts = parseVxlanOptions({ type: "vxlan", raw: { Type: "vxlan" } });
    const v4 = new VxlanBackend(nl, opts, ext, dir);
    const sys = new Map<string, string>();
    const sysctl = {
      read: (k: string) => sys.get(k) ?? "1",
      write: (k: string, v: string) => void sys.set(k, v),
    };
    const v6 = new VxlanBackend(nl, opts, ext, dir, { family: 6, sysctl });
    v4.prepare();
    v6.prepare();
    assertEquals([v6.overlayDev, v6.mtu], ["flannel-v6.1", 1430]);
    assert(v4.mac !== v6.mac, "a VTEP MAC per device");
    const own6 = IPNet.parse("fc00:244:0:3::/64");
    const ch = v6.ensure(own6);
    assertEquals(ch, ["created", "address fc00:244:0:3::/128", "accept_ra 0", "up"]);
    assertEquals(sys.get("net/ipv6/conf/flannel-v6.1/accept_ra"), "0");
    const l = nl.link("flannel-v6.1")!;
    assertEquals([l.mtu, l.mac, l.vxlan?.local], [1430, v6.mac, "fc00:99::11"]);
    assertEquals(Deno.readTextFileSync(`${dir}/flannel-v6.1.mac`).trim(), v6.mac);
    // The kernel's link-local address on the device is left alone.
    nl.addrList.push({
      index: l.index,
      ifname: l.name,
      family: 6,
      local: "fe80::1",
      prefix: 64,
      scope: "link",
    });
    assertEquals(v6.ensure(own6), [], "idempotent; the link-local address is kept");

    const under: UnderlayRoute[] = [
      { net: IPNet.parse("::/0"), gateway: "fc00:99::1", devName: "eth0", metric: 0 },
      { net: IPNet.parse("fc00:99::/64"), gateway: null, devName: "eth0", metric: 0 },
    ];
    const reach = (ip: string) => lookupRoute(under, ip);
    const peer = (pub: string) => ({
      subnet: IPNet.parse("fc00:244:0:5::/64"),
      publicIP: pub,
      backendType: "vxlan",
      backendData: { VNI: 1, VtepMAC: "02:bb:00:00:00:05" },
    });
    assertEquals(v6.peer(peer("fc00:99::12"), reach), {
      route: { dst: "fc00:244:0:5::/64", via: "fc00:244:0:5::", dev: "flannel-v6.1", onlink: true },
      neigh: { ip: "fc00:244:0:5::", mac: "02:bb:00:00:00:05" },
      fdb: { mac: "02:bb:00:00:00:05", dst: "fc00:99::12" },
    });
    const none = v6.peer(peer(""), reach);
    assert(typeof none === "string" && none.includes("no PublicIPv6"), String(none));
    const dr = new VxlanBackend(
      nl,
      parseVxlanOptions({ type: "vxlan", raw: { DirectRouting: true } }),
      ext,
      dir,
      {
        family: 6,
      },
    );
    assertEquals(dr.peer(peer("fc00:99::12"), reach), {
      route: { dst: "fc00:244:0:5::/64", via: "fc00:99::12", dev: "eth0", onlink: false },
      neigh: null,
      fdb: null,
    });
    assertEquals(
      (dr.peer(peer("fc00:77::1"), reach) as { route: { dev: string } }).route.dev,
      "flannel-v6.1",
    );
    // An IPv6 underlay of 1300 cannot carry 1280 inside VXLAN.
    assertThrows(
      () => new VxlanBackend(nl, opts, { ...ext, mtu: 1300 }, dir, { family: 6 }),
      ConfigError,
      "1350",
    );

    const h = new HostGwBackend(ext, 6);
    const hp = { ...peer("fc00:99::12"), backendType: "host-gw" };
    assertEquals(h.peer(hp, reach), {
      route: { dst: "fc00:244:0:5::/64", via: "fc00:99::12", dev: "eth0", onlink: false },
      neigh: null,
      fdb: null,
    });
    assertThrows(
      () => new HostGwBackend({ ...ext, publicIPv6: "fc00:77::1" }, 6),
      ConfigError,
      "--public-ipv6",
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("vxlan: local is the external (public) address as flanneld >= 0.27.4; accept_ra=0 on the device", () => {
  const { nl, ext, dir } = setup();
  try {
    const nat = { ...ext, publicIP: "203.0.113.7" };
    const writes: string[] = [];
    // A device's sysctls start at 1 (a recreated device gets fresh ones).
    const sysctlOf = (sys = new Map<string, string>()) => ({
      read: (k: string) => sys.get(k) ?? "1",
      write: (k: string, v: string) => {
        writes.push(`${k}=${v}`);
        sys.set(k, v);
      },
    });
    const opts = parseVxlanOptions({ type: "vxlan", raw: {} });
    const b = new VxlanBackend(nl, opts, nat, dir, { sysctl: sysctlOf() });
    b.prepare();
    b.ensure(OWN);
    assertEquals(nl.link("flannel.1")!.vxlan?.local, "203.0.113.7");
    assertEquals(writes, ["net/ipv6/conf/flannel.1/accept_ra=0"]);
    assertEquals(b.ensure(OWN), [], "a device with local = public IP is reused");
    assertEquals(writes.length, 1, "written once per device");
    // A device made with the interface address (older flanneld, older flanctl) is recreated, same MAC.
    const b2 = new VxlanBackend(nl, opts, ext, dir, { sysctl: sysctlOf() });
    b2.prepare();
    assertEquals(b2.ensure(OWN)[0], "recreated (local 203.0.113.7 != 192.0.2.11)");
    assertEquals(b2.mac, b.mac);
    assertEquals(writes.length, 2, "the new device gets accept_ra=0 too");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
