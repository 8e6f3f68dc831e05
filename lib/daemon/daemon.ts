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
import { StoreUnavailableError } from "../store/errors.ts";
import { retryableStoreError } from "../store/classify.ts";
import { LeaseKeeper } from "../store/keeper.ts";
import type { Lease, LeaseAttrsWire, LeaseEvent, SubnetStore } from "../store/types.ts";
import { readSubnetEnv, writeSubnetEnv } from "../subnet_env.ts";
import { createBackend } from "../backend/mod.ts";
import type { Backend, ExternalIface, PeerInfo } from "../backend/types.ts";
import { Reconciler } from "../reconcile/reconciler.ts";
import { type DesiredPeer, samePeer } from "../reconcile/types.ts";
import { FlannelRules, type FlannelRuleSpec } from "../firewall/flannel.ts";
import type { Runner } from "../firewall/types.ts";
import { selectExternal } from "./iface6.ts";
import { FamilyPlane, peerView, subnetOf } from "./family.ts";
import { supportsRandomFully } from "../firewall/iptables.ts";
import { checkBrNetfilter } from "./preflight.ts";
import type { Logger } from "./log.ts";
import { Metrics } from "./metrics.ts";
import type { DaemonOptions } from "./options.ts";

/** Exit code of a daemon whose own lease was revoked in the store. */
export const REVOKED_EXIT_CODE = 3;

/** What the daemon runs against (injected so tests and benchmarks can substitute parts). */
export interface DaemonDeps {
  nl: NetlinkHandle;
  store: SubnetStore;
  log: Logger;
  /** systemd notification (READY=1, STOPPING=1, STATUS=…). */
  notify?: (state: string) => void;
  /** Runs iptables-save/iptables-restore (and nft, where libnftables is missing). */
  runIptables?: Runner;
  /**
   * Gives free C heap memory back to the kernel (run.ts: glibc malloc_trim through lib/netlink); called
   * {@link TRIM_DELAY_MS} after the last of a burst of store events or full passes.
   */
  releaseMemory?: () => void;
  /**
   * A full JS garbage collection (run.ts: V8's `gc`, present when the launcher passes --expose-gc), run
   * before releaseMemory the first time (start-up's garbage) and after big bursts: {@link GC_MIN_EVENTS}
   * store events, or a full pass over {@link GC_MIN_PEERS} peers.
   */
  collectGarbage?: () => void;
  /** V8 runs with --jitless (run.ts: from FLANCTL_DAEMON_V8_FLAGS, which install.sh's launcher sets). */
  jitless?: boolean;
}

/** Store events since the last release that make it collect garbage first (DaemonDeps.collectGarbage). */
export const GC_MIN_EVENTS = 500;
/** Peers from which every full pass is followed by a garbage collection (DaemonDeps.collectGarbage). */
export const GC_MIN_PEERS = 1000;

