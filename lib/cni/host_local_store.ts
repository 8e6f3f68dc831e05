/**
 * host-local's on-disk store, byte-compatible with the reference plugin so a node can switch between the
 * reference and flanctl without losing allocations: `<dataDir>/<network>/<ip>` (content
 * `<containerID>\r\n<ifname>`, mode 0600, created O_EXCL), `last_reserved_ip.<rangeSetIndex>` (0600), and `lock`
 * (0750, flock'd for the whole allocate/release, the same lock the reference takes); the modes are the
 * reference v1.10's.
 *
 * Beyond the reference: a per-attachment index file `<dataDir>/.flanctl-byid/<network>/<cid>:<ifname>`
 * listing the attachment's IPs. It makes the duplicate-ADD check and DEL O(1) instead of a directory scan
 * per call (the reference reads every file on every ADD). It lives outside the reference's directory so the
 * reference never sees it. An empty index means "ADD in progress or crashed": then (and when there is no
 * index at all, e.g. the reference made the allocation) we fall back to the scan, so nothing is missed.
 * @module
 */
import { IPAddr } from "../base/cidr.ts";
import { readCappedText } from "../base/capped_read.ts";

/** The reference's line break between container ID and ifname. */
export const LINE_BREAK = "\r\n";
const LAST_PREFIX = "last_reserved_ip.";

/** One attachment as written in an IP file. */
export interface Owner {
  containerId: string;
  ifname: string;
}

/** The store of one network. Open with {@link openStore}; always `close()`. */
export class DiskStore {
  /** `<dataDir>/<network>`. */
  readonly dir: string;
  /** The index directory. */
  readonly indexDir: string;
  #lock: Deno.FsFile | null = null;

  constructor(dataDir: string, network: string) {
    this.dir = `${dataDir}/${network}`;
    this.indexDir = `${dataDir}/.flanctl-byid/${network}`;
  }

  /** Creates the directories and takes the exclusive flock on `<dir>/lock` (blocks until free). */
  async lock(): Promise<void> {
    Deno.mkdirSync(this.dir, { recursive: true, mode: 0o755 });
    const f = Deno.openSync(`${this.dir}/lock`, { read: true, write: true, create: true, mode: 0o750 });
    try {
      // Synchronous flock: a CNI process has nothing else to do meanwhile, and the async variant costs a
      // thread-pool start (several ms) per call.
      f.lockSync(true);
      await Promise.resolve();
    } catch (e) {
      f.close();
      throw e;
    }
    this.#lock = f;
  }

  /** Releases the lock. Idempotent. */
  close(): void {
    if (this.#lock) {
      try {
        this.#lock.unlockSync();
      } catch { /* closing releases it anyway */ }
      this.#lock.close();
      this.#lock = null;
    }
  }

  /** Tries to reserve `ip` (O_EXCL create). False when it is taken. Records last_reserved_ip.<rangeId>. */
  reserve(owner: Owner, ip: IPAddr, rangeId: number): boolean {
    const path = `${this.dir}/${ip}`;
    let f: Deno.FsFile;
    try {
      f = Deno.openSync(path, { read: true, write: true, createNew: true, mode: 0o600 });
    } catch (e) {
      if (e instanceof Deno.errors.AlreadyExists) return false;
      throw e;
    }
    try {
      const data = new TextEncoder().encode(owner.containerId.trim() + LINE_BREAK + owner.ifname);
      let off = 0;
      while (off < data.length) off += f.writeSync(data.subarray(off));
    } catch (e) {
      f.close();
      Deno.removeSync(path);
      throw e;
    }
    f.close();
    Deno.writeTextFileSync(`${this.dir}/${LAST_PREFIX}${rangeId}`, ip.toString(), { mode: 0o600 });
    return true;
  }

  /** The last reserved IP of range set `rangeId`, or null. */
  lastReserved(rangeId: number): IPAddr | null {
    try {
      return IPAddr.tryParse(readCappedText(`${this.dir}/${LAST_PREFIX}${rangeId}`, 4096).trim());
    } catch {
      return null;
    }
  }

