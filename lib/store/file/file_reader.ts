/**
 * Reading the file store's directory without changing it: the one parser of its lease files, used by
 * {@link FileStore} (lib/store/file/file.ts) for every read, by `flanctl lease` through it, and by the doctor,
 * which opens a {@link FileStoreReader} directly (it must change nothing and must see expired leases).
 *
 * Layout (see lib/store/file/file.ts): `<dir>/config` (net-conf JSON), `<dir>/seq` (the change counter),
 * `<dir>/subnets/<key>` = `{"lease":<flannel's lease JSON>,"expiration":"<ISO>"|null,"seq":n}`. Nothing
 * here creates, deletes or locks anything: a missing directory is {@link StoreDirNotFoundError}. Every file
 * is read through lib/base/capped_read.ts (a FIFO, device or oversized file is refused, never waited on).
 * @module
 */
import type { NetConfig } from "../../config/types.ts";
import { readCappedTextAsync, safeJson } from "../../base/capped_read.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import {
  encodeLeaseAttrs,
  MalformedLeaseError,
  parseLeaseKey,
  validateLeaseAttrs,
} from "../../lease/wire.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../types.ts";
import { NoNetworkConfigError, ReadOnlyStoreError, StoreDirNotFoundError, StoreError } from "../errors.ts";
import { errText } from "../../base/errors.ts";
import { isObj } from "../../base/json.ts";

/** One lease file: its sequence number (the store's counter when it was written) and the lease. */
export interface FileLeaseEntry {
  seq: number;
  lease: Lease;
}

/** Parses lease file `name` (its file name is the subnet key). Throws {@link MalformedLeaseError}. */
export function parseLeaseFile(name: string, text: string): FileLeaseEntry {
  try {
    const k = parseLeaseKey(name);
    if (!k) throw new Error(`file name is not a subnet key (e.g. 10.5.52.0-24)`);
    const doc: unknown = JSON.parse(text);
    if (!isObj(doc)) throw new Error("not a JSON object");
    const attrs = validateLeaseAttrs(name, doc.lease);
    const exp = typeof doc.expiration === "string" ? new Date(doc.expiration) : null;
    if (exp && isNaN(exp.getTime())) throw new Error(`bad expiration ${safeJson(doc.expiration)}`);
    const seq = typeof doc.seq === "number" ? doc.seq : 0;
    // `created`: the seq of the file's first write (files from before it was recorded: their last write).
    const created = typeof doc.created === "number" && Number.isSafeInteger(doc.created) ? doc.created : seq;
    return { seq, lease: { ...k, attrs, expiration: exp, revision: String(seq), created } };
  } catch (e) {
    if (e instanceof MalformedLeaseError) throw e;
    throw new MalformedLeaseError(name, errText(e));
  }
}

/** The text of a lease file, the inverse of {@link parseLeaseFile}. */
export function encodeLeaseFile(
  attrs: LeaseAttrsWire,
  expiration: Date | null,
  seq: number,
  created: number = seq,
): string {
  const exp = expiration ? JSON.stringify(expiration.toISOString()) : "null";
  return `{"lease":${encodeLeaseAttrs(attrs)},"expiration":${exp},"seq":${seq},"created":${created}}\n`;
}

/** True when `l` has an expiration at or before `now` (reservations never expire). */
export function leaseExpired(l: Lease, now: number = Date.now()): boolean {
  return l.expiration !== null && l.expiration.getTime() <= now;
}

/** Options of {@link FileStoreReader}. */
export interface FileStoreReaderOptions {
  /** Called once per malformed lease file (path, error); the default collects them in `malformed` only. */
  onMalformed?: (err: MalformedLeaseError, path: string) => void;
  /** Warnings of the net-conf parser (defaults, unknown fields); default: parseNetConfig's own. */
  warnConfig?: (msg: string) => void;
}

/** A lease file is a few hundred bytes; 64 KiB is far beyond any real one. */
const LEASE_MAX_BYTES = 64 * 1024;

/**
 * A read-only view of a file store's directory. As a {@link SubnetStore} it lists every lease file,
 * expired ones included (callers that want live leases filter with {@link leaseExpired}); its write
 * methods are refused with {@link ReadOnlyStoreError} and it has no watch.
 */
export class FileStoreReader implements SubnetStore {
  /** Always "file". */
  readonly kind = "file";
  /** The directory. */
  readonly dir: string;
  /** Malformed lease files seen so far, each once: `<path>: <reason>`. */
  readonly malformed: string[] = [];
  #seen = new Set<string>();
  #opts: FileStoreReaderOptions;

