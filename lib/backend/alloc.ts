/**
 * The alloc backend (flannel pkg/backend/alloc, v0.28.10): subnet allocation only. The node takes a lease
 * (PublicIP its public address, no BackendType, no BackendData, no PublicIPv6: what flanneld's alloc writes)
 * and writes subnet.env (FLANNEL_MTU the interface's MTU); no device, no routes, and other nodes' leases
 * are not acted on: something else (a cloud's routes, an operator) carries the traffic.
 * @module
 */
import type { IPNet } from "../base/cidr.ts";
import type { LeaseAttrsWire } from "../lease/types.ts";
import type { Backend, ExternalIface } from "./types.ts";

/**
 * The alloc backend. Also the IPv6 half of a dual-stack extension node (`type` "extension"): its commands
 * run once, on the main family's leases, as flanneld's one extension network does.
 */
export class AllocBackend implements Backend {
  readonly type: "alloc" | "extension";
  /** flanneld's alloc writes no BackendType. */
  readonly leaseBackendType: string;
  readonly overlayDev = null;
  readonly mtu: number;

  constructor(ext: ExternalIface, type: "alloc" | "extension" = "alloc") {
    this.type = type;
    this.leaseBackendType = type === "alloc" ? "" : type;
    this.mtu = ext.mtu;
  }

  prepare(): void {}

  backendData(): null {
    return null;
  }

  /** As flanneld's alloc: PublicIP only (no PublicIPv6). */
  leaseAttrs(a: LeaseAttrsWire): LeaseAttrsWire {
    return { ...a, PublicIPv6: null };
  }

  ensure(_own: IPNet): string[] {
    return [];
  }

  /** No kernel entries for any peer. */
  peer(): null {
    return null;
  }
}
