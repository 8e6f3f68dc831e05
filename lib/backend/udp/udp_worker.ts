/**
 * A data-path worker of the UDP backend (run as a Web Worker). Role "tx": reads IP packets from the TUN
 * device, looks the destination up in the peer table and sends each packet unchanged (flannel's wire
 * format: the raw IP packet is the UDP payload) to the peer's PublicIP:Port. Role "rx": receives datagrams,
 * drops those from addresses holding no lease, whose inner source is outside the sender's subnets or
 * whose inner destination is not in our subnet, and writes the rest to the TUN device.
 *
 * With `vnetHdr` (flannel0 opened with TUN offloads) every TUN read and write carries a virtio_net_hdr:
 * tx cuts TCP GSO super-packets into MSS-sized packets (gso.ts) and sends them with UDP GSO; rx reads
 * with UDP_GRO (several datagrams per read) and merges the TCP segments of a flow into super-packets
 * (gso.ts Coalescer).
 *
 * With `steal` (the default) the rx worker is also flannel0's reader while traffic is light: flannel0 is
 * in its idle poll with the socket, and after every receive batch it reads what the kernel queued on
 * flannel0 meanwhile (the reply its writes caused: an echo reply, a TCP ACK — in this thread's softirq,
 * usually before write() returns) and sends it itself; a request/response round trip then wakes no tx
 * worker (3 thread wake-ups instead of 4). Finding more than `STEAL_MAX` packets waiting it hands
 * flannel0 over to the tx worker, which gives it back after `TX_LINGER_MS` without a packet. A
 * token in shared memory (`CTL_TUN_READER`) says who reads: only one thread at a time, so packets
 * leave in the order flannel0 handed them over.
 *
 * Every syscall is a blocking FFI call on this worker's own thread: the event loop never sees a packet.
 * Both descriptors are non-blocking; an idle worker waits in poll() with a short timeout so that a stop
 * request (a flag in shared memory) is seen within ~200 ms. The peer table is read from shared memory
 * under a seqlock whenever its sequence number changes.
 *
 * This module is the worker's entry (the URL the control thread loads, udp_dataplane.ts): it sets the
 * thread up and runs its role. The roles are worker/tx.ts and worker/rx.ts, over worker/common.ts.
 * @module
 */
import { libc } from "../../sys/ffi.ts";
import { STAT_SLOT, type WarmupInit, type WorkerInit, type WorkerStart } from "./udp_layout.ts";
import { errText } from "../../base/errors.ts";
import { runTxLoop, txPath } from "./worker/tx.ts";
import { runRx, runRxBatch, runRxOffload, RxOffloadLoop, turnUntilStopped } from "./worker/rx.ts";

const PRIO_PROCESS = 0;

/** The worker's global scope (typed here: the project is checked with the window lib). */
const scope = globalThis as unknown as {
  onmessage: ((ev: MessageEvent<WorkerStart>) => void) | null;
  postMessage(m: unknown): void;
  close(): void;
};

/** The loop of this worker's role (returns when `ctl`'s stop flag is set). */
function runRole(init: WorkerInit, ctl: Int32Array, st: Float64Array): void {
  if (init.role === "tx") {
    runTxLoop(init, ctl, txPath(init, st, init.slot * STAT_SLOT, init.batch));
  } else if (init.vnetHdr) runRxOffload(init, ctl, st);
  else (init.batch > 1 ? runRxBatch : runRx)(init, ctl, st);
}

/**
 * The receive worker (offload loop) with a warm-up first (udp_warmup.ts): the serving loop is made, then
 * the warm-up's own one on the stand-in descriptors, control block and counters, turned until the control
 * thread stops it, then the serving one. Both are made before either turns, and `init` itself is pointed
 * at the stand-ins meanwhile (not a copy): every object the serving loop touches then has the shape — and
 * every field the state — it had while V8 compiled the warm-up's turns, so that code stays valid for it
 * (made after the warm-up, its fields' second values would have invalidated it).
 */
function runRxWarmedUp(init: WorkerInit, ctl: Int32Array, st: Float64Array, w: WarmupInit): void {
  const serving = new RxOffloadLoop(init, ctl, st);
  const { tunFd, sockFd, wakeFd } = init;
  const wctl = new Int32Array(w.ctl);
  init.tunFd = w.tunFd, init.sockFd = w.sockFd, init.wakeFd = -1;
  try {
    turnUntilStopped(new RxOffloadLoop(init, wctl, new Float64Array(w.stats)), wctl);
  } finally {
    init.tunFd = tunFd, init.sockFd = sockFd, init.wakeFd = wakeFd;
  }
  scope.postMessage({ warmed: true });
  turnUntilStopped(serving, ctl);
}

scope.onmessage = (ev: MessageEvent<WorkerStart>) => {
  const { init, warmup } = ev.data;
  const ctl = new Int32Array(init.ctl);
  const st = new Float64Array(init.stats);
  const L = libc(); // load before saying ready: a missing libc fails here, visibly
  // A higher priority for this thread only: a woken worker runs before ordinary tasks on a busy node.
  // Without CAP_SYS_NICE it stays as it is (the data path works the same, only waits longer for a CPU).
  const niced = init.nice === 0 || L.setpriority(PRIO_PROCESS, L.gettid(), init.nice) === 0;
  let pinned = true;
  if (init.cpu >= 0) {
    const set = new Uint8Array(128); // cpu_set_t: 1024 CPUs
    set[init.cpu >> 3] = 1 << (init.cpu & 7);
    pinned = init.cpu < 1024 && L.sched_setaffinity(0, 128n, set) === 0;
  }
  scope.postMessage({ ready: true, niced, pinned });
  try {
    if (warmup && init.role === "rx" && init.vnetHdr) runRxWarmedUp(init, ctl, st, warmup);
    else runRole(init, ctl, st);
    scope.postMessage({ stopped: true });
  } catch (e) {
    scope.postMessage({ error: errText(e) });
  }
  scope.close();
};
