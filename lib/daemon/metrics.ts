/**
 * The daemon's counters and gauges, rendered in the Prometheus text exposition format (version 0.0.4).
 * Hand-written: a client library would be a dependency for a dozen lines of text.
 * @module
 */
import type { ReconcileStats } from "../reconcile/reconciler.ts";
import { REJECT_REASONS, type RejectReason } from "../reconcile/peer_guard.ts";

/** Upper bounds (seconds) of the reconcile-duration histogram buckets. */
export const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** All daemon metrics. Plain fields so hot paths just increment numbers. */
export class Metrics implements ReconcileStats {
  /** Peers programmed (desired state size). */
  peers = 0;
  /** Leases seen in the store (including our own). */
  leases = 0;
  reconcileRuns = 0;
  reconcileErrors = 0;
  /** Kernel entries (re)programmed or removed by full passes. */
  repairs = 0;
  /** Times the iptables rules were (re)applied. */
  ruleResyncs = 0;
  /** Times the iptables rules were checked. */
  ruleChecks = 0;
  /** 1 while the store answers, else 0. */
  storeUp = 0;
  /**
   * Where flanctl_ready comes from (1 ready, 0 not), read when the metrics are rendered: the daemon's
   * Readiness, the same answer /readyz gives at that moment (a lease expires with no event to update a
   * stored value).
   */
  readySource: () => number = () => 0;
  leaseRenewals = 0;
  leaseRenewalErrors = 0;
  /** Store events applied. */
  events = 0;
  /** Peer leases refused before anything was programmed (lib/reconcile/peer_guard.ts), by reason. */
  readonly rejectedPeers: Map<RejectReason, number> = new Map();
  /** Leases seen claiming our own subnet with attributes that are not ours. */
  ownSubnetClaims = 0;
  /** Times our lease was written back over another writer's claim. */
  ownLeaseRewrites = 0;
  /** The PublicIP of the last claim of our subnet and when it was seen (ms since the epoch). */
  lastClaim: { publicIP: string; at: number } | null = null;
  /** When the last full reconcile pass ended (ms since the epoch), 0 before the first. */
  lastReconcileAt = 0;
  /** Duration of the last full pass, seconds. */
  lastReconcileSeconds = 0;
  /** Entries the last full pass repaired or removed. */
  lastReconcileRepairs = 0;
  /** Process start (ms since the epoch). */
  readonly startedAt: number = Date.now();
  #repairsSeen = 0;
  /** More metric lines (a backend's data-path counters), appended to {@link render}. */
  readonly sources: (() => string[])[] = [];
  readonly #buckets = new Array<number>(DURATION_BUCKETS.length).fill(0);
  #durSum = 0;
  #durCount = 0;

  /** Records one full reconcile pass duration. */
  observeReconcile(seconds: number): void {
    // The reconciler adds the pass's repairs to `repairs` before it reports the duration.
    this.lastReconcileRepairs = this.repairs - this.#repairsSeen;
    this.#repairsSeen = this.repairs;
    this.lastReconcileAt = Date.now();
    this.lastReconcileSeconds = seconds;
    this.#durSum += seconds;
    this.#durCount++;
    for (let i = 0; i < DURATION_BUCKETS.length; i++) if (seconds <= DURATION_BUCKETS[i]) this.#buckets[i]++;
  }

  /** The Prometheus text exposition. */
  render(): string {
    const out = [
      ...exposition(BEFORE_HISTOGRAM, this),
      ...this.#histogram(),
      ...exposition(AFTER_HISTOGRAM, this),
      ...exposition(MEMORY, Deno.memoryUsage()),
    ];
    out.push(...this.#trustLines());
    for (const src of this.sources) out.push(...src());
    return out.join("\n") + "\n";
  }

  /** Counts one refused peer lease. */
  rejectPeer(reason: RejectReason): void {
    this.rejectedPeers.set(reason, (this.rejectedPeers.get(reason) ?? 0) + 1);
  }

  /** Refused peers by reason (every reason, 0 included), claims of our subnet and the last claimant. */
  #trustLines(): string[] {
    const out = [
      "# HELP flanctl_rejected_peers_total Peer leases refused before anything was programmed, by reason.",
      "# TYPE flanctl_rejected_peers_total counter",
      ...REJECT_REASONS.map((r) =>
        `flanctl_rejected_peers_total{reason="${r}"} ${this.rejectedPeers.get(r) ?? 0}`
      ),
      ...exposition(CLAIMS, this),
    ];
    if (this.lastClaim) {
      out.push(
        "# HELP flanctl_own_subnet_last_claim_timestamp_seconds When a lease last claimed our subnet, by claimant.",
        "# TYPE flanctl_own_subnet_last_claim_timestamp_seconds gauge",
        `flanctl_own_subnet_last_claim_timestamp_seconds{public_ip="${this.lastClaim.publicIP}"} ${
          this.lastClaim.at / 1000
        }`,
      );
    }
    return out;
  }

