import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../../tests/assert.ts";
import { FakeUapi } from "../../../tests/wg_uapi_fake.ts";
import { FakeNetlink } from "../../netlink/fake/fake_netlink.ts";
import { IPNet } from "../../base/cidr.ts";
import type { ExternalIface, PeerInfo } from "../types.ts";
import { createBackend } from "../mod.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import { ConfigError } from "../../config/netconf.ts";
import { WireguardBackend, type WireguardV6Side } from "./backend.ts";
import { parseWireguardOptions } from "./options.ts";
import { keyBase64, WgKeyError } from "./keys.ts";
import type { WgGenl } from "./kernel.ts";
import type { Log } from "../../base/log.ts";

const EXT: ExternalIface = {
  name: "eth0",
  index: 2,
  mtu: 1500,
  ifaceIP: "192.0.2.11",
  publicIP: "192.0.2.11",
};
const NET = IPNet.parse("10.244.0.0/16");
const OWN = IPNet.parse("10.244.1.0/24");
const KEY2 = keyBase64(new Uint8Array(32).fill(2));
const KEY3 = keyBase64(new Uint8Array(32).fill(3));
const KEY2_HEX = "02".repeat(32);

/** A kernel without the `wireguard` generic netlink family. */
const NO_GENL: WgGenl = {
  familyId: () => null,
  set: () => {
    throw new Error("no family");
  },
  get: () => {
    throw new Error("no family");
  },
};

function opts(backend: Record<string, unknown> = {}) {
  return parseWireguardOptions({ type: "wireguard", raw: { Type: "wireguard", ...backend } });
}

function peer(subnet: string, ip: string, data: unknown): PeerInfo {
  return { subnet: IPNet.parse(subnet), publicIP: ip, backendType: "wireguard", backendData: data };
}

