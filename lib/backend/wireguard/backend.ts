/**
 * The wireguard backend, as flanneld's (pkg/backend/wireguard) in `Mode: separate`: one WireGuard device
 * per address family, `flannel-wg` (IPv4, ListenPort) and `flannel-wg-v6` (IPv6, ListenPortV6), both with
 * the node's one key pair (flanneld's key file, keys.ts). The device holds our subnet's network address
 * (/32, /128), MTU = underlay − 80, a route for the whole Network; each peer node is a WireGuard peer
 * whose AllowedIPs are its subnet and whose Endpoint is its PublicIP (PublicIPv6) and the lease's Port.
 * The lease carries `{"PublicKey": <base64>, "Port": <listen port>}` in BackendData (BackendV6Data).
 *
 * In the one-device modes (`Mode` auto, ipv4, ipv6) flannel-wg carries both families: it listens on
 * ListenPort and holds both our subnets' addresses and both Network routes; each node is one peer with
 * both its subnets as AllowedIPs and the endpoint the mode picks (single.ts). In dual stack the IPv6 plane's
 * backend is a {@link WireguardV6Side} of the IPv4 one: both feed the one device.
 *
 * The device is the kernel's (kernel.ts: the `wireguard` link kind, generic netlink) or wireguard-go's
 * (userspace.ts: a TUN, its UAPI socket), chosen at the first {@link WireguardBackend.ensure} (choose.ts:
 * the kernel first, userspace where the kernel has no WireGuard). Netlink sets the MTU, address, up state
 * and routes, synchronously in `ensure`; the key, port and peers go through the driver, asynchronously,
 * one reconcile at a time, each a `get` then the `set` that makes the device what the leases say
 * ({@link WireguardBackend.settle} waits for it).
 *
 * Where flanctl differs from flanneld: the device is kept across a daemon restart (flanneld deletes it on
 * exit and re-creates it on start, losing the packets in between); each peer subnet also gets a route
 * via the device (so `ip route` shows the peers, as with udp); in the one-device modes BackendV6Data's Port is
 * the port the device listens on (ListenPort), where flanneld writes ListenPortV6 (docs/daemon.md).
 * @module
 */
import { ConfigError } from "../../config/netconf.ts";
import { type IPNet, tryIp } from "../../base/cidr.ts";
import { type NetlinkHandle, RT_TABLE_MAIN } from "../../netlink/mod.ts";
import type { DesiredPeer } from "../../reconcile/types.ts";
import type { Backend, ExternalIface, PeerInfo } from "../types.ts";
import type { Log } from "../../base/log.ts";
import { errText } from "../../base/errors.ts";
import { wgPublicKeyField } from "../../lease/backend_data.ts";
import { keyFilePath, loadOrCreateKey, parseKey, type WgKey } from "./keys.ts";
import { type DeviceSet, type DeviceState, type PeerSet, uapiSocket } from "./uapi.ts";
import { WG_DEVICE, WG_DEVICE_V6, WG_OVERHEAD, type WireguardOptions } from "./options.ts";
import { type KeyedSide, sideOf, singleDevicePeers } from "./single.ts";
import { findWireguardGo, kernelWireguard, UserspaceDriver, WgDeviceError } from "./userspace.ts";
import type { WgDriver, WgWayName } from "./driver.ts";
import { chooseDriver, wantedWay, type WgWayWanted, WIREGUARD_WAY_ENV } from "./choose.ts";
import { kernelGenl, type WgGenl } from "./kernel.ts";

/** What the lease's BackendData (BackendV6Data) holds, as flanneld's wireguardLeaseAttrs. */
export interface WgLeaseData {
  PublicKey: string;
  Port: number;
}

/** What the backend reads from its surroundings (tests pass their own). */
export interface WgEnv {
  /** The key file (default: WIREGUARD_KEY_FILE, else /run/flannel/wgkey). */
  keyFile?: string;
  /** The wireguard-go binary (default: FLANCTL_WIREGUARD_GO, else PATH); null: none. */
  program?: string | null;
  /** The UAPI socket directory (default /var/run/wireguard). */
  socketDir?: string;
  /** Starts the userspace device (default: wireguard-go). */
  start?: (prog: string, dev: string) => void;
  /** The way asked for (default: FLANCTL_WIREGUARD_WAY, else auto: the kernel first). */
  way?: WgWayWanted;
  /** The kernel's generic netlink calls (default: lib/netlink's, in the handle's namespace). */
  genl?: WgGenl;
}

