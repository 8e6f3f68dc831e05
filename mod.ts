/**
 * flanctl as a library: the pieces another program needs to work with a flannel network — flannel's file
 * and wire formats (net-conf.json, subnet.env, lease keys and attributes), the subnet-lease stores (file,
 * etcd v3, Kubernetes API), IPv4/IPv6 prefix arithmetic, the kernel reader/writer behind every command
 * (links, addresses, routes, neighbours, FDB in any network namespace), and the node doctor.
 *
 * ```ts
 * import { IPNet, openNetlink } from "./mod.ts";
 * const nl = openNetlink({ name: "node1" });
 * try {
 *   const pods = IPNet.parse("10.244.0.0/16");
 *   const peers = nl.routes({ family: 4 }).filter((r) => r.dst !== "default" && pods.contains(IPNet.parse(r.dst)));
 *   console.log(peers.map((r) => `${r.dst} via ${r.gateway ?? "-"} dev ${r.devName}`));
 * } finally {
 *   nl.close();
 * }
 * ```
 * @module
 */
export { FlanctlError, ParseError, UsageError } from "./lib/base/errors.ts";
export {
  type Cidr,
  type Ip,
  IPAddr,
  type IPFamily,
  IPNet,
  type Mac,
  parseCidr,
  parseIp,
  parseMac,
  tryCidr,
  tryIp,
  tryMac,
} from "./lib/base/cidr.ts";
export {
  formatSubnetEnv,
  parseSubnetEnv,
  readSubnetEnv,
  type SubnetEnv,
  SubnetEnvError,
  writeSubnetEnv,
} from "./lib/node/subnet_env.ts";
export type * from "./lib/netlink/types.ts";
export { NetlinkError, openNetlink } from "./lib/netlink/mod.ts";
export { inNetns, listNamedNetns, netnsPath } from "./lib/os/mod.ts";
export { ConfigError, parseNetConfig, type ParseNetConfigOptions } from "./lib/config/netconf.ts";
export type * from "./lib/config/types.ts";
export {
  decodeLeaseAttrs,
  encodeLeaseAttrs,
  leaseKey,
  leaseToJson,
  parseLeaseKey,
} from "./lib/lease/wire.ts";
export type * from "./lib/store/types.ts";
export {
  LeaseNotFoundError,
  NoNetworkConfigError,
  ReadOnlyStoreError,
  StoreDirNotFoundError,
  StoreError,
  StoreUnavailableError,
  SubnetConflictError,
} from "./lib/store/errors.ts";
export { openStore, type StoreChoice, storeChoice, type StoreOptions } from "./lib/store/open.ts";
export type { ReservationV6 } from "./lib/lease/reservation.ts";
export type { Warn, WarnFields } from "./lib/base/warn.ts";
export { CHECK_IDS, runDoctor } from "./lib/doctor/mod.ts";
export type {
  CheckId,
  DoctorReport,
  Finding,
  FindingId,
  Severity,
  SnapshotOptions,
  Summary,
} from "./lib/doctor/mod.ts";
