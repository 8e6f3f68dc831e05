import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../../tests/assert.ts";
import {
  badKeyMode,
  isKey,
  keyBase64,
  keyFilePath,
  keyFromHex,
  keyHex,
  loadOrCreateKey,
  parseKey,
  publicKeyOf,
  WgKey,
  WgKeyError,
} from "./keys.ts";

const hex = (s: string) => keyFromHex(s)!;

Deno.test("publicKeyOf: RFC 7748 section 6.1's test vectors (Alice and Bob)", () => {
  const alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  assertEquals(
    keyHex(publicKeyOf(alice)),
    "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
  );
  assertEquals(keyHex(publicKeyOf(bob)), "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
});

Deno.test("parseKey: base64 of exactly 32 bytes, as wgtypes.ParseKey", () => {
  const k = keyBase64(new Uint8Array(32).fill(7));
  assertEquals(parseKey(k)?.length, 32);
  assert(isKey(k));
  for (const bad of ["", k.slice(1), k + "=", k.replace("=", "A"), "!".repeat(44), 42, null]) {
    assertEquals(parseKey(bad), null, String(bad));
  }
  assert(!isKey(keyBase64(new Uint8Array(31))));
  assert(!isKey(keyBase64(new Uint8Array(33))));
});

Deno.test("WgKey: the private half never shows in its string, JSON or inspect forms", () => {
  const priv = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const k = new WgKey(priv);
  const privB64 = keyBase64(priv), privHex = keyHex(priv);
  for (const s of [String(k), JSON.stringify(k), Deno.inspect(k), JSON.stringify({ k })]) {
    assert(!s.includes(privB64) && !s.includes(privHex), s);
    assertStringIncludes(s, k.publicKey);
  }
  assertEquals(k.privateHex(), privHex);
  assert(k.samePrivate(privHex));
  assert(!k.samePrivate(null));
});

Deno.test("badKeyMode: refuses any group or other bit", () => {
  assertEquals(badKeyMode(0o100600), null);
  assertEquals(badKeyMode(0o100400), null);
  assertStringIncludes(badKeyMode(0o100644)!, "0644");
  assertStringIncludes(badKeyMode(0o100640)!, "read");
  assertStringIncludes(badKeyMode(0o100620)!, "write");
  assertStringIncludes(badKeyMode(0o100604)!, "read");
});

Deno.test("keyFilePath: WIREGUARD_KEY_FILE, else /run/flannel/wgkey (flanneld's)", () => {
  assertEquals(keyFilePath({}), "/run/flannel/wgkey");
  assertEquals(keyFilePath({ WIREGUARD_KEY_FILE: "/x/k" }), "/x/k");
});

Deno.test("loadOrCreateKey: made 0600 once, then kept; a world-readable or bad file refused", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/sub/wgkey`;
    const a = loadOrCreateKey(path);
    assert(a.made);
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o600);
    const text = Deno.readTextFileSync(path);
    assert(isKey(text), "base64, no newline, as flanneld writes it");
    assertEquals(keyBase64(publicKeyOf(parseKey(text)!)), a.key.publicKey);
    const b = loadOrCreateKey(path);
    assert(!b.made);
    assertEquals(b.key.publicKey, a.key.publicKey);
    // wg genkey's output ends in a newline: accepted.
    Deno.writeTextFileSync(path, text + "\n");
    assertEquals(loadOrCreateKey(path).key.publicKey, a.key.publicKey);
    Deno.chmodSync(path, 0o644);
    const e = assertThrows(() => loadOrCreateKey(path), WgKeyError, "refused");
    assert(!e.message.includes(text), "the message never carries the key");
    Deno.chmodSync(path, 0o600);
    Deno.writeTextFileSync(path, "not a key");
    assertThrows(() => loadOrCreateKey(path), WgKeyError, "holds no key");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
