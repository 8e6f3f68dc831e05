/**
 * WireGuard keys: Curve25519 (x25519) through node:crypto, and the private key file flanneld keeps.
 *
 * flanneld (pkg/backend/wireguard/device.go, setupKeys) reads its private key from `/run/flannel/wgkey`, or
 * from the file the WIREGUARD_KEY_FILE environment variable names; when the file does not exist it
 * generates a key and writes it there (base64 of the 32 bytes, no newline). The key is therefore kept
 * across restarts and lost at reboot (/run is a tmpfs). flanctl does the same, with one difference: the
 * file is written 0600 and a file any group or other user may read or write is refused (flanneld writes
 * 0400 and reads any mode).
 *
 * A private key is held as bytes and only ever leaves this process over the UAPI socket (hex): never in a
 * command line, a log field or a metric. {@link WgKey.toString} hides it.
 * @module
 */
import { createPrivateKey, createPublicKey, randomBytes } from "node:crypto";
import { FlanctlError } from "../../base/errors.ts";

/** flanneld's key file (WIREGUARD_KEY_FILE overrides it, as in flanneld). */
export const DEFAULT_KEY_FILE = "/run/flannel/wgkey";
/** The environment variable flanneld reads the key file's path from. */
export const KEY_FILE_ENV = "WIREGUARD_KEY_FILE";

/** The PKCS#8 header of an X25519 private key (RFC 8410): the 32 key bytes follow. */
const PKCS8_X25519 = Uint8Array.from([
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x6e,
  0x04,
  0x22,
  0x04,
  0x20,
]);

function decodeBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

function encodeBase64(b: Uint8Array): string {
  return btoa(String.fromCharCode(...b));
}

/** A key file that cannot be used: unreadable, not a key, or open to other users. */
export class WgKeyError extends FlanctlError {}

/** Decodes a WireGuard key as wg(8) and wgtypes.ParseKey write it (base64 of 32 bytes), or null. */
export function parseKey(s: unknown): Uint8Array | null {
  if (typeof s !== "string" || s.length !== 44 || !/^[A-Za-z0-9+/]{43}=$/.test(s)) return null;
  try {
    const b = decodeBase64(s);
    return b.length === 32 ? b : null;
  } catch {
    return null;
  }
}

/** True when `s` is a WireGuard public key as leases carry it (base64 of 32 bytes). */
export function isKey(s: unknown): boolean {
  return parseKey(s) !== null;
}

