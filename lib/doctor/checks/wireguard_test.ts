import { assertEquals, assertStringIncludes } from "../../../tests/assert.ts";
import { offlineSnapshot } from "../../observe/fake/offline_snapshot.ts";
import {
  daemonAge,
  HANDSHAKE_GRACE_S,
  judgeHandshake,
  useWgReader,
  wgDevice,
  wgPeers,
  type WgReader,
} from "./wireguard.ts";
import { IPNet } from "../../base/cidr.ts";
import type { Lease } from "../../lease/types.ts";
import { ownDaemonState, writeDaemonState } from "../../node/daemon_state.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import type { LinkInfo } from "../../netlink/types.ts";
import type { PeerState } from "../../backend/wireguard/uapi.ts";

const P: PeerState = {
  publicKey: btoa("k".repeat(32)),
  presharedKey: false,
  endpoint: "192.0.2.12:51820",
  lastHandshake: 0,
  txBytes: 0,
  rxBytes: 0,
  keepalive: 0,
  allowedIPs: ["10.244.2.0/24"],
};

Deno.test("judgeHandshake: none after 2 minutes of trying is critical; idle or young is not", () => {
  const now = 1_800_000_000;
  assertEquals(judgeHandshake(P, now, 3600).severity, "ok", "idle: nothing sent, nothing to shake hands for");
  assertEquals(judgeHandshake({ ...P, txBytes: 148 }, now, HANDSHAKE_GRACE_S - 1).severity, "ok", "young");
  const c = judgeHandshake({ ...P, txBytes: 148 }, now, HANDSHAKE_GRACE_S);
  assertEquals(c.severity, "critical");
  assertStringIncludes(c.text, "no handshake");
  assertEquals(judgeHandshake({ ...P, keepalive: 25 }, now, 600).severity, "critical", "keepalives try");
  assertEquals(judgeHandshake({ ...P, txBytes: 1 }, now, null).severity, "critical", "age unknown");
  const recent = judgeHandshake({ ...P, lastHandshake: now - 30, txBytes: 1 }, now, 600);
  assertEquals([recent.severity, recent.text], ["ok", "last handshake 30 s ago"]);
  assertEquals(judgeHandshake({ ...P, lastHandshake: now - 900 }, now, 3600).severity, "ok", "idle since");
  assertEquals(
    judgeHandshake({ ...P, lastHandshake: now - 900, keepalive: 25 }, now, 3600).severity,
    "warning",
  );
});

/** A snapshot of a wireguard node whose flannel-wg is of link kind `kind`, read through `read`. */
function wgContext(kind: string, read: WgReader): NodeSnapshot {
  const ctx = offlineSnapshot();
  ctx.store.config = parseNetConfig(
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "wireguard" } }),
  );
  const link = (index: number, name: string, k: string | null, mtu: number): LinkInfo => ({
    index,
    name,
    kind: k,
    flags: ["UP"],
    up: true,
    operstate: "UNKNOWN",
    mtu,
    mac: null,
    master: null,
    parent: null,
    linkNetnsId: null,
  });
  ctx.kernel = {
    links: [link(2, "eth0", null, 1500), link(7, "flannel-wg", kind, 1420)],
    addrs: [],
    routes: [],
    neigh: [],
    fdb: [],
    source: "test",
  };
  useWgReader(ctx, read);
  return ctx;
}

Deno.test("wg-device: the kernel's device needs no process and is read over generic netlink", async () => {
  const ways: string[] = [];
  const ok = wgContext("wireguard", (dev, way) => {
    ways.push(`${dev} ${way}`);
    return Promise.resolve({ publicKey: null, listenPort: 51820, fwmark: 0, peers: [] });
  });
  const [f] = await wgDevice.run(ok);
  assertEquals(f.severity, "ok", f.detail);
  assertStringIncludes(f.detail, "MTU 1420, kernel");
  assertEquals(ways, ["flannel-wg kernel"]);
  const down = wgContext("wireguard", () => Promise.reject(new Error("the kernel has no wireguard family")));
  const [g] = await wgDevice.run(down);
  assertEquals(g.severity, "critical");
  assertEquals(
    g.detail,
    "kernel: generic netlink does not answer for it: the kernel has no wireguard family",
  );
  // wireguard-go's TUN is read over its UAPI, and with no process holding it that is said.
  const tun = wgContext("tun", (dev, way) => {
    ways.push(`${dev} ${way}`);
    return Promise.resolve({ publicKey: null, listenPort: 51820, fwmark: 0, peers: [] });
  });
  const [h] = await wgDevice.run(tun);
  assertStringIncludes(h.detail, "userspace (no process): no process holds flannel-wg open");
  assertEquals(ways.at(-1), "flannel-wg userspace");
});

