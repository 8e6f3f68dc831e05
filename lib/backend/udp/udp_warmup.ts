/**
 * The receive worker's warm-up, driven from the control thread: before the worker serves flannel0, it runs
 * its own receive loop (udp_worker.ts, unchanged code) on stand-ins bound to 127.0.0.1 — a UDP socket
 * connected to itself as the TUN device (a packet written to it comes back to be read, as the reply the
 * kernel queues on flannel0 during the write) and a UDP socket its stand-in peer table sends to itself —
 * while this side keeps a few echo requests (192.0.2.0/24, TEST-NET-1: inner addresses only, never routed)
 * circulating: received, written, read back, sent, received again, their TTL counting down the laps — and
 * now and then puts an IPv6 packet on the stand-in TUN, as flannel0 gets from the kernel (dropped and
 * counted as malformed, as there).
 *
 * Why: V8 compiles the worker's loop for the paths it has seen run. Started cold, the loop spends its first
 * seconds in its idle poll, gets compiled for that alone, and the first packets throw that code away again
 * (a deoptimization: no type feedback for the packet path; a peer-table change did the same); at light
 * traffic — a ping every 20 ms — it then runs unoptimized until enough packets made it hot, every syscall
 * of a round trip costing more meanwhile (the FFI calls go through V8's slow path; measured:
 * docs/performance.md, "udp data plane", the RX worker's warm-up). After the
 * warm-up every path of a light round trip (receive, TUN write, the steal of the reply, send, the idle
 * poll, a table change) has run a few thousand times and the loop is compiled with all of it.
 * Nothing leaves the loopback device; it costs ~0.1–0.3 s of one worker before it serves (packets meanwhile
 * wait in flannel0's queue and the socket's buffer, none is lost). FLANCTL_UDP_WARMUP=0 turns it off.
 * @module
 */
import { errno, libc } from "../../sys/ffi.ts";
import { syscallError } from "../../sys/errors.ts";
import { csum } from "./gso.ts";
import {
  CTL_STOP,
  RX_STATS,
  STAT_SLOT,
  STAT_SLOTS,
  STEAL_SLOT,
  TX_STATS,
  type WarmupInit,
} from "./udp_layout.ts";
import { ctlBytes, writeOwn, writePeers } from "./udp_table.ts";
import { bindUdp, boundPort, connectUdp, setUdpGro, sockaddrIn } from "./udp_socket.ts";
import { closeFdQuiet } from "../../sys/tun.ts";
import { errText } from "../../base/errors.ts";

/** Round trips (packets the receive loop took) a warm-up aims at. */
export const WARMUP_LAPS = 4000;
/** The stand-in subnet, ours and the stand-in peer's alike (TEST-NET-1, RFC 5737). */
const NET = "192.0.2.0/24";
/**
 * Echo requests circulating at once: with the IPv6 packet now and then, fewer than the worker's steal
 * reads (4), so no steal finds more waiting and hands the stand-in TUN to a transmit worker there is not.
 */
const IN_FLIGHT = 2;
/** A warm-up ends after this long whatever its laps, or after STALL_MS without one (loopback filtered?). */
const DEADLINE_MS = 1500, STALL_MS = 200;
/** The stand-in table is written again every this many laps: the worker's table re-read runs too. */
const REPUBLISH_LAPS = 256;
const LOOPBACK = "127.0.0.1";

/** What a warm-up did. */
export interface WarmupReport {
  /** Packets the receive loop took (0: no warm-up). */
  laps: number;
  /** Milliseconds from the first seed to the stop. */
  ms: number;
  /** Why it ended short or did not run (absent: it reached {@link WARMUP_LAPS}). */
  reason?: string;
}

/** An IPv6 header (no payload): what the worker drops as malformed (the kernel's IPv6 on flannel0). */
const IPV6 = new Uint8Array(40).fill(0x60, 0, 1);

