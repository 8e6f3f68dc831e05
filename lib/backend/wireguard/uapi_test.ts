import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../../tests/assert.ts";
import { FakeUapi } from "../../../tests/wg_uapi_fake.ts";
import { keyBase64, keyHex, publicKeyOf, WgKey } from "./keys.ts";
import { encodeSet, parseGet, request, splitReply, UapiError, uapiGet, uapiSet, uapiSocket } from "./uapi.ts";

const PRIV = new Uint8Array(32).fill(0x11);
const PEER = keyBase64(new Uint8Array(32).fill(0x22));
const PEER_HEX = "22".repeat(32);

Deno.test("uapiSocket: wireguard-go's fixed directory", () => {
  assertEquals(uapiSocket("flannel-wg"), "/var/run/wireguard/flannel-wg.sock");
});

Deno.test("encodeSet: the protocol's lines, keys in hex, the peer's allowed IPs replaced", () => {
  const text = encodeSet({
    privateKeyHex: keyHex(PRIV),
    listenPort: 51820,
    replacePeers: true,
    peers: [{
      publicKey: PEER,
      presharedKeyHex: "33".repeat(32),
      endpoint: "192.0.2.2:51820",
      keepalive: 25,
      allowedIPs: ["10.244.2.0/24"],
    }, { publicKey: PEER, remove: true, endpoint: "ignored:1" }],
  });
  assertEquals(
    text,
    [
      "set=1",
      `private_key=${"11".repeat(32)}`,
      "listen_port=51820",
      "replace_peers=true",
      `public_key=${PEER_HEX}`,
      `preshared_key=${"33".repeat(32)}`,
      "endpoint=192.0.2.2:51820",
      "persistent_keepalive_interval=25",
      "replace_allowed_ips=true",
      "allowed_ip=10.244.2.0/24",
      `public_key=${PEER_HEX}`,
      "remove=true",
    ].join("\n") + "\n\n",
  );
  assertStringIncludes(
    encodeSet({ peers: [{ publicKey: PEER, endpoint: "[fc00::2]:51821" }] }),
    "[fc00::2]:51821",
  );
});

Deno.test("encodeSet: refuses what would inject lines or is not the protocol's form", () => {
  assertThrows(() => encodeSet({ peers: [{ publicKey: "x" }] }), UapiError);
  assertThrows(
    () => encodeSet({ peers: [{ publicKey: PEER, endpoint: "1.2.3.4:1\nremove=true" }] }),
    UapiError,
  );
  assertThrows(() => encodeSet({ peers: [{ publicKey: PEER, allowedIPs: ["10.0.0.0/8\nx=1"] }] }), UapiError);
  assertThrows(() => encodeSet({ listenPort: 70000 }), UapiError);
  assertThrows(() => encodeSet({ privateKeyHex: "zz" }), UapiError);
});

Deno.test("parseGet: the public key derived, the private and preshared keys dropped", () => {
  const d = parseGet([
    `private_key=${keyHex(PRIV)}`,
    "listen_port=51820",
    `public_key=${PEER_HEX}`,
    `preshared_key=${"0".repeat(64)}`,
    "protocol_version=1",
    "endpoint=192.0.2.2:51820",
    "last_handshake_time_sec=1700000000",
    "last_handshake_time_nsec=5",
    "tx_bytes=10",
    "rx_bytes=20",
    "persistent_keepalive_interval=0",
    "allowed_ip=10.244.2.0/24",
  ]);
  assertEquals(d.publicKey, keyBase64(publicKeyOf(PRIV)));
  assertEquals(d.listenPort, 51820);
  assertEquals(d.peers, [{
    publicKey: PEER,
    presharedKey: false,
    endpoint: "192.0.2.2:51820",
    lastHandshake: 1700000000,
    txBytes: 10,
    rxBytes: 20,
    keepalive: 0,
    allowedIPs: ["10.244.2.0/24"],
  }]);
  assert(!JSON.stringify(d).includes(keyHex(PRIV)));
  assert(parseGet([`public_key=${PEER_HEX}`, `preshared_key=${"ab".repeat(32)}`]).peers[0].presharedKey);
  assertThrows(() => parseGet(["listen_port=x"]), UapiError);
  assertThrows(() => parseGet(["garbage"]), UapiError);
  assertThrows(() => parseGet([`public_key=${PEER_HEX}`, "endpoint=evil\u001b[2J"]), UapiError);
});

Deno.test("splitReply: incomplete, complete, not the protocol", () => {
  assertEquals(splitReply("listen_port=1\n"), null);
  assertEquals(splitReply("listen_port=1\nerrno=0\n\n"), { lines: ["listen_port=1"], errno: 0 });
  assertEquals(splitReply("errno=-98\n\n"), { lines: [], errno: -98 });
  assertThrows(() => splitReply("hello\n\n"), UapiError);
});

Deno.test("uapiSet / uapiGet over a unix socket: configured, read back, errno reported", async () => {
  const dir = Deno.makeTempDirSync();
  const fake = new FakeUapi(`${dir}/wg.sock`);
  try {
    const k = new WgKey(PRIV);
    await uapiSet(fake.path, {
      privateKeyHex: k.privateHex(),
      listenPort: 51820,
      replacePeers: true,
      peers: [{ publicKey: PEER, endpoint: "192.0.2.2:51820", allowedIPs: ["10.244.2.0/24"] }],
    });
    const d = await uapiGet(fake.path);
    assertEquals(d.publicKey, k.publicKey);
    assertEquals(d.peers.map((p) => [p.publicKey, p.endpoint, p.allowedIPs]), [[
      PEER,
      "192.0.2.2:51820",
      ["10.244.2.0/24"],
    ]]);
    await uapiSet(fake.path, { peers: [{ publicKey: PEER, remove: true }] });
    assertEquals((await uapiGet(fake.path)).peers, []);
    fake.portsInUse.add(51821);
    const e = await uapiSet(fake.path, { listenPort: 51821 }).then(() => null, (e) => e);
    assert(e instanceof UapiError);
    assertEquals(e.errno, -98);
    assertStringIncludes(e.message, "EADDRINUSE");
  } finally {
    await fake.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("request: a socket that never answers times out; a missing socket is a UapiError", async () => {
  const dir = Deno.makeTempDirSync();
  const l = Deno.listen({ transport: "unix", path: `${dir}/mute.sock` });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of l) held.push(c);
  })();
  try {
    const e = await request(`${dir}/mute.sock`, "get=1\n\n", 200).then(() => null, (e) => e);
    assert(e instanceof UapiError, String(e));
    const e2 = await request(`${dir}/none.sock`, "get=1\n\n", 200).then(() => null, (e) => e);
    assert(e2 instanceof UapiError);
  } finally {
    l.close();
    await accepting.catch(() => {});
    for (const c of held) c.close();
    Deno.removeSync(dir, { recursive: true });
  }
});
