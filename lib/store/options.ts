/**
 * The store options (the store flags' values) and the store kinds, as types alone: shared by the store
 * opener (lib/store/open.ts) and the store record a daemon's state file holds (lib/store/record.ts).
 * @module
 */

/** The store kinds. */
export type StoreKind = "kube" | "etcd" | "file";

/** Store options as parsed from the store flags (lib/store/flags.ts; all optional). */
export interface StoreOptions {
  /** `--store`: etcd, kube or file (explicit choice). */
  store?: string;
  /** File store directory; selects the file store. */
  storeDir?: string;
  /** Comma-separated etcd endpoints; selects the etcd store. */
  etcdEndpoints?: string;
  /** etcd key prefix (default /coreos.com/network). */
  etcdPrefix?: string;
  /** CA bundle to verify etcd's certificate. */
  etcdCafile?: string;
  /** Client certificate for etcd. */
  etcdCertfile?: string;
  /** Client key for etcd. */
  etcdKeyfile?: string;
  /** etcd user name. */
  etcdUsername?: string;
  /** etcd password. */
  etcdPassword?: string;
  /** File holding the etcd password. */
  etcdPasswordFile?: string;
  /** Selects the Kubernetes store. */
  kubeSubnetMgr?: boolean;
  /** API server URL (overrides the kubeconfig's). */
  kubeApiUrl?: string;
  /** Node annotation prefix (default flannel.alpha.coreos.com). */
  kubeAnnotationPrefix?: string;
  /** kubeconfig file (default: in-cluster service account). */
  kubeconfigFile?: string;
  /** This node's name (kube; after env NODE_NAME and the pod's spec.nodeName). */
  nodeName?: string;
  /** net-conf.json in kube mode (default /etc/kube-flannel/net-conf.json). */
  netConfigPath?: string;
  /** Lease TTL in seconds (default 86400, flannel's 24 h); for tests and labs. */
  leaseTtl?: string | number;
  /**
   * Set when the store comes from a daemon's state file, not from flags: that file's path (said in
   * storeChoice's `why` (lib/store/open.ts), so an error names where the choice came from).
   */
  recordedIn?: string;
}
