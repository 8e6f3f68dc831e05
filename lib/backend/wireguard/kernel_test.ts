/**
 * The kernel WireGuard driver against the fake netlink and the fake `wireguard` generic netlink family:
 * what it asks of the kernel, in order, from the first start to a peer's removal.
 */
import { assert, assertEquals, assertThrows } from "../../../tests/assert.ts";
import { holds, recordingArrays } from "../../../tests/arrays_made.ts";
import { FakeNetlink } from "../../netlink/fake/fake_netlink.ts";
import { FakeWgGenl } from "../../netlink/fake/fake_wg_genl.ts";
import { IPNet } from "../../base/cidr.ts";
import type { ExternalIface, PeerInfo } from "../types.ts";
import { WireguardBackend } from "./backend.ts";
import { parseWireguardOptions } from "./options.ts";
import { keyBase64, publicKeyOf } from "./keys.ts";
import { configOf, KernelDriver, setRequests, stateOf, WG_SET_PEER_BYTES } from "./kernel.ts";
import type { Log } from "../../base/log.ts";

const EXT: ExternalIface = {
  name: "eth0",
  index: 2,
  mtu: 1500,
  ifaceIP: "192.0.2.11",
  publicIP: "192.0.2.11",
};
const KEY2 = keyBase64(new Uint8Array(32).fill(2));
const KEY3 = keyBase64(new Uint8Array(32).fill(3));

function peer(subnet: string, ip: string, data: unknown): PeerInfo {
  return { subnet: IPNet.parse(subnet), publicIP: ip, backendType: "wireguard", backendData: data };
}

function setup(backend: Record<string, unknown> = {}) {
  const dir = Deno.makeTempDirSync();
  const nl = new FakeNetlink();
  const genl = new FakeWgGenl(nl, publicKeyOf);
  const logs: string[] = [];
  const log = {
    info: (m: string, f?: unknown) => logs.push(`info ${m} ${JSON.stringify(f ?? {})}`),
    warn: (m: string) => logs.push(`warn ${m}`),
    error: (m: string) => logs.push(`error ${m}`),
    debug: () => {},
  } as unknown as Log;
  const b = new WireguardBackend(
    nl,
    parseWireguardOptions({ type: "wireguard", raw: { Type: "wireguard", ...backend } }),
    EXT,
    IPNet.parse("10.244.0.0/16"),
    4,
    log,
    {
      keyFile: `${dir}/wgkey`,
      program: null, // no wireguard-go: the kernel way must not need it
      socketDir: dir,
      genl,
      start: () => {
        throw new Error("wireguard-go started on the kernel way");
      },
    },
  );
  return { b, nl, genl, logs, done: () => Deno.removeSync(dir, { recursive: true }) };
}

Deno.test("wireguard kernel: the link, then key and port, then peers, over generic netlink", async () => {
  const { b, nl, genl, logs, done } = setup({ PSK: KEY3, PersistentKeepaliveInterval: 25 });
  try {
    b.prepare();
    assertEquals(b.ensure(IPNet.parse("10.244.1.0/24")), [
      "created",
      "address 10.244.1.0/32",
      "up",
      "route 10.244.0.0/16 dev flannel-wg",
    ]);
    assertEquals(nl.ops, [
      "createWireguard flannel-wg",
      "addAddr flannel-wg 10.244.1.0/32",
      "setUp flannel-wg true",
      "replaceRoute 10.244.0.0/16",
    ]);
    assertEquals([nl.link("flannel-wg")?.kind, nl.link("flannel-wg")?.mtu], ["wireguard", 1420]);
    assertEquals(b.way, { way: "kernel", program: null, fallback: null });
    await b.settle();
    assertEquals(genl.calls, ["familyId", "get flannel-wg", "set flannel-wg key port=51820"]);
    b.syncPeers([peer("10.244.2.0/24", "192.0.2.12", { PublicKey: KEY2, Port: 51820 })]);
    await b.settle();
    assertEquals(genl.calls.slice(3), ["get flannel-wg", "set flannel-wg peers=+02020202"]);
    const p = genl.peer("02".repeat(32))!;
    assertEquals(
      [p.endpoint, p.allowedIPs, p.keepalive, p.presharedKey],
      ["192.0.2.12:51820", ["10.244.2.0/24"], 25, true],
    );
    // The device's key is ours: the GET's public key (the kernel derives it) matches the lease's.
    const st = stateOf(genl.get(0x1c, "flannel-wg"));
    assertEquals([st.publicKey, st.listenPort], [b.publicKey, 51820]);
    b.syncPeers([]);
    await b.settle();
    assertEquals(genl.calls.at(-1), "set flannel-wg peers=-02020202");
    assertEquals(genl.peer("02".repeat(32)), undefined);
    assertEquals(b.ensure(IPNet.parse("10.244.1.0/24")), [], "a second ensure changes nothing");
    assertEquals(nl.ops.filter((o) => o.startsWith("createWireguard")).length, 1);
    assert(b.metricLines().includes(`flanctl_wireguard_userspace{device="flannel-wg"} 0`));
    assertEquals(
      logs.filter((l) => l.includes("WireGuard device is the kernel's")).length,
      1,
      logs.join("\n"),
    );
    assert(!logs.some((l) => l.includes("fall")), logs.join("\n"));
    await b.close();
  } finally {
    done();
  }
});

