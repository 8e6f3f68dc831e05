import { assert, assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import { FakeUapi } from "../../tests/wg_uapi_fake.ts";
import { keyBase64, keyHex } from "../backend/wireguard/keys.ts";
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
    const v = await wireguardViews(undefined, dir);
    assertEquals(v.length, 1, "flannel-wg-v6 has no socket: not listed");
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
    const missing = await wireguardViews("flannel-wg-v6", dir);
    assertStringIncludes(missing[0].error!, "no UAPI socket");
  } finally {
    await fake.close();
    Deno.removeSync(dir, { recursive: true });
  }
});
