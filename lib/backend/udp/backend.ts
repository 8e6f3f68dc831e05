/**
 * The UDP backend, wire-compatible with flannel's (backend/udp of flannel ≤ v0.21): a TUN device
 * `flannel0` (IFF_TUN | IFF_NO_PI) with our subnet's network address /32, MTU = underlay MTU − 28, one
 * route for the whole Network via flannel0, and userspace encapsulation: each IP packet read from flannel0
 * is sent unchanged as the payload of a UDP datagram to the peer's PublicIP:Port (Port default 8285, the
 * same on every node, as flannel); datagrams received from peers are written back to flannel0.
 *
 * Speed (each switchable, for benches: FLANCTL_UDP_OFFLOAD, FLANCTL_UDP_COALESCE, FLANCTL_UDP_GRO,
 * FLANCTL_UDP_BATCH): flannel0 is opened with IFF_VNET_HDR + TUNSETOFFLOAD (a plain
 * TUN, warned once, where the kernel refuses), so the kernel hands over 64 KiB TCP super-packets that the
 * transmit worker cuts into ordinary MSS-sized IP packets (the wire stays flannel's) and sends with UDP GSO;
 * the socket reads with UDP_GRO and the receive worker merges the segments of a flow back into GSO
 * super-packets written to flannel0 (gso.ts). The offloads are cleared when the daemon closes.
 * While traffic is light the receive worker is flannel0's reader too (FLANCTL_UDP_STEAL, on by default):
 * it sends the replies its own writes made the kernel queue, so a round trip wakes no transmit worker
 * (udp_worker.ts). Before it serves, the receive worker is warmed up on loopback stand-ins so that
 * V8 has compiled its loop for a round trip's paths (udp_warmup.ts; FLANCTL_UDP_WARMUP, on by
 * default). FLANCTL_UDP_CPU pins both workers to one CPU (off by default).
 *
 * Deliberate differences from flanneld, each documented in docs/udp.md: the data path runs in two workers
 * with blocking syscalls (not a single poll loop); datagrams from addresses holding no lease, packets
 * whose inner source is outside the sender's subnets or whose destination is not our subnet are dropped
 * and counted (flannel forwards them); the device is persistent (IFF_PERSIST) so its address and routes
 * survive a daemon restart and a restart costs only the packets of the gap, not a route flap; each peer
 * subnet also gets a route via flannel0 (so `ip route` shows the peers; the Network route catches
 * the rest, which the data path drops and counts).
 *
 * The lease is written as flannel's udp backend writes it: `{"PublicIP":…,"PublicIPv6":null}` — no
 * BackendType, no BackendData. Peers with BackendType "" or "udp" are accepted.
 * @module
 */
import { ConfigError } from "../../config/netconf.ts";
import type { IPNet } from "../../base/cidr.ts";
import { NetlinkError, type NetlinkHandle, RT_TABLE_MAIN } from "../../netlink/mod.ts";
import {
  bindUdp,
  closeFdQuiet,
  EADDRINUSE,
  openTun,
  openTunOffloaded,
  probeUdpSegment,
  setTunOffload,
  setTunPersist,
  setTxQueueLen,
  setUdpGro,
  type UdpCounters,
  UdpDataplane,
} from "./dataplane.ts";
import type { DesiredPeer } from "../../reconcile/types.ts";
import { UDP_DEVICE, type UdpOptions } from "../config.ts";
import type { Backend, ExternalIface, PeerInfo } from "../types.ts";
import type { Log } from "../../base/log.ts";
import { errText } from "../../base/errors.ts";
import { EBUSY } from "../../sys/consts.ts";

/** Encapsulation overhead: outer IPv4 header 20 + UDP header 8. */
export const UDP_OVERHEAD = 28;
/** flannel's UDP port. */
export const DEFAULT_UDP_PORT = 8285;

/**
 * flannel0's queue: the kernel drops once this many packets wait for the TX worker. 500 (the default) made
 * TCP retransmit thousands of segments per second on a loaded machine (`ip -s link` TX dropped); 5000 none.
 */
export const UDP_TXQUEUELEN = 5000;
/** Datagrams per recvmmsg/sendmmsg call unless FLANCTL_UDP_BATCH says otherwise (1 = recvfrom/sendto). */
export const DEFAULT_UDP_BATCH = 32;