Deno.test("wireguard kernel: a restart finds its link and keeps it (no create, family looked up)", () => {
  const { b, nl, genl, done } = setup();
  try {
    nl.addLink("flannel-wg", { kind: "wireguard", mtu: 1420 });
    b.prepare();
    assertEquals(b.ensure(IPNet.parse("10.244.1.0/24")).includes("created"), false);
    assert(!nl.ops.some((o) => o.startsWith("createWireguard") || o.startsWith("deleteLink")), nl.ops.join());
    assertEquals(genl.calls[0], "familyId");
    assertEquals(b.way?.way, "kernel");
  } finally {
    done();
  }
});

Deno.test("configOf / stateOf: keys to bytes and back, a cleared PSK is zeros, no private key read", () => {
  const c = configOf("flannel-wg", {
    privateKeyHex: "05".repeat(32),
    listenPort: 51820,
    peers: [
      {
        publicKey: KEY2,
        presharedKeyHex: "",
        endpoint: "[2001:db8::1]:51821",
        keepalive: 0,
        allowedIPs: ["fd00::/64"],
      },
      { publicKey: KEY3, remove: true },
    ],
  });
  assertEquals(c.privateKey, new Uint8Array(32).fill(5));
  assertEquals(c.peers![0].presharedKey, new Uint8Array(32));
  assertEquals(c.peers![0].endpoint, "[2001:db8::1]:51821");
  assertEquals(c.peers![1], { publicKey: new Uint8Array(32).fill(3), remove: true });
  assertThrows(() => configOf("flannel-wg", { privateKeyHex: "zz" }), Error, "private key");
  assertThrows(() => configOf("flannel-wg", { peers: [{ publicKey: "x" }] }), Error, "public key");
  const st = stateOf({
    ifindex: 3,
    ifname: "flannel-wg",
    privateKey: false,
    publicKey: new Uint8Array(32).fill(9),
    listenPort: 1,
    fwmark: 0,
    peers: [],
  });
  assertEquals(st.publicKey, null, "no private key set: no public key either");
});

Deno.test("KernelDriver: the private key's bytes are zeroed once sent", async () => {
  const nl = new FakeNetlink();
  const sent: Uint8Array[] = [];
  const d = new KernelDriver(nl, "wg0", 1420, {
    familyId: () => 0x1c,
    set: (_f, c) => void sent.push(c.privateKey!),
    get: () => {
      throw new Error("unused");
    },
  });
  d.ensureDevice();
  await d.configure({ privateKeyHex: "07".repeat(32) });
  assertEquals(sent[0], new Uint8Array(32));
});

Deno.test("configOf: a key that does not parse leaves the keys parsed before it zeroed", () => {
  const peers = [
    { publicKey: keyBase64(new Uint8Array(32).fill(2)), presharedKeyHex: "c3".repeat(32) },
    { publicKey: keyBase64(new Uint8Array(32).fill(3)), presharedKeyHex: "not hex" },
  ];
  let err: unknown = null;
  const bufs = recordingArrays(() => {
    try {
      configOf("wg0", { privateKeyHex: "a5".repeat(32), peers });
    } catch (e) {
      err = e;
    }
  });
  assert(err instanceof Error && err.message.includes("preshared key: not a WireGuard key"), String(err));
  assert(bufs.size > 0, "configOf made its arrays under the recorder");
  assertEquals([...bufs].filter((b) => holds(b, 0xa5) || holds(b, 0xc3)).length, 0);
});

Deno.test("setRequests: peers split so each SET_DEVICE's peers fit; the key and port in the first only", () => {
  const peers = Array.from({ length: 600 }, (_, i) => ({
    publicKey: new Uint8Array(32).fill(i & 0xff),
    endpoint: "192.0.2.1:51820",
    allowedIPs: [`10.${i >> 8}.${i & 0xff}.0/24`],
  }));
  const parts = setRequests({ ifname: "flannel-wg", privateKey: new Uint8Array(32), listenPort: 1, peers });
  // 168 bytes a peer at most: 195 per request.
  assertEquals(parts.map((p) => p.peers?.length), [195, 195, 195, 15]);
  assertEquals([parts[0].listenPort, parts[1].listenPort, parts[1].privateKey], [1, undefined, undefined]);
  assertEquals(parts.flatMap((p) => p.peers!), peers, "every peer once, in order");
  assert(parts.every((p) => p.peers!.length * 168 <= WG_SET_PEER_BYTES));
  assertEquals(setRequests({ ifname: "flannel-wg", listenPort: 2 }), [{
    ifname: "flannel-wg",
    listenPort: 2,
  }]);
});

Deno.test("wireguard kernel: 600 peers reach the device in several SET_DEVICE requests", async () => {
  const { b, genl, done } = setup();
  try {
    b.ensure(IPNet.parse("10.244.1.0/24"));
    await b.settle();
    const many = Array.from({ length: 600 }, (_, i) => {
      const k = new Uint8Array(32).fill(7);
      k[0] = i & 0xff;
      k[1] = i >> 8;
      return peer(`10.${100 + (i >> 8)}.${i & 0xff}.0/24`, "192.0.2.12", {
        PublicKey: keyBase64(k),
        Port: 51820,
      });
    });
    b.syncPeers(many);
    await b.settle();
    assertEquals(genl.calls.filter((c) => c.startsWith("set")).length, 1 + 4);
    assertEquals(stateOf(genl.get(0x1c, "flannel-wg")).peers.length, 600);
  } finally {
    done();
  }
});
