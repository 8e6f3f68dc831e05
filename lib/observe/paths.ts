/**
 * Default locations of a real node's files, used by `flanctl doctor` (kept apart so the CLI can show
 * them in `--help` without loading the doctor).
 * @module
 */

/** Default paths of a real node. */
export const DEFAULT_PATHS = {
  subnetFile: "/run/flannel/subnet.env",
  cniConfDir: "/etc/cni/net.d",
  cniBinDir: "/opt/cni/bin",
  hostLocalDir: "/var/lib/cni/networks",
  flannelDataDir: "/var/lib/cni/flannel",
  cniResultsDir: "/var/lib/cni/results",
  podNetnsPrefix: "cni-",
} as const;