/** A backend over a fake netlink and a fake UAPI server in a temp dir; `fn` runs with them, then cleanup. */
async function withBackend(
  backend: Record<string, unknown>,
  fn: (
    b: WireguardBackend,
    nl: FakeNetlink,
    fake: () => FakeUapi,
    logs: string[],
    /** Another backend over the same netlink and directory (by default: the same options). */
    again: (backend?: Record<string, unknown>, family?: 4 | 6, families?: (4 | 6)[]) => WireguardBackend,
  ) => Promise<void>,
  family: 4 | 6 = 4,
  families?: (4 | 6)[],
) {
  const dir = Deno.makeTempDirSync();
  const nl = new FakeNetlink();
  nl.kinds.delete("wireguard"); // this machine's kernel: the userspace way
  let fake: FakeUapi | null = null;
  const fakes: FakeUapi[] = [];
  const logs: string[] = [];
  const log = {
    info: (m: string, f?: unknown) => logs.push(`info ${m} ${JSON.stringify(f ?? {})}`),
    warn: (m: string, f?: unknown) => logs.push(`warn ${m} ${JSON.stringify(f ?? {})}`),
    error: (m: string, f?: unknown) => logs.push(`error ${m} ${JSON.stringify(f ?? {})}`),
    debug: () => {},
  } as unknown as Log;
  const make = (o = backend, f = family, fs = families) =>
    new WireguardBackend(
      nl,
      opts(o),
      EXT,
      f === 6 ? IPNet.parse("fd00::/56") : NET,
      f,
      log,
      {
        keyFile: `${dir}/wgkey`,
        program: "/nonexistent/wireguard-go",
        socketDir: dir,
        genl: NO_GENL,
        start: (_prog, dev) => {
          nl.addLink(dev, { kind: "tun", up: false, mtu: 1420, flags: [] });
          fake = new FakeUapi(`${dir}/${dev}.sock`);
          fakes.push(fake);
        },
      },
      fs,
    );
  try {
    await fn(make(), nl, () => fake!, logs, make);
  } finally {
    for (const f of fakes) await f.close();
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test("options: flanneld's defaults and keys; a bad PSK or Mode refused without echoing the PSK", () => {
  assertEquals(opts(), {
    listenPort: 51820,
    listenPortV6: 51821,
    mtu: 0,
    pskHex: null,
    keepalive: 0,
    mode: "separate",
  });
  const o = opts({ listenport: 4000, PSK: KEY2, PersistentKeepaliveInterval: 25, Mode: "auto" });
  assertEquals([o.listenPort, o.pskHex, o.keepalive, o.mode], [4000, KEY2_HEX, 25, "auto"]);
  const e = assertThrows(() => opts({ PSK: "secret-but-wrong" }), ConfigError);
  assert(!e.message.includes("secret-but-wrong"));
  assertThrows(() => opts({ Mode: "both" }), ConfigError, "Mode");
  assertThrows(() => opts({ PersistentKeepaliveInterval: "25s" }), ConfigError);
});

Deno.test("createBackend: wireguard from net-conf; IPv6 with one device (Mode auto) is flannel-wg's", () => {
  const nl = new FakeNetlink();
  const cfg = parseNetConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "wireguard" } }));
  const b = createBackend(nl, cfg, EXT, "/tmp") as WireguardBackend;
  assertEquals([b.type, b.overlayDev, b.mtu, b.port], ["wireguard", "flannel-wg", 1420, 51820]);
  const dual = parseNetConfig(JSON.stringify({
    Network: "10.244.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fd00::/56",
    Backend: { Type: "wireguard", Mode: "auto" },
  }));
  // Mode auto in dual stack: the IPv6 plane's backend is the IPv4 one's device (one key, ListenPort).
  const one = createBackend(nl, dual, EXT, "/tmp") as WireguardBackend;
  assertEquals([one.overlayDev, one.port, one.single, one.families], ["flannel-wg", 51820, true, [4, 6]]);
  const side = createBackend(nl, dual, EXT, "/tmp", { family: 6, pair: one });
  assertEquals([side.overlayDev, side.mtu, (side as WireguardV6Side).device], ["flannel-wg", 1420, one]);
  assertThrows(() => createBackend(nl, dual, EXT, "/tmp", { family: 6 }), Error, "IPv4 backend");
  // Mode ipv6 needs IPv6 in the network; Mode ipv4 needs IPv4.
  const v4only = parseNetConfig(JSON.stringify({
    Network: "10.244.0.0/16",
    Backend: { Type: "wireguard", Mode: "ipv6" },
  }));
  assertThrows(() => createBackend(nl, v4only, EXT, "/tmp"), ConfigError, "no IPv6");
  const v6only = parseNetConfig(JSON.stringify({
    EnableIPv4: false,
    EnableIPv6: true,
    IPv6Network: "fd00::/56",
    Backend: { Type: "wireguard", Mode: "ipv4" },
  }));
  assertThrows(() => createBackend(nl, v6only, EXT, "/tmp", { family: 6 }), ConfigError, "no IPv4");
  const auto6 = { ...v6only, backend: { ...v6only.backend, raw: { Type: "wireguard", Mode: "auto" } } };
  const b6 = createBackend(nl, auto6, EXT, "/tmp", { family: 6 }) as WireguardBackend;
  assertEquals([b6.overlayDev, b6.port, b6.families], ["flannel-wg", 51820, [6]]);
  const six = createBackend(
    nl,
    { ...dual, backend: { ...dual.backend, raw: { Type: "wireguard" } } },
    EXT,
    "/tmp",
    {
      family: 6,
    },
  ) as WireguardBackend;
  assertEquals([six.overlayDev, six.mtu, six.port], ["flannel-wg-v6", 1420, 51821]);
});

Deno.test("wireguard: ensure starts the device, sets MTU/address/up/route; key and port over the UAPI", async () => {
  await withBackend({}, async (b, nl, fake, logs) => {
    const changes = b.ensure(OWN);
    assertEquals(changes[0], "created");
    // This kernel refuses the link kind: one line says the device is wireguard-go's, and why.
    const why = logs.filter((x) => x.includes("WireGuard falls back to userspace"));
    assertEquals(why.length, 1, logs.join("\n"));
    assertStringIncludes(why[0], "the kernel refused the link kind wireguard (EOPNOTSUPP");
    assertEquals(b.way, {
      way: "userspace",
      program: "/nonexistent/wireguard-go",
      fallback: b.way!.fallback,
    });
    assert(b.metricLines().includes(`flanctl_wireguard_userspace{device="flannel-wg"} 1`));
    const l = nl.link("flannel-wg")!;
    assertEquals([l.mtu, l.up], [1420, true]);
    assert(nl.addrs(4).some((a) => a.ifname === "flannel-wg" && a.local === "10.244.1.0" && a.prefix === 32));
    assert(nl.routes().some((r) => r.dst === "10.244.0.0/16" && r.devName === "flannel-wg" && !r.gateway));
    await b.settle();
    assertEquals(fake().listenPort, 51820);
    assertEquals(b.backendData(), { PublicKey: b.publicKey!, Port: 51820 });
    // The key reached the device only over the socket, and never a log line.
    assert(fake().privateKey !== null);
    assert(!logs.some((x) => x.includes(fake().privateKey!)), logs.join("\n"));
    assertEquals(b.ensure(OWN), [], "a second ensure changes nothing");
    await b.settle();
    assertEquals(fake().requests.filter((r) => r.startsWith("set=1")).length, 1);
  });
});