/** How long after the last burst of work the daemon gives free heap memory back (DaemonDeps.releaseMemory). */
export const TRIM_DELAY_MS = 1000;
/** A release asked for is not put off longer than this by further work. */
export const TRIM_MAX_WAIT_MS = 5000;

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
  readonly #releaseMemory?: () => void;
  readonly #collectGarbage?: () => void;
  readonly #jitless: boolean;
  /** A full GC before the next release: true at first (start-up's garbage), then after big bursts. */
  #gcDue = true;
  #eventsSinceTrim = 0;
  #trimTimer: ReturnType<typeof setTimeout> | null = null;
  /** When the pending release was first asked for (performance.now()). */
  #trimFirst = 0;
  readonly #stop = new AbortController();
  #ext!: ExternalIface;
  #cfg!: NetConfig;
  #network!: IPNet;
  #backend!: Backend;
  #reconciler!: Reconciler;
  #rules!: FlannelRules;
  #lease!: Lease;
  #own!: IPNet;
  #attrs!: LeaseAttrsWire;
  /** The family of #network/#own/#backend/#reconciler: 4, or 6 in an IPv6-only network. */
  #family: 4 | 6 = 4;
  /** The IPv6 half of a dual-stack node (device, peers, reconciler), else null. */
  #v6: FamilyPlane | null = null;
  /** Peers by subnet text. */
  readonly #peers = new Map<string, PeerInfo>();
  /** Why a peer is skipped (logged once per reason). */
  readonly #skipped = new Map<string, string>();
  #subnetEnvWritten = false;
  #rulesInPlace = false;
  /** Renews and re-acquires the lease (after start). */
  #keeper: LeaseKeeper | null = null;
  #storeOk = true;
  /** MASQUERADE with --random-fully (not disabled and iptables supports it). */
  #randomFully = true;

  constructor(o: DaemonOptions, deps: DaemonDeps) {
    this.#o = o;
    this.#nl = deps.nl;
    this.#store = deps.store;
    this.#log = deps.log;
    this.#notify = deps.notify ?? (() => {});
    this.#runIptables = deps.runIptables;
    this.#releaseMemory = deps.releaseMemory;
    this.#collectGarbage = deps.collectGarbage;
    this.#jitless = deps.jitless ?? false;
  }

  /**
   * Schedules {@link DaemonDeps.releaseMemory} {@link TRIM_DELAY_MS} after the last of a burst of work (at
   * most {@link TRIM_MAX_WAIT_MS} after the first; never after stop). The memory a burst freed is otherwise kept by malloc as resident pages: measured with the
   * bundled daemon on etcd (bench/daemon_bench.ts) RSS at 1,000 peers fell from ~62 to ~54 MiB with it.
   */
  #trimSoon(): void {
    if (!this.#releaseMemory || this.#stop.signal.aborted) return;
    // Debounced (never in the middle of a burst of events), but not put off for more than TRIM_MAX_WAIT_MS.
    const now = performance.now();
    if (this.#trimTimer !== null) {
      if (now - this.#trimFirst >= TRIM_MAX_WAIT_MS) return;
      clearTimeout(this.#trimTimer);
    } else this.#trimFirst = now;
    const t = setTimeout(() => {
      this.#trimTimer = null;
      if (this.#stop.signal.aborted) return;
      const t0 = performance.now();
      const gc = this.#gcDue ? this.#collectGarbage : undefined;
      this.#gcDue = false;
      this.#eventsSinceTrim = 0;
      try {
        gc?.();
        this.#releaseMemory!();
      } catch (e) {
        this.#log.debug("releasing free memory failed", { error: errText(e) });
      }
      this.#log.debug("released free memory", { gc: !!gc, ms: Math.round(performance.now() - t0) });
    }, TRIM_DELAY_MS);
    Deno.unrefTimer(t as unknown as number);
    this.#trimTimer = t;
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
    if (!this.#rulesInPlace) return `${this.#rules?.mode ?? "iptables"} rules not in place yet`;
    if (!this.#storeOk) return "the lease store is unreachable";
    return this.#keeper?.whyInvalid() ?? null;
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

  /**
   * Retries `fn` while the store is unavailable, has no config yet, or refuses (EPERM/EROFS/ENOSPC, etcd
   * auth or quota), as flanneld retries at start; a bad config and other errors propagate.
   */
  async #retryStore<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let delay = 500;
    while (true) {
      try {
        const r = await fn();
        this.#setStoreUp(true);
        return r;
      } catch (e) {
        const retryable = retryableStoreError(e);
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
   * Startup, up to readiness. Throws (ConfigError, IfaceError, FirewallError, …) on a fatal problem;
   * everything that can fail on bad input is checked before the first kernel change.
   */
  async start(): Promise<void> {
    let o = this.#o;
    // kube: the node's node-public-ip annotation acts as --public-ip (flanneld's GetStoredPublicIP).
    const stored = this.#store.storedPublicIP
      ? await this.#retryStore("reading our node's annotations", () => this.#store.storedPublicIP!())
      : null;
    if (stored?.publicIP) {
      this.#log.info("public IP from our node's node-public-ip annotation", { public_ip: stored.publicIP });
      o = { ...o, publicIP: stored.publicIP };
    }
    // The network config decides the families, and so how the interface is chosen (IPv6: iface6.ts).
    this.#cfg = await this.#retryStore("reading the network config", () => this.#store.getNetworkConfig());
    const cfg = this.#cfg;
    this.#ext = selectExternal(this.#nl, o, { v4: cfg.enableIPv4, v6: cfg.enableIPv6 });
    this.#log.info("using interface", {
      iface: this.#ext.name,
      iface_ip: this.#ext.ifaceIP || undefined,
      public_ip: cfg.enableIPv4 ? this.#ext.publicIP : undefined,
      iface_ipv6: this.#ext.ifaceIPv6 ?? undefined,
      public_ipv6: this.#ext.publicIPv6 ?? undefined,
      mtu: this.#ext.mtu,
    });
    this.#family = cfg.enableIPv4 ? 4 : 6;
    const network = this.#family === 4 ? cfg.network : cfg.ipv6Network;
    if (!network) {
      throw new ConfigError("Network", "the network config has no Network for the enabled family");
    }
    checkBrNetfilter(cfg);
    this.#network = network;
    // kube: our own published backend-data (IPv6: backend-v6-data) keeps the VTEP MAC when the state file
    // is gone (as flanneld).
    const storedOf = (family: 4 | 6) =>
      this.#store.storedBackendData
        ? this.#retryStore(
          `reading our node's backend data (IPv${family})`,
          () => this.#store.storedBackendData!(family),
        )
        : Promise.resolve(null);
    const storedData = await storedOf(this.#family);
    this.#backend = createBackend(this.#nl, cfg, this.#ext, o.stateDir, {
      vxlanTxChecksumOffload: o.vxlanTxChecksumOffload,
      family: this.#family,
      storedBackendData: storedData,
      log: this.#log,
    });
    const lines = this.#backend.metricLines?.bind(this.#backend);
    if (lines) this.metrics.sources.push(lines);
    this.#backend.prepare();
    if (cfg.enableIPv4 && cfg.enableIPv6) {
      const b6 = createBackend(this.#nl, cfg, this.#ext, o.stateDir, {
        vxlanTxChecksumOffload: o.vxlanTxChecksumOffload,
        family: 6,
        storedBackendData: await storedOf(6),
      });
      b6.prepare();
      this.#v6 = new FamilyPlane({
        nl: this.#nl,
        family: 6,
        network: cfg.ipv6Network!,
        backend: b6,
        ownPublicIP: this.#ext.publicIPv6 ?? "",
        log: this.#log,
        stats: this.metrics,
      });
    }
    this.#log.info("network config", {
      network: cfg.network?.toString(),
      ipv6_network: cfg.ipv6Network?.toString(),
      subnet_len: cfg.enableIPv4 ? cfg.subnetLen : cfg.ipv6SubnetLen,
      backend: this.#backend.type,
      device: this.#backend.overlayDev,
      mtu: this.#backend.mtu,
    });
    if (this.#jitless && this.#backend.type === "udp") {
      // Measured (bench/udp_bench.ts): pod-to-pod 0.26 against 0.50 Gbit/s, ping 5.6 against 1.2 ms.
      this.#log.warn(
        "the udp backend's data path runs in JavaScript, and V8 runs with --jitless (the launcher's default, " +
          "for memory): about half the throughput and ~4 ms more latency; set FLANCTL_DAEMON_V8_FLAGS=" +
          "--max-semi-space-size=1,--expose-gc to run it with the JIT",
      );
    }
    this.#rules = new FlannelRules(cfg.enableNFTables ? "nftables" : "iptables", {
      run: this.#runIptables,
      log: this.#log,
    });
    // Network-only rules to probe the tools (no subnet is ours yet).
    this.#rules.set({ ...this.#ruleSpec(true), subnet: null, ipv6Subnet: null });
    await this.#rules.probe();
    await this.#cleanupOtherMode();
    if (o.ipMasq && !cfg.enableNFTables) {
      // As flanneld: MASQUERADE --random-fully unless disabled or iptables lacks it (older than 1.6.2).
      this.#randomFully = !o.ipMasqFullyRandomDisable && await supportsRandomFully(this.#runIptables);
      if (!o.ipMasqFullyRandomDisable && !this.#randomFully) {
        this.#log.warn(
          "iptables has no MASQUERADE --random-fully (older than 1.6.2): masquerading without it",
        );
      }
    } else this.#randomFully = !o.ipMasqFullyRandomDisable;
    let previous: IPNet | null = null;
    let previous6: IPNet | null = null;
    try {
      const env = readSubnetEnv(o.subnetFile);
      if (env.subnet && cfg.network?.contains(env.subnet.net)) previous = env.subnet.net;
      if (env.ipv6Subnet && cfg.ipv6Network?.contains(env.ipv6Subnet.net)) previous6 = env.ipv6Subnet.net;
    } catch { /* no previous subnet.env: fine */ }
    // As flanneld's vxlan newSubnetAttrs: BackendData with IPv4, BackendV6Data with IPv6 (each omitted
    // when its family is off), PublicIP 0.0.0.0 in an IPv6-only network.
    const data4 = cfg.enableIPv4 ? this.#backend.backendData() : undefined;
    const data6 = this.#v6
      ? this.#v6.backend.backendData()
      : this.#family === 6
      ? this.#backend.backendData()
      : undefined;
    this.#attrs = {
      PublicIP: cfg.enableIPv4 ? this.#ext.publicIP : "0.0.0.0",
      PublicIPv6: cfg.enableIPv6 ? this.#ext.publicIPv6 ?? null : null,
      BackendType: this.#backend.leaseBackendType ?? this.#backend.type,
      ...(data4 !== undefined && data4 !== null ? { BackendData: data4 } : {}),
      ...(data6 !== undefined && data6 !== null ? { BackendV6Data: data6 } : {}),
    };
    this.#lease = await this.#retryStore(
      "acquiring a lease",
      () =>
        this.#store.acquireLease(this.#attrs, { previousSubnet: previous, previousIPv6Subnet: previous6 }),
    );
    const own = subnetOf(this.#lease, this.#family);
    if (!own || (cfg.enableIPv6 && !this.#lease.ipv6Subnet)) {
      throw new ConfigError(
        cfg.enableIPv6 ? "IPv6Network" : "Network",
        `the store returned a lease without an ${own ? "IPv6" : `IPv${this.#family}`} subnet`,
      );
    }
    this.#own = own;
    this.#v6?.setOwn(this.#lease.ipv6Subnet!);
    this.#log.info("lease acquired", {
      subnet: this.#own.toString(),
      ipv6_subnet: this.#v6 ? this.#v6.own.toString() : undefined,
      expires: this.#lease.expiration?.toISOString() ?? "never",
      previous: previous?.toString(),
    });
    this.#reconciler = new Reconciler({
      nl: this.#nl,
      network: this.#network,
      overlayDev: this.#backend.overlayDev,
      log: this.#log,
      stats: this.metrics,
    });
    this.#reconciler.setOwnSubnet(this.#own);
    this.#ensureDevice();
    this.#writeSubnetEnv();
    this.#rules.set(this.#ruleSpec());
    await this.#ensureRules();
    // Device, subnet.env and rules are in place: now (not at acquire) tell the cluster the network is up.
    if (this.#store.completeLease && o.setNodeNetworkUnavailable) {
      await this.#retryStore("setting NetworkUnavailable=False", () => this.#store.completeLease!());
      this.#log.info("node condition NetworkUnavailable=False (FlannelIsUp)");
    }
    const { leases, cursor } = await this.#retryStore("listing leases", () => this.#store.listLeases());
    this.#peers.clear();
    for (const l of leases) this.#remember(l);
    this.#v6?.reset(leases);
    this.#fullPass();
    this.#watchCursor = cursor;
    this.metrics.ready = this.notReady() === null ? 1 : 0;
    this.#log.info("ready", { subnet: this.#own.toString(), peers: this.#reconciler.size });
    this.#notify(`READY=1\nSTATUS=serving ${this.#own} with ${this.#reconciler.size} peers`);
    this.#keeper = this.#newKeeper();
  }

  /** The renewal policy (lib/store/keeper.ts); its callbacks keep metrics, logs and readiness current. */
  #newKeeper(): LeaseKeeper {
    const ready = () => (this.metrics.ready = this.notReady() === null ? 1 : 0);
    return new LeaseKeeper(this.#store, this.#lease, this.#attrs, {
      signal: this.#stop.signal,
      renewMarginMs: this.#o.subnetLeaseRenewMargin * 60_000,
      onRenewed: (l) => {
        this.#lease = l;
        this.metrics.leaseRenewals++;
        this.#log.info("lease renewed", {
          subnet: this.#own.toString(),
          expires: l.expiration?.toISOString() ?? "never",
        });
      },
      onLost: (why) => {
        this.#log.warn("our lease is gone; re-acquiring the same subnet", {
          subnet: this.#own.toString(),
          reason: why,
        });
        ready();
      },
      onAcquired: (l) => this.#onReacquired(l),
      onError: (what, e) => {
        if (what.startsWith("renewing")) this.metrics.leaseRenewalErrors++;
        if (e instanceof StoreUnavailableError) this.#setStoreUp(false, errText(e));
      },
      onProblem: (what, cause) => {
        if (cause === null) this.#log.info(`${what} works again`, { subnet: this.#own.toString() });
        else this.#log.warn(`${what} failed; retrying with backoff`, { subnet: this.#own.toString(), cause });
      },
      onValidity: (valid) => {
        if (!valid) this.#log.warn("no valid lease: not ready", { reason: this.#keeper?.whyInvalid() });
        else this.#log.info("lease valid again", { subnet: this.#own.toString() });
        ready();
      },
    });
  }

  #watchCursor = "";

  /** flannel's rules for both families: IPv4 from Network/our subnet, IPv6 from IPv6Network/our IPv6 subnet. */
  #ruleSpec(beforeLease = false): FlannelRuleSpec {
    const v4 = this.#family === 4;
    const own6 = beforeLease ? null : this.#v6 ? this.#v6.own : v4 ? null : this.#own ?? null;
    return {
      ipMasq: this.#o.ipMasq,
      forward: this.#o.iptablesForwardRules,
      network: v4 ? this.#network : null,
      subnet: v4 ? this.#own ?? null : null,
      ipv6Network: this.#cfg.enableIPv6 ? this.#cfg.ipv6Network ?? null : null,
      ipv6Subnet: own6,
      randomFully: this.#randomFully,
    };
  }

  /** As flanneld: starting in one mode removes the other mode's flannel rules (failures only logged). */
  async #cleanupOtherMode(): Promise<void> {
    try {
      const removed = await this.#rules.cleanupOtherMode();
      if (removed.length) {
        this.#log.info("removed the other mode's flannel rules", {
          mode: this.#rules.mode,
          removed: removed.join(","),
        });
      }
    } catch (e) {
      this.#log.warn("could not remove the other mode's flannel rules", { error: errText(e) });
    }
  }

  #ensureDevice(): void {
    const changes = this.#backend.ensure(this.#own);
    if (changes.length) {
      this.#log.info("backend device configured", {
        device: this.#backend.overlayDev,
        changes: changes.join(", "),
      });
    }
    const c6 = this.#v6?.ensureDevice() ?? [];
    if (c6.length) {
      this.#log.info("backend device configured", {
        device: this.#v6!.backend.overlayDev,
        changes: c6.join(", "),
      });
    }
  }

  /** FLANNEL_MTU: the smallest of the devices' MTUs (the IPv6 VXLAN device carries 20 bytes more). */
  #mtu(): number {
    return Math.min(this.#backend.mtu, this.#v6?.backend.mtu ?? Infinity);
  }

  #writeSubnetEnv(): void {
    const own6 = this.#v6 ? this.#v6.own : this.#family === 6 ? this.#own : null;
    const v4 = this.#family === 4;
    writeSubnetEnv({
      network: v4 ? this.#network : undefined,
      subnet: v4 ? { ip: this.#own.ip.add(1), net: this.#own } : undefined,
      ipv6Network: own6 ? this.#cfg.ipv6Network! : undefined,
      ipv6Subnet: own6 ? { ip: own6.ip.add(1), net: own6 } : undefined,
      mtu: this.#mtu(),
      ipMasq: this.#o.ipMasq,
    }, this.#o.subnetFile);
    this.#subnetEnvWritten = true;
    this.#log.info("wrote subnet.env", {
      path: this.#o.subnetFile,
      subnet: v4 ? `${this.#own.ip.add(1)}/${this.#own.prefix}` : undefined,
      ipv6_subnet: own6 ? `${own6.ip.add(1)}/${own6.prefix}` : undefined,
    });
  }

  /** `--ip-blackhole-route`: a blackhole route for our own subnet (as flanneld, re-checked with the rules). */
  #ensureBlackhole(): void {
    if (!this.#o.ipBlackholeRoute) return;
    const dst = this.#own.toString();
    if (this.#nl.routes({ family: 4, table: 254 }).some((r) => r.type === "blackhole" && r.dst === dst)) {
      return;
    }
    this.#nl.replaceRoute({ dst, type: "blackhole" });
    this.#log.info("blackhole route added", { subnet: dst });
  }

  async #ensureRules(): Promise<void> {
    this.#ensureBlackhole();
    if (this.#rules.empty) {
      this.#rulesInPlace = true;
      return;
    }
    this.metrics.ruleChecks++;
    const fixed = await this.#rules.ensure();
    if (fixed.length) {
      this.metrics.ruleResyncs++;
      this.#log.info(`${this.#rules.mode} rules applied`, { tables: fixed.join(",") });
    }
    this.#rulesInPlace = true;
  }

  /** Records a lease from the store; returns the peer key when it is a peer. */
  #remember(l: Lease): string | null {
    const p = peerView(l, this.#family);
    if (!p) return null;
    const key = p.subnet.toString();
    if (p.subnet.equals(this.#own)) return null;
    this.#peers.set(key, p);
    return key;
  }

  #desired(key: string, p: PeerInfo): DesiredPeer | null {
    let d: DesiredPeer | string;
    if (!this.#network.contains(p.subnet)) d = `its subnet is outside the Network ${this.#network}`;
    else if (p.publicIP === (this.#family === 4 ? this.#ext.publicIP : this.#ext.publicIPv6)) {
      d = "it has our own public IP (a stale lease of this node?)";
    } else d = this.#backend.peer(p, this.#reconciler.reach);
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
    if (this.#reconciler.size >= GC_MIN_PEERS) this.#gcDue = true;
    this.#trimSoon();
    if (r.programmed || r.removed || r.errors) this.#log.info("reconciled", fields);
    else this.#log.debug("reconciled", fields);
    if (!this.#v6) return;
    const r6 = this.#v6.fullPass();
    const f6 = {
      family: "ipv6",
      peers: this.#v6.size,
      programmed: r6.programmed,
      removed: r6.removed,
      errors: r6.errors,
    };
    if (r6.programmed || r6.removed || r6.errors) this.#log.info("reconciled", f6);
    else this.#log.debug("reconciled", f6);
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
      this.#v6?.apply(ev); // the IPv6 half of a dual-stack node (skips our own IPv6 subnet itself)
      const sn = subnetOf(l, this.#family);
      if (!sn) continue;
      const key = sn.toString();
      if (sn.equals(this.#own)) {
        if (ev.type === "removed") this.#onOwnLeaseGone(l);
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
    this.#eventsSinceTrim += events.length;
    if (this.#eventsSinceTrim >= GC_MIN_EVENTS) this.#gcDue = true;
    this.#trimSoon();
    this.#log.debug("applied store events", {
      events: events.length,
      ms: Math.round(performance.now() - t0),
    });
  }

  /**
   * Exit code for the process: 0, or {@link REVOKED_EXIT_CODE} once our lease was deleted in the store.
   * As flanneld ("Lease has been revoked. Shutting down daemon."), the daemon then stops so its supervisor
   * restarts it and it acquires anew: `flanctl lease revoke` really takes the subnet away (kernel state and
   * rules stay in place, as on any stop).
   */
  exitCode = 0;

  /**
   * Our lease left the store (`removed` from the watch, or missing from a re-list). Removed before its expiry
   * (revoked with `flanctl lease revoke`, etcdctl del, …): exit as flanneld does. Expired (our renewals
   * failed, e.g. the store refused writes): the keeper re-acquires it.
   */
  #onOwnLeaseGone(removed?: Lease): void {
    if (this.#stop.signal.aborted) return;
    const exp = (removed ?? this.#lease)?.expiration;
    const expired = exp !== null && exp !== undefined && exp.getTime() <= Date.now();
    if (expired) {
      this.#keeper?.lost("it expired");
      return;
    }
    this.#log.error("lease has been revoked: shutting down so the supervisor restarts the daemon", {
      subnet: this.#own.toString(),
    });
    this.exitCode = REVOKED_EXIT_CODE;
    this.#notify("STOPPING=1\nSTATUS=lease revoked");
    this.stop();
  }

  /** After our subnet (either family) changed: device, subnet.env, rules and a full pass for the new one. */
  async #reconfigure(): Promise<void> {
    this.#ensureDevice();
    this.#writeSubnetEnv();
    this.#rules.set(this.#ruleSpec());
    await this.#ensureRules().catch((e) =>
      this.#log.error(`${this.#rules.mode} rules failed`, { error: errText(e) })
    );
    this.#fullPass();
  }

  /** Applies a lease acquired again after it was lost (the same subnet, or a new one if it was taken). */
  async #onReacquired(lease: Lease): Promise<void> {
    this.#lease = lease;
    const s = subnetOf(lease, this.#family);
    if (!s) {
      throw new ConfigError("Network", `the store returned a lease without an IPv${this.#family} subnet`);
    }
    const s6 = this.#v6 ? lease.ipv6Subnet : null;
    if (s6 && !s6.equals(this.#v6!.own)) {
      this.#log.warn("our IPv6 subnet changed (the old one was taken); reconfiguring", {
        old: this.#v6!.own.toString(),
        new: s6.toString(),
      });
      this.#v6!.setOwn(s6);
      if (s.equals(this.#own)) await this.#reconfigure();
    }
    if (!s.equals(this.#own)) {
      this.#log.warn("our subnet changed (the old one was taken); reconfiguring", {
        old: this.#own.toString(),
        new: s.toString(),
      });
      this.#own = s;
      this.#reconciler.setOwnSubnet(s);
      this.#peers.delete(s.toString());
      this.#reconciler.setPeer(s.toString(), null);
      await this.#reconfigure();
    } else {
      this.#log.info("lease re-acquired", { subnet: s.toString() });
    }
    this.metrics.ready = this.notReady() === null ? 1 : 0;
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
          this.#v6?.reset(leases);
          if (!leases.some((l) => subnetOf(l, this.#family)?.equals(this.#own))) this.#onOwnLeaseGone();
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
      this.#keeper?.run(),
    ]);
  }

  /** Stops what the backend runs (udp data-path workers); kernel state stays. Safe to call twice. */
  async close(): Promise<void> {
    await this.#backend?.close?.();
  }

  /** Stops serving. Kernel state, rules and the lease are left in place. */
  stop(): void {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort();
    if (this.#trimTimer !== null) clearTimeout(this.#trimTimer);
    this.#trimTimer = null;
  }

  /** True once {@link stop} was called. */
  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }
}