Deno.test("daemonAge: a kernel device's grace is the running daemon's time, none without one", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const ctx = offlineSnapshot({ subnetFile: `${dir}/subnet.env` });
    const now = Date.now() / 1000;
    assertEquals(daemonAge(ctx, now), null, "no state file");
    const st = ownDaemonState("test", null, `${dir}/subnet.env`); // this process stands for the daemon
    writeDaemonState(`${dir}/flanctl.json`, { ...st, startedAt: new Date((now - 30) * 1000).toISOString() });
    assertEquals(Math.round(daemonAge(ctx, now)!), 30);
    writeDaemonState(`${dir}/flanctl.json`, { ...st, procStart: (st.procStart ?? 0) + 1 }); // pid reused
    assertEquals(daemonAge(ctx, now), null, "a daemon that is not running");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("wg-device/wg-peers, Mode auto dual stack: flannel-wg with both addresses, one peer with both", async () => {
  const K1 = btoa("a".repeat(32)), K2 = btoa("b".repeat(32));
  let peers: PeerState[] = []; // read once per snapshot: set before the first check
  const ctx = wgContext(
    "wireguard",
    () => Promise.resolve({ publicKey: K1, listenPort: 51820, fwmark: 0, peers }),
  );
  ctx.store.config = parseNetConfig(JSON.stringify({
    Network: "10.244.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fd00::/56",
    Backend: { Type: "wireguard", Mode: "auto" },
  }));
  const lease = (n: number, key: string): Lease => ({
    subnet: IPNet.parse(`10.244.${n}.0/24`),
    ipv6Subnet: IPNet.parse(`fd00:0:0:${n}::/64`),
    attrs: {
      PublicIP: `10.0.0.${n}`,
      PublicIPv6: `fd01::${n}`,
      BackendType: "wireguard",
      BackendData: { PublicKey: key, Port: 51820 },
      BackendV6Data: { PublicKey: key, Port: 51820 },
    },
    expiration: null,
  });
  ctx.store.leases = [lease(1, K1), lease(2, K2)];
  const addr = (index: number, ifname: string, family: 4 | 6, local: string, prefix: number) =>
    ({ index, ifname, family, local, prefix, scope: "global" }) as never;
  ctx.kernel!.addrs = [
    addr(2, "eth0", 4, "10.0.0.1", 24),
    addr(2, "eth0", 6, "fd01::1", 64),
    addr(7, "flannel-wg", 4, "10.244.1.0", 32),
    addr(7, "flannel-wg", 6, "fd00:0:0:1::", 128),
  ];
  // Both subnets on one peer, the IPv4 endpoint (ULA both sides: flanneld's selectMode picks IPv4).
  peers = [{
    ...P,
    publicKey: K2,
    endpoint: "10.0.0.2:51820",
    allowedIPs: ["10.244.2.0/24", "fd00:0:0:2::/64"],
  }];
  const dev = await wgDevice.run(ctx);
  assertEquals(dev.length, 1, "one device: one finding");
  assertEquals(dev[0].detail, "flannel-wg up, 10.244.1.0 and fd00:0:0:1::, MTU 1420, kernel");
  const [ok] = await wgPeers.run(ctx);
  assertEquals([ok.severity, ok.detail], [
    "ok",
    "flannel-wg: 1 peers, AllowedIPs and endpoints as the leases say",
  ]);
  // The IPv4 subnet alone (a separate-mode peer) is critical.
  const bad = wgContext("wireguard", () =>
    Promise.resolve({
      publicKey: K1,
      listenPort: 51820,
      fwmark: 0,
      peers: [{ ...P, publicKey: K2, endpoint: "10.0.0.2:51820" }],
    }));
  Object.assign(bad.store, { config: ctx.store.config, leases: ctx.store.leases });
  bad.kernel!.addrs = ctx.kernel!.addrs;
  const [crit] = await wgPeers.run(bad);
  assertEquals(crit.severity, "critical");
  assertStringIncludes(crit.detail, "flannel-wg: 10.244.2.0/24,fd00:0:0:2::/64's peer allows 10.244.2.0/24");
});