/** The `port` of a peer's backend data: 0 or missing means our own listen port (as flanneld). */
export function leasePort(data: unknown): number | null {
  if (typeof data !== "object" || data === null) return 0;
  let v: unknown = undefined;
  for (const [k, x] of Object.entries(data)) if (k.toLowerCase() === "port") v = x;
  if (v === undefined || v === null) return 0;
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 65535 ? v : null;
}

/** The `PublicKey` of a peer's backend data as flanneld finds it (Go's case-insensitive match), unchecked. */
export const leasePublicKey = wgPublicKeyField;

export { endpointOf } from "./single.ts";

/** How the device is driven (after the first ensure). */
export interface WgWay {
  way: WgWayName;
  /** userspace: the wireguard-go binary; kernel: null. */
  program: string | null;
  /** Why the kernel is not used (its refusal), when the auto choice fell back to userspace; else null. */
  fallback: string | null;
}

/**
 * The wireguard backend of one address family (Mode separate), or of the one device for the families it
 * carries (the other modes; dual stack: with its {@link WireguardV6Side}).
 */
export class WireguardBackend implements Backend {
  readonly type = "wireguard";
  readonly overlayDev: string;
  readonly mtu: number;
  readonly family: 4 | 6;
  readonly port: number;
  readonly socket: string;
  /** One device for both families (Mode auto, ipv4, ipv6). */
  readonly single: boolean;
  /** The families the device carries. */
  readonly families: readonly (4 | 6)[];
  readonly #nl: NetlinkHandle;
  readonly #o: WireguardOptions;
  readonly #network: IPNet;
  readonly #ext: ExternalIface;
  readonly #log: Log | undefined;
  readonly #env: WgEnv;
  #key: WgKey | null = null;
  #way: WgWay | null = null;
  #wanted: WgWayWanted = "auto";
  #driver: WgDriver | null = null;
  #peers: PeerSet[] = [];
  /**
   * The peers the daemon accepted, per family (syncPeers). Until every family the device carries has said,
   * a reconcile sets only the key and port, so a restarted daemon never removes the peers (or a peer's
   * other family) the device still serves.
   */
  #sides = new Map<4 | 6, readonly PeerInfo[]>();
  #twin: WireguardV6Side | null = null;
  /** The reconcile running or queued; its failure (device level) is kept for settle(). */
  #chain: Promise<void> = Promise.resolve();
  #queued = false;
  #failure: Error | null = null;
  /**
   * The next reconcile writes every peer whole (after a start: a new PSK or keepalive reaches all). A peer
   * written with what it already has keeps its session (wireguard-go updates it in place).
   */
  #full = true;
  #uapiErrors = 0;
  #lastPeers = 0;

  constructor(
    nl: NetlinkHandle,
    o: WireguardOptions,
    ext: ExternalIface,
    network: IPNet,
    family: 4 | 6,
    log?: Log,
    env: WgEnv = {},
    /** One-device modes: the families the network has (default: `family`'s only). */
    families: readonly (4 | 6)[] = [family],
  ) {
    this.#nl = nl;
    this.#o = o;
    this.#network = network;
    this.#ext = ext;
    this.#log = log;
    this.#env = env;
    this.family = family;
    this.single = o.mode !== "separate";
    this.families = this.single ? families : [family];
    for (const [mode, f] of [["ipv4", 4], ["ipv6", 6]] as const) {
      if (o.mode === mode && !this.families.includes(f)) {
        throw new ConfigError(
          "Backend.Mode",
          `Backend.Mode "${mode}" needs IPv${f} endpoints, and the network has no IPv${f}: use Mode "auto"`,
        );
      }
    }
    this.overlayDev = this.single || family === 4 ? WG_DEVICE : WG_DEVICE_V6;
    this.port = this.single || family === 4 ? o.listenPort : o.listenPortV6;
    this.socket = uapiSocket(this.overlayDev, env.socketDir);
    this.mtu = (o.mtu || ext.mtu) - WG_OVERHEAD;
    const six = this.families.includes(6);
    if (this.mtu < (six ? 1280 : 576)) {
      throw new ConfigError(
        "Backend.MTU",
        `the WireGuard MTU would be ${this.mtu} (${o.mtu || ext.mtu} − ${WG_OVERHEAD}): too small for IPv${
          six ? 6 : 4
        }`,
      );
    }
  }

  /** Dual stack in a one-device mode: the IPv6 plane's backend, feeding this device (made once). */
  pairV6(network: IPNet): WireguardV6Side {
    if (!this.single || this.family !== 4 || !this.families.includes(6)) {
      throw new Error(`flannel-wg carries IPv6 only in a one-device mode with EnableIPv6 (${this.#o.mode})`);
    }
    this.#twin ??= new WireguardV6Side(this, network);
    return this.#twin;
  }

