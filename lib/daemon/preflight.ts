/**
 * Start-up checks flanneld makes before touching the kernel. br_netfilter: in iptables mode flanneld exits
 * when `/proc/sys/net/bridge/bridge-nf-call-iptables` (IPv6: `…-ip6tables`) is missing, since bridged pod
 * traffic would bypass iptables (kube-proxy Services and masquerading break; kubeadm stopped checking in
 * Kubernetes 1.30). Read-only.
 * @module
 */
import type { NetConfig } from "../config/types.ts";
import { FlanctlError } from "../base/errors.ts";

/** The br_netfilter module is not loaded. */
export class BrNetfilterError extends FlanctlError {
  /** The sysctl file that is missing. */
  readonly path: string;
  constructor(path: string) {
    super(
      `br_netfilter is not loaded: ${path} is missing (bridged pod traffic would bypass iptables); ` +
        "load it with 'modprobe br_netfilter' and make it permanent with " +
        "'echo br_netfilter > /etc/modules-load.d/flanctl.conf'",
      1,
    );
    this.path = path;
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/** Throws {@link BrNetfilterError} as flanneld refuses to start (iptables mode only). */
export function checkBrNetfilter(cfg: NetConfig, fileExists: (path: string) => boolean = exists): void {
  if (cfg.enableNFTables) return;
  const want = [
    cfg.enableIPv4 ? "/proc/sys/net/bridge/bridge-nf-call-iptables" : null,
    cfg.enableIPv6 ? "/proc/sys/net/bridge/bridge-nf-call-ip6tables" : null,
  ];
  for (const p of want) if (p && !fileExists(p)) throw new BrNetfilterError(p);
}
