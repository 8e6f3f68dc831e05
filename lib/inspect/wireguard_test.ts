import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { FakeUapi } from "../../tests/wg_uapi_fake.ts";
import { keyBase64, keyHex, publicKeyOf } from "../backend/wireguard/keys.ts";
import { FakeNetlink } from "../netlink/fake/fake_netlink.ts";
import { FAKE_WG_FAMILY, FakeWgGenl } from "../netlink/fake/fake_wg_genl.ts";
import { wireguardTable, wireguardViews } from "./wireguard.ts";

Deno.test("inspect wireguard: devices and peers over the UAPI; no private or preshared key shown", async () => {
  const dir = Deno.makeTempDirSync();
  const fake = new FakeUapi(`${dir}/flannel-wg.sock`);
  try {
    const priv = new Uint8Array(32).fill(9), psk = new Uint8Array(32).fill(5);
    const peer = new Uint8Array(32).fill(2);
    fake.handle([
      "set=1",
      `private_key=${keyHex(priv)}`,
      "listen_port=51820",
      `public_key=${keyHex(peer)}`,
      `preshared_key=${keyHex(psk)}`,
      "endpoint=192.0.2.12:51820",
      "allowed_ip=10.244.2.0/24",
    ]);
    fake.peers.get(keyHex(peer))!.lastHandshake = 1_800_000_000;
    const v = await wireguardViews(undefined, dir, { kindOf: (d) => d === "flannel-wg" ? "tun" : null });
    assertEquals(v.length, 1, "flannel-wg-v6 has no socket: not listed");
    // The JSON view's fields, pinned.
    assertEquals(Object.keys(v[0]), ["dev", "way", "socket", "publicKey", "listenPort", "peers", "error"]);
    assertEquals([v[0].way, v[0].socket], ["userspace", `${dir}/flannel-wg.sock`]);
    assertEquals(Object.keys(v[0].peers[0]), [
      "publicKey",
      "endpoint",
      "allowedIPs",
      "latestHandshake",
      "txBytes",
      "rxBytes",
      "keepalive",
      "presharedKey",
    ]);
    assertEquals(v[0].listenPort, 51820);
    assertEquals(v[0].peers[0].publicKey, keyBase64(peer));
    assertEquals(v[0].peers[0].latestHandshake, "2027-01-15T08:00:00.000Z");
    assert(v[0].peers[0].presharedKey);
    const table = wireguardTable(v, Date.parse("2027-01-15T08:00:30Z"));
    assertStringIncludes(table, "30 s ago");
    for (const text of [JSON.stringify(v), table]) {
      for (const secret of [keyHex(priv), keyBase64(priv), keyHex(psk), keyBase64(psk)]) {
        assert(!text.includes(secret), "a secret key in inspect's output");
      }
    }
    const missing = await wireguardViews("flannel-wg-v6", dir, { kindOf: () => null });
    assertStringIncludes(missing[0].error!, "no UAPI socket");
  } finally {
    await fake.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("inspect wireguard: a kernel device is read over generic netlink, without a socket", async () => {
  const nl = new FakeNetlink();
  nl.createWireguard("flannel-wg");
  const genl = new FakeWgGenl(nl, publicKeyOf);
  const priv = new Uint8Array(32).fill(9), peer = new Uint8Array(32).fill(2);
  genl.set(FAKE_WG_FAMILY, {
    ifname: "flannel-wg",
    privateKey: priv,
    listenPort: 51820,
    peers: [{ publicKey: peer, endpoint: "192.0.2.12:51820", allowedIPs: ["10.244.2.0/24"] }],
  });
  const v = await wireguardViews(undefined, "/nonexistent", {
    kindOf: (d) => nl.link(d)?.kind ?? null,
    genl,
  });
  assertEquals(v.length, 1);
  assertEquals([v[0].way, v[0].socket, v[0].listenPort], ["kernel", null, 51820]);
  assertEquals(v[0].publicKey, keyBase64(publicKeyOf(priv)));
  assertEquals([v[0].peers[0].publicKey, v[0].peers[0].allowedIPs], [keyBase64(peer), ["10.244.2.0/24"]]);
  assertStringIncludes(wireguardTable(v), "flannel-wg (kernel): public key");
  assert(!JSON.stringify(v).includes(keyBase64(priv)));
  genl.present = false;
  const gone = await wireguardViews("flannel-wg", "/nonexistent", { kindOf: () => "wireguard", genl });
  assertStringIncludes(gone[0].error!, "no wireguard generic netlink family");
});
