/**
 * What the daemon runs on. {@link DaemonDeps} is what it is given (kernel handle, store, logger);
 * {@link NodeContext} is what start-up (lib/daemon/bootstrap.ts) leaves behind: options, interface, network
 * config, backend, rules, reconciler, peers — fixed for the daemon's life and read by the run loop
 * (lib/daemon/run_loop.ts). The only part that changes is {@link NodeState} (our current lease and subnet:
 * a renewal replaces the lease, a re-acquire after a loss may change the subnet). Also the small helpers
 * both sides use (store retry, timeout).
 * @module
 */
import type { NetConfig } from "../config/types.ts";
import type { IPNet } from "../base/cidr.ts";
import type { NetlinkHandle } from "../netlink/types.ts";
import { StoreUnavailableError } from "../store/errors.ts";
import { Backoff } from "../base/backoff.ts";
import { retryableStoreError } from "../store/classify.ts";
import type { Lease, LeaseAttrsWire, SubnetStore } from "../store/types.ts";
import type { Backend, ExternalIface } from "../backend/types.ts";
import type { Reconciler } from "../reconcile/reconciler.ts";
import type { FlannelRules } from "../firewall/flannel.ts";
import type { Runner } from "../firewall/types.ts";
import type { FamilyPlane } from "./family.ts";
import type { Logger } from "../base/log.ts";
import type { MemoryRelease } from "./memory.ts";
import type { Metrics } from "./metrics.ts";
import type { DaemonOptions } from "./options.ts";
import type { Peers } from "./peers.ts";
import type { Readiness } from "./readiness.ts";
import { errText } from "../base/errors.ts";

/** What the daemon runs against (injected so tests and benchmarks can substitute parts). */
export interface DaemonDeps {
  nl: NetlinkHandle;
  store: SubnetStore;
  log: Logger;
  /** systemd notification (READY=1, STOPPING=1, STATUS=…). */
  notify?: (state: string) => void;
  /** Runs iptables-save/iptables-restore (and nft, where libnftables is missing). */
  runIptables?: Runner;
  /** Gives free C heap memory back after bursts (lib/daemon/memory.ts). */
  releaseMemory?: () => void;
  /** A full JS garbage collection before such a release (V8's `gc`, with --expose-gc). */
  collectGarbage?: () => void;
  /** Drops the Deno binary's resident read-only pages at start-up's and idle releases (lib/daemon/memory.ts). */
  releaseBinaryPages?: () => void;
  /** V8 runs with --jitless (run.ts: from FLANCTL_DAEMON_V8_FLAGS, which install.sh's launcher sets). */
  jitless?: boolean;
  /**
   * Replaces the process by the same daemon with the JIT (run.ts: execve, same pid); called by the backend
   * step of a jitless udp daemon before it binds anything of its own. Returns only when it could not.
   */
  runWithJit?: () => void;
}

/** What changes while the node runs: our current lease and our subnet of the node's main family. */
export interface NodeState {
  lease: Lease;
  own: IPNet;
}

/** The parts every stage shares, known before the first step runs. */
export interface NodeBase {
  /** The options as given (a kube node's node-public-ip annotation only changes how the interface is chosen). */
  readonly o: DaemonOptions;
  readonly nl: NetlinkHandle;
  readonly store: SubnetStore;
  readonly log: Logger;
  readonly notify: (s: string) => void;
  readonly runIptables?: Runner;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  /** Releases memory after bursts of work (peers.ts calls it). */
  readonly memory: MemoryRelease;
  /** V8 runs with --jitless (the udp backend re-runs with the JIT: its data path runs in JavaScript). */
  readonly jitless: boolean;
  /** See {@link DaemonDeps.runWithJit}. */
  readonly runWithJit?: () => void;
  /** Aborted by `Daemon.stop()`: start-up retries and the run loop end. */
  readonly signal: AbortSignal;
}

/** The node after start-up: fixed for the daemon's life (only {@link state}'s fields change). */
export interface NodeContext extends NodeBase {
  /** The network config read at start-up (a later change in the store needs a restart). */
  readonly cfg: NetConfig;
  /** The family of {@link network}/{@link backend}/{@link reconciler}: 4, or 6 in an IPv6-only network. */
  readonly family: 4 | 6;
  readonly network: IPNet;
  readonly ext: ExternalIface;
  readonly backend: Backend;
  /** The IPv6 half of a dual-stack node (device, peers, reconciler), else null. */
  readonly v6: FamilyPlane | null;
  readonly rules: FlannelRules;
  /** MASQUERADE with --random-fully (not disabled and iptables supports it). */
  readonly randomFully: boolean;
  /** The lease attributes we publish (renewals and re-acquires write them again). */
  readonly attrs: LeaseAttrsWire;
  readonly reconciler: Reconciler;
  readonly peers: Peers;
  /** Where the store's watch starts (the listing's revision). */
  readonly watchCursor: string;
  readonly state: NodeState;
}

/**
 * Retries `fn` while the store is unavailable, has no config yet, or refuses (EPERM/EROFS/ENOSPC, etcd
 * auth or quota), as flanneld retries at start; a bad config and other errors propagate, and so does the
 * last error once `n.signal` aborts.
 */
export async function retryStore<T>(
  n: Pick<NodeBase, "log" | "readiness" | "signal">,
  what: string,
  fn: () => Promise<T>,
): Promise<T> {
  // Jittered (0.5-1 s doubling to 10-20 s): daemons restarted together do not retry in step.
  const delay = new Backoff({ minMs: 500, maxMs: 10_000, jitter: 1.0 });
  while (true) {
    try {
      const r = await fn();
      n.readiness.setStoreUp(true);
      return r;
    } catch (e) {
      const retryable = retryableStoreError(e);
      if (!retryable || n.signal.aborted) throw e;
      if (e instanceof StoreUnavailableError) n.readiness.setStoreUp(false, errText(e));
      await delay.wait({
        signal: n.signal,
        announce: (ms) => n.log.warn(`${what} failed; retrying`, { error: errText(e), retry_in_ms: ms }),
      });
      if (n.signal.aborted) throw e;
    }
  }
}