/** Lower-case hex of a key, the UAPI's form. */
export function keyHex(k: Uint8Array): string {
  return Array.from(k, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A key from the UAPI's hex, or null. */
export function keyFromHex(s: string): Uint8Array | null {
  if (!/^[0-9a-f]{64}$/.test(s)) return null;
  const k = new Uint8Array(32);
  for (let i = 0; i < 32; i++) k[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return k;
}

/** The base64 form (the lease's, wg(8)'s) of a key. */
export function keyBase64(k: Uint8Array): string {
  return encodeBase64(k);
}

/** Clamps a Curve25519 private key in place (as wgtypes.GeneratePrivateKey does). */
function clamp(k: Uint8Array): Uint8Array {
  k[0] &= 248;
  k[31] = (k[31] & 127) | 64;
  return k;
}

/** The public key of an X25519 private key. */
export function publicKeyOf(priv: Uint8Array): Uint8Array {
  if (priv.length !== 32) throw new WgKeyError("a WireGuard private key is 32 bytes");
  const der = new Uint8Array(PKCS8_X25519.length + 32);
  der.set(PKCS8_X25519);
  der.set(priv, PKCS8_X25519.length);
  const key = createPrivateKey({ key: der as unknown as Buffer, format: "der", type: "pkcs8" });
  const jwk = createPublicKey(key).export({ format: "jwk" }) as { x?: string };
  const pub = jwk.x ? decodeBase64Url(jwk.x) : null;
  if (!pub || pub.length !== 32) throw new WgKeyError("x25519: no public key derived");
  return pub;
}

function decodeBase64Url(s: string): Uint8Array {
  const b = s.replaceAll("-", "+").replaceAll("_", "/");
  return decodeBase64(b + "=".repeat((4 - b.length % 4) % 4));
}

/** A fresh, clamped private key. */
export function generatePrivateKey(): Uint8Array {
  return clamp(new Uint8Array(randomBytes(32)));
}

/** A node's key pair. The private half never appears in a string form of the object. */
export class WgKey {
  readonly #priv: Uint8Array;
  /** The public key (base64, as the lease carries it). */
  readonly publicKey: string;

  constructor(priv: Uint8Array) {
    this.#priv = Uint8Array.from(priv);
    this.publicKey = keyBase64(publicKeyOf(this.#priv));
  }

  /** The private key in the UAPI's hex form (for the UAPI request only). */
  privateHex(): string {
    return keyHex(this.#priv);
  }

  /** True when `hex` (a UAPI reply's private_key) is this key. */
  samePrivate(hex: string | null): boolean {
    return hex === this.privateHex();
  }

  toString(): string {
    return `WgKey(public ${this.publicKey})`;
  }

  toJSON(): unknown {
    return { publicKey: this.publicKey };
  }

  [Symbol.for("Deno.customInspect")](): string {
    return this.toString();
  }
}

/** The key file's path: `WIREGUARD_KEY_FILE` when set (as flanneld), else /run/flannel/wgkey. */
export function keyFilePath(env: Record<string, string | undefined> = Deno.env.toObject()): string {
  return env[KEY_FILE_ENV] || DEFAULT_KEY_FILE;
}

/** Why a key file's mode is refused, or null when only its owner may read or write it. */
export function badKeyMode(mode: number): string | null {
  const open = mode & 0o077;
  if (!open) return null;
  return `its mode is ${(mode & 0o777).toString(8).padStart(4, "0")}: group or others may ${
    open & 0o044 ? "read" : "write"
  } it (chmod 600 it, or remove it to have a new key made)`;
}

/**
 * Our key: read from `path` when it exists (refused when open to group or others, or not a key), else
 * generated and written there (0600, its directory made 0755 when missing, as flanneld). `made` tells which.
 */
export function loadOrCreateKey(path: string): { key: WgKey; made: boolean } {
  let st: Deno.FileInfo | null = null;
  try {
    st = Deno.lstatSync(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      throw new WgKeyError(`WireGuard key file ${path}: ${(e as Error).message}`);
    }
  }
  if (st) {
    if (!st.isFile) throw new WgKeyError(`WireGuard key file ${path} is not a regular file`);
    const why = badKeyMode(st.mode ?? 0);
    if (why) throw new WgKeyError(`WireGuard key file ${path} is refused: ${why}`);
    if (st.size > 4096) throw new WgKeyError(`WireGuard key file ${path} is not a key (${st.size} bytes)`);
    const text = Deno.readTextFileSync(path).replace(/\r?\n$/, "");
    const k = parseKey(text);
    if (!k) {
      throw new WgKeyError(
        `WireGuard key file ${path} holds no key (base64 of 32 bytes, as \`wg genkey\` writes): ` +
          "remove it to have a new key made",
      );
    }
    return { key: new WgKey(k), made: false };
  }
  const priv = generatePrivateKey();
  const dir = path.slice(0, path.lastIndexOf("/"));
  if (dir) Deno.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const tmp = `${path}.tmp-${Deno.pid}`;
  const f = Deno.openSync(tmp, { write: true, createNew: true, mode: 0o600 });
  try {
    f.writeSync(new TextEncoder().encode(keyBase64(priv)));
    f.syncSync();
  } finally {
    f.close();
  }
  Deno.chmodSync(tmp, 0o600); // the umask may have taken bits away, never added: exact anyway
  Deno.renameSync(tmp, path);
  return { key: new WgKey(priv), made: true };
}
