/**
 * The node daemon's lifecycle: choose the interface, read the network config, acquire the lease, set up
 * the backend, write subnet.env, install the rules, then serve peers from the store's watch — applying
 * each event at once and running a full reconcile every `--resync-interval`. Renews the lease before it
 * expires and re-acquires it if it disappears. On SIGTERM/SIGINT it stops and leaves the kernel state
 * and the lease in place, so pod traffic keeps flowing across a restart.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import type { NetConfig } from "../config/types.ts";
import type { IPNet } from "../ip/cidr.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import { LeaseNotFoundError, NoNetworkConfigError, StoreUnavailableError } from "../store/errors.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../store/types.ts";
import { readSubnetEnv, writeSubnetEnv } from "../subnet_env.ts";
import { createBackend } from "../backend/mod.ts";
import type { Backend, ExternalIface, PeerInfo } from "../backend/types.ts";
import { Reconciler } from "../reconcile/reconciler.ts";
import { type DesiredPeer, samePeer } from "../reconcile/types.ts";
import { forwardRules, masqRules, type TableRules } from "../masq/rules.ts";
import { RuleManager, type Runner } from "../masq/iptables.ts";
import { selectIface } from "./iface.ts";
import type { Logger } from "./log.ts";
import { Metrics } from "./metrics.ts";
import type { DaemonOptions } from "./options.ts";

/** What the daemon runs against (injected so tests and benchmarks can substitute parts). */
export interface DaemonDeps {
  nl: NetlinkHandle;
  store: SubnetStore;
  log: Logger;
  /** systemd notification (READY=1, STOPPING=1, STATUS=…). */
  notify?: (state: string) => void;
  /** Runs iptables-save/iptables-restore. */
  runIptables?: Runner;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Sleeps `ms`, waking early (without throwing) when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, rej) => {
    t = setTimeout(() => rej(new StoreUnavailableError(`${what} timed out after ${ms / 1000}s`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** The running daemon. */
export class Daemon {
  readonly metrics: Metrics = new Metrics();
  readonly #o: DaemonOptions;
  readonly #nl: NetlinkHandle;
  readonly #store: SubnetStore;
  readonly #log: Logger;
  readonly #notify: (s: string) => void;
  readonly #runIptables?: Runner;
  readonly #stop = new AbortController();
  #ext!: ExternalIface;
  #cfg!: NetConfig;
  #network!: IPNet;
  #backend!: Backend;
  #reconciler!: Reconciler;
  #rules!: RuleManager;
  #lease!: Lease;
  #own!: IPNet;
  #attrs!: LeaseAttrsWire;
  /** Peers by subnet text. */
  readonly #peers = new Map<string, PeerInfo>();
  /** Why a peer is skipped (logged once per reason). */
  readonly #skipped = new Map<string, string>();
  #subnetEnvWritten = false;
  #rulesInPlace = false;
  #reacquiring: Promise<void> | null = null;
  #renewTimer: ReturnType<typeof setTimeout> | undefined;
  #storeOk = true;

  constructor(o: DaemonOptions, deps: DaemonDeps) {
    this.#o = o;
    this.#nl = deps.nl;
    this.#store = deps.store;
    this.#log = deps.log;
    this.#notify = deps.notify ?? (() => {});
    this.#runIptables = deps.runIptables;
  }

  /** Our subnet (after start). */
  get subnet(): IPNet {
    return this.#own;
  }

  /** The chosen external interface (after start). */
  get iface(): ExternalIface {
    return this.#ext;
  }

  /** Why /readyz fails, or null when ready. */
  notReady = (): string | null => {
    if (!this.#subnetEnvWritten) return "subnet.env not written yet";
    if (!this.#rulesInPlace) return "iptables rules not in place yet";
    if (!this.#storeOk) return "the lease store is unreachable";
    return null;
  };

  #setStoreUp(up: boolean, why?: string): void {
    if (up !== this.#storeOk) {
      if (up) this.#log.info("lease store reachable again");
      else this.#log.warn("lease store unreachable", { error: why });
    }
    this.#storeOk = up;
    this.metrics.storeUp = up ? 1 : 0;
    this.metrics.ready = this.notReady() === null ? 1 : 0;
  }

  /** Retries `fn` while the store is unavailable (or has no config yet); other errors propagate. */
  async #retryStore<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let delay = 500;
    while (true) {
      try {
        const r = await fn();
        this.#setStoreUp(true);
        return r;
      } catch (e) {
        const retryable = e instanceof StoreUnavailableError || e instanceof NoNetworkConfigError;
        if (!retryable || this.#stop.signal.aborted) throw e;
        if (e instanceof StoreUnavailableError) this.#setStoreUp(false, errText(e));
        this.#log.warn(`${what} failed; retrying`, { error: errText(e), retry_in_ms: delay });
        await pause(delay, this.#stop.signal);
        if (this.#stop.signal.aborted) throw e;
        delay = Math.min(delay * 2, 10_000);
      }
    }
  }

  /**
   * Startup, up to readiness. Throws (ConfigError, IfaceError, IptablesError, …) on a fatal problem;
   * everything that can fail on bad input is checked before the first kernel change.
   */
  async start(): Promise<void> {
    const o = this.#o;
    this.#ext = selectIface(this.#nl, o);
    this.#log.info("using interface", {
      iface: this.#ext.name,
      iface_ip: this.#ext.ifaceIP,
      public_ip: this.#ext.publicIP,
      mtu: this.#ext.mtu,
    });
    this.#cfg = await this.#retryStore("reading the network config", () => this.#store.getNetworkConfig());
    const cfg = this.#cfg;
    if (cfg.enableIPv6) {
      throw new ConfigError(
        "EnableIPv6",
        "EnableIPv6 is set but the flanctl daemon supports IPv4 networks only: remove EnableIPv6/IPv6Network",
      );
    }
    if (!cfg.network) throw new ConfigError("Network", "the network config has no IPv4 Network");
    this.#network = cfg.network;
    this.#backend = createBackend(this.#nl, cfg, this.#ext, o.stateDir, {
      vxlanTxChecksumOffload: o.vxlanTxChecksumOffload,
      log: this.#log,
    });
    const lines = this.#backend.metricLines?.bind(this.#backend);
    if (lines) this.metrics.sources.push(lines);
    this.#backend.prepare();
    this.#log.info("network config", {
      network: cfg.network.toString(),
      subnet_len: cfg.subnetLen,
      backend: this.#backend.type,
      device: this.#backend.overlayDev,
      mtu: this.#backend.mtu,
    });
    if (cfg.enableNFTables && (o.ipMasq || o.iptablesForwardRules)) {
      this.#log.warn("EnableNFTables is set, but flanctl installs flannel's rules in iptables mode");
    }
    this.#rules = new RuleManager([], { run: this.#runIptables });
    if (o.ipMasq || o.iptablesForwardRules) {
      this.#rules.setTables([forwardRules(cfg.network)]); // placeholder network-only table to probe tools
      await this.#rules.probe();
    }
    let previous: IPNet | null = null;
    try {
      const env = readSubnetEnv(o.subnetFile);
      if (env.subnet && cfg.network.contains(env.subnet.net)) previous = env.subnet.net;
    } catch { /* no previous subnet.env: fine */ }
    this.#attrs = {
      PublicIP: this.#ext.publicIP,
      PublicIPv6: null,
      BackendType: this.#backend.leaseBackendType ?? this.#backend.type,
      BackendData: this.#backend.backendData(),
    };
    this.#lease = await this.#retryStore(
      "acquiring a lease",
      () => this.#store.acquireLease(this.#attrs, { previousSubnet: previous }),
    );
    if (!this.#lease.subnet) {
      throw new ConfigError("Network", "the store returned a lease without IPv4 subnet");
    }
    this.#own = this.#lease.subnet;
    this.#log.info("lease acquired", {
      subnet: this.#own.toString(),
      expires: this.#lease.expiration?.toISOString() ?? "never",
      previous: previous?.toString(),
    });
    this.#reconciler = new Reconciler({
      nl: this.#nl,
      network: cfg.network,
      overlayDev: this.#backend.overlayDev,
      log: this.#log,
      stats: this.metrics,
    });
    this.#reconciler.setOwnSubnet(this.#own);
    this.#ensureDevice();
    this.#writeSubnetEnv();
    this.#rules.setTables(this.#tables());
    await this.#ensureRules();
    const { leases, cursor } = await this.#retryStore("listing leases", () => this.#store.listLeases());
    this.#peers.clear();
    for (const l of leases) this.#remember(l);
    this.#fullPass();
    this.#watchCursor = cursor;
    this.metrics.ready = this.notReady() === null ? 1 : 0;
    this.#log.info("ready", { subnet: this.#own.toString(), peers: this.#reconciler.size });
    this.#notify(`READY=1\nSTATUS=serving ${this.#own} with ${this.#reconciler.size} peers`);
    this.#scheduleRenew();
  }

  #watchCursor = "";

  #tables(): TableRules[] {
    const t: TableRules[] = [];
    if (this.#o.ipMasq) t.push(masqRules(this.#network, this.#own));
    if (this.#o.iptablesForwardRules) t.push(forwardRules(this.#network));
    return t;
  }

  #ensureDevice(): void {
    const changes = this.#backend.ensure(this.#own);
    if (changes.length) {
      this.#log.info("backend device configured", {
        device: this.#backend.overlayDev,
        changes: changes.join(", "),
      });
    }
  }

  #writeSubnetEnv(): void {
    writeSubnetEnv({
      network: this.#network,
      subnet: { ip: this.#own.ip.add(1), net: this.#own },
      mtu: this.#backend.mtu,
      ipMasq: this.#o.ipMasq,
    }, this.#o.subnetFile);
    this.#subnetEnvWritten = true;
    this.#log.info("wrote subnet.env", {
      path: this.#o.subnetFile,
      subnet: `${this.#own.ip.add(1)}/${this.#own.prefix}`,
    });
  }

  async #ensureRules(): Promise<void> {
    if (this.#rules.empty) {
      this.#rulesInPlace = true;
      return;
    }
    this.metrics.ruleChecks++;
    const fixed = await this.#rules.ensure();
    if (fixed.length) {
      this.metrics.ruleResyncs++;
      this.#log.info("iptables rules applied", { tables: fixed.join(",") });
    }
    this.#rulesInPlace = true;
  }

  /** Records a lease from the store; returns the peer key when it is a peer. */
  #remember(l: Lease): string | null {
    if (!l.subnet) return null;
    const key = l.subnet.toString();
    if (l.subnet.equals(this.#own)) return null;
    this.#peers.set(key, {
      subnet: l.subnet,
      publicIP: l.attrs.PublicIP,
      backendType: l.attrs.BackendType,
      backendData: l.attrs.BackendData,
    });
    return key;
  }

  #desired(key: string, p: PeerInfo): DesiredPeer | null {
    let d: DesiredPeer | string;
    if (!this.#network.contains(p.subnet)) d = `its subnet is outside the Network ${this.#network}`;
    else if (p.publicIP === this.#ext.publicIP) d = "it has our own public IP (a stale lease of this node?)";
    else d = this.#backend.peer(p, this.#reconciler.reach);
    if (typeof d === "string") {
      if (this.#skipped.get(key) !== d) {
        this.#skipped.set(key, d);
        this.#log.warn("skipping peer", { subnet: key, public_ip: p.publicIP, reason: d });
      }
      return null;
    }
    this.#skipped.delete(key);
    return d;
  }

  #fullPass(): void {
    const t0 = performance.now();
    const r = this.#reconciler.fullPass(() => {
      const m = new Map<string, DesiredPeer>();
      for (const [k, p] of this.#peers) {
        const d = this.#desired(k, p);
        if (d) m.set(k, d);
      }
      return m;
    });
    this.metrics.peers = this.#reconciler.size;
    this.metrics.leases = this.#peers.size + 1;
    const fields = {
      peers: this.#reconciler.size,
      programmed: r.programmed,
      removed: r.removed,
      errors: r.errors,
      ms: Math.round(performance.now() - t0),
    };
    this.#syncBackendPeers();
    if (r.programmed || r.removed || r.errors) this.#log.info("reconciled", fields);
    else this.#log.debug("reconciled", fields);
  }

  /** Hands the accepted peers to a backend with a userspace data path (udp). */
  #syncBackendPeers(): void {
    if (!this.#backend.syncPeers) return;
    const accepted: PeerInfo[] = [];
    for (const [k, p] of this.#peers) if (this.#reconciler.desired(k)) accepted.push(p);
    this.#backend.syncPeers(accepted);
  }

  /** Applies one batch of store events. */
  applyEvents(events: LeaseEvent[]): void {
    const t0 = performance.now();
    for (const ev of events) {
      this.metrics.events++;
      const l = ev.lease;
      if (!l.subnet) continue;
      const key = l.subnet.toString();
      if (l.subnet.equals(this.#own)) {
        if (ev.type === "removed") this.#onOwnLeaseLost();
        continue;
      }
      if (ev.type === "added") {
        const isNew = !this.#peers.has(key);
        const before = this.#reconciler.desired(key);
        this.#remember(l);
        const d = this.#desired(key, this.#peers.get(key)!);
        const ok = this.#reconciler.setPeer(key, d);
        if (isNew && d) this.#log.info("peer added", { subnet: key, public_ip: l.attrs.PublicIP, ok });
        else if (!isNew && d && before && !samePeer(before, d)) {
          this.#log.info("peer changed", { subnet: key, public_ip: l.attrs.PublicIP, ok });
        }
      } else {
        if (!this.#peers.delete(key)) continue;
        this.#skipped.delete(key);
        this.#reconciler.setPeer(key, null);
        this.#log.info("peer removed", { subnet: key, public_ip: l.attrs.PublicIP });
      }
    }
    this.metrics.peers = this.#reconciler.size;
    this.metrics.leases = this.#peers.size + 1;
    this.#syncBackendPeers();
    this.#log.debug("applied store events", {
      events: events.length,
      ms: Math.round(performance.now() - t0),
    });
  }

  #onOwnLeaseLost(): void {
    if (this.#stop.signal.aborted || this.#reacquiring) return;
    this.#log.warn("our lease disappeared from the store; re-acquiring the same subnet", {
      subnet: this.#own.toString(),
    });
    this.#reacquiring = this.#reacquire().finally(() => (this.#reacquiring = null));
  }

  async #reacquire(): Promise<void> {
    let lease: Lease;
    try {
      lease = await this.#retryStore(
        "re-acquiring our lease",
        () => this.#store.acquireLease(this.#attrs, { previousSubnet: this.#own }),
      );
    } catch (e) {
      if (!this.#stop.signal.aborted) this.#log.error("re-acquiring our lease failed", { error: errText(e) });
      return;
    }
    this.#lease = lease;
    const s = lease.subnet!;
    if (!s.equals(this.#own)) {
      this.#log.warn("our subnet changed (the old one was taken); reconfiguring", {
        old: this.#own.toString(),
        new: s.toString(),
      });
      this.#own = s;
      this.#reconciler.setOwnSubnet(s);
      this.#peers.delete(s.toString());
      this.#reconciler.setPeer(s.toString(), null);
      this.#ensureDevice();
      this.#writeSubnetEnv();
      this.#rules.setTables(this.#tables());
      await this.#ensureRules().catch((e) => this.#log.error("iptables rules failed", { error: errText(e) }));
      this.#fullPass();
    } else {
      this.#log.info("lease re-acquired", { subnet: s.toString() });
    }
    this.#scheduleRenew();
  }

  #scheduleRenew(delayOverride?: number): void {
    clearTimeout(this.#renewTimer);
    const exp = this.#lease.expiration;
    if (!exp || this.#stop.signal.aborted) return;
    const left = exp.getTime() - Date.now();
    let delay = delayOverride ?? left - this.#o.subnetLeaseRenewMargin * 60_000;
    // A TTL shorter than the margin (short test/lab TTLs): renew half-way.
    if (delay <= 0) delay = Math.max(500, left / 2);
    this.#renewTimer = setTimeout(() => this.#renew(), Math.min(delay, 2 ** 31 - 1));
  }

  async #renew(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    try {
      this.#lease = await withTimeout(this.#store.renewLease(this.#lease), 10_000, "renewing the lease");
      this.metrics.leaseRenewals++;
      this.#setStoreUp(true);
      this.#log.info("lease renewed", {
        subnet: this.#own.toString(),
        expires: this.#lease.expiration?.toISOString() ?? "never",
      });
      this.#scheduleRenew();
    } catch (e) {
      this.metrics.leaseRenewalErrors++;
      if (e instanceof LeaseNotFoundError) {
        this.#onOwnLeaseLost();
        return;
      }
      if (e instanceof StoreUnavailableError) this.#setStoreUp(false, errText(e));
      const left = (this.#lease.expiration?.getTime() ?? Date.now()) - Date.now();
      const retry = Math.max(500, Math.min(60_000, left / 4));
      this.#log.warn("renewing the lease failed; retrying", {
        error: errText(e),
        retry_in_ms: Math.round(retry),
      });
      this.#scheduleRenew(retry);
    }
  }

  async #watchLoop(): Promise<void> {
    const signal = this.#stop.signal;
    let cursor = this.#watchCursor;
    while (!signal.aborted) {
      try {
        for await (const batch of this.#store.watchLeases(cursor, signal)) {
          if (signal.aborted) break;
          this.applyEvents(batch);
        }
        if (signal.aborted) break;
        throw new StoreUnavailableError("the watch ended");
      } catch (e) {
        if (signal.aborted) break;
        this.#setStoreUp(false, errText(e));
        await pause(1000, signal);
        try {
          const { leases, cursor: c } = await withTimeout(this.#store.listLeases(), 10_000, "listing leases");
          cursor = c;
          this.#peers.clear();
          for (const l of leases) this.#remember(l);
          if (!leases.some((l) => l.subnet?.equals(this.#own))) this.#onOwnLeaseLost();
          this.#setStoreUp(true);
          this.#fullPass();
        } catch (e2) {
          this.#setStoreUp(false, errText(e2));
        }
      }
    }
  }

  /** Periodic work: device + peer resync, rule check, store probe. No per-peer timers. */
  async #loop(every: number, what: string, fn: () => Promise<void> | void): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      await pause(every, signal);
      if (signal.aborted) break;
      try {
        await fn();
      } catch (e) {
        this.#log.error(`${what} failed`, { error: errText(e) });
      }
    }
  }

  #resync(): void {
    try {
      this.#ensureDevice();
    } catch (e) {
      this.metrics.reconcileErrors++;
      this.#log.error("repairing the backend device failed", { error: errText(e) });
      return;
    }
    this.#fullPass();
  }

  async #probeStore(): Promise<void> {
    try {
      const cfg = await withTimeout(this.#store.getNetworkConfig(), 5_000, "reading the network config");
      this.#setStoreUp(true);
      if (cfg.source.trim() !== this.#cfg.source.trim()) {
        this.#log.warn("the network config in the store changed; restart the daemon to apply it");
        this.#cfg = cfg;
      }
    } catch (e) {
      this.#setStoreUp(false, errText(e));
    }
  }

  /** Serves until {@link stop} is called. */
  async run(): Promise<void> {
    const o = this.#o;
    await Promise.all([
      this.#watchLoop(),
      this.#loop(o.resyncInterval * 1000, "resync", () => this.#resync()),
      this.#loop(o.iptablesResync * 1000, "iptables resync", () => this.#ensureRules()),
      this.#loop(Math.min(o.resyncInterval, 5) * 1000, "store probe", () => this.#probeStore()),
    ]);
    clearTimeout(this.#renewTimer);
    await this.#reacquiring;
    await this.close();
  }

  /** Stops what the backend runs (udp data-path workers); kernel state stays. Safe to call twice. */
  async close(): Promise<void> {
    await this.#backend?.close?.();
  }

  /** Stops serving. Kernel state, rules and the lease are left in place. */
  stop(): void {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort();
    clearTimeout(this.#renewTimer);
  }

  /** True once {@link stop} was called. */
  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }
}