  /** Our public key (after prepare). */
  get publicKey(): string | null {
    return this.#key?.publicKey ?? null;
  }

  /** How the device is driven (after the first ensure). */
  get way(): WgWay | null {
    return this.#way;
  }

  /**
   * Reads (or makes) the key and reads the way asked for; when it is userspace, finds wireguard-go. No
   * kernel change.
   */
  prepare(): void {
    if (this.#key) return;
    const env = this.#env;
    this.#wanted = env.way ?? wantedWay();
    if (this.#wanted === "userspace") this.#program(`${WIREGUARD_WAY_ENV}=userspace`);
    const path = env.keyFile ?? keyFilePath();
    const { key, made } = loadOrCreateKey(path);
    this.#key = key;
    this.#log?.info(made ? "made a WireGuard key" : "read the WireGuard key", {
      key_file: path,
      public_key: key.publicKey,
      device: this.overlayDev,
    });
  }

  /** The wireguard-go binary, or a ConfigError saying why it is needed (`why`) and how to provide it. */
  #program(why: string): string {
    const program = this.#env.program !== undefined ? this.#env.program : findWireguardGo();
    if (program) return program;
    throw new ConfigError(
      "Backend.Type",
      `the wireguard backend needs wireguard-go here (${why}; the kernel ${
        kernelWireguard() ? "has" : "has no"
      } wireguard module on disk): install it on PATH or set ` +
        "FLANCTL_WIREGUARD_GO=/path/to/wireguard-go (`install.sh --dev` builds one)",
    );
  }

  backendData(): WgLeaseData {
    if (!this.#key) this.prepare();
    return { PublicKey: this.#key!.publicKey, Port: this.port };
  }

  /** Chooses the driver (first call) or has it make the device again when it is gone; returns what changed. */
  #attach(): string[] {
    if (this.#driver) return this.#driver.ensureDevice();
    const chosen = chooseDriver({
      nl: this.#nl,
      dev: this.overlayDev,
      mtu: this.mtu,
      wanted: this.#wanted,
      genl: this.#env.genl ?? kernelGenl(this.#nl.netns),
      userspace: (why) =>
        new UserspaceDriver(
          this.#nl,
          this.overlayDev,
          this.#program(why ?? "its device is wireguard-go's"),
          this.socket,
          this.#env.start,
        ),
    });
    const d = chosen.driver;
    this.#driver = d;
    this.#way = {
      way: d.way,
      program: d instanceof UserspaceDriver ? d.program : null,
      fallback: chosen.fallback,
    };
    this.#log?.info(
      chosen.fallback
        ? `WireGuard falls back to userspace (wireguard-go): ${chosen.fallback}`
        : `the WireGuard device is ${d.way === "kernel" ? "the kernel's" : "wireguard-go's"}`,
      { device: this.overlayDev, way: d.way, ...(this.#way.program ? { program: this.#way.program } : {}) },
    );
    return chosen.changes;
  }

  ensure(own: IPNet): string[] {
    return this.ensureFamily(this.family, own, this.#network);
  }

  /** Makes (or repairs) the device, and family `f`'s address (our subnet `own`) and `network` route on it. */
  ensureFamily(f: 4 | 6, own: IPNet, network: IPNet): string[] {
    if (!this.#key) this.prepare();
    const nl = this.#nl, dev = this.overlayDev;
    const changes = this.#attach();
    if (changes.length) this.#full = true;
    changes.push(...this.#dropOtherLayout());
    const l = nl.link(dev);
    if (!l) throw new WgDeviceError(`${dev} was started but cannot be found`);
    if (l.mtu !== this.mtu) {
      nl.setMtu(dev, this.mtu);
      changes.push(`mtu ${l.mtu}->${this.mtu}`);
    }
    const want = own.ip.toString(), plen = f === 6 ? 128 : 32;
    let have = false;
    for (const a of nl.addrs(f)) {
      if (a.ifname !== dev || (f === 6 && a.local.startsWith("fe80:"))) continue;
      if (a.local === want && a.prefix === plen) have = true;
      else {
        nl.delAddr(dev, `${a.local}/${a.prefix}`);
        changes.push(`removed address ${a.local}/${a.prefix}`);
      }
    }
    if (!have) {
      nl.addAddr(dev, `${want}/${plen}`);
      changes.push(`address ${want}/${plen}`);
    }
    if (!l.up) {
      nl.setUp(dev, true);
      changes.push("up");
    }
    const net = network.toString();
    const hasRoute = nl.routes({ family: f, table: RT_TABLE_MAIN }).some((r) =>
      r.dst === net && r.devName === dev && !r.gateway
    );
    if (!hasRoute) {
      nl.replaceRoute({ dst: net, dev });
      changes.push(`route ${net} dev ${dev}`);
    }
    this.#kick();
    return changes;
  }

  /**
   * Removes what a previous Backend.Mode left: flannel-wg-v6 (device, address, port, peers) in the
   * one-device modes; the addresses of a family the device does not carry (link-local aside), e.g.
   * flannel-wg's IPv6 /128 in Mode separate. Logs what it removed.
   */
  #dropOtherLayout(): string[] {
    const nl = this.#nl, dev = this.overlayDev, out: string[] = [];
    if (this.single && nl.link(WG_DEVICE_V6)) {
      nl.deleteLink(WG_DEVICE_V6);
      out.push(`removed ${WG_DEVICE_V6} (Mode separate's IPv6 device)`);
    }
    for (const f of [4, 6] as const) {
      if (this.families.includes(f)) continue;
      for (const a of nl.addrs(f)) {
        if (a.ifname !== dev || (f === 6 && a.local.startsWith("fe80:"))) continue;
        nl.delAddr(dev, `${a.local}/${a.prefix}`);
        out.push(`removed address ${a.local}/${a.prefix} (IPv${f}: not carried in Mode ${this.#o.mode})`);
      }
    }
    if (out.length) {
      this.#log?.info("removed what another Backend.Mode left", { device: dev, removed: out.join("; ") });
    }
    return out;
  }

  peer(p: PeerInfo): DesiredPeer | string {
    if (p.backendType !== "wireguard") return `its BackendType is "${p.backendType}", ours is "wireguard"`;
    const pk = leasePublicKey(p.backendData);
    if (!parseKey(pk)) return "its PublicKey is not a WireGuard key (base64 of 32 bytes)";
    if (pk === this.#key?.publicKey) return "its PublicKey is ours (a key file copied from this node?)";
    if (leasePort(p.backendData) === null) return "its Port is not 0–65535";
    if (!tryIp(p.publicIP)) return `its PublicIP is not an IP address`;
    return {
      route: { dst: p.subnet.toString(), via: p.subnet.ip.toString(), dev: this.overlayDev, onlink: true },
      neigh: null,
      fdb: null,
    };
  }

  /** One family's accepted peers as WireGuard sides (one per public key: the first lease of a key wins). */
  #keyed(peers: readonly PeerInfo[]): KeyedSide[] {
    const out = new Map<string, KeyedSide>();
    for (const p of peers) {
      if (typeof this.peer(p) === "string") continue;
      const pk = leasePublicKey(p.backendData) as string;
      const have = out.get(pk);
      if (have) {
        this.#log?.warn("two leases carry one WireGuard public key: the second is not a peer", {
          public_key: pk,
          subnet: p.subnet.toString(),
          kept: have.subnet,
        });
        continue;
      }
      out.set(pk, sideOf(p, pk, leasePort(p.backendData) || this.port));
    }
    return [...out.values()];
  }

  /** The WireGuard peers for the accepted leases of every family the device carries. */
  #desired(): PeerSet[] {
    const side = (f: 4 | 6) => this.#keyed(this.#sides.get(f) ?? []);
    if (!this.single) {
      return side(this.family).map((s) => ({
        publicKey: s.publicKey,
        presharedKeyHex: this.#o.pskHex ?? "",
        endpoint: s.endpoint,
        keepalive: this.#o.keepalive,
        allowedIPs: [s.subnet],
      }));
    }
    return singleDevicePeers(side(4), side(6), {
      mode: this.#o.mode as "auto" | "ipv4" | "ipv6",
      our4: this.#ext.publicIP || null,
      our6: this.#ext.publicIPv6 || null,
      pskHex: this.#o.pskHex ?? "",
      keepalive: this.#o.keepalive,
    });
  }

  /** Whether every family the device carries has said which peers it accepted. */
  get #peersKnown(): boolean {
    return this.families.every((f) => this.#sides.has(f));
  }

  /** The peers the daemon accepted (after every change): the device is made to match, asynchronously. */
  syncPeers(peers: readonly PeerInfo[]): void {
    this.syncFamily(this.family, peers);
  }

  /** Family `f`'s accepted peers (the IPv6 side's, in a one-device mode in dual stack). */
  syncFamily(f: 4 | 6, peers: readonly PeerInfo[]): void {
    this.#sides.set(f, [...peers]);
    this.#peers = this.#desired();
    this.#kick();
  }

  /** Queues one reconcile (at most one waits behind the running one: it reads the latest peers). */
  #kick(): void {
    if (this.#queued) return;
    this.#queued = true;
    this.#chain = this.#chain.then(async () => {
      this.#queued = false;
      try {
        await this.#reconcile();
        this.#failure = null;
      } catch (e) {
        this.#uapiErrors++;
        this.#failure = e as Error;
        this.#log?.error("WireGuard device not configured", { device: this.overlayDev, error: errText(e) });
      }
    });
  }

  /** A `get`, then the `set` that makes the device what the key, port and peers say. */
  async #reconcile(): Promise<void> {
    const d = this.#driver!;
    const st = await d.get();
    const set = this.plan(st, this.#full);
    if (set) await d.configure(set);
    if (this.#peersKnown) this.#full = false;
    this.#lastPeers = this.#peers.length;
  }

  /** The `set` that turns device state `st` into the wanted one, or null when it already is (exported for tests). */
  plan(st: DeviceState, full: boolean): DeviceSet | null {
    const key = this.#key!;
    const set: DeviceSet = { peers: [] };
    let any = false;
    if (st.publicKey !== key.publicKey) {
      set.privateKeyHex = key.privateHex();
      any = true;
    }
    if (st.listenPort !== this.port) {
      set.listenPort = this.port;
      any = true;
    }
    if (!this.#peersKnown) return any ? set : null;
    const have = new Map(st.peers.map((p) => [p.publicKey, p]));
    for (const want of this.#peers) {
      const h = have.get(want.publicKey);
      have.delete(want.publicKey);
      if (
        !full && h && h.endpoint === want.endpoint && h.keepalive === want.keepalive &&
        h.presharedKey === !!want.presharedKeyHex &&
        h.allowedIPs.join(",") === want.allowedIPs!.join(",")
      ) continue;
      set.peers!.push(want);
    }
    for (const gone of have.keys()) set.peers!.push({ publicKey: gone, remove: true });
    return any || set.peers!.length ? set : null;
  }

  /** Waits for the queued reconciles; throws the last one's failure (a key or port the device refused). */
  async settle(): Promise<void> {
    await this.#chain;
    if (this.#failure) throw this.#failure;
  }

  metricLines(): string[] {
    const d = `{device="${this.overlayDev}"}`;
    return [
      "# HELP flanctl_wireguard_peers WireGuard peers configured on the device at the last reconcile.",
      "# TYPE flanctl_wireguard_peers gauge",
      `flanctl_wireguard_peers${d} ${this.#lastPeers}`,
      "# HELP flanctl_wireguard_uapi_errors_total Reconciles of the WireGuard device that failed.",
      "# TYPE flanctl_wireguard_uapi_errors_total counter",
      `flanctl_wireguard_uapi_errors_total${d} ${this.#uapiErrors}`,
      "# HELP flanctl_wireguard_userspace 1 when the device is a userspace program's (wireguard-go), " +
      "0 when the kernel's.",
      "# TYPE flanctl_wireguard_userspace gauge",
      `flanctl_wireguard_userspace${d} ${this.#way?.way === "userspace" ? 1 : 0}`,
    ];
  }

  /** Waits for the reconcile in flight; the device (and wireguard-go) keep running. */
  async close(): Promise<void> {
    await this.#chain;
    this.#driver?.close();
  }
}

/**
 * The IPv6 plane's backend in a one-device mode in dual stack: flannel-wg's IPv6 side. Its address, route and
 * peers go to the IPv4 backend's device; the lease's BackendV6Data is that device's key and listen port.
 */
export class WireguardV6Side implements Backend {
  readonly type = "wireguard";
  readonly family = 6;
  readonly overlayDev: string;
  readonly mtu: number;
  readonly device: WireguardBackend;
  readonly #network: IPNet;

  constructor(device: WireguardBackend, network: IPNet) {
    this.device = device;
    this.#network = network;
    this.overlayDev = device.overlayDev;
    this.mtu = device.mtu;
  }

  prepare(): void {
    this.device.prepare();
  }

  /**
   * `{"PublicKey", "Port"}` with the port the device listens on (ListenPort). flanneld writes ListenPortV6
   * here although its one device listens on ListenPort (docs/daemon.md, the differences).
   */
  backendData(): WgLeaseData {
    return this.device.backendData();
  }

  ensure(own: IPNet): string[] {
    return this.device.ensureFamily(6, own, this.#network);
  }

  peer(p: PeerInfo): DesiredPeer | string {
    return this.device.peer(p);
  }

  syncPeers(peers: readonly PeerInfo[]): void {
    this.device.syncFamily(6, peers);
  }

  settle(): Promise<void> {
    return this.device.settle();
  }
}