  /** The reconcile-duration histogram: a bucket per bound, +Inf, sum and count. */
  #histogram(): string[] {
    return [
      "# HELP flanctl_reconcile_duration_seconds Duration of full reconcile passes.",
      "# TYPE flanctl_reconcile_duration_seconds histogram",
      ...DURATION_BUCKETS.map((b, i) =>
        `flanctl_reconcile_duration_seconds_bucket{le="${b}"} ${this.#buckets[i]}`
      ),
      `flanctl_reconcile_duration_seconds_bucket{le="+Inf"} ${this.#durCount}`,
      `flanctl_reconcile_duration_seconds_sum ${this.#durSum}`,
      `flanctl_reconcile_duration_seconds_count ${this.#durCount}`,
    ];
  }
}

/** One metric of the exposition: its name, HELP text and value; counters are named `…_total`. */
type Series<T> = [name: string, help: string, value: (from: T) => number];

/** The HELP, TYPE and sample lines of each series, in order. */
function exposition<T>(series: Series<T>[], from: T): string[] {
  return series.flatMap(([name, help, value]) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} ${name.endsWith("_total") ? "counter" : "gauge"}`,
    `${name} ${value(from)}`,
  ]);
}

/** The metrics before the reconcile-duration histogram. */
const BEFORE_HISTOGRAM: Series<Metrics>[] = [
  ["flanctl_peers", "Peers whose routes/ARP/FDB entries are programmed.", (m) => m.peers],
  ["flanctl_leases", "Subnet leases seen in the store, including our own.", (m) => m.leases],
  ["flanctl_reconcile_runs_total", "Full reconcile passes.", (m) => m.reconcileRuns],
  ["flanctl_reconcile_errors_total", "Failed kernel operations while reconciling.", (m) => m.reconcileErrors],
  ["flanctl_reconcile_repairs_total", "Kernel entries repaired or removed by resyncs.", (m) => m.repairs],
];

/** The metrics after the histogram. */
const AFTER_HISTOGRAM: Series<Metrics>[] = [
  [
    "flanctl_last_reconcile_timestamp_seconds",
    "End of the last full reconcile pass (Unix time; 0 before the first).",
    (m) => m.lastReconcileAt / 1000,
  ],
  [
    "flanctl_last_reconcile_duration_seconds",
    "Duration of the last full reconcile pass.",
    (m) => m.lastReconcileSeconds,
  ],
  [
    "flanctl_last_reconcile_repairs",
    "Kernel entries the last full reconcile pass repaired or removed.",
    (m) => m.lastReconcileRepairs,
  ],
  ["process_start_time_seconds", "Start of the daemon process (Unix time).", (m) => m.startedAt / 1000],
  ["flanctl_rule_resyncs_total", "Times the iptables rules were (re)applied.", (m) => m.ruleResyncs],
  ["flanctl_rule_checks_total", "Times the iptables rules were checked.", (m) => m.ruleChecks],
  ["flanctl_store_up", "1 when the lease store answers.", (m) => m.storeUp],
  ["flanctl_ready", "1 once rules are in place and subnet.env is written.", (m) => m.readySource()],
  ["flanctl_lease_renewals_total", "Successful renewals of our own lease.", (m) => m.leaseRenewals],
  ["flanctl_lease_renewal_errors_total", "Failed renewals of our own lease.", (m) => m.leaseRenewalErrors],
  ["flanctl_store_events_total", "Lease events applied from the store watch.", (m) => m.events],
];

/** Claims of our own subnet. */
const CLAIMS: Series<Metrics>[] = [
  [
    "flanctl_own_subnet_claims_total",
    "Leases seen claiming our own subnet with another PublicIP or VtepMAC.",
    (m) => m.ownSubnetClaims,
  ],
  [
    "flanctl_own_lease_rewrites_total",
    "Times our lease was written back over another writer's claim.",
    (m) => m.ownLeaseRewrites,
  ],
];

/** The process's memory, from `Deno.memoryUsage()`. */
const MEMORY: Series<Deno.MemoryUsage>[] = [
  ["process_resident_memory_bytes", "Resident set size of the daemon.", (m) => m.rss],
  ["flanctl_heap_used_bytes", "JavaScript heap in use.", (m) => m.heapUsed],
  ["flanctl_heap_total_bytes", "JavaScript heap reserved.", (m) => m.heapTotal],
  [
    "flanctl_external_memory_bytes",
    "Memory held outside the JavaScript heap (buffers, FFI).",
    (m) => m.external,
  ],
];
