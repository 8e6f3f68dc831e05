/**
 * The UDP backend's data path as seen from the control thread: two workers (TUN→UDP and UDP→TUN, see
 * udp_worker.ts) on a TUN descriptor and a bound UDP socket, a peer table in shared memory that
 * {@link UdpDataplane.setPeers} rewrites under a seqlock (the workers pick it up on their next packet, no
 * restart, no packet lost for untouched peers), and counters read from shared memory.
 * Pointer-free: callers pass file descriptors and strings.
 * @module
 */
import {
  CTL_STOP,
  RX_STATS,
  STAT_SLOT,
  STAT_SLOTS,
  STEAL_SLOT,
  TX_STATS,
  type WorkerInit,
  type WorkerStart,
} from "./udp_layout.ts";
import { ctlBytes, type UdpPeerEntry, writeOwn, writePeers } from "./udp_table.ts";
import { openEventFd } from "./udp_socket.ts";
import { closeFdQuiet } from "../../sys/tun.ts";
import { UdpWarmup, type WarmupReport } from "./udp_warmup.ts";
import { errText } from "../../base/errors.ts";

export type { UdpPeerEntry } from "./udp_table.ts";

/** The data path's counters (totals since start). */
export type UdpCounters = Record<typeof TX_STATS[number] | typeof RX_STATS[number] | "txStolen", number>;

/** Options of {@link UdpDataplane}. */
export interface UdpDataplaneOptions {
  tunFd: number;
  sockFd: number;
  /** Our subnet ("10.244.1.0/24"): received packets for any other destination are dropped. */
  own: string;
  /** Most peers the table holds. */
  capacity: number;
  /** Datagrams per syscall in the workers (1 = recvfrom/sendto per packet). */
  batch?: number;
  /** `tunFd` was opened with IFF_VNET_HDR and TSO offloads (tun.ts openTunOffloaded). */
  vnetHdr?: boolean;
  /** Send a super-packet's segments with UDP GSO (udp_socket.ts probeUdpSegment said yes). */
  udpGso?: boolean;
  /** Merge received TCP segments into GSO super-packets (needs vnetHdr). */
  coalesce?: boolean;
  /** `sockFd` has UDP_GRO on (udp_socket.ts setUdpGro said yes; needs vnetHdr). */
  udpGro?: boolean;
  /**
   * The receive worker takes the packets its TUN writes made the kernel queue (replies) and sends them
   * itself, when the transmit worker is not reading (see WorkerInit.steal). Off when absent.
   */
  steal?: boolean;
  /** Nice value of the worker threads (0 or absent: unchanged). */
  nice?: number;
  /** The CPU both worker threads are pinned to (-1 or absent: not pinned). */
  cpu?: number;

  /**
   * Warm the receive worker up before it serves (udp_warmup.ts: its loop run on loopback stand-ins until
   * V8 compiled it for a round trip's paths). Off when absent.
   */
  warmup?: boolean;
  /** Called once the warm-up ended (or could not run: `laps` 0 and the reason). */
  onWarm?: (report: WarmupReport) => void;

  /** Called when a worker fails (it has stopped). */
  onError?: (role: string, message: string) => void;
}

/**
 * The data-path worker's module: beside this one in a source tree. In the installed daemon bundle (one
 * daemon.js, where this module has no file of its own) the worker is loaded from the installed source tree,
 * `$FLANCTL_LIBDIR/src` (the launcher exports FLANCTL_LIBDIR).
 */
function workerModule(): string {
  const here = new URL("./udp_worker.ts", import.meta.url);
  if (import.meta.url.endsWith("/lib/backend/udp/udp_dataplane.ts")) return here.href;
  const libdir = Deno.env.get("FLANCTL_LIBDIR");
  return libdir ? new URL(`file://${libdir}/src/lib/backend/udp/udp_worker.ts`).href : here.href;
}

/** Thrown by {@link UdpDataplane.setPeers} when the table is full. */
export class PeerTableFullError extends Error {}

/** The running data path. */
export class UdpDataplane {
  readonly #o: UdpDataplaneOptions;
  readonly #ctlBuf: SharedArrayBuffer;
  readonly #ctl: Int32Array;
  readonly #statsBuf = new SharedArrayBuffer(STAT_SLOTS * STAT_SLOT * 8);
  readonly #stats = new Float64Array(this.#statsBuf);
  readonly #workers: Worker[] = [];
  readonly #stopped = new Map<Worker, () => void>();
  #peers = 0;
  /** With `steal`: the eventfd by which the transmit worker wakes the receive worker (else -1). */
  #wakeFd = -1;
  /** The receive worker's warm-up while it runs (closed once the worker is out of it, or gone). */
  #warm: UdpWarmup | null = null;
  #niceRefused = false;
  #pinRefused = false;

  constructor(o: UdpDataplaneOptions) {
    this.#o = o;
    this.#ctlBuf = new SharedArrayBuffer(ctlBytes(o.capacity));
    this.#ctl = new Int32Array(this.#ctlBuf);
    this.setOwn(o.own);
  }

  /** True when a worker could not take the asked nice value (no CAP_SYS_NICE); known after start. */
  get niceRefused(): boolean {
    return this.#niceRefused;
  }

  /** True when a worker could not be pinned to the asked CPU (no such CPU); known after start. */
  get pinRefused(): boolean {
    return this.#pinRefused;
  }

  /** Peers in the table. */
  get size(): number {
    return this.#peers;
  }