  constructor(dir: string, opts: FileStoreReaderOptions = {}) {
    this.dir = dir.replace(/\/+$/, "") || "/";
    this.#opts = opts;
  }

  /** `<dir>/subnets`, where the lease files are. */
  get subnetsDir(): string {
    return `${this.dir}/subnets`;
  }

  /** Throws {@link StoreDirNotFoundError} unless the store directory exists. */
  async requireDir(): Promise<void> {
    try {
      if ((await Deno.stat(this.dir)).isDirectory) return;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        throw new StoreError(`cannot read ${this.dir}: ${errText(e)}`);
      }
    }
    throw new StoreDirNotFoundError(this.dir);
  }

  /** The store's change counter (0 when never written). */
  async readSeq(): Promise<number> {
    try {
      const n = Number((await readCappedTextAsync(`${this.dir}/seq`, 64)).trim());
      return Number.isFinite(n) ? n : 0;
    } catch {
      return 0;
    }
  }

  /** Reads lease file `key`; null when it is missing or malformed (malformed ones are recorded). */
  async readEntry(key: string): Promise<FileLeaseEntry | null> {
    const path = `${this.subnetsDir}/${key}`;
    let text: string;
    try {
      text = await readCappedTextAsync(path, LEASE_MAX_BYTES);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return null;
      this.#malformed(new MalformedLeaseError(key, `cannot read: ${errText(e)}`), path, key);
      return null;
    }
    try {
      return parseLeaseFile(key, text);
    } catch (e) {
      this.#malformed(e as MalformedLeaseError, path, `${key}:${text.length}`);
      return null;
    }
  }

  #malformed(err: MalformedLeaseError, path: string, id: string): void {
    const key = `${id}:${err.message}`;
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    this.malformed.push(`${path}: ${err.message}`);
    this.#opts.onMalformed?.(err, path);
  }

  /**
   * Every parseable lease file by key, expired ones included. A store directory without `subnets/` has
   * no leases; a missing store directory is {@link StoreDirNotFoundError}.
   */
  async scan(): Promise<Map<string, FileLeaseEntry>> {
    const out = new Map<string, FileLeaseEntry>();
    const names: string[] = [];
    try {
      for await (const e of Deno.readDir(this.subnetsDir)) {
        if (!e.name.startsWith(".") && !e.isDirectory) names.push(e.name);
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        throw new StoreError(`cannot read ${this.subnetsDir}: ${errText(e)}`);
      }
      await this.requireDir();
      return out;
    }
    names.sort();
    // Read in parallel batches: thousands of small files.
    for (let i = 0; i < names.length; i += 64) {
      const batch = names.slice(i, i + 64);
      const got = await Promise.all(batch.map((n) => this.readEntry(n)));
      got.forEach((e, j) => e && out.set(batch[j], e));
    }
    return out;
  }

  /** Reads and parses `<dir>/config` ({@link NoNetworkConfigError} when absent, naming what to do). */
  async getNetworkConfig(): Promise<NetConfig> {
    let text: string;
    try {
      text = await readCappedTextAsync(`${this.dir}/config`);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        const where = await this.requireDir().then(
          () => `${this.dir}/config`,
          () => `${this.dir} (no such directory)`,
        );
        throw new NoNetworkConfigError(
          `no network config in ${where}: write one with ` +
            `'flanctl lease config set net-conf.json --store-dir ${this.dir}'`,
        );
      }
      throw new StoreError(`cannot read ${this.dir}/config: ${errText(e)}`);
    }
    return parseNetConfig(text, this.#opts.warnConfig ? { warn: this.#opts.warnConfig } : {});
  }

  /** Every lease file, expired ones included, and the change counter as cursor. */
  async listLeases(): Promise<{ leases: Lease[]; cursor: string }> {
    const seq = await this.readSeq();
    const entries = await this.scan();
    return { leases: [...entries.values()].map((e) => e.lease), cursor: String(seq) };
  }

  /** Refused. */
  setNetworkConfig(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("setNetworkConfig"));
  }
  /** Refused. */
  acquireLease(): Promise<Lease> {
    return Promise.reject(new ReadOnlyStoreError("acquireLease"));
  }
  /** Refused. */
  renewLease(): Promise<Lease> {
    return Promise.reject(new ReadOnlyStoreError("renewLease"));
  }
  /** Refused. */
  revokeLease(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("revokeLease"));
  }
  /** Refused. */
  reserve(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("reserve"));
  }
  /** Not offered by the reader (FileStore watches): refused. */
  watchLeases(): AsyncIterable<LeaseEvent[]> {
    throw new ReadOnlyStoreError("watchLeases (open a FileStore to watch)");
  }
  /** Nothing to release. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
