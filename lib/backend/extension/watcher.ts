/**
 * The lease events flanneld's extension backend acts on (flannel pkg/lease LeaseWatcher, v0.28.10), from
 * the other nodes' leases as a store lists and watches them. A listing (at start, and again after a watch
 * error) gives `added` for each lease not known before and `removed` (with the last known lease) for each
 * known one no longer listed — an unchanged or changed lease that stays gives nothing. A watched event is
 * passed on every time: `added` for a new lease and for every rewrite of a known one (a renewal too), and
 * `removed` with the last known attributes (an expired etcd key carries none).
 * @module
 */
import { keyOf } from "../../lease/wire.ts";
import type { Lease, LeaseEvent } from "../../lease/types.ts";

/** The other nodes' leases as flanneld's LeaseWatcher keeps them. */
export class LeaseWatcher {
  readonly #known = new Map<string, Lease>();

  /** Number of leases known. */
  get size(): number {
    return this.#known.size;
  }

  /** A full listing (our own lease left out): the events it implies. */
  reset(leases: readonly Lease[]): LeaseEvent[] {
    const out: LeaseEvent[] = [];
    const next = new Map<string, Lease>();
    for (const l of leases) {
      const k = keyOf(l);
      if (!this.#known.has(k)) out.push({ type: "added", lease: l });
      next.set(k, l);
    }
    for (const [k, l] of this.#known) if (!next.has(k)) out.push({ type: "removed", lease: l });
    this.#known.clear();
    for (const [k, l] of next) this.#known.set(k, l);
    return out;
  }

  /** One watched event of another node's lease: passed on (`removed` with the last known lease). */
  update(ev: LeaseEvent): LeaseEvent {
    const k = keyOf(ev.lease);
    if (ev.type === "added") {
      this.#known.set(k, ev.lease);
      return ev;
    }
    const last = this.#known.get(k);
    this.#known.delete(k);
    return { type: "removed", lease: last ?? ev.lease };
  }
}
