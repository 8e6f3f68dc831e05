/**
 * Why the daemon is not ready (/readyz, the `flanctl_ready` metric): subnet.env not written, rules not in
 * place, the store unreachable, or no valid lease. Start-up steps and the run loop record what they did; the
 * health server asks {@link Readiness.notReady}.
 * @module
 */
import type { Logger } from "../base/log.ts";
import type { Metrics } from "./metrics.ts";

/** The daemon's readiness: the source of `flanctl_ready` (read at render time) and kept in `metrics.storeUp`. */
export class Readiness {
  readonly #metrics: Metrics;
  readonly #log: Logger;
  #subnetEnvWritten = false;
  #rulesInPlace = false;
  #storeOk = true;
  /** The firewall mode named while the rules are missing. */
  #rulesMode = "iptables";
  /** Why the lease is not valid (the renewal keeper's view), once renewals run. */
  #leaseInvalid: () => string | null = () => null;

  constructor(metrics: Metrics, log: Logger) {
    this.#metrics = metrics;
    this.#log = log;
    metrics.readySource = () => (this.notReady() === null ? 1 : 0);
  }

  /** Why /readyz fails, or null when ready. */
  notReady(): string | null {
    if (!this.#subnetEnvWritten) return "subnet.env not written yet";
    if (!this.#rulesInPlace) return `${this.#rulesMode} rules not in place yet`;
    if (!this.#storeOk) return "the lease store is unreachable";
    return this.#leaseInvalid();
  }

  /** subnet.env is written. */
  subnetEnvWritten(): void {
    this.#subnetEnvWritten = true;
  }

  /** The firewall mode ("iptables" or "nftables") of the rules awaited. */
  set rulesMode(mode: string) {
    this.#rulesMode = mode;
  }

  /** The rules are in place. */
  rulesInPlace(): void {
    this.#rulesInPlace = true;
  }

  /** Where the lease's validity comes from (the renewal keeper). */
  set leaseInvalid(fn: () => string | null) {
    this.#leaseInvalid = fn;
  }

  /** Records whether the store answers (logged on a change). */
  setStoreUp(up: boolean, why?: string): void {
    if (up !== this.#storeOk) {
      if (up) this.#log.info("lease store reachable again");
      else this.#log.warn("lease store unreachable", { error: why });
    }
    this.#storeOk = up;
    this.#metrics.storeUp = up ? 1 : 0;
  }
}