/** FLANCTL_UDP_BATCH (1–1024), a tuning knob for benchmarks; the default otherwise. */
function batchFromEnv(): number {
  const v = Number(Deno.env.get("FLANCTL_UDP_BATCH") ?? DEFAULT_UDP_BATCH);
  return Number.isInteger(v) && v >= 1 && v <= 1024 ? v : DEFAULT_UDP_BATCH;
}

/**
 * Nice value of the data-path worker threads unless FLANCTL_UDP_NICE says otherwise (0 = unchanged):
 * -10 was measured (`deno task bench udp`, variant "nice -10") with no clear gain, so it is not the default.
 */
const DEFAULT_UDP_NICE = 0;

/** FLANCTL_UDP_NICE (-20–19), the workers' nice value; the default otherwise. */
function niceFromEnv(): number {
  const v = Number(Deno.env.get("FLANCTL_UDP_NICE") ?? DEFAULT_UDP_NICE);
  return Number.isInteger(v) && v >= -20 && v <= 19 ? v : DEFAULT_UDP_NICE;
}

/**
 * FLANCTL_UDP_CPU (0–1023): the CPU both data-path worker threads are pinned to; unset or out of range:
 * not pinned (the default: the scheduler places them). A tuning knob measured by `deno task bench udp`.
 */
function cpuFromEnv(): number {
  const s = Deno.env.get("FLANCTL_UDP_CPU");
  const v = Number(s);
  return s !== undefined && s !== "" && Number.isInteger(v) && v >= 0 && v < 1024 ? v : -1;
}

/** An on/off switch from the environment (`0`, `false`, `off`, `no` = off); on when unset. */
function switchFromEnv(name: string): boolean {
  const v = (Deno.env.get(name) ?? "").trim().toLowerCase();
  return !["0", "false", "off", "no"].includes(v);
}

/**
 * The data path's offload switches: FLANCTL_UDP_OFFLOAD (TUN offloads + UDP GSO), FLANCTL_UDP_COALESCE,
 * FLANCTL_UDP_GRO.
 */
export interface UdpOffloadSwitches {
  /** IFF_VNET_HDR + TUNSETOFFLOAD on flannel0, super-packets cut in userspace, sent with UDP GSO. */
  offload: boolean;
  /** Received TCP segments merged into GSO super-packets written to flannel0 (needs offload). */
  coalesce: boolean;
  /** UDP_GRO on the socket: a UDP GSO packet is read whole, not one datagram per read (needs offload). */
  gro: boolean;
  /**
   * The receive worker sends the packets its writes to flannel0 made the kernel queue right away (an echo
   * reply, a TCP ACK), so the transmit worker need not wake for them (one thread wake-up less per round
   * trip); FLANCTL_UDP_STEAL.
   */
  steal: boolean;
  /** The receive worker warmed up on loopback stand-ins before it serves (FLANCTL_UDP_WARMUP). */
  warmup: boolean;
}

/** The switches as the environment sets them (all on unless set to 0). */
function offloadSwitchesFromEnv(): UdpOffloadSwitches {
  return {
    offload: switchFromEnv("FLANCTL_UDP_OFFLOAD"),
    coalesce: switchFromEnv("FLANCTL_UDP_COALESCE"),
    gro: switchFromEnv("FLANCTL_UDP_GRO"),
    steal: switchFromEnv("FLANCTL_UDP_STEAL"),
    warmup: switchFromEnv("FLANCTL_UDP_WARMUP"),
  };
}

/** The UDP backend. */
export class UdpBackend implements Backend {
  readonly type = "udp";
  /** flannel's udp backend leaves BackendType empty in the lease. */
  readonly leaseBackendType = "";
  readonly overlayDev = UDP_DEVICE;
  readonly mtu: number;
  readonly port: number;
  readonly #nl: NetlinkHandle;
  readonly #ext: ExternalIface;
  readonly #network: IPNet;
  readonly #log: Log | undefined;
  #sock = -1;
  #tun = -1;
  #dp: UdpDataplane | null = null;
  #peers: PeerInfo[] = [];
  #own: IPNet | null = null;
  readonly #switches: UdpOffloadSwitches = offloadSwitchesFromEnv();
  /** flannel0's descriptor has IFF_VNET_HDR with TSO offloads. */
  #vnet = false;
  #udpGso = false;
  #udpGro = false;
  #warned = false;

