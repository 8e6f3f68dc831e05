/**
 * flanctl library: the pieces behind the `flanctl` command, usable on their own.
 *
 * ```ts
 * import { IPNet, openNetlink } from "./mod.ts";
 * ```
 * @module
 */
export * from "./lib/base/errors.ts";
export * from "./lib/base/cidr.ts";
export * from "./lib/node/subnet_env.ts";
export type * from "./lib/netlink/types.ts";
export type * from "./lib/config/types.ts";
export type * from "./lib/store/types.ts";
export type * from "./lib/inspect/views.ts";
export { inNetns, listNamedNetns, NetlinkError, netnsPath, openNetlink } from "./lib/netlink/mod.ts";
export { listHostNetns, listVethPairs } from "./lib/observe/veths.ts";
export type { HostNetns, VethEnd, VethPair } from "./lib/observe/veths.ts";
export { labAddNode, labDown, labExec, labStatus, labUp, loadState as loadLabState } from "./lib/lab/mod.ts";
export type { LabState, LabStatusJson, LabUpOptions } from "./lib/lab/mod.ts";
export {
  ConfigError,
  DEFAULT_BACKEND_TYPE,
  KNOWN_BACKENDS,
  parseNetConfig,
  subnetFitsConfig,
} from "./lib/config/netconf.ts";
export {
  decodeLeaseAttrs,
  encodeLeaseAttrs,
  keyOf,
  leaseFromKV,
  leaseKey,
  leaseToJson,
  MalformedLeaseError,
  parseLeaseKey,
} from "./lib/lease/wire.ts";
export { allocate, OutOfSubnetsError } from "./lib/lease/allocator.ts";
export {
  LeaseNotFoundError,
  NoNetworkConfigError,
  ReadOnlyStoreError,
  StoreDirNotFoundError,
  StoreError,
  StoreUnavailableError,
  SubnetConflictError,
} from "./lib/store/errors.ts";
export { addStoreOptions, DEFAULT_ETCD_PREFIX, openStore, storeChoice, storeKind } from "./lib/store/open.ts";
export type { StoreOptions } from "./lib/store/open.ts";
export { DEFAULT_STORE_DIR, FileStore } from "./lib/store/file/file.ts";
export { FileStoreReader, leaseExpired, parseLeaseFile } from "./lib/store/file/file_reader.ts";
export { DEFAULT_LEASE_TTL_MS } from "./lib/store/util.ts";
export {
  DEFAULT_RENEW_MARGIN_MS,
  DEFAULT_RENEW_RETRY_MS,
  LeaseKeeper,
  renewDelayMs,
} from "./lib/store/keeper.ts";
export type { LeaseKeeperOptions } from "./lib/store/keeper.ts";
export {
  ALL_CHECKS,
  CHECK_IDS,
  DEFAULT_PATHS as DOCTOR_DEFAULT_PATHS,
  renderJson,
  renderTable,
  runDoctor,
} from "./lib/doctor/mod.ts";
export type {
  DoctorReport,
  Finding as DoctorFinding,
  Severity as DoctorSeverity,
  SnapshotOptions,
} from "./lib/doctor/mod.ts";
export {
  CniError,
  ErrCode as CniErrorCode,
  SUPPORTED_VERSIONS as CNI_SUPPORTED_VERSIONS,
} from "./lib/cni/spec.ts";
export { formatResult as formatCniResult, parseResult as parseCniResult } from "./lib/cni/result.ts";
export type { CniResult } from "./lib/cni/result.ts";
export { buildDelegate as buildFlannelDelegate } from "./lib/cni/flannel.ts";
export { PLUGINS as CNI_PLUGINS } from "./lib/cni/plugins.ts";
export { Daemon } from "./lib/daemon/daemon.ts";
export type { DaemonDeps } from "./lib/daemon/daemon.ts";
export { runDaemon } from "./lib/daemon/run.ts";
export {
  ALL_DAEMON_FLAGS,
  DAEMON_FLAGS,
  daemonHelp,
  DEFAULT_STATE_DIR,
  parseDaemonArgs,
  toDaemonOptions,
} from "./lib/daemon/options.ts";
export { type FlagSpec, parseGoFlags } from "./lib/base/goflag.ts";
export type { DaemonOptions } from "./lib/daemon/options.ts";
export { IfaceError, selectIface } from "./lib/daemon/iface.ts";
export { Metrics as DaemonMetrics } from "./lib/daemon/metrics.ts";
export { sdNotify } from "./lib/daemon/sdnotify.ts";
export { createBackend, HostGwBackend, VxlanBackend } from "./lib/backend/mod.ts";
export type { Backend, ExternalIface, PeerInfo } from "./lib/backend/mod.ts";
export { Reconciler } from "./lib/reconcile/reconciler.ts";
export type { DesiredPeer } from "./lib/reconcile/types.ts";
export { forwardRules, masqRules } from "./lib/firewall/masq_rules.ts";
export { Iptables, RuleManager } from "./lib/firewall/iptables.ts";
export { FlannelRules } from "./lib/firewall/flannel.ts";
export { nftDriver } from "./lib/firewall/nft.ts";
export { FirewallError } from "./lib/firewall/types.ts";
export { getTxChecksum, setTxChecksum } from "./lib/netlink/mod.ts";
