/**
 * The wireguard backend's wire format and device configuration, pinned against flanneld's own source
 * (pkg/backend/wireguard of the pinned flanneld, from the dev cache tools/peers/build.sh fills). flanneld's
 * wireguard backend needs the kernel module, which this machine lacks, so a flanneld node and a flanctl
 * node cannot run side by side here: instead each fact two such nodes must agree on is read from flanneld's
 * source and compared with what flanctl writes — the lease's BackendData (`{"PublicKey":…,"Port":…}`, the
 * v6 twin), the device names, the ports, the MTU overhead, the key file and its environment variable, the
 * keepalive's unit, the modes, and a peer's configuration (Endpoint = PublicIP:Port, AllowedIPs = its
 * subnet, replaced; the PSK; the keepalive).
 */
import { assert, assertEquals, assertMatch } from "./assert.ts";
import { devCacheDir, peerVersions, requirePeers } from "./peers.ts";
import { FakeNetlink } from "../lib/netlink/fake/fake_netlink.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { parseNetConfig } from "../lib/config/netconf.ts";
import { createBackend } from "../lib/backend/mod.ts";
import { WireguardBackend } from "../lib/backend/wireguard/backend.ts";
import { DEFAULT_KEY_FILE, KEY_FILE_ENV, keyBase64 } from "../lib/backend/wireguard/keys.ts";
import {
  parseWireguardOptions,
  WG_DEVICE,
  WG_DEVICE_V6,
  WG_OVERHEAD,
} from "../lib/backend/wireguard/options.ts";
import { encodeSet } from "../lib/backend/wireguard/uapi.ts";

function source(): string {
  const dir = `${devCacheDir()}/flanneld-${peerVersions().flanneld}/src/pkg/backend/wireguard`;
  return ["wireguard.go", "device.go", "wireguard_network.go"].map((f) =>
    Deno.readTextFileSync(`${dir}/${f}`)
  )
    .join("\n");
}

/** The Go expression `name` is set to in flanneld's source (first match), e.g. a default or a constant. */
function goValue(src: string, re: RegExp): string {
  const m = re.exec(src);
  assert(m, `flanneld's source no longer has ${re}: review the wireguard backend against it`);
  return m[1];
}

