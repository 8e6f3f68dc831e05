/**
 * The etcd v3 store, in flannel's schema: `<prefix>/config` holds the net-conf JSON, each lease is
 * `<prefix>/subnets/10.5.52.0-24` with flannel's JSON, attached to an etcd lease of TTL 24 h
 * (reservations: keys without an etcd lease). Subnets are created with a create-if-absent transaction
 * and retried on a lost race; watches resume from the last revision and re-list after compaction; a
 * vanished etcd gives clear errors and the watch reconnects with backoff.
 *
 * Talks to etcd through its JSON gateway with fetch (see etcd_client.ts for why not npm:etcd3).
 * @module
 */
import type { ReservationV6 } from "../../lease/reservation.ts";
import { plannedReservation, replacedLeases } from "../reserve.ts";
import type { NetConfig } from "../../config/types.ts";
import { parseNetConfig } from "../../config/netconf.ts";
import type { IPNet } from "../../base/cidr.ts";
import { allocate } from "../../lease/allocator.ts";
import {
  encodeLeaseAttrs,
  keyOf,
  leaseFromKV,
  leaseKey,
  MalformedLeaseError,
  warnMalformed,
} from "../../lease/wire.ts";
import type { AcquireOptions, Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../types.ts";
import { LeaseNotFoundError, NoNetworkConfigError, StoreError } from "../errors.ts";
import { EtcdClient, type EtcdClientOptions, type EtcdKV, prefixEnd } from "./etcd_client.ts";
import { DEFAULT_LEASE_TTL_MS, diffLeases, WatchRetry } from "../util.ts";
import { type Warn, warnOnce } from "../../base/warn.ts";
import { errText } from "../../base/errors.ts";

/** How long the acquire list cache outlives the last acquire. */
const CACHE_IDLE_MS = 30_000;

/** Options of the etcd store. */
export interface EtcdStoreOptions extends EtcdClientOptions {
  /** Key prefix (flannel's default /coreos.com/network). */
  prefix: string;
  /** Lease TTL in ms (default 24 h; etcd's granularity is 1 s). */
  ttlMs?: number;
  /** Times a lost create race is retried (default 10, as flannel). */
  raceRetries?: number;
  /**
   * Receives warnings (malformed leases, net-conf notes, watch failures and their recovery); default:
   * plain lines on stderr.
   */
  warn?: Warn;
}

/** Opens the etcd store (no I/O until the first call). */
export function openEtcdStore(opts: EtcdStoreOptions): Promise<EtcdStore> {
  return Promise.resolve(new EtcdStore(opts));
}

interface Listed {
  leases: Map<string, { lease: Lease; kv: EtcdKV }>;
  revision: number;
}

/** The etcd v3 store. */
export class EtcdStore implements SubnetStore {
  /** Always "etcd". */
  readonly kind = "etcd";
  /** Key prefix without a trailing slash. */
  readonly prefix: string;
  /** Lease TTL in ms. */
  readonly ttlMs: number;
  /** The client (exposed for tools and tests). */
  readonly client: EtcdClient;
  #raceRetries: number;
  #warn: Warn | undefined;
  /** net-conf warnings, each once (the config is re-read often). */
  #configWarn: Warn | null;
  /** etcd lease ID → expiry (ms since epoch); our leases are never kept alive, only replaced. */
  #expiry = new Map<string, number>();
  #snapshots = new Map<string, Map<string, Lease>>();
  #closed = new AbortController();
  /** Malformed entries already reported (key@revision), so re-lists do not repeat the warning. */
  #warned = new Set<string>();
  /** Parsed leases by key, reused while the mod revision is unchanged (re-lists of thousands of keys). */
  #parsed = new Map<string, { modRevision: number; leaseId: string; lease: Lease }>();
  /**
   * The lease list acquires work on, kept current by a watch from its revision (so an acquire with 5,000
   * leases does not list them all; the create-if-absent / mod-revision compare of the write catches what
   * the watch has not delivered yet, and a lost race re-lists). Made for the second of acquires in a row;
   * dropped, with its watch, after
   * {@link CACHE_IDLE_MS} without an acquire (a daemon acquires once: it must not hold a second copy of
   * every lease), when the watch fails or is compacted, and on close().
   */
  #cache: Listed | null = null;
  #cacheStop: AbortController | null = null;
  #cacheTask: Promise<void> | null = null;
  #cacheIdle: ReturnType<typeof setTimeout> | null = null;
  /** When the last acquire started (ms); the cache is made only for an acquire soon after another. */
  #lastAcquire = -Infinity;

  constructor(opts: EtcdStoreOptions) {
    this.client = new EtcdClient(opts);
    this.prefix = opts.prefix.replace(/\/+$/, "");
    this.ttlMs = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.#raceRetries = opts.raceRetries ?? 10;
    this.#warn = opts.warn;
    this.#configWarn = opts.warn ? warnOnce(opts.warn) : null;
  }

  get #subnets(): string {
    return `${this.prefix}/subnets/`;
  }

  get #ttlSec(): number {
    return Math.max(1, Math.round(this.ttlMs / 1000));
  }

  /** Expiry of an etcd lease ID (cached; one timetolive call per new ID). */
  async #expiration(id: string): Promise<Date | null> {
    if (id === "0") return null;
    let t = this.#expiry.get(id);
    if (t === undefined) {
      const ttl = await this.client.timeToLive(id);
      t = Date.now() + Math.max(ttl, 0) * 1000;
      this.#expiry.set(id, t);
    }
    return new Date(t);
  }

  /** Parses a subnet KV; null (with a warning) when malformed. */
  async #toLease(kv: EtcdKV): Promise<Lease | null> {
    const name = kv.key.slice(this.#subnets.length);
    const hit = this.#parsed.get(kv.key);
    if (hit && hit.modRevision === kv.modRevision && hit.leaseId === kv.lease) return hit.lease;
    try {
      const lease = leaseFromKV(name, kv.value, await this.#expiration(kv.lease), String(kv.modRevision));
      if (kv.createRevision > 0) lease.created = kv.createRevision;
      this.#parsed.set(kv.key, { modRevision: kv.modRevision, leaseId: kv.lease, lease });
      return lease;
    } catch (e) {
      if (e instanceof MalformedLeaseError) {
        const id = `${kv.key}@${kv.modRevision}`;
        if (!this.#warned.has(id)) warnMalformed(e, `etcd ${kv.key}`, this.#warn);
        this.#warned.add(id);
        return null;
      }
      throw e;
    }
  }

  async #list(): Promise<Listed> {
    const { kvs, revision } = await this.client.range(this.#subnets, prefixEnd(this.#subnets));
    const now = Date.now();
    for (const [id, t] of this.#expiry) if (t < now) this.#expiry.delete(id); // keep the cache bounded
    // Look up unknown lease expiries with bounded parallelism.
    const ids = [...new Set(kvs.map((k) => k.lease))].filter((id) => id !== "0" && !this.#expiry.has(id));
    for (let i = 0; i < ids.length; i += 32) {
      await Promise.all(ids.slice(i, i + 32).map((id) => this.#expiration(id)));
    }
    const leases = new Map<string, { lease: Lease; kv: EtcdKV }>();
    const present = new Set(kvs.map((k) => k.key));
    for (const k of this.#parsed.keys()) if (!present.has(k)) this.#parsed.delete(k);
    for (const kv of kvs) {
      const l = await this.#toLease(kv);
      if (l) leases.set(kv.key, { lease: l, kv });
    }
    return { leases, revision };
  }

  /** The cached lease list (see {@link EtcdStore.#cache}), listing and starting its watch when there is none. */
  async #current(): Promise<Listed> {
    this.#touchCache();
    if (this.#cache) return this.#cache;
    const l = await this.#list();
    if (this.#closed.signal.aborted) return l;
    this.#dropCache();
    this.#cache = l;
    const stop = new AbortController();
    this.#cacheStop = stop;
    this.#cacheTask = this.#follow(l, l.revision, AbortSignal.any([stop.signal, this.#closed.signal]))
      .catch(() => {})
      .finally(() => {
        if (this.#cache === l) this.#cache = null;
      });
    return l;
  }

  /**
   * The leases an acquire works on: a plain list for a lone acquire (a daemon acquires once and must not
   * keep a second copy of every lease and a second watch), the cached list when acquires follow each other.
   */
  #leasesForAcquire(): Promise<Listed> {
    const now = Date.now(), recent = now - this.#lastAcquire < CACHE_IDLE_MS;
    this.#lastAcquire = now;
    return this.#cache || recent ? this.#current() : this.#list();
  }

  /** Applies the watch events after `rev` to `l` until stopped, compacted or failed. */
  async #follow(l: Listed, rev: number, stop: AbortSignal): Promise<void> {
    for await (const msg of this.client.watch(this.#subnets, prefixEnd(this.#subnets), rev + 1, stop)) {
      if (msg.compactRevision > 0 || msg.canceled) return;
      for (const ev of msg.events) {
        if (this.#cache !== l) return;
        l.revision = Math.max(l.revision, ev.kv.modRevision);
        const lease = ev.type === "PUT" ? await this.#toLease(ev.kv) : null;
        if (lease) l.leases.set(ev.kv.key, { lease, kv: ev.kv });
        else l.leases.delete(ev.kv.key);
      }
    }
  }

  #touchCache(): void {
    if (this.#cacheIdle !== null) clearTimeout(this.#cacheIdle);
    const t = setTimeout(() => {
      this.#cacheIdle = null;
      this.#dropCache();
    }, CACHE_IDLE_MS);
    Deno.unrefTimer(t as unknown as number);
    this.#cacheIdle = t;
  }

  /** Forgets the cached list and stops its watch. */
  #dropCache(): void {
    this.#cache = null;
    this.#cacheStop?.abort();
    this.#cacheStop = null;
  }

  /** Reads `<prefix>/config`. */
  async getNetworkConfig(): Promise<NetConfig> {
    const { kvs } = await this.client.range(`${this.prefix}/config`);
    if (kvs.length === 0) {
      throw new NoNetworkConfigError(
        `no network config at ${this.prefix}/config in etcd ${this.client.endpoint}: write one with ` +
          `'flanctl lease config set net-conf.json --etcd-endpoints ${this.client.endpoints.join(",")}'`,
      );
    }
    return parseNetConfig(kvs[0].value, this.#configWarn ? { warn: this.#configWarn } : {});
  }

  /** Validates and writes `<prefix>/config`. */
  async setNetworkConfig(json: string): Promise<void> {
    parseNetConfig(json);
    await this.client.txnPut(`${this.prefix}/config`, json, null, null);
  }

  async #put(
    key: string,
    attrs: LeaseAttrsWire,
    reservation: boolean,
    cmp: { target: "CREATE" | "MOD"; revision: number },
  ) {
    const lease = reservation ? null : await this.client.grant(this.#ttlSec);
    if (lease) this.#expiry.set(lease, Date.now() + this.#ttlSec * 1000);
    const ok = await this.client.txnPut(key, encodeLeaseAttrs(attrs), lease, cmp);
    if (!ok && lease) await this.client.revoke(lease).catch(() => {});
    return { ok, lease };
  }

  /** Acquires a lease: own PublicIP, previous subnet, random free; create-if-absent with retries. */
  async acquireLease(attrs: LeaseAttrsWire, opts: AcquireOptions = {}): Promise<Lease> {
    const cfg = await this.getNetworkConfig();
    for (let attempt = 0; attempt < this.#raceRetries; attempt++) {
      const listed = await this.#leasesForAcquire();
      const { leases } = listed;
      const a = allocate(cfg, [...leases.values()].map((x) => x.lease), attrs, opts);
      for (const s of a.stale) {
        await this.client.delete(this.#subnets + keyOf(s));
        leases.delete(this.#subnets + keyOf(s));
      }
      if (a.kind === "existing") {
        const key = this.#subnets + keyOf(a.lease);
        const cur = leases.get(key)!;
        // A reservation becomes a 24 h lease on first use, as flanneld (tryAcquireLease).
        const { ok, lease } = await this.#put(key, attrs, false, {
          target: "MOD",
          revision: cur.kv.modRevision,
        });
        if (ok) {
          this.#remember(listed, key, attrs, lease, a.lease);
          return {
            ...a.lease,
            attrs: { ...attrs },
            expiration: lease ? await this.#expiration(lease) : null,
          };
        }
        this.#dropCache(); // lost a race: list afresh
        continue;
      }
      const name = leaseKey(a.subnet, a.ipv6Subnet);
      const { ok, lease } = await this.#put(this.#subnets + name, attrs, false, {
        target: "CREATE",
        revision: 0,
      });
      if (ok) {
        this.#remember(listed, this.#subnets + name, attrs, lease, {
          subnet: a.subnet,
          ipv6Subnet: a.ipv6Subnet,
        });
        return {
          subnet: a.subnet,
          ipv6Subnet: a.ipv6Subnet,
          attrs: { ...attrs },
          expiration: await this.#expiration(lease!),
        };
      }
      // Lost the race for this subnet to another node: list again and pick another.
      this.#dropCache();
    }
    throw new StoreError(
      `could not acquire a subnet after ${this.#raceRetries} tries: other nodes kept taking the chosen ones`,
    );
  }

  /**
   * Puts what we just wrote into the cached list at once (the watch delivers the real entry shortly; its
   * unknown mod revision only makes a compare against it fail, which re-lists).
   */
  #remember(
    l: Listed,
    key: string,
    attrs: LeaseAttrsWire,
    leaseId: string | null,
    s: { subnet: IPNet | null; ipv6Subnet: IPNet | null },
  ): void {
    if (this.#cache !== l) return;
    const lease: Lease = {
      subnet: s.subnet,
      ipv6Subnet: s.ipv6Subnet,
      attrs: { ...attrs },
      expiration: null,
    };
    const kv: EtcdKV = { key, value: "", lease: leaseId ?? "0", createRevision: -1, modRevision: -1 };
    l.leases.set(key, { lease, kv });
  }

  /** Re-writes the lease with a fresh etcd lease (as flannel renews). */
  async renewLease(lease: Lease): Promise<Lease> {
    const key = this.#subnets + keyOf(lease);
    const { kvs } = await this.client.range(key);
    const cur = kvs[0] ? await this.#toLease(kvs[0]) : null;
    if (!cur || cur.attrs.PublicIP !== lease.attrs.PublicIP) {
      throw new LeaseNotFoundError(
        `lease ${keyOf(lease)} no longer exists in etcd (expired, revoked or taken over): acquire a new one`,
      );
    }
    const reservation = kvs[0].lease === "0";
    const r = await this.#put(key, lease.attrs, reservation, { target: "MOD", revision: kvs[0].modRevision });
    if (!r.ok) throw new LeaseNotFoundError(`lease ${keyOf(lease)} changed while renewing: acquire again`);
    return { ...lease, expiration: r.lease ? await this.#expiration(r.lease) : null };
  }

  /**
   * Writes our lease back over a record another writer changed (see {@link SubnetStore.reclaimLease}):
   * compare on the mod revision read (create when the key is gone); a fresh etcd lease as a renewal.
   */
  async reclaimLease(lease: Lease): Promise<Lease> {
    const key = this.#subnets + keyOf(lease);
    const want = encodeLeaseAttrs(lease.attrs);
    for (let attempt = 0; attempt < this.#raceRetries; attempt++) {
      const kv = (await this.client.range(key)).kvs[0];
      if (kv && kv.value === want) return lease;
      const cmp = kv
        ? { target: "MOD" as const, revision: kv.modRevision }
        : { target: "CREATE" as const, revision: 0 };
      const r = await this.#put(key, lease.attrs, lease.expiration === null, cmp);
      if (r.ok) return { ...lease, expiration: r.lease ? await this.#expiration(r.lease) : null };
    }
    throw new StoreError(`lease ${keyOf(lease)} kept changing while it was written back`);
  }

  /** Deletes the lease holding `subnet`. */
  async revokeLease(subnet: IPNet): Promise<void> {
    const { leases } = await this.#list();
    for (const [key, { lease }] of leases) {
      if ((subnet.family === 4 ? lease.subnet : lease.ipv6Subnet)?.equals(subnet)) {
        await this.client.delete(key);
        return;
      }
    }
    throw new LeaseNotFoundError(`no lease for ${subnet} under ${this.#subnets} (see 'flanctl lease list')`);
  }

  /** Writes a reservation: a key without an etcd lease. */
  async reserve(subnet: IPNet, publicIP: string, v6?: ReservationV6): Promise<void> {
    const r = await plannedReservation(this, subnet, publicIP, v6);
    const { leases } = await this.#list();
    for (const key of replacedLeases(r, [...leases].map(([k, v]) => [k, v.lease] as const))) {
      await this.client.delete(key);
    }
    await this.client.txnPut(this.#subnets + r.key, encodeLeaseAttrs(r.attrs), null, null);
  }

  /** All leases; the cursor is the etcd revision of the listing. */
  async listLeases(): Promise<{ leases: Lease[]; cursor: string }> {
    const { leases, revision } = await this.#list();
    const cursor = String(revision);
    const snap = new Map([...leases].map(([k, v]) => [k, v.lease]));
    this.#snapshots.set(cursor, snap);
    if (this.#snapshots.size > 8) this.#snapshots.delete(this.#snapshots.keys().next().value!);
    return { leases: [...snap.values()], cursor };
  }

  /**
   * Watches `<prefix>/subnets/` from `cursor`+1. After a compaction it re-lists and yields the difference;
   * when etcd is unreachable it logs the error, retries with client-go's backoff (0.8 s doubling to 30 s,
   * jittered up to 2×: `CLIENT_GO_BACKOFF` in lib/store/util.ts) and resumes.
   */
  async *watchLeases(cursor: string, signal: AbortSignal): AsyncIterable<LeaseEvent[]> {
    const stop = AbortSignal.any([signal, this.#closed.signal]);
    let rev = Number(cursor) || 0;
    // The listing's snapshot is taken over (this watch's own map from here on, updated in place): the store
    // does not keep a second map of every lease for good, nor copy it.
    let known = this.#snapshots.get(cursor);
    this.#snapshots.delete(cursor);
    if (!known) {
      const l = await this.#list();
      known = new Map([...l.leases].map(([k, v]) => [k, v.lease]));
      if (!rev) rev = l.revision;
    }
    const backoff = new WatchRetry(this.#warn);
    let failing = false;
    while (!stop.aborted) {
      let relist = false;
      // Every restart but a watch that worked a while waits the backoff (client-go's reflector values), so
      // a server answering each watch with a compaction, a cancel or nothing costs a few requests, not
      // hundreds: the trouble is named in the retry line.
      let trouble: string | null = null;
      const started = Date.now();
      let got = 0;
      try {
        for await (const msg of this.client.watch(this.#subnets, prefixEnd(this.#subnets), rev + 1, stop)) {
          got++;
          if (failing) {
            backoff.recovered(`etcd watch on ${this.client.endpoint} resumed at revision ${rev + 1}`);
            failing = false;
          }
          if (msg.compactRevision > 0) {
            relist = true;
            trouble = `etcd watch: revision ${rev + 1} compacted (at ${msg.compactRevision}): re-listing`;
            break;
          }
          if (msg.canceled) {
            trouble = "etcd watch canceled by the server";
            break;
          }
          const events: LeaseEvent[] = [];
          for (const ev of msg.events) {
            rev = Math.max(rev, ev.kv.modRevision);
            if (ev.type === "PUT") {
              const l = await this.#toLease(ev.kv);
              if (!l) continue;
              known.set(ev.kv.key, l);
              events.push({ type: "added", lease: l });
            } else {
              const old = known.get(ev.kv.key) ?? (ev.prevKv ? await this.#toLease(ev.prevKv) : null);
              known.delete(ev.kv.key);
              if (old) events.push({ type: "removed", lease: old });
            }
          }
          if (events.length) yield events;
        }
        if (!trouble && got === 0 && Date.now() - started < 1000) trouble = "etcd watch closed at once";
      } catch (e) {
        if (stop.aborted) break;
        failing = true;
        trouble = `etcd watch on ${this.client.endpoint} failed (${errText(e)})`;
        relist = true; // we may have missed a compaction while away; a re-list is cheap and exact
      }
      if (stop.aborted) break;
      if (trouble) await backoff.wait(trouble, stop);
      if (stop.aborted) break;
      if (relist) {
        try {
          const l = await this.#list();
          const cur = new Map([...l.leases].map(([k, v]) => [k, v.lease]));
          const events = diffLeases(known, cur, (a, b) => a.revision === b.revision);
          known = cur;
          rev = l.revision;
          if (events.length) yield events;
        } catch (e) {
          if (stop.aborted) break;
          await backoff.wait(`etcd re-list failed: ${errText(e)}`, stop);
        }
      }
    }
  }

  /** Stops watchers and closes the HTTP client. */
  async close(): Promise<void> {
    this.#closed.abort();
    this.#dropCache();
    if (this.#cacheIdle !== null) clearTimeout(this.#cacheIdle);
    this.#cacheIdle = null;
    await this.#cacheTask;
    this.client.close();
  }
}