Deno.test("wireguard: peers as flanneld configures them; a removed lease removes its peer", async () => {
  await withBackend({ PSK: KEY3, PersistentKeepaliveInterval: 25 }, async (b, _nl, fake) => {
    b.ensure(OWN);
    const p2 = peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2, Port: 51820 });
    const p3 = peer("10.244.3.0/24", "192.0.2.13", { PublicKey: KEY3 }); // no Port: ours (old flanneld)
    assertEquals(b.peer(p2), {
      route: { dst: "10.244.2.0/24", via: "10.244.2.0", dev: "flannel-wg", onlink: true },
      neigh: null,
      fdb: null,
    });
    b.syncPeers([p2, p3]);
    await b.settle();
    const got = fake().peers.get(KEY2_HEX)!;
    assertEquals(got.endpoint, "192.0.2.12:51820");
    assertEquals(got.allowed, ["10.244.2.0/24"]);
    assertEquals(got.keepalive, 25);
    assertEquals(got.psk, "03".repeat(32));
    assertEquals(fake().peers.get("03".repeat(32))!.endpoint, "192.0.2.13:51820");
    b.syncPeers([p3]);
    await b.settle();
    assertEquals([...fake().peers.keys()], ["03".repeat(32)]);
    assert(fake().requests.at(-1)!.includes(`public_key=${KEY2_HEX}\nremove=true`));
  });
});

Deno.test("wireguard: a restarted daemon keeps the device's peers until it knows its own", async () => {
  await withBackend({}, async (b, _nl, fake, _logs, again) => {
    b.ensure(OWN);
    const p2 = peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2, Port: 51820 });
    b.syncPeers([p2]);
    await b.settle();
    await b.close();
    const sets = fake().requests.length;
    const b2 = again(); // the device (and wireguard-go) outlived the daemon
    assertEquals(b2.ensure(OWN), []);
    await b2.settle();
    assert(fake().peers.has(KEY2_HEX), "the first reconcile after a restart removed a peer");
    assertEquals(fake().requests.length, sets + 1, "a get only: key and port are right");
    b2.syncPeers([p2]);
    await b2.settle();
    assert(fake().requests.at(-1)!.startsWith("set=1"), "the peers are written whole once after a start");
    assert(!fake().requests.at(-1)!.includes("remove=true"));
    b2.syncPeers([]);
    await b2.settle();
    assertEquals(fake().peers.size, 0);
  });
});

Deno.test("wireguard: a device changed behind our back is put back; peers not in a lease removed", async () => {
  await withBackend({}, async (b, _nl, fake) => {
    b.ensure(OWN);
    b.syncPeers([peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2, Port: 51820 })]);
    await b.settle();
    fake().handle([
      "set=1",
      `public_key=${KEY2_HEX}`,
      "replace_allowed_ips=true",
      "allowed_ip=10.244.9.0/24",
    ]);
    fake().handle(["set=1", `public_key=${"07".repeat(32)}`, "allowed_ip=10.244.7.0/24"]);
    fake().handle(["set=1", "listen_port=1234"]);
    b.ensure(OWN);
    await b.settle();
    assertEquals(fake().peers.get(KEY2_HEX)!.allowed, ["10.244.2.0/24"]);
    assert(!fake().peers.has("07".repeat(32)));
    assertEquals(fake().listenPort, 51820);
  });
});