  /** Owner of an IP file, or null (missing/unreadable). Old-format files (ID only) give ifname "". */
  owner(ip: string): Owner | null {
    let text: string;
    try {
      text = readCappedText(`${this.dir}/${ip}`, 64 * 1024);
    } catch {
      return null;
    }
    const t = text.trim();
    const i = t.indexOf(LINE_BREAK);
    return i < 0 ? { containerId: t, ifname: "" } : { containerId: t.slice(0, i), ifname: t.slice(i + 2) };
  }

  /** Every allocated IP file: [ip text, owner]. A full scan (GC, fallback paths only). */
  scan(): [string, Owner][] {
    const out: [string, Owner][] = [];
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(this.dir)];
    } catch {
      return out;
    }
    for (const e of entries) {
      if (!e.isFile || IPAddr.tryParse(e.name) === null) continue;
      const o = this.owner(e.name);
      if (o) out.push([e.name, o]);
    }
    return out;
  }

  /** IPs held by an attachment, found by scanning (as the reference). */
  scanFor(owner: Owner): string[] {
    return this.scan().filter(([, o]) => o.containerId === owner.containerId && o.ifname === owner.ifname)
      .map(([ip]) => ip);
  }

  /** The index file of `o`, or null when `<id>:<ifname>` is longer than a file name may be (255 bytes). */
  #indexPath(o: Owner): string | null {
    const name = `${o.containerId}:${o.ifname}`;
    // The index is only a shortcut: without it (IDs near the 255-character limit) lookups scan instead.
    if (new TextEncoder().encode(name).length > 255) return null;
    return `${this.indexDir}/${name}`;
  }

  /** The index entry: null = none; [] = ADD started but not finished (scan to be sure); else the IPs. */
  readIndex(o: Owner): string[] | null {
    const path = this.#indexPath(o);
    if (path === null) return null;
    try {
      return readCappedText(path, 1024 * 1024).split("\n").filter(Boolean);
    } catch {
      return null;
    }
  }

  /** Writes the index entry (an empty list marks an ADD in progress). */
  writeIndex(o: Owner, ips: string[]): void {
    const path = this.#indexPath(o);
    if (path === null) return;
    Deno.mkdirSync(this.indexDir, { recursive: true, mode: 0o700 });
    Deno.writeTextFileSync(path, ips.map((i) => i + "\n").join(""), { mode: 0o600 });
  }

  /** Removes the index entry. */
  dropIndex(o: Owner): void {
    const path = this.#indexPath(o);
    if (path === null) return;
    try {
      Deno.removeSync(path);
    } catch { /* gone */ }
  }

  /** All index entries. */
  indexEntries(): Owner[] {
    const out: Owner[] = [];
    try {
      for (const e of Deno.readDirSync(this.indexDir)) {
        const i = e.name.indexOf(":");
        if (i > 0) out.push({ containerId: e.name.slice(0, i), ifname: e.name.slice(i + 1) });
      }
    } catch { /* none */ }
    return out;
  }

  /** IPs currently held by the attachment: via the index when complete, else by scanning. */
  held(o: Owner): string[] {
    const idx = this.readIndex(o);
    if (idx && idx.length) {
      return idx.filter((ip) => {
        const w = this.owner(ip);
        return w !== null && w.containerId === o.containerId && w.ifname === o.ifname;
      });
    }
    return this.scanFor(o);
  }

  /** Removes an IP file if `o` still owns it (old-format files match on the ID alone). */
  releaseIp(ip: string, o: Owner): boolean {
    const w = this.owner(ip);
    if (!w || w.containerId !== o.containerId || (w.ifname !== "" && w.ifname !== o.ifname)) return false;
    try {
      Deno.removeSync(`${this.dir}/${ip}`);
      return true;
    } catch {
      return false;
    }
  }

  /** Releases everything the attachment holds (index, else scan; plus old-format files) and its index. */
  releaseAll(o: Owner): string[] {
    const idx = this.readIndex(o);
    let ips: string[];
    if (idx && idx.length) ips = idx;
    else {
      ips = this.scan().filter(([, w]) =>
        w.containerId === o.containerId && (w.ifname === o.ifname || w.ifname === "")
      ).map(([ip]) => ip);
    }
    const done = ips.filter((ip) => this.releaseIp(ip, o));
    this.dropIndex(o);
    return done;
  }
}
