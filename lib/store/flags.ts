/**
 * The store flags as one declarative table: flanneld's names, defaults and `FLANNELD_<FLAG>` environment
 * variables, plus flanctl's additions (`--store`, `--store-dir`, `--node-name`, `--etcd-password-file`).
 * The daemon parses them with Go flag syntax (lib/base/goflag.ts); `flanctl lease` and the doctor turn the
 * same table into commander options ({@link addStoreOptions} in open.ts). No commander import here.
 * @module
 */
import type { FlagSpec } from "../base/goflag.ts";

/** Default etcd key prefix (flannel's). */
export const DEFAULT_ETCD_PREFIX = "/coreos.com/network";
/** Default net-conf path in kube mode (flannel's). */
export const DEFAULT_NET_CONFIG_PATH = "/etc/kube-flannel/net-conf.json";
/** flanneld's default `--etcd-endpoints` (main.go), used when no store is chosen. */
export const DEFAULT_ETCD_ENDPOINTS = "http://127.0.0.1:4001,http://127.0.0.1:2379";
/** flanneld's default `--kube-annotation-prefix`. */
export const DEFAULT_ANNOTATION_PREFIX = "flannel.alpha.coreos.com";

/** The store flags (flanneld's first, then flanctl's). */
export const STORE_FLAGS: readonly FlagSpec[] = [
  {
    name: "etcd-endpoints",
    kind: "string",
    origin: "flanneld",
    arg: "<urls>",
    help:
      `comma-separated etcd endpoints; selects the etcd v3 store (the default store, at ${DEFAULT_ETCD_ENDPOINTS})`,
  },
  {
    name: "etcd-prefix",
    kind: "string",
    origin: "flanneld",
    arg: "<prefix>",
    default: DEFAULT_ETCD_PREFIX,
    help: "etcd key prefix",
  },
  { name: "etcd-keyfile", kind: "string", origin: "flanneld", arg: "<file>", help: "client key for etcd" },
  {
    name: "etcd-certfile",
    kind: "string",
    origin: "flanneld",
    arg: "<file>",
    help: "client certificate for etcd",
  },
  {
    name: "etcd-cafile",
    kind: "string",
    origin: "flanneld",
    arg: "<file>",
    help: "CA certificate to verify etcd",
  },
  { name: "etcd-username", kind: "string", origin: "flanneld", arg: "<name>", help: "etcd user name" },
  {
    name: "etcd-password",
    kind: "string",
    origin: "flanneld",
    arg: "<password>",
    help: "etcd password (visible in ps: prefer --etcd-password-file or the env variable)",
  },
  {
    name: "kube-subnet-mgr",
    kind: "bool",
    origin: "flanneld",
    default: false,
    help: "use the Kubernetes API as the store (node podCIDR, annotations)",
  },
  {
    name: "kube-api-url",
    kind: "string",
    origin: "flanneld",
    arg: "<url>",
    help: "Kubernetes API server URL (not needed in a pod)",
  },
  {
    name: "kube-annotation-prefix",
    kind: "string",
    origin: "flanneld",
    arg: "<prefix>",
    default: DEFAULT_ANNOTATION_PREFIX,
    help: "prefix of the node annotations; one '/' may be inside, otherwise '/' is appended",
  },
  {
    name: "kubeconfig-file",
    kind: "string",
    origin: "flanneld",
    arg: "<file>",
    help: "kubeconfig file (not needed in a pod: the service account is used)",
  },
  {
    name: "net-config-path",
    kind: "string",
    origin: "flanneld",
    arg: "<file>",
    default: DEFAULT_NET_CONFIG_PATH,
    help: "net-conf.json in kube mode",
  },
  {
    name: "store",
    kind: "string",
    origin: "flanctl",
    arg: "<etcd|kube|file>",
    choices: ["etcd", "kube", "file"],
    help:
      "choose the store explicitly (default: kube with --kube-subnet-mgr, file with --store-dir, else etcd)",
  },
  {
    name: "store-dir",
    kind: "string",
    origin: "flanctl",
    arg: "<dir>",
    help: "embedded file store directory; selects the file store (one node or a lab: leases are local)",
  },
  {
    name: "etcd-password-file",
    kind: "string",
    origin: "flanctl",
    arg: "<file>",
    help: "read the etcd password from this file (keeps it out of argv)",
  },
  {
    name: "node-name",
    kind: "string",
    origin: "flanctl",
    arg: "<name>",
    help: "this node's name in kube mode when neither env NODE_NAME nor POD_NAMESPACE/POD_NAME give it",
  },
  {
    name: "lease-ttl",
    kind: "string",
    origin: "flanctl",
    arg: "<seconds>",
    env: "FLANCTL_LEASE_TTL",
    hidden: true,
    help: "lease TTL in seconds (default 86400 as flannel); for tests and labs",
  },
];