Deno.test("wireguard: peer() refuses a bad key, our own key, another backend; duplicates warned", async () => {
  await withBackend({}, async (b, _nl, fake, logs) => {
    b.ensure(OWN);
    assertStringIncludes(
      b.peer(peer("10.244.2.0/24", "192.0.2.12", { PublicKey: "x" })) as string,
      "PublicKey",
    );
    assertStringIncludes(
      b.peer(peer("10.244.2.0/24", "192.0.2.12", { PublicKey: b.publicKey })) as string,
      "ours",
    );
    assertStringIncludes(
      b.peer({ ...peer("10.244.2.0/24", "192.0.2.12", {}), backendType: "vxlan" }) as string,
      "BackendType",
    );
    assertStringIncludes(
      b.peer(peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2, Port: 1e6 })) as string,
      "Port",
    );
    b.syncPeers([
      peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2 }),
      peer("10.244.4.0/24", "192.0.2.14", { PublicKey: KEY2 }),
    ]);
    await b.settle();
    assertEquals(fake().peers.get(KEY2_HEX)!.allowed, ["10.244.2.0/24"]);
    assert(logs.some((l) => l.startsWith("warn two leases carry one WireGuard public key")));
  });
});

Deno.test("wireguard: a listen port in use fails settle() with the device's errno", async () => {
  await withBackend({ ListenPort: 4444 }, async (b, _nl, fake) => {
    b.prepare();
    b.ensure(OWN);
    fake().portsInUse.add(4444);
    b.ensure(OWN); // the first reconcile may have run: make one that must set the port
    fake().listenPort = 1;
    b.ensure(OWN);
    const e = await b.settle().then(() => null, (e) => e);
    assert(e instanceof Error);
    assertStringIncludes(e.message, "EADDRINUSE");
  });
});

Deno.test("wireguard: IPv6 endpoints in brackets; the device flannel-wg-v6 with a /128", async () => {
  await withBackend({}, async (b, nl, fake) => {
    b.ensure(IPNet.parse("fd00:0:0:1::/64"));
    assert(
      nl.addrs(6).some((a) => a.ifname === "flannel-wg-v6" && a.local === "fd00:0:0:1::" && a.prefix === 128),
    );
    b.syncPeers([peer("fd00:0:0:2::/64", "2001:db8::12", { PublicKey: KEY2, Port: 51821 })]);
    await b.settle();
    assertEquals(fake().peers.get(KEY2_HEX)!.endpoint, "[2001:db8::12]:51821");
    assertEquals(fake().listenPort, 51821);
  }, 6);
});

Deno.test("wireguard: a world-readable key file stops the start before any kernel change", async () => {
  await withBackend({}, (b, nl) => {
    const path = (b as unknown as { socket: string }).socket.replace(/[^/]*$/, "wgkey");
    Deno.writeTextFileSync(path, KEY2, { mode: 0o644 });
    Deno.chmodSync(path, 0o644);
    assertThrows(() => b.prepare(), WgKeyError, "0644");
    assertEquals(nl.link("flannel-wg"), null);
    return Promise.resolve();
  });
});