/** An ICMP echo request from 192.0.2.1 to 192.0.2.2, TTL 255, 56 bytes of data (as ping sends). */
function echoRequest(seq: number): Uint8Array<ArrayBuffer> {
  const p = new Uint8Array(84);
  const v = new DataView(p.buffer);
  v.setUint8(0, 0x45);
  v.setUint16(2, p.length);
  v.setUint16(4, seq & 0xffff);
  v.setUint8(8, 255);
  v.setUint8(9, 1);
  p.set([192, 0, 2, 1, 192, 0, 2, 2], 12);
  v.setUint16(10, ~csum(p, 0, 20) & 0xffff);
  v.setUint8(20, 8);
  v.setUint16(26, seq & 0xffff);
  v.setUint16(22, ~csum(p, 20, 64) & 0xffff);
  return p;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One warm-up: its stand-in descriptors, control block and counters. */
export class UdpWarmup {
  /** What the receive worker is given ({@link WarmupInit}). */
  readonly init: WarmupInit;
  readonly #ctl: Int32Array;
  readonly #stats: Float64Array;
  readonly #to: Uint8Array<ArrayBuffer>;
  #closed = false;

  private constructor(tunFd: number, sockFd: number, port: number) {
    const ctl = new SharedArrayBuffer(ctlBytes(1));
    const stats = new SharedArrayBuffer(STAT_SLOTS * STAT_SLOT * 8);
    this.init = { tunFd, sockFd, ctl, stats };
    this.#ctl = new Int32Array(ctl);
    this.#stats = new Float64Array(stats);
    this.#to = sockaddrIn(LOOPBACK, port);
    writeOwn(this.#ctl, NET);
    writePeers(this.#ctl, [{ subnet: NET, publicIP: LOOPBACK, port }]);
  }

  /**
   * Makes the stand-ins (`udpGro`: the socket with UDP_GRO, as the real one). Throws NetlinkError when
   * 127.0.0.1 cannot be bound (no loopback address in this network namespace).
   */
  static open(udpGro: boolean): UdpWarmup {
    const fds: number[] = [];
    try {
      const sock = bindUdp(LOOPBACK, 0, 1 << 20);
      fds.push(sock);
      const port = boundPort(sock);
      if (udpGro) setUdpGro(sock, true);
      const tun = bindUdp(LOOPBACK, 0, 1 << 20);
      fds.push(tun);
      connectUdp(tun, LOOPBACK, boundPort(tun));
      return new UdpWarmup(tun, sock, port);
    } catch (e) {
      fds.forEach(closeFdQuiet);
      throw e;
    }
  }

  /** Packets the worker's receive loop took so far. */
  #laps(): number {
    return this.#stats[STAT_SLOT];
  }

  /** Requests that left the circle: dropped or failed anywhere (a TTL run out, mostly). */
  #lost(): number {
    const s = this.#stats;
    let n = 0;
    for (const slot of [0, STEAL_SLOT]) {
      const b = slot * STAT_SLOT;
      for (const k of ["dropNoRoute", "dropMalformed", "dropTtl", "sendErrors", "readErrors"] as const) {
        n += s[b + TX_STATS.indexOf(k)];
      }
    }
    for (
      const k of ["dropUnknownSource", "dropMalformed", "dropSpoofed", "dropNotLocal", "writeErrors"] as const
    ) {
      n += s[STAT_SLOT + RX_STATS.indexOf(k)];
    }
    return n;
  }

  /**
   * Keeps {@link IN_FLIGHT} requests circulating until the worker took {@link WARMUP_LAPS} packets (or the
   * deadline, or a stall), then sets the stop flag: the worker's loop returns and it starts serving.
   */
  async drive(): Promise<WarmupReport> {
    const t0 = performance.now();
    let seeds = 0, junk = 0, last = 0, lastAt = t0, republished = 0, reason: string | undefined;
    try {
      for (;;) {
        const laps = this.#laps(), now = performance.now();
        if (laps >= WARMUP_LAPS) break;
        if (this.#closed || Atomics.load(this.#ctl, CTL_STOP)) {
          reason = "stopped";
          break;
        }
        if (now - t0 > DEADLINE_MS) {
          reason = `deadline (${DEADLINE_MS} ms)`;
          break;
        }
        if (laps !== last) (last = laps), (lastAt = now);
        else if (now - lastAt > STALL_MS) {
          reason = `no packet came back over ${LOOPBACK} for ${STALL_MS} ms`;
          break;
        }
        if (laps - republished >= REPUBLISH_LAPS) {
          republished = laps;
          writePeers(this.#ctl, [{ subnet: NET, publicIP: LOOPBACK, port: this.#port() }]);
          if (libc().write(this.init.tunFd, IPV6, IPV6.length) === IPV6.length) junk++;
        }
        while (seeds - (this.#lost() - junk) < IN_FLIGHT) {
          const p = echoRequest(seeds++);
          if (libc().sendto(this.init.sockFd, p, p.length, 0, this.#to, 16) < 0) {
            const e = errno();
            throw syscallError(`warm-up send to ${LOOPBACK}`, e);
          }
        }
        await sleep(1);
      }
    } catch (e) {
      reason = errText(e);
    } finally {
      this.stop();
    }
    return { laps: this.#laps(), ms: Math.round(performance.now() - t0), ...(reason ? { reason } : {}) };
  }

  #port(): number {
    return (this.#to[2] << 8) | this.#to[3];
  }

  /** Asks the worker to end its warm-up loop (it sees the flag within its poll timeout). */
  stop(): void {
    Atomics.store(this.#ctl, CTL_STOP, 1);
  }

  /** Closes the stand-ins (once the worker is out of its warm-up loop, or gone). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.stop();
    closeFdQuiet(this.init.tunFd);
    closeFdQuiet(this.init.sockFd);
  }
}
