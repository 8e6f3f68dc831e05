/**
 * The shared-memory layout between the UDP backend's control thread and its data-path workers: one
 * Int32Array control block (a seqlock-protected peer table) and one Float64Array of counters, a slot of
 * {@link STAT_SLOT} per worker. Both sides import these numbers; nothing else is shared.
 * @module
 */

/** Control block: seqlock counter (odd while the table is being written). */
export const CTL_SEQ = 0;
/** Control block: non-zero asks the workers to stop. */
export const CTL_STOP = 1;
/** Control block: number of peer entries. */
export const CTL_COUNT = 2;
/** Control block: our subnet's network address (uint32 stored as int32). */
export const CTL_OWN_NET = 3;
/** Control block: our subnet's mask. */
export const CTL_OWN_MASK = 4;
/**
 * Control block (with `steal`): which thread reads the TUN device — {@link TUN_FREE} (the receive worker
 * watches it in its idle poll and reads a few packets after each receive batch), {@link TUN_RX} (the
 * receive worker is reading now) or {@link TUN_TX} (handed to the transmit worker, which gives it back
 * when idle). Only one thread reads at a time, so packets leave in the order the TUN handed them over.
 */
export const CTL_TUN_READER = 5;
/** {@link CTL_TUN_READER}: nobody is reading; the receive worker watches the TUN device. */
export const TUN_FREE = 0;
/** {@link CTL_TUN_READER}: the transmit worker owns the TUN device. */
export const TUN_TX = 1;
/** {@link CTL_TUN_READER}: the receive worker is reading the TUN device. */
export const TUN_RX = 2;
/** Index of the first peer entry. */
export const CTL_ENTRIES = 16;
/** Int32 words per peer entry: subnet network, subnet mask, public IP, UDP port. */
export const ENTRY_WORDS = 4;

/** Float64 counters per worker. */
export const STAT_SLOT = 16;
/** Stat slots: 0 the transmit worker (TX_STATS), 1 the receive worker (RX_STATS), 2 the receive worker's
 * sends of packets it took from the TUN device (TX_STATS layout). */
export const STAT_SLOTS = 3;
/** The stat slot of the receive worker's own sends (packets taken from the TUN right after its writes). */
export const STEAL_SLOT = 2;

/** Counters of the TUN→UDP (transmit) worker, by index in its slot. */
export const TX_STATS = [
  "txPackets",
  "txBytes",
  "dropNoRoute",
  "dropMalformed",
  "dropTtl",
  "sendErrors",
  "readErrors",
  "txBatches",
  "txSuperPackets",
  "txGsoSends",
] as const;

/** Counters of the UDP→TUN (receive) worker, by index in its slot. */
export const RX_STATS = [
  "rxPackets",
  "rxBytes",
  "dropUnknownSource",
  "dropMalformed",
  "dropSpoofed",
  "dropNotLocal",
  "writeErrors",
  "rxBatches",
  "rxCoalesced",
  "rxCoalescedSegments",
  "rxGroReads",
] as const;

/** What a worker is told at start. */
export interface WorkerInit {
  role: "tx" | "rx";
  tunFd: number;
  sockFd: number;
  ctl: SharedArrayBuffer;
  stats: SharedArrayBuffer;
  /** Index of this worker's stat slot. */
  slot: number;
  /** Datagrams per recvmmsg/sendmmsg call (1 = plain recvfrom/sendto). */
  batch: number;
  /** The TUN descriptor has IFF_VNET_HDR with TSO offloads: a virtio_net_hdr before every packet. */
  vnetHdr: boolean;
  /** tx: send the segments of a super-packet with UDP GSO (UDP_SEGMENT), else one datagram each. */
  udpGso: boolean;
  /** rx (with vnetHdr): merge consecutive TCP segments of a flow into GSO super-packets. */
  coalesce: boolean;
  /** rx (with vnetHdr): the socket has UDP_GRO on: a read may hold several datagrams (cmsg: their size). */
  udpGro: boolean;
  /**
   * rx: right after writing to the TUN device, take the packets the kernel queued on it meanwhile (an
   * echo reply, a TCP ACK) and send them from this thread — when the transmit worker does not hold the
   * TUN reader token ({@link CTL_TUN_READER}); tx: hold that token while reading. Saves one thread
   * wake-up per request/response round trip.
   */
  steal: boolean;
  /** With `steal`: an eventfd the transmit worker writes to wake the receive worker's poll (else -1). */
  wakeFd: number;
  /** The CPU the worker thread is pinned to (sched_setaffinity), or -1: wherever the scheduler puts it. */
  cpu: number;
  /** The worker thread's nice value (setpriority on its thread id); 0 leaves it as it is. */
  nice: number;
}

/**
 * The receive worker's warm-up (udp_warmup.ts): before it serves, it runs its own loop on these stand-ins
 * — a loopback UDP socket connected to itself as the TUN device (a packet written comes back to be read,
 * as a reply the kernel queues during the write) and a loopback UDP socket its peer table sends to — with
 * a control block and counters of their own, until that control block's stop flag is set.
 */
export interface WarmupInit {
  tunFd: number;
  sockFd: number;
  ctl: SharedArrayBuffer;
  stats: SharedArrayBuffer;
}

/** The one message a worker gets: its init, and (the receive worker) a warm-up to run first, or null. */
export interface WorkerStart {
  init: WorkerInit;
  warmup: WarmupInit | null;
}

/** IPv4 text to uint32. */
export function ip4ToU32(ip: string): number {
  const p = ip.split(".");
  return ((+p[0] << 24) | (+p[1] << 16) | (+p[2] << 8) | +p[3]) >>> 0;
}

/** Mask of a prefix length as uint32. */
export function maskU32(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}
