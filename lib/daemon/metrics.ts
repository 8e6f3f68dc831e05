/**
 * The daemon's counters and gauges, rendered in the Prometheus text exposition format (version 0.0.4).
 * Hand-written: a client library would be a dependency for a dozen lines of text.
 * @module
 */
import type { ReconcileStats } from "../reconcile/reconciler.ts";

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
  /** 1 once ready (rules in place, subnet.env written). */
  ready = 0;
  leaseRenewals = 0;
  leaseRenewalErrors = 0;
  /** Store events applied. */
  events = 0;
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
    const out: string[] = [];
    const m = (name: string, type: string, help: string, v: number) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${v}`);
    };
    m("flanctl_peers", "gauge", "Peers whose routes/ARP/FDB entries are programmed.", this.peers);
    m("flanctl_leases", "gauge", "Subnet leases seen in the store, including our own.", this.leases);
    m("flanctl_reconcile_runs_total", "counter", "Full reconcile passes.", this.reconcileRuns);
    m(
      "flanctl_reconcile_errors_total",
      "counter",
      "Failed kernel operations while reconciling.",
      this.reconcileErrors,
    );
    m(
      "flanctl_reconcile_repairs_total",
      "counter",
      "Kernel entries repaired or removed by resyncs.",
      this.repairs,
    );
    out.push(
      "# HELP flanctl_reconcile_duration_seconds Duration of full reconcile passes.",
      "# TYPE flanctl_reconcile_duration_seconds histogram",
    );
    DURATION_BUCKETS.forEach((b, i) =>
      out.push(`flanctl_reconcile_duration_seconds_bucket{le="${b}"} ${this.#buckets[i]}`)
    );
    out.push(`flanctl_reconcile_duration_seconds_bucket{le="+Inf"} ${this.#durCount}`);
    out.push(`flanctl_reconcile_duration_seconds_sum ${this.#durSum}`);
    out.push(`flanctl_reconcile_duration_seconds_count ${this.#durCount}`);
    m(
      "flanctl_last_reconcile_timestamp_seconds",
      "gauge",
      "End of the last full reconcile pass (Unix time; 0 before the first).",
      this.lastReconcileAt / 1000,
    );
    m(
      "flanctl_last_reconcile_duration_seconds",
      "gauge",
      "Duration of the last full reconcile pass.",
      this.lastReconcileSeconds,
    );
    m(
      "flanctl_last_reconcile_repairs",
      "gauge",
      "Kernel entries the last full reconcile pass repaired or removed.",
      this.lastReconcileRepairs,
    );
    m(
      "process_start_time_seconds",
      "gauge",
      "Start of the daemon process (Unix time).",
      this.startedAt / 1000,
    );
    m(
      "flanctl_rule_resyncs_total",
      "counter",
      "Times the iptables rules were (re)applied.",
      this.ruleResyncs,
    );
    m("flanctl_rule_checks_total", "counter", "Times the iptables rules were checked.", this.ruleChecks);
    m("flanctl_store_up", "gauge", "1 when the lease store answers.", this.storeUp);
    m("flanctl_ready", "gauge", "1 once rules are in place and subnet.env is written.", this.ready);
    m("flanctl_lease_renewals_total", "counter", "Successful renewals of our own lease.", this.leaseRenewals);
    m(
      "flanctl_lease_renewal_errors_total",
      "counter",
      "Failed renewals of our own lease.",
      this.leaseRenewalErrors,
    );
    m("flanctl_store_events_total", "counter", "Lease events applied from the store watch.", this.events);
    const mem = Deno.memoryUsage();
    m("process_resident_memory_bytes", "gauge", "Resident set size of the daemon.", mem.rss);
    m("flanctl_heap_used_bytes", "gauge", "JavaScript heap in use.", mem.heapUsed);
    m("flanctl_heap_total_bytes", "gauge", "JavaScript heap reserved.", mem.heapTotal);
    m(
      "flanctl_external_memory_bytes",
      "gauge",
      "Memory held outside the JavaScript heap (buffers, FFI).",
      mem.external,
    );
    for (const src of this.sources) out.push(...src());
    return out.join("\n") + "\n";
  }
}