  /** Starts both workers; resolves once they run (rejects when one cannot start). */
  async start(): Promise<void> {
    if (this.#o.steal && this.#wakeFd < 0) this.#wakeFd = openEventFd();
    const roles = ["tx", "rx"] as const;
    await Promise.all(roles.map((role, slot) =>
      new Promise<void>((resolve, reject) => {
        const w = new Worker(workerModule(), { type: "module" });
        this.#workers.push(w);
        let started = false;
        // The warm-up is the offload receive loop's (the default data path; udp_warmup.ts).
        const warm = role === "rx" && this.#o.warmup && this.#o.vnetHdr ? this.#openWarmup() : null;
        let warmed: Promise<WarmupReport> | null = null;
        w.onmessage = (
          ev: MessageEvent<
            {
              ready?: boolean;
              niced?: boolean;
              pinned?: boolean;
              error?: string;
              stopped?: boolean;
              warmed?: boolean;
            }
          >,
        ) => {
          if (ev.data.stopped) this.#stopped.get(w)?.();
          else if (ev.data.warmed) this.#warmedUp(warm, warmed);
          else if (ev.data.ready) {
            if (ev.data.niced === false) this.#niceRefused = true;
            if (ev.data.pinned === false) this.#pinRefused = true;
            started = true;
            if (warm) warmed = warm.drive();
            resolve();
          } else if (ev.data.error) {
            if (!started) reject(new Error(`${role} worker: ${ev.data.error}`));
            else this.#o.onError?.(role, ev.data.error);
          }
        };
        w.onerror = (e) => {
          e.preventDefault();
          if (!started) reject(new Error(`${role} worker: ${e.message}`));
          else this.#o.onError?.(role, e.message);
        };
        const init: WorkerInit = {
          role,
          tunFd: this.#o.tunFd,
          sockFd: this.#o.sockFd,
          ctl: this.#ctlBuf,
          stats: this.#statsBuf,
          slot,
          batch: this.#o.batch ?? 1,
          vnetHdr: this.#o.vnetHdr ?? false,
          udpGso: (this.#o.vnetHdr ?? false) && (this.#o.udpGso ?? false),
          coalesce: (this.#o.vnetHdr ?? false) && (this.#o.coalesce ?? false),
          udpGro: (this.#o.vnetHdr ?? false) && (this.#o.udpGro ?? false),
          steal: this.#wakeFd >= 0,
          wakeFd: this.#wakeFd,
          nice: this.#o.nice ?? 0,
          cpu: this.#o.cpu ?? -1,
        };
        const start: WorkerStart = { init, warmup: warm?.init ?? null };
        w.postMessage(start);
      })
    )).catch(async (e) => {
      await this.stop();
      throw e;
    });
  }

  /** The receive worker's warm-up stand-ins, or null (reported) when they cannot be made. */
  #openWarmup(): UdpWarmup | null {
    try {
      return this.#warm = UdpWarmup.open(this.#o.udpGro ?? false);
    } catch (e) {
      this.#o.onWarm?.({ laps: 0, ms: 0, reason: errText(e) });
      return null;
    }
  }

  /** The receive worker left its warm-up loop: its stand-ins are closed, the report handed on. */
  #warmedUp(warm: UdpWarmup | null, report: Promise<WarmupReport> | null): void {
    if (!warm) return;
    warm.close();
    if (this.#warm === warm) this.#warm = null;
    report?.then((r) => this.#o.onWarm?.(r));
  }

  /** Our subnet (after a subnet change). */
  setOwn(own: string): void {
    writeOwn(this.#ctl, own);
  }

  /** Replaces the whole peer table. Throws {@link PeerTableFullError} past the capacity (table unchanged). */
  setPeers(peers: readonly UdpPeerEntry[]): void {
    if (peers.length > this.#o.capacity) {
      throw new PeerTableFullError(`${peers.length} peers exceed the table's ${this.#o.capacity}`);
    }
    writePeers(this.#ctl, peers);
    this.#peers = peers.length;
  }

  /**
   * Totals since start. The transmit counters include the packets the receive worker sent itself
   * (`steal`); `txStolen` counts those alone.
   */
  counters(): UdpCounters {
    const c = {} as UdpCounters;
    const s = this.#stats, own = STEAL_SLOT * STAT_SLOT;
    TX_STATS.forEach((k, i) => (c[k] = s[i] + s[own + i]));
    RX_STATS.forEach((k, i) => (c[k] = (c[k] ?? 0) + s[STAT_SLOT + i]));
    c.txStolen = s[own];
    return c;
  }

  /** Stops the workers (within ~200 ms: their poll timeout) and waits for them. Descriptors stay open. */
  async stop(): Promise<void> {
    Atomics.store(this.#ctl, CTL_STOP, 1);
    this.#warm?.stop();
    const ws = this.#workers.splice(0);
    // A busy worker sees the flag at its next packet, an idle one within its poll timeout (200 ms).
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(ws.map((w) => new Promise<void>((r) => this.#stopped.set(w, r)))),
      new Promise((r) => (timer = setTimeout(r, ws.length ? 300 : 0))),
    ]);
    clearTimeout(timer);
    for (const w of ws) w.terminate();
    this.#warm?.close(); // the worker is gone: nothing uses the stand-ins any more
    this.#warm = null;
    closeFdQuiet(this.#wakeFd);
    this.#wakeFd = -1;
  }
}