  constructor(nl: NetlinkHandle, o: UdpOptions, ext: ExternalIface, network: IPNet, log?: Log) {
    this.#nl = nl;
    this.#ext = ext;
    this.#network = network;
    this.#log = log;
    this.port = o.port;
    this.mtu = ext.mtu - UDP_OVERHEAD;
    if (this.mtu < 68) {
      throw new ConfigError(
        "Backend.Type",
        `UDP MTU would be ${this.mtu} (MTU of ${ext.name} ${ext.mtu} − ${UDP_OVERHEAD}); use an underlay ` +
          `MTU of at least ${68 + UDP_OVERHEAD}`,
      );
    }
  }

  /** Binds the UDP port (so a port in use fails before any kernel change). */
  prepare(): void {
    if (this.#sock >= 0) return;
    try {
      this.#sock = bindUdp(this.#ext.ifaceIP, this.port);
    } catch (e) {
      if (e instanceof NetlinkError && e.errno === EADDRINUSE) {
        throw new ConfigError(
          "Backend.Port",
          `UDP port ${this.port} on ${this.#ext.ifaceIP} is already in use (another flanctl or flanneld ` +
            `daemon on this node?): stop it, or set another Backend.Port on every node`,
        );
      }
      throw e;
    }
  }

  backendData(): null {
    return null;
  }

  /** Opens (or re-attaches to) flannel0; a dead data path is stopped here, `ensure()` starts the next. */
  #attach(changes: string[]): void {
    let l = this.#nl.link(UDP_DEVICE);
    if (l && l.kind !== "tun") {
      this.#nl.deleteLink(UDP_DEVICE);
      changes.push(`recreated (kind is ${l.kind ?? "none"}, not tun)`);
      l = null;
    }
    if (this.#tun >= 0 && l) return;
    if (this.#tun >= 0) {
      // The device was deleted under us: our descriptor is dead.
      this.#stopDataplane();
      closeFdQuiet(this.#tun);
      this.#tun = -1;
      changes.push("recreated (device was deleted)");
    }
    try {
      this.#open();
    } catch (e) {
      if (e instanceof NetlinkError && e.errno === EBUSY) {
        throw new ConfigError(
          "Backend.Type",
          `${UDP_DEVICE} is held by another process (a second daemon?): stop it first`,
        );
      }
      throw e;
    }
    try {
      setTunPersist(this.#tun, true);
      setTxQueueLen(UDP_DEVICE, UDP_TXQUEUELEN);
    } catch (e) {
      closeFdQuiet(this.#tun);
      this.#tun = -1;
      throw e;
    }
    if (!changes.length) changes.push(l ? "attached" : "created");
  }

  /** Opens flannel0, with offloads unless switched off or refused (then a warning, once). */
  #open(): void {
    if (!this.#switches.offload) {
      this.#tun = openTun(UDP_DEVICE);
      this.#vnet = false;
      try {
        setTunOffload(this.#tun, 0); // a persistent device keeps the offloads a previous holder set
      } catch { /* no TUNSETOFFLOAD: nothing to clear */ }
      return;
    }
    const t = openTunOffloaded(UDP_DEVICE);
    this.#tun = t.fd;
    this.#vnet = t.offload;
    if (!t.offload && !this.#warned) {
      this.#warned = true;
      this.#log?.warn("flannel0 TUN offloads refused by the kernel: the UDP data path runs without them", {
        error: t.reason,
      });
    }
    this.#udpGso = this.#vnet && this.#sock >= 0 && probeUdpSegment(this.#sock);
    this.#udpGro = this.#sock >= 0 && setUdpGro(this.#sock, this.#vnet && this.#switches.gro) &&
      this.#vnet && this.#switches.gro;
  }

  /** Whether the data path runs with TUN offloads / UDP GSO / coalescing (after ensure). */
  get offloads(): { tun: boolean; udpGso: boolean; coalesce: boolean; udpGro: boolean } {
    return {
      tun: this.#vnet,
      udpGso: this.#udpGso,
      coalesce: this.#vnet && this.#switches.coalesce,
      udpGro: this.#udpGro,
    };
  }

  #startDataplane(own: IPNet): void {
    const cap = 2 ** Math.min(16, Math.max(0, own.prefix - this.#network.prefix));
    const cpu = cpuFromEnv();
    const dp = new UdpDataplane({
      tunFd: this.#tun,
      sockFd: this.#sock,
      own: own.toString(),
      capacity: Math.max(cap, 256),
      batch: batchFromEnv(),
      vnetHdr: this.#vnet,
      udpGso: this.#udpGso,
      coalesce: this.#vnet && this.#switches.coalesce,
      udpGro: this.#udpGro,
      steal: this.#switches.steal,
      warmup: this.#switches.warmup,
      onWarm: (r) => {
        const fields = { laps: r.laps, ms: r.ms, ...(r.reason ? { reason: r.reason } : {}) };
        if (r.reason) this.#log?.warn("UDP data path warm-up ended short", fields);
        else this.#log?.info("UDP data path warmed up", fields);
      },
      nice: niceFromEnv(),
      cpu,
      onError: (role, message) => this.#log?.error("UDP data path worker failed", { role, error: message }),
    });
    this.#dp = dp;
    this.#pushPeers();
    dp.start().then(() => {
      if (dp.pinRefused) {
        this.#log?.warn("UDP data path workers are not pinned (sched_setaffinity refused)", { cpu });
      }
      if (dp.niceRefused) {
        this.#log?.warn(
          "UDP data path workers keep their priority (setpriority refused: no CAP_SYS_NICE?)",
          {
            nice: niceFromEnv(),
          },
        );
      }
    }).catch((e) => this.#log?.error("UDP data path failed to start", { error: errText(e) }));
  }

  #stopDataplane(): void {
    const dp = this.#dp;
    this.#dp = null;
    if (dp) void dp.stop();
  }

  ensure(own: IPNet): string[] {
    const nl = this.#nl;
    const changes: string[] = [];
    if (this.#sock < 0) this.prepare();
    this.#attach(changes);
    const l = nl.link(UDP_DEVICE);
    if (!l) throw new Error(`${UDP_DEVICE} was opened but cannot be found`);
    if (l.mtu !== this.mtu) {
      nl.setMtu(UDP_DEVICE, this.mtu);
      changes.push(`mtu ${l.mtu}->${this.mtu}`);
    }
    const want = own.ip.toString();
    let have = false;
    for (const a of nl.addrs(4)) {
      if (a.ifname !== UDP_DEVICE) continue;
      if (a.local === want && a.prefix === 32) have = true;
      else {
        nl.delAddr(UDP_DEVICE, `${a.local}/${a.prefix}`);
        changes.push(`removed address ${a.local}/${a.prefix}`);
      }
    }
    if (!have) {
      nl.addAddr(UDP_DEVICE, `${want}/32`);
      changes.push(`address ${want}/32`);
    }
    if (!l.up) {
      nl.setUp(UDP_DEVICE, true);
      changes.push("up");
    }
    const net = this.#network.toString();
    const hasRoute = nl.routes({ family: 4, table: RT_TABLE_MAIN }).some((r) =>
      r.dst === net && r.devName === UDP_DEVICE && !r.gateway
    );
    if (!hasRoute) {
      nl.replaceRoute({ dst: net, dev: UDP_DEVICE });
      changes.push(`route ${net} dev ${UDP_DEVICE}`);
    }
    if (!this.#dp) this.#startDataplane(own);
    else if (!this.#own || !this.#own.equals(own)) this.#dp.setOwn(own.toString());
    this.#own = own;
    return changes;
  }

  peer(p: PeerInfo): DesiredPeer | string {
    if (p.backendType !== "" && p.backendType !== "udp") {
      return `its BackendType is "${p.backendType}", ours is "udp" (flannel's udp leases have none)`;
    }
    const gw = p.subnet.ip.toString();
    return {
      route: { dst: p.subnet.toString(), via: gw, dev: UDP_DEVICE, onlink: true },
      neigh: null,
      fdb: null,
    };
  }

  #pushPeers(): void {
    if (!this.#dp) return;
    try {
      this.#dp.setPeers(this.#peers.map((p) => ({
        subnet: p.subnet.toString(),
        publicIP: p.publicIP,
        port: this.port,
      })));
    } catch (e) {
      this.#log?.error("UDP peer table not updated", { error: errText(e) });
    }
  }

  /** The peers the daemon accepted (called after every change): rewrites the data path's table. */
  syncPeers(peers: readonly PeerInfo[]): void {
    this.#peers = [...peers];
    this.#pushPeers();
  }

  /** The data path's counters, or null before it runs. */
  counters(): UdpCounters | null {
    return this.#dp?.counters() ?? null;
  }

  /** Prometheus lines for the data path. */
  metricLines(): string[] {
    const c = this.counters();
    if (!c) return [];
    const out: string[] = [];
    const fam = (name: string, type: string, help: string, rows: [string, number][]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of rows) out.push(`${name}${labels} ${v}`);
    };
    fam("flanctl_udp_peers", "gauge", "Peers in the UDP data path's table.", [["", this.#dp?.size ?? 0]]);
    fam("flanctl_udp_packets_total", "counter", "Packets carried by the UDP backend.", [
      ['{direction="tx"}', c.txPackets],
      ['{direction="rx"}', c.rxPackets],
    ]);
    fam("flanctl_udp_bytes_total", "counter", "Inner IP bytes carried by the UDP backend.", [
      ['{direction="tx"}', c.txBytes],
      ['{direction="rx"}', c.rxBytes],
    ]);
    fam("flanctl_udp_dropped_total", "counter", "Packets the UDP backend dropped, by reason.", [
      ['{reason="no_route"}', c.dropNoRoute],
      ['{reason="unknown_source"}', c.dropUnknownSource],
      ['{reason="spoofed_source"}', c.dropSpoofed],
      ['{reason="not_local"}', c.dropNotLocal],
      ['{reason="malformed"}', c.dropMalformed],
      ['{reason="ttl"}', c.dropTtl],
    ]);
    fam(
      "flanctl_udp_tx_offload_total",
      "counter",
      "TUN offload work on transmit: TCP super-packets read from flannel0 and cut into segments " +
        "(tso_split), UDP GSO sends (udp_gso, each several datagrams).",
      [
        ['{op="tso_split"}', c.txSuperPackets],
        ['{op="udp_gso"}', c.txGsoSends],
      ],
    );
    fam(
      "flanctl_udp_rx_coalesced_total",
      "counter",
      "Received TCP segments merged into GSO super-packets written to flannel0 (super-packets, segments).",
      [
        ['{unit="packets"}', c.rxCoalesced],
        ['{unit="segments"}', c.rxCoalescedSegments],
      ],
    );
    fam(
      "flanctl_udp_rx_gro_total",
      "counter",
      "Reads of the UDP socket (UDP_GRO) that carried several datagrams at once.",
      [["", c.rxGroReads]],
    );
    fam(
      "flanctl_udp_tx_stolen_total",
      "counter",
      "Packets read from flannel0 and sent by the receive worker right after its own write (the kernel's " +
        'immediate replies; included in flanctl_udp_packets_total{direction="tx"}).',
      [["", c.txStolen]],
    );
    fam("flanctl_udp_errors_total", "counter", "Failed data-path syscalls.", [
      ['{op="send"}', c.sendErrors],
      ['{op="tun_write"}', c.writeErrors],
      ['{op="tun_read"}', c.readErrors],
    ]);
    return out;
  }

  /** Stops the data path and closes the descriptors; flannel0 (persistent) stays with its address/routes. */
  async close(): Promise<void> {
    const dp = this.#dp;
    this.#dp = null;
    await dp?.stop();
    if (this.#tun >= 0 && this.#vnet) {
      try {
        setTunOffload(this.#tun, 0); // the persistent device must not hand super-packets to a plain reader
      } catch { /* the device is gone */ }
    }
    closeFdQuiet(this.#tun);
    closeFdQuiet(this.#sock);
    this.#tun = this.#sock = -1;
  }
}