Deno.test({
  name: "wireguard format: flanneld's source facts equal flanctl's",
  ignore: !requirePeers(["flanneld"]),
  fn() {
    const src = source();
    // Device names, ports, MTU overhead.
    assertEquals(
      goValue(src, /createWGDev\(ctx, wg, "([^"]+)", cfg\.PSK, &keepalive, cfg\.ListenPort,/),
      WG_DEVICE,
    );
    assertEquals(
      goValue(src, /createWGDev\(ctx, wg, "([^"]+)", cfg\.PSK, &keepalive, cfg\.ListenPortV6,/),
      WG_DEVICE_V6,
    );
    assertEquals(Number(goValue(src, /overhead = (\d+)/)), WG_OVERHEAD);
    const o = parseWireguardOptions({ type: "wireguard", raw: {} });
    assertEquals(Number(goValue(src, /ListenPort: +(\d+),/)), o.listenPort);
    assertEquals(Number(goValue(src, /ListenPortV6: +(\d+),/)), o.listenPortV6);
    assertEquals(goValue(src, /Mode: +(\w+),\n/), "Separate");
    assertEquals(goValue(src, /Separate Mode = "(\w+)"/), o.mode);
    // The keepalive is whole seconds (a JSON number times time.Second).
    assertMatch(src, /keepalive := cfg\.PersistentKeepaliveInterval \* time\.Second/);
    // The key file and its variable; written as the key's String() (base64), read with ParseKey.
    assertEquals(goValue(src, /keyFile := "([^"]+)"/), DEFAULT_KEY_FILE);
    assertEquals(goValue(src, /os\.LookupEnv\("([A-Z_]+)"\)/), KEY_FILE_ENV);
    assertMatch(src, /writePrivateKey\(keyFile, privateKey\.String\(\)\)/);
    // The lease: BackendType "wireguard"; BackendData / BackendV6Data are wireguardLeaseAttrs, in this order.
    assertMatch(src, /type wireguardLeaseAttrs struct \{\n\s+PublicKey string\n\s+Port +uint16\n\}/);
    assertMatch(src, /BackendType: "wireguard"/);
    assertMatch(src, /Port: +v4Port,[\s\S]*Port: +v6Port,/);
    // A peer: the endpoint from PublicIP and the lease's Port (own port when 0), AllowedIPs replaced.
    assertMatch(
      src,
      /v4PeerEndpoint := fmt\.Sprintf\("%s:%d", event\.Lease\.Attrs\.PublicIP\.String\(\), v4Port\)/,
    );
    assertMatch(src, /v6PeerEndpoint = fmt\.Sprintf\("\[%s\]:%d"/);
    assertMatch(src, /if v4Port == 0 && n\.dev != nil \{\n\s+v4Port = uint16\(n\.dev\.attrs\.listenPort\)/);
    assertMatch(src, /ReplaceAllowedIPs: +true,\n\s+AllowedIPs: +peerSubnets,/);
    assertMatch(
      src,
      /PresharedKey: +dev\.attrs\.psk,\n\s+PersistentKeepaliveInterval: dev\.attrs\.keepalive,/,
    );
    // The device holds the lease subnet's address as a /32 (/128) and routes the whole Network.
    assertMatch(src, /ip\.IP4Net\{IP: devIP, PrefixLen: 32\}/);
    assertMatch(src, /ip\.IP6Net\{IP: devIP, PrefixLen: 128\}/);
    assertMatch(src, /dev\.upAndAddRoute\(flannelnet\.ToIPNet\(\)\)/);
  },
});

Deno.test("wireguard format: the lease and the peer configuration flanctl writes", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const nl = new FakeNetlink();
    const ext = { name: "eth0", index: 2, mtu: 1500, ifaceIP: "192.0.2.11", publicIP: "192.0.2.11" };
    const cfg = parseNetConfig(JSON.stringify({
      Network: "10.244.0.0/16",
      EnableIPv6: true,
      IPv6Network: "fd00::/56",
      Backend: {
        Type: "wireguard",
        PSK: keyBase64(new Uint8Array(32).fill(3)),
        PersistentKeepaliveInterval: 25,
      },
    }));
    const env = { keyFile: `${dir}/wgkey`, program: "/x", kernel: false, socketDir: dir };
    const make = (family: 4 | 6) =>
      new WireguardBackend(
        nl,
        parseWireguardOptions(cfg.backend),
        ext,
        family === 4 ? cfg.network! : cfg.ipv6Network!,
        family,
        undefined,
        env,
      );
    const b4 = make(4), b6 = make(6);
    // Exactly flanneld's json.Marshal(&wireguardLeaseAttrs{...}): the same key on both families.
    const pub = b4.backendData().PublicKey;
    assertEquals(JSON.stringify(b4.backendData()), `{"PublicKey":"${pub}","Port":51820}`);
    assertEquals(JSON.stringify(b6.backendData()), `{"PublicKey":"${pub}","Port":51821}`);
    assertEquals(
      Deno.readTextFileSync(`${dir}/wgkey`).length,
      44,
      "base64, no newline (flanneld ParseKey's form)",
    );
    assertEquals([b4.overlayDev, b6.overlayDev, b4.mtu, b6.mtu], ["flannel-wg", "flannel-wg-v6", 1420, 1420]);
    assert(createBackend(nl, cfg, ext, dir) instanceof WireguardBackend);
    // A peer as flanneld configures it, in UAPI lines.
    const peerKey = keyBase64(new Uint8Array(32).fill(2));
    const st = { publicKey: pub, listenPort: 51820, fwmark: 0, peers: [] };
    b4.syncPeers([{
      subnet: IPNet.parse("10.244.2.0/24"),
      publicIP: "192.0.2.12",
      backendType: "wireguard",
      backendData: { PublicKey: peerKey, Port: 0 },
    }]);
    await b4.settle().catch(() => {}); // no device here: only the plan is compared
    const set = b4.plan(st, true)!;
    assertEquals(
      encodeSet(set),
      [
        "set=1",
        `public_key=${"02".repeat(32)}`,
        `preshared_key=${"03".repeat(32)}`,
        "endpoint=192.0.2.12:51820",
        "persistent_keepalive_interval=25",
        "replace_allowed_ips=true",
        "allowed_ip=10.244.2.0/24",
      ].join("\n") + "\n\n",
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name: "wireguard format: one device (Mode auto/ipv4/ipv6) as flanneld's source has it, and our lease",
  ignore: !requirePeers(["flanneld"]),
  fn() {
    const src = source();
    // One device flannel-wg on ListenPort for auto/ipv4/ipv6; the IPv6 subnet configured on it.
    assertMatch(
      src,
      /case Auto, Ipv4, Ipv6:\n\s+dev, err = createWGDev\(ctx, wg, "flannel-wg", cfg\.PSK, &keepalive, cfg\.ListenPort,/,
    );
    assertMatch(src, /\} else \{\n\s+err = dev\.ConfigureV6\(lease\.IPv6Subnet\.IP, config\.IPv6Network\)/);
    // flanneld's lease says ListenPortV6 in BackendV6Data whatever the mode (flanctl: the port it listens on).
    assertMatch(src, /newSubnetAttrs\([^)]*uint16\(cfg\.ListenPort\), uint16\(cfg\.ListenPortV6\)\)/);
    // One peer: AllowedIPs IPv4 then IPv6; the key from the v6 attributes when the lease has IPv6.
    assertMatch(
      src,
      /wireguardAttrs = v4wireguardAttrs\n\s+subnets = append\(subnets, event\.Lease\.Subnet\.ToIPNet\(\)\)/,
    );
    assertMatch(
      src,
      /wireguardAttrs = v6wireguardAttrs\n\s+subnets = append\(subnets, event\.Lease\.IPv6Subnet/,
    );
    // selectMode, in the order single.ts follows.
    assertMatch(
      src,
      /if ip6 == nil \{\n\s+return Ipv4\n\s+\}\n\s+if !ip4\.IsPrivate\(\) && n\.extIface\.ExtAddr != nil \{\n\s+return Ipv4\n\s+\}\n\s+if !ip6\.IsPrivate\(\) && n\.extIface\.ExtV6Addr != nil && !ip\.FromIP6\(n\.extIface\.ExtV6Addr\)\.IsPrivate\(\) \{\n\s+return Ipv6\n\s+\}\n\s+return Ipv4/,
    );
  },
});

Deno.test("wireguard format: the lease flanctl writes in one-device mode (dual stack): ListenPort twice", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const nl = new FakeNetlink();
    const ext = { name: "eth0", index: 2, mtu: 1500, ifaceIP: "192.0.2.11", publicIP: "192.0.2.11" };
    const cfg = parseNetConfig(JSON.stringify({
      Network: "10.244.0.0/16",
      EnableIPv6: true,
      IPv6Network: "fd00::/56",
      Backend: { Type: "wireguard", Mode: "auto", ListenPort: 51000, ListenPortV6: 51001 },
    }));
    const b4 = new WireguardBackend(
      nl,
      parseWireguardOptions(cfg.backend),
      ext,
      cfg.network!,
      4,
      undefined,
      { keyFile: `${dir}/wgkey`, program: "/x", socketDir: dir },
      [4, 6],
    );
    const b6 = createBackend(nl, cfg, ext, dir, { family: 6, pair: b4 });
    const pub = b4.backendData().PublicKey;
    assertEquals(JSON.stringify(b4.backendData()), `{"PublicKey":"${pub}","Port":51000}`);
    // flanneld writes 51001 here, a port nothing listens on; flanctl the device's (docs/daemon.md).
    assertEquals(JSON.stringify(b6.backendData()), `{"PublicKey":"${pub}","Port":51000}`);
    assertEquals([b4.overlayDev, b6.overlayDev, b4.port], ["flannel-wg", "flannel-wg", 51000]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
