/**
 * The kernel layer's second public face: the udp backend's data path (flannel0 TUN, the UDP socket and the
 * worker-driven packet loop). Kept out of mod.ts so the modules every other caller loads — the CNI plugins'
 * bundle above all, bundled per call — do not carry it (measured: +6 KB of the minified cni.js).
 * @module
 */
export {
  closeFdQuiet,
  openTun,
  openTunOffloaded,
  setTunOffload,
  setTunPersist,
  setTxQueueLen,
} from "../../sys/tun.ts";
export { bindUdp, EADDRINUSE, probeUdpSegment, setUdpGro } from "./udp_socket.ts";
export { type UdpCounters, UdpDataplane } from "./udp_dataplane.ts";
