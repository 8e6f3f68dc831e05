/**
 * The VTEP MAC of the VXLAN device: random, locally administered, and kept across restarts in the state
 * directory so peers' ARP/FDB entries stay valid when the device has to be recreated.
 * @module
 */
import { readCappedText } from "../base/capped_read.ts";
import { type Mac, parseMac, tryMac } from "../base/cidr.ts";

/** A random unicast, locally administered MAC ("x2:xx:xx:xx:xx:xx"). */
export function randomLocalMac(): Mac {
  const b = crypto.getRandomValues(new Uint8Array(6));
  b[0] = (b[0] & 0xfe) | 0x02;
  return parseMac([...b].map((x) => x.toString(16).padStart(2, "0")).join(":"));
}

/** Path of the persisted MAC for a device. */
export function macStatePath(stateDir: string, dev: string): string {
  return `${stateDir.replace(/\/+$/, "")}/${dev}.mac`;
}

/** The persisted MAC, or null when none (or the file is unreadable/garbled). */
export function loadMac(stateDir: string, dev: string): Mac | null {
  try {
    return tryMac(readCappedText(macStatePath(stateDir, dev), 4096).trim());
  } catch {
    return null;
  }
}

/** Persists the MAC atomically (temp file + rename), creating the directory. */
export function saveMac(stateDir: string, dev: string, mac: Mac): void {
  Deno.mkdirSync(stateDir, { recursive: true });
  const p = macStatePath(stateDir, dev);
  const tmp = `${p}.tmp.${Deno.pid}`;
  Deno.writeTextFileSync(tmp, mac + "\n", { mode: 0o644 });
  Deno.renameSync(tmp, p);
}
