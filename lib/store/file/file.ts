/**
 * The file store: the embedded default, for daemons sharing one host (the lab's nodes in namespaces).
 *
 * Layout of the directory (default /var/lib/flanctl):
 * - `config`: the net-conf JSON.
 * - `subnets/<key>`: one file per lease, `<key>` in flannel's form (`10.5.52.0-24`), holding
 *   `{"lease":<flannel's lease JSON>,"expiration":"<ISO>"|null,"seq":<n>}` (null = reservation).
 * - `seq`: a counter bumped by every change; it is the watch cursor and the cache key.
 * - `.lock`: every writer holds an exclusive `flock` on it (Deno.FsFile.lock) for the whole
 *   read-decide-write, so acquires from many processes never hand out the same subnet.
 * - `tmp/`: files are written here and renamed into place (atomic for readers).
 *
 * Reading never writes: every read goes through lib/store/file/file_reader.ts (the one lease-file parser), the
 * constructor creates nothing, and listing or watching never deletes. Only writers create the directories
 * (`lease config set` may create the store directory itself; the other writers need it to exist) and
 * collect expired leases (acquire, reserve, revoke). A missing store directory is StoreDirNotFoundError.
 *
 * Watching uses inotify (Deno.watchFs) on `subnets/` and re-reads only the files named in events, starting
 * from the snapshot the listing returned (no file is read again when nothing changed in between); expiry
 * is a timer set to the next expiration, not polling.
 * @module
 */
