/**
 * Store selection shared by the daemon, `flanctl lease` and the doctor: the flags (flannel's names, each
 * also from env `FLANNELD_<FLAG>`), and {@link openStore}, which picks kube (`--kube-subnet-mgr`), etcd
 * (`--etcd-endpoints`) or the file store (default).
 * @module
 */
import { type Command, Option } from "commander";
import { UsageError } from "../errors.ts";
import type { SubnetStore } from "./types.ts";
import { DEFAULT_STORE_DIR, FileStore } from "./file.ts";

/** Default etcd key prefix (flannel's). */
export const DEFAULT_ETCD_PREFIX = "/coreos.com/network";
/** Default net-conf path in kube mode (flannel's). */
export const DEFAULT_NET_CONFIG_PATH = "/etc/kube-flannel/net-conf.json";

/** Store options as commander yields them from {@link addStoreOptions} (all optional). */
export interface StoreOptions {
  /** File store directory (default /var/lib/flanctl). */
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
  /** Selects the Kubernetes store. */
  kubeSubnetMgr?: boolean;
  /** API server URL (overrides the kubeconfig's). */
  kubeApiUrl?: string;
  /** kubeconfig file (default: in-cluster service account). */
  kubeconfigFile?: string;
  /** This node's name (kube; default env NODE_NAME). */
  nodeName?: string;
  /** net-conf.json in kube mode (default /etc/kube-flannel/net-conf.json). */
  netConfigPath?: string;
  /** Lease TTL in seconds (default 86400, flannel's 24 h); for tests and labs. */
  leaseTtl?: string | number;
}

const ENV = (flag: string) => `FLANNELD_${flag.toUpperCase().replaceAll("-", "_")}`;

/** Adds the store flags (and their FLANNELD_* env fallbacks) to `cmd`. Returns `cmd`. */
export function addStoreOptions(cmd: Command): Command {
  const opt = (flags: string, desc: string, dflt?: string) => {
    const name = /--([a-z0-9-]+)/.exec(flags)![1];
    const o = new Option(flags, desc).env(ENV(name));
    if (dflt !== undefined) o.default(dflt);
    cmd.addOption(o);
  };
  opt("--store-dir <path>", "file store directory (used unless etcd or kube is selected)", DEFAULT_STORE_DIR);
  opt("--etcd-endpoints <urls>", "comma-separated etcd endpoints; selects the etcd v3 store");
  opt("--etcd-prefix <prefix>", "etcd key prefix", DEFAULT_ETCD_PREFIX);
  opt("--etcd-cafile <file>", "CA certificate to verify etcd");
  opt("--etcd-certfile <file>", "client certificate for etcd");
  opt("--etcd-keyfile <file>", "client key for etcd");
  opt("--etcd-username <name>", "etcd user name");
  opt("--etcd-password <password>", "etcd password");
  cmd.addOption(
    new Option(
      "--kube-subnet-mgr",
      `use the Kubernetes API as the store (env ${ENV("kube-subnet-mgr")}=true)`,
    ),
  );
  opt("--kube-api-url <url>", "Kubernetes API server URL (overrides the kubeconfig's)");
  opt("--kubeconfig-file <file>", "kubeconfig file (default: in-cluster service account)");
  opt("--node-name <name>", "this node's name in kube mode (default: env NODE_NAME)");
  opt("--net-config-path <file>", "net-conf.json in kube mode", DEFAULT_NET_CONFIG_PATH);
  cmd.addOption(
    new Option("--lease-ttl <seconds>", "lease TTL in seconds (default 86400 as flannel)").env(
      "FLANCTL_LEASE_TTL",
    )
      .hideHelp(),
  );
  return cmd;
}

/** The lease TTL in ms from the options, or undefined for the default. Throws UsageError when invalid. */
export function leaseTtlMs(opts: StoreOptions): number | undefined {
  if (opts.leaseTtl === undefined || opts.leaseTtl === "") return undefined;
  const s = Number(opts.leaseTtl);
  if (!Number.isFinite(s) || s <= 0) {
    throw new UsageError(`--lease-ttl: '${opts.leaseTtl}' is not a positive number of seconds`);
  }
  return Math.round(s * 1000);
}

function envTrue(name: string): boolean {
  const v = Deno.env.get(name)?.toLowerCase();
  return v === "true" || v === "1" || v === "yes";
}

/** The store kind {@link openStore} would open for these options. */
export function storeKind(opts: StoreOptions): "kube" | "etcd" | "file" {
  if (opts.kubeSubnetMgr || envTrue(ENV("kube-subnet-mgr"))) return "kube";
  if (opts.etcdEndpoints) return "etcd";
  return "file";
}

/** Opens the store selected by `opts`: kube if --kube-subnet-mgr, etcd if --etcd-endpoints, else file. */
export async function openStore(opts: StoreOptions): Promise<SubnetStore> {
  const ttlMs = leaseTtlMs(opts);
  switch (storeKind(opts)) {
    case "kube": {
      const { openKubeStore } = await import("./kube.ts");
      return await openKubeStore({
        apiUrl: opts.kubeApiUrl,
        kubeconfigFile: opts.kubeconfigFile,
        nodeName: opts.nodeName ?? Deno.env.get("NODE_NAME"),
        netConfigPath: opts.netConfigPath ?? DEFAULT_NET_CONFIG_PATH,
      });
    }
    case "etcd": {
      const { openEtcdStore } = await import("./etcd.ts");
      return await openEtcdStore({
        endpoints: opts.etcdEndpoints!.split(",").map((s) => s.trim()).filter(Boolean),
        prefix: opts.etcdPrefix ?? DEFAULT_ETCD_PREFIX,
        caFile: opts.etcdCafile,
        certFile: opts.etcdCertfile,
        keyFile: opts.etcdKeyfile,
        username: opts.etcdUsername,
        password: opts.etcdPassword,
        ttlMs,
      });
    }
    default:
      return new FileStore({ dir: opts.storeDir ?? DEFAULT_STORE_DIR, ttlMs });
  }
}