Deno.test("wireguard: no wireguard-go where the kernel has none is a ConfigError naming how to provide one", () => {
  const nl = new FakeNetlink();
  nl.kinds.delete("wireguard");
  const dir = Deno.makeTempDirSync();
  try {
    const b = new WireguardBackend(nl, opts(), EXT, NET, 4, undefined, {
      keyFile: `${dir}/wgkey`,
      program: null,
      genl: NO_GENL,
    });
    b.prepare();
    const e = assertThrows(() => b.ensure(OWN), ConfigError, "FLANCTL_WIREGUARD_GO");
    assertStringIncludes(e.message, "the kernel refused the link kind wireguard");
    assertEquals(nl.links().length, 0);
    // Forced to userspace, the start stops at prepare, before any kernel change.
    const forced = new WireguardBackend(nl, opts(), EXT, NET, 4, undefined, {
      keyFile: `${dir}/wgkey`,
      program: null,
      way: "userspace",
    });
    assertThrows(() => forced.prepare(), ConfigError, "FLANCTL_WIREGUARD_WAY=userspace");
    assertEquals(nl.ops, ["createWireguard flannel-wg"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("wireguard Mode auto, dual stack: one device, both addresses, one peer with both subnets", async () => {
  await withBackend(
    { Mode: "auto" },
    async (b, nl, fake, _logs, again) => {
      const NET6 = IPNet.parse("fd00::/56"), OWN6 = IPNet.parse("fd00:0:0:1::/64");
      const v6 = b.pairV6(NET6);
      assertEquals(b.pairV6(NET6), v6, "one side per device");
      b.ensure(OWN);
      assertEquals(v6.ensure(OWN6), ["address fd00:0:0:1::/128", "route fd00::/56 dev flannel-wg"]);
      assert(
        nl.addrs(4).some((a) => a.ifname === "flannel-wg" && a.local === "10.244.1.0" && a.prefix === 32),
      );
      assert(
        nl.addrs(6).some((a) => a.ifname === "flannel-wg" && a.local === "fd00:0:0:1::" && a.prefix === 128),
      );
      assert(nl.routes().some((r) => r.dst === "fd00::/56" && r.devName === "flannel-wg"));
      assertEquals(nl.link("flannel-wg-v6"), null);
      // The lease: one key, the port the device listens on in both (flanneld writes ListenPortV6 in v6).
      assertEquals(JSON.stringify(b.backendData()), `{"PublicKey":"${b.publicKey}","Port":51820}`);
      assertEquals(JSON.stringify(v6.backendData()), `{"PublicKey":"${b.publicKey}","Port":51820}`);
      const p4 = peer("10.244.2.0/24", "10.0.0.12", { PublicKey: KEY2, Port: 51820 });
      const p6 = peer("fd00:0:0:2::/64", "fd01::12", { PublicKey: KEY2, Port: 0 });
      assertEquals(v6.peer(p6), {
        route: { dst: "fd00:0:0:2::/64", via: "fd00:0:0:2::", dev: "flannel-wg", onlink: true },
        neigh: null,
        fdb: null,
      });
      b.syncPeers([p4]);
      await b.settle();
      assertEquals(fake().peers.size, 0, "no peer written before the IPv6 side says which it accepted");
      v6.syncPeers([p6]);
      await v6.settle();
      assertEquals(fake().listenPort, 51820);
      const got = fake().peers.get(KEY2_HEX)!;
      assertEquals(got.allowed, ["10.244.2.0/24", "fd00:0:0:2::/64"]);
      assertEquals(got.endpoint, "10.0.0.12:51820", "ULA both sides: flanneld's auto picks IPv4");
      assert(b.metricLines().includes(`flanctl_wireguard_peers{device="flannel-wg"} 1`));
      // A restart keeps the peer whole until both sides have said; then the IPv6 side's removal.
      await b.close();
      const b2 = again();
      const v62 = b2.pairV6(NET6);
      assertEquals([...b2.ensure(OWN), ...v62.ensure(OWN6)], []);
      b2.syncPeers([p4]);
      await b2.settle();
      assertEquals(fake().peers.get(KEY2_HEX)!.allowed, ["10.244.2.0/24", "fd00:0:0:2::/64"]);
      v62.syncPeers([]);
      await b2.settle();
      assertEquals(fake().peers.get(KEY2_HEX)!.allowed, ["10.244.2.0/24"]);
      b2.syncPeers([]);
      await b2.settle();
      assertEquals(fake().peers.size, 0);
    },
    4,
    [4, 6],
  );
});

Deno.test("wireguard Mode ipv6, dual stack: the peer's [PublicIPv6]:port; a zero Port is ours", async () => {
  await withBackend(
    { Mode: "ipv6", ListenPort: 4000 },
    async (b, _nl, fake) => {
      const v6 = b.pairV6(IPNet.parse("fd00::/56"));
      b.ensure(OWN);
      v6.ensure(IPNet.parse("fd00:0:0:1::/64"));
      b.syncPeers([peer("10.244.2.0/24", "10.0.0.12", { PublicKey: KEY2, Port: 4000 })]);
      v6.syncPeers([peer("fd00:0:0:2::/64", "fd01::12", { PublicKey: KEY2 })]);
      await b.settle();
      assertEquals(fake().listenPort, 4000);
      assertEquals(fake().peers.get(KEY2_HEX)!.endpoint, "[fd01::12]:4000");
      assertEquals(v6.backendData().Port, 4000);
    },
    4,
    [4, 6],
  );
});

Deno.test("wireguard Mode auto, IPv6 only: flannel-wg on ListenPort, a /128, [PublicIPv6]:port peers", async () => {
  await withBackend(
    { Mode: "auto" },
    async (b, nl, fake) => {
      assertEquals([b.overlayDev, b.port, b.single], ["flannel-wg", 51820, true]);
      b.ensure(IPNet.parse("fd00:0:0:1::/64"));
      assert(
        nl.addrs(6).some((a) => a.ifname === "flannel-wg" && a.local === "fd00:0:0:1::" && a.prefix === 128),
      );
      assertEquals(nl.link("flannel-wg-v6"), null);
      assertThrows(() => b.pairV6(IPNet.parse("fd00::/56")), Error, "EnableIPv6");
      b.syncPeers([peer("fd00:0:0:2::/64", "fd01::12", { PublicKey: KEY2, Port: 0 })]);
      await b.settle();
      assertEquals(fake().listenPort, 51820);
      const got = fake().peers.get(KEY2_HEX)!;
      assertEquals([got.endpoint, got.allowed], ["[fd01::12]:51820", ["fd00:0:0:2::/64"]]);
      assertEquals(b.backendData(), { PublicKey: b.publicKey!, Port: 51820 });
    },
    6,
    [6],
  );
});

Deno.test("wireguard: switching Mode separate -> auto removes flannel-wg-v6 (the device and its address)", async () => {
  await withBackend(
    { Mode: "separate" },
    async (b6, nl, _fake, logs, again) => {
      const OWN6 = IPNet.parse("fd00:0:0:1::/64");
      b6.ensure(OWN6);
      assert(nl.link("flannel-wg-v6"), "separate: the IPv6 device");
      assert(nl.addrs(6).some((a) => a.ifname === "flannel-wg-v6" && a.prefix === 128));
      // The daemon restarted with Mode auto: one device for both families.
      const b = again({ Mode: "auto" }, 4, [4, 6]);
      const v6 = b.pairV6(IPNet.parse("fd00::/56"));
      const changes = [...b.ensure(OWN), ...v6.ensure(OWN6)];
      assert(changes.includes("removed flannel-wg-v6 (Mode separate's IPv6 device)"), changes.join(", "));
      assertEquals(nl.link("flannel-wg-v6"), null);
      assertEquals(nl.addrs(6).filter((a) => a.ifname === "flannel-wg-v6"), []);
      assert(
        nl.addrs(6).some((a) => a.ifname === "flannel-wg" && a.local === "fd00:0:0:1::" && a.prefix === 128),
      );
      assert(
        logs.some((l) =>
          l.startsWith("info removed what another Backend.Mode left") && l.includes("flannel-wg-v6")
        ),
      );
      // Nothing more to remove on the next ensure.
      assertEquals([...b.ensure(OWN), ...v6.ensure(OWN6)], []);
      await b.close();
    },
    6,
  );
});

Deno.test("wireguard: switching Mode auto -> separate removes flannel-wg's IPv6 /128", async () => {
  await withBackend(
    { Mode: "auto" },
    async (b, nl, _fake, logs, again) => {
      const NET6 = IPNet.parse("fd00::/56"), OWN6 = IPNet.parse("fd00:0:0:1::/64");
      b.ensure(OWN);
      b.pairV6(NET6).ensure(OWN6);
      assert(nl.addrs(6).some((a) => a.ifname === "flannel-wg" && a.prefix === 128));
      await b.close();
      // The daemon restarted with Mode separate: flannel-wg is IPv4's only, flannel-wg-v6 IPv6's.
      const b4 = again({ Mode: "separate" }, 4, [4]), b6 = again({ Mode: "separate" }, 6, [6]);
      const changes = b4.ensure(OWN);
      assert(changes.some((c) => c.startsWith("removed address fd00:0:0:1::/128")), changes.join(", "));
      b6.ensure(OWN6);
      assertEquals(nl.addrs(6).filter((a) => a.ifname === "flannel-wg").map((a) => a.local), []);
      assert(nl.addrs(4).some((a) => a.ifname === "flannel-wg" && a.local === "10.244.1.0"));
      assert(nl.addrs(6).some((a) => a.ifname === "flannel-wg-v6" && a.local === "fd00:0:0:1::"));
      assert(
        logs.some((l) =>
          l.startsWith("info removed what another Backend.Mode left") && l.includes("fd00:0:0:1::/128")
        ),
      );
      assertEquals(b4.ensure(OWN), []);
      await b4.close();
      await b6.close();
    },
    4,
    [4, 6],
  );
});