import { plainWarn, type Warn, warnOnce } from "../../base/warn.ts";
import type { ReservationV6 } from "../../lease/reservation.ts";
import { plannedReservation, replacedLeases } from "../reserve.ts";
import type { NetConfig } from "../../config/types.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import type { IPNet } from "../../base/cidr.ts";
import { allocate } from "../../lease/allocator.ts";
import { encodeLeaseAttrs, keyOf, leaseKey, parseLeaseKey, warnMalformed } from "../../lease/wire.ts";
import type { AcquireOptions, Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../types.ts";
import { LeaseNotFoundError, StoreDirNotFoundError, StoreError } from "../errors.ts";
import { encodeLeaseFile, type FileLeaseEntry, FileStoreReader, leaseExpired } from "./file_reader.ts";
import { DEFAULT_LEASE_TTL_MS, Mutex, Wakeup } from "../util.ts";
import { errText } from "../../base/errors.ts";

/** Options of {@link FileStore}. */
export interface FileStoreOptions {
  /** The shared directory. */
  dir: string;
  /** Lease TTL in ms (default 24 h). */
  ttlMs?: number;
  /** Receives warnings (malformed lease files, watch failures); default: plain lines on stderr. */
  warn?: Warn;
}

/** The default directory of the file store. */
export const DEFAULT_STORE_DIR = "/var/lib/flanctl";

type Entry = FileLeaseEntry;
const expired = leaseExpired;

/** The file store. Several instances (in several processes) may share one directory. */
export class FileStore implements SubnetStore {
  /** Always "file". */
  readonly kind = "file";
  /** The directory. */
  readonly dir: string;
  /** Lease TTL in ms. */
  readonly ttlMs: number;
  #mutex = new Mutex();
  #cache: { seq: number; entries: Map<string, Entry> } | null = null;
  #snapshots = new Map<string, Map<string, Entry>>();
  #closed = new AbortController();
  /** Every read (malformed files are warned about once each). */
  #reader: FileStoreReader;
  #warn: Warn;

  /** Opens the store in `opts.dir`; nothing is read or created until a method is called. */
  constructor(opts: FileStoreOptions) {
    this.dir = opts.dir.replace(/\/+$/, "") || "/";
    this.ttlMs = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.#warn = opts.warn ?? plainWarn;
    this.#reader = new FileStoreReader(this.dir, {
      onMalformed: (err) => warnMalformed(err, this.#subnets, this.#warn),
      ...(opts.warn ? { warnConfig: warnOnce(opts.warn) } : {}),
    });
  }

  get #subnets() {
    return `${this.dir}/subnets`;
  }

  /**
   * Writers only: makes `subnets/` and `tmp/` in the store directory. The directory itself is made only
   * when `createDir` (writing the config creates a store); otherwise it must exist.
   */
  async #prepare(createDir: boolean): Promise<void> {
    if (!createDir) await this.#reader.requireDir();
    try {
      await Deno.mkdir(this.#subnets, { recursive: true });
      await Deno.mkdir(`${this.dir}/tmp`, { recursive: true });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) throw new StoreDirNotFoundError(this.dir);
      throw new StoreError(`cannot create store directory ${this.dir}: ${errText(e)} (check --store-dir)`);
    }
  }

  /** Runs `fn` holding the in-process mutex and the directory's exclusive file lock (writers only). */
  #locked<T>(fn: () => Promise<T>, createDir = false): Promise<T> {
    return this.#mutex.run(async () => {
      await this.#prepare(createDir);
      const f = await Deno.open(`${this.dir}/.lock`, { read: true, write: true, create: true });
      try {
        await f.lock(true);
        return await fn();
      } finally {
        f.close(); // closing releases the flock
      }
    });
  }

  async #write(path: string, text: string): Promise<void> {
    const tmp = `${this.dir}/tmp/${path.split("/").pop()}.${Deno.pid}.${crypto.randomUUID().slice(0, 8)}`;
    await Deno.writeTextFile(tmp, text);
    await Deno.rename(tmp, path);
  }

  #readSeq(): Promise<number> {
    return this.#reader.readSeq();
  }

  /**
   * The change counter once no writer is between its two writes. A writer renames its lease file into
   * place and then bumps `seq`, both under the exclusive lock: read under a shared lock of `.lock`, `seq`
   * counts every lease file already in place, so a watch that reads it after inotify started misses none
   * (read without the lock, a file renamed just before the watch started and counted just after it was
   * never seen: tests/store_file_test.ts). Only read access: reading never writes. No `.lock` (no writer
   * ever ran), no right to open it, or not a regular file (a FIFO would block the open): the counter as
   * it is.
   */
  async #settledSeq(): Promise<number> {
    const path = `${this.dir}/.lock`;
    let f: Deno.FsFile;
    try {
      if (!(await Deno.lstat(path)).isFile) return this.#readSeq();
      f = await Deno.open(path, { read: true });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.PermissionDenied) {
        return this.#readSeq();
      }
      throw e;
    }
    try {
      await f.lock(false);
      return await this.#readSeq();
    } finally {
      f.close(); // closing releases the flock
    }
  }

  async #bumpSeq(): Promise<number> {
    const n = (await this.#readSeq()) + 1;
    await this.#write(`${this.dir}/seq`, `${n}\n`);
    return n;
  }

  /** Reads one lease file; null when missing or malformed (malformed ones are reported once). */
  #readEntry(key: string): Promise<Entry | null> {
    return this.#reader.readEntry(key);
  }

  #scan(): Promise<Map<string, Entry>> {
    return this.#reader.scan();
  }

  /** All entries as of now, from the cache when the sequence number has not moved. */
  async #entries(): Promise<{ seq: number; entries: Map<string, Entry> }> {
    const seq = await this.#readSeq();
    if (this.#cache?.seq === seq) return this.#cache;
    const entries = await this.#scan();
    const c = { seq, entries };
    this.#cache = c;
    return c;
  }

  /** Writes lease file `key`; `created` is the seq of its first write (default: this one). */
  async #putEntry(
    key: string,
    attrs: LeaseAttrsWire,
    expiration: Date | null,
    created?: number,
  ): Promise<Lease> {
    const seq = (await this.#readSeq()) + 1;
    const text = encodeLeaseFile(attrs, expiration, seq, created ?? seq);
    await this.#write(`${this.#subnets}/${key}`, text);
    await this.#write(`${this.dir}/seq`, `${seq}\n`);
    const k = parseLeaseKey(key)!;
    const lease: Lease = {
      ...k,
      attrs: { ...attrs },
      expiration,
      revision: String(seq),
      created: created ?? seq,
    };
    if (this.#cache && this.#cache.seq === seq - 1) {
      this.#cache.entries.set(key, { seq, lease });
      this.#cache.seq = seq;
    } else this.#cache = null;
    return lease;
  }

  async #deleteEntry(key: string): Promise<void> {
    try {
      await Deno.remove(`${this.#subnets}/${key}`);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    const seq = await this.#bumpSeq();
    if (this.#cache && this.#cache.seq === seq - 1) {
      this.#cache.entries.delete(key);
      this.#cache.seq = seq;
    } else this.#cache = null;
  }

  /** Under the lock: entries with expired ones deleted. */
  async #liveEntries(): Promise<Map<string, Entry>> {
    const { entries } = await this.#entries();
    const now = Date.now();
    const dead = [...entries].filter(([, e]) => expired(e.lease, now)).map(([k]) => k);
    for (const k of dead) await this.#deleteEntry(k);
    return (await this.#entries()).entries;
  }

  /** Reads and parses `<dir>/config` (NoNetworkConfigError, naming the fix, when there is none). */
  getNetworkConfig(): Promise<NetConfig> {
    return this.#reader.getNetworkConfig();
  }

  /** Validates and writes `<dir>/config`. */
  async setNetworkConfig(json: string): Promise<void> {
    parseNetConfig(json);
    await this.#locked(
      () => this.#write(`${this.dir}/config`, json.endsWith("\n") ? json : json + "\n"),
      true,
    );
  }

  /** Acquires a lease (see lib/lease/allocator.ts for the order). */
  acquireLease(attrs: LeaseAttrsWire, opts: AcquireOptions = {}): Promise<Lease> {
    return this.#locked(async () => {
      const cfg = await this.getNetworkConfig();
      const entries = await this.#liveEntries();
      const leases = [...entries.values()].map((e) => e.lease);
      const a = allocate(cfg, leases, attrs, opts);
      for (const s of a.stale) await this.#deleteEntry(keyOf(s));
      if (a.kind === "existing") {
        // A reservation becomes a lease with the TTL on first use, as flanneld (tryAcquireLease).
        return await this.#putEntry(
          keyOf(a.lease),
          attrs,
          new Date(Date.now() + this.ttlMs),
          a.lease.created,
        );
      }
      return await this.#putEntry(
        leaseKey(a.subnet, a.ipv6Subnet),
        attrs,
        new Date(Date.now() + this.ttlMs),
      );
    });
  }

  /** Extends the lease by the TTL (reservations stay without expiry). */
  renewLease(lease: Lease): Promise<Lease> {
    return this.#locked(async () => {
      const key = keyOf(lease);
      const cur = await this.#readEntry(key);
      if (!cur || expired(cur.lease) || cur.lease.attrs.PublicIP !== lease.attrs.PublicIP) {
        throw new LeaseNotFoundError(
          `lease ${key} no longer exists in ${this.dir} (expired, revoked or taken over): acquire a new one`,
        );
      }
      const exp = cur.lease.expiration === null ? null : new Date(Date.now() + this.ttlMs);
      return await this.#putEntry(key, lease.attrs, exp, cur.lease.created);
    });
  }

  /**
   * Writes our lease back over a record another writer changed (see {@link SubnetStore.reclaimLease}), under
   * the store's lock (the compare-and-swap of this store).
   */
  reclaimLease(lease: Lease): Promise<Lease> {
    return this.#locked(async () => {
      const key = keyOf(lease);
      const cur = await this.#readEntry(key);
      if (cur && encodeLeaseAttrs(cur.lease.attrs) === encodeLeaseAttrs(lease.attrs)) return cur.lease;
      return await this.#putEntry(key, lease.attrs, lease.expiration, cur?.lease.created);
    });
  }

  /** Deletes the lease whose IPv4 or IPv6 subnet is `subnet`. */
  revokeLease(subnet: IPNet): Promise<void> {
    return this.#locked(async () => {
      const entries = await this.#liveEntries();
      const hit = [...entries].find(([, e]) =>
        (subnet.family === 4 ? e.lease.subnet : e.lease.ipv6Subnet)?.equals(subnet)
      );
      if (!hit) {
        throw new LeaseNotFoundError(`no lease for ${subnet} in ${this.dir} (see 'flanctl lease list')`);
      }
      await this.#deleteEntry(hit[0]);
    });
  }

  /** Writes a reservation (no expiry) of `subnet` for `publicIP`. */
  reserve(subnet: IPNet, publicIP: string, v6?: ReservationV6): Promise<void> {
    return this.#locked(async () => {
      const r = await plannedReservation(this, subnet, publicIP, v6);
      const entries = await this.#liveEntries();
      for (const k of replacedLeases(r, [...entries].map(([k, e]) => [k, e.lease] as const))) {
        await this.#deleteEntry(k);
      }
      await this.#putEntry(r.key, r.attrs, null);
    });
  }

  /**
   * All live leases and the current sequence number as cursor. Read-only: expired leases are left out,
   * not deleted (writers collect them); a missing store directory is StoreDirNotFoundError.
   */
  async listLeases(): Promise<{ leases: Lease[]; cursor: string }> {
    const { seq, entries: all } = await this.#entries();
    const now = Date.now();
    const entries = new Map([...all].filter(([, e]) => !expired(e.lease, now)));
    const cursor = String(seq);
    this.#snapshots.set(cursor, entries);
    if (this.#snapshots.size > 8) this.#snapshots.delete(this.#snapshots.keys().next().value!);
    return { leases: [...entries.values()].map((e) => e.lease), cursor };
  }

  /**
   * Where a watch starts: the listing that returned `cursor`, as it is (no lease file is read again); for
   * an unknown cursor, the current leases, those written after the cursor reported as added. `base` is the
   * change counter that state corresponds to.
   */
  async #watchBaseline(
    cursor: string,
  ): Promise<{ known: Map<string, Entry>; pending: LeaseEvent[]; base: number }> {
    const known = new Map<string, Entry>();
    const pending: LeaseEvent[] = [];
    const snap = this.#snapshots.get(cursor);
    if (snap) {
      for (const [k, e] of snap) known.set(k, e);
      return { known, pending, base: Number(cursor) };
    }
    const c = Number(cursor) || 0;
    const { seq, entries } = await this.#entries();
    const now = Date.now();
    for (const [k, e] of entries) {
      if (expired(e.lease, now)) continue;
      known.set(k, e);
      if (e.seq > c) pending.push({ type: "added", lease: e.lease });
    }
    return { known, pending, base: seq };
  }

  /**
   * Changes after `cursor`. The baseline is the listing that returned `cursor` (kept by this instance);
   * for an unknown cursor, every current lease with a newer sequence number is reported as added.
   */
  async *watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]> {
    const stop = AbortSignal.any([signal, this.#closed.signal]);
    let { known, pending, base } = await this.#watchBaseline(cursor);
    const wake = new Wakeup();
    const dirty = new Set<string>();
    let fsw: Deno.FsWatcher;
    try {
      fsw = Deno.watchFs(this.#subnets, { recursive: false });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      await this.#reader.requireDir();
      throw new StoreError(`cannot watch ${this.#subnets}: no such directory (no lease was ever written)`);
    }
    // A change between the baseline and the start of the watch: one full re-read, else none.
    let rescan = (await this.#settledSeq()) !== base;
    const onAbort = () => {
      try {
        fsw.close();
      } catch { /* already closed */ }
      wake.notify();
    };
    stop.addEventListener("abort", onAbort, { once: true });
    const pump = (async () => {
      try {
        for await (const ev of fsw) {
          if (ev.flag === "rescan" || ev.kind === "other") rescan = true;
          for (const p of ev.paths) {
            const name = p.slice(p.lastIndexOf("/") + 1);
            if (name && !name.startsWith(".") && p.startsWith(this.#subnets)) dirty.add(name);
          }
          wake.notify();
        }
      } catch (e) {
        if (!stop.aborted) {
          this.#warn(`watching ${this.#subnets} failed (${errText(e)}); rescanning`);
          rescan = true;
          wake.notify();
        }
      }
    })();
    try {
      while (!stop.aborted) {
        const events: LeaseEvent[] = pending;
        pending = [];
        const now = Date.now();
        const names = rescan ? null : [...dirty];
        dirty.clear();
        if (names === null) {
          rescan = false;
          const cur = await this.#scan();
          for (const k of new Set([...known.keys(), ...cur.keys()])) {
            this.#diff(k, known, cur.get(k) ?? null, events, now);
          }
        } else {
          for (const k of names) this.#diff(k, known, await this.#readEntry(k), events, now);
        }
        // Expired leases: re-read (a renewal may have landed) and report; the files stay for a writer to
        // collect (watching never writes).
        for (const [k, e] of [...known]) {
          if (!expired(e.lease, now)) continue;
          this.#diff(k, known, await this.#readEntry(k), events, now);
        }
        if (events.length) yield events;
        let next = Infinity;
        for (const e of known.values()) {
          if (e.lease.expiration) next = Math.min(next, e.lease.expiration.getTime());
        }
        await wake.wait(next === Infinity ? 2 ** 31 - 1 : next - Date.now() + 5, stop);
      }
    } finally {
      stop.removeEventListener("abort", onAbort);
      onAbort();
      await pump;
    }
  }

  /** Compares what a watcher knows about `k` with the file's current state and records events. */
  #diff(k: string, known: Map<string, Entry>, cur: Entry | null, events: LeaseEvent[], now: number): void {
    const old = known.get(k);
    const live = cur && !expired(cur.lease, now) ? cur : null;
    if (!live) {
      if (old) {
        known.delete(k);
        events.push({ type: "removed", lease: old.lease });
      }
      return;
    }
    if (!old || old.seq !== live.seq) {
      known.set(k, live);
      events.push({ type: "added", lease: live.lease });
    }
  }

  /** Stops this instance's watchers. */
  close(): Promise<void> {
    this.#closed.abort();
    return Promise.resolve();
  }
}
