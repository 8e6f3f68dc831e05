/**
 * Store selection shared by the daemon, `flanctl lease` and the doctor: the flags (one table,
 * lib/store/flags.ts: flannel's names, each also from env `FLANNELD_<FLAG>`), {@link storeChoice} (which
 * store and why) and {@link openStore}. As flanneld, no store flag means etcd at
 * http://127.0.0.1:4001,http://127.0.0.1:2379; the embedded file store is only used when chosen
 * (`--store-dir DIR` or `--store file`), so a flanneld unit relying on the default never turns into a
 * per-node store whose subnets collide across nodes.
 * @module
 */
import type { Command } from "commander";
import { CappedReadError, readCappedText } from "../base/capped_read.ts";
import { errText, FlanctlError, UsageError } from "../base/errors.ts";
import { flagEnv, flagKey, goBool } from "../base/goflag.ts";
import type { SubnetStore } from "./types.ts";
import { StoreError } from "./errors.ts";
import type { Warn } from "../base/warn.ts";
import { DEFAULT_STORE_DIR, FileStore } from "./file/file.ts";
import {
  DEFAULT_ETCD_ENDPOINTS,
  DEFAULT_ETCD_PREFIX,
  DEFAULT_NET_CONFIG_PATH,
  STORE_FLAGS,
} from "./flags.ts";
import type { StoreKind, StoreOptions } from "./options.ts";
import type { RecordOf, StoreRecord } from "./record.ts";

export { DEFAULT_ETCD_ENDPOINTS, DEFAULT_ETCD_PREFIX, DEFAULT_NET_CONFIG_PATH };
export type { StoreKind, StoreOptions };

/**
 * Adds the store flags of {@link STORE_FLAGS} to a commander command (`flanctl lease`, the doctor), with
 * the same env variables. Uses `cmd.createOption` so this module never loads commander itself (the daemon
 * imports it for {@link openStore}). Returns `cmd`.
 */
export function addStoreOptions(cmd: Command): Command {
  const bools: string[] = [];
  for (const s of STORE_FLAGS) {
    const env = flagEnv(s);
    // Commander shows `(env: …)` only for an option given .env(); a boolean's env is read by the hook
    // below (Go's ParseBool), so its help names the variable itself, in commander's words.
    const o = cmd.createOption(
      s.kind === "bool" ? `--${s.name}` : `--${s.name} ${s.arg ?? "<value>"}`,
      s.kind === "bool" && env ? `${s.help} (env: ${env})` : s.help,
    );
    if (s.kind === "bool") bools.push(s.name);
    else if (env) o.env(env);
    if (s.default !== undefined && s.kind !== "bool") o.default(s.default);
    if (s.choices) o.choices(s.choices);
    if (s.hidden) o.hideHelp();
    cmd.addOption(o);
  }
  // Boolean flags from env as flanneld reads them (Go's ParseBool), not commander's "set = true".
  cmd.hook("preAction", (_this, action) => {
    for (const s of STORE_FLAGS.filter((x) => bools.includes(x.name))) {
      const key = flagKey(s.name), env = flagEnv(s);
      const raw = env ? Deno.env.get(env) : undefined;
      if (action.getOptionValueSource(key) === "cli" || raw === undefined || raw === "") continue;
      const b = goBool(raw);
      if (b === null) {
        throw new UsageError(`--${s.name} (from ${env}): '${raw}' is not a boolean; use true or false`);
      }
      action.setOptionValueWithSource(key, b, "env");
    }
  });
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

/** Which store {@link openStore} opens, and why (for logs and error messages). */
export interface StoreChoice {
  /** The store kind. */
  kind: "kube" | "etcd" | "file";
  /** Why this store, e.g. "--store-dir is set". */
  why: string;
  /** True when no store flag chose it (flanneld's default etcd). */
  implicit: boolean;
}

/** Chooses the store: `--store`, else kube (`--kube-subnet-mgr`), etcd (`--etcd-endpoints`), file (`--store-dir`), else etcd at flanneld's default endpoints. */
export function storeChoice(opts: StoreOptions): StoreChoice {
  if (opts.recordedIn && (opts.store === "etcd" || opts.store === "kube" || opts.store === "file")) {
    return {
      kind: opts.store,
      why: `the daemon's store, as its state file ${opts.recordedIn} records`,
      implicit: false,
    };
  }
  const given = [
    opts.kubeSubnetMgr ? "--kube-subnet-mgr" : null,
    opts.etcdEndpoints ? "--etcd-endpoints" : null,
    opts.storeDir ? "--store-dir" : null,
  ].filter((x): x is string => x !== null);
  if (opts.store !== undefined && opts.store !== "") {
    if (opts.store !== "etcd" && opts.store !== "kube" && opts.store !== "file") {
      throw new UsageError(`--store: '${opts.store}' is not valid; use one of etcd, kube, file`);
    }
    return { kind: opts.store, why: `--store ${opts.store}`, implicit: false };
  }
  if (opts.kubeSubnetMgr) return { kind: "kube", why: "--kube-subnet-mgr is set", implicit: false };
  if (given.length > 1) {
    throw new UsageError(
      `${given[1]}: conflicts with ${given[0]}; give only one of them (or choose with --store etcd|file)`,
    );
  }
  if (opts.etcdEndpoints) return { kind: "etcd", why: "--etcd-endpoints is set", implicit: false };
  if (opts.storeDir) return { kind: "file", why: "--store-dir is set", implicit: false };
  return {
    kind: "etcd",
    why:
      `no --etcd-endpoints, --kube-subnet-mgr or --store-dir: flanneld's default etcd ${DEFAULT_ETCD_ENDPOINTS}`,
    implicit: true,
  };
}

/** The store kind {@link openStore} would open for these options. */
export function storeKind(opts: StoreOptions): "kube" | "etcd" | "file" {
  return storeChoice(opts).kind;
}

/** Opening the chosen store failed; the message says which store was chosen and why. */
export class StoreOpenError extends StoreError {
  /** The choice that failed. */
  readonly choice: StoreChoice;
  constructor(choice: StoreChoice, cause: unknown) {
    const code = cause instanceof FlanctlError ? cause.exitCode : 1;
    super(`${choice.kind} store (${choice.why}): ${errText(cause)}`, { cause }, code);
    this.choice = choice;
  }
}

function etcdPassword(opts: StoreOptions): string | undefined {
  if (!opts.etcdPasswordFile) return opts.etcdPassword;
  if (opts.etcdPassword) {
    throw new UsageError("--etcd-password-file: conflicts with --etcd-password; give only one of them");
  }
  try {
    // Capped and type-checked: a FIFO or device given here must be an error, never a hang.
    return readCappedText(opts.etcdPasswordFile, 64 * 1024).replace(/\r?\n$/, "");
  } catch (e) {
    const why = e instanceof CappedReadError ? e.message : (e as Error).name;
    throw new UsageError(
      `--etcd-password-file: cannot read ${opts.etcdPasswordFile} (${why}); give a readable file`,
    );
  }
}

/** Opens the store chosen by {@link storeChoice}. Errors name the store and why it was chosen. */
export async function openStore(
  opts: StoreOptions,
  log: { warn?: Warn; releaseMemory?: (binaryPages: boolean) => void } = {},
): Promise<SubnetStore> {
  const ttlMs = leaseTtlMs(opts);
  const choice = storeChoice(opts);
  try {
    switch (choice.kind) {
      case "kube": {
        const { openKubeStore } = await import("./kube/kube.ts");
        return await openKubeStore({
          apiUrl: opts.kubeApiUrl,
          kubeconfigFile: opts.kubeconfigFile,
          nodeName: opts.nodeName,
          netConfigPath: opts.netConfigPath ?? DEFAULT_NET_CONFIG_PATH,
          annotationPrefix: opts.kubeAnnotationPrefix,
          warn: log.warn,
          releaseMemory: log.releaseMemory,
        });
      }
      case "etcd": {
        const { openEtcdStore } = await import("./etcd/etcd.ts");
        return await openEtcdStore({
          endpoints: (opts.etcdEndpoints || DEFAULT_ETCD_ENDPOINTS).split(",").map((s) => s.trim())
            .filter(Boolean),
          prefix: opts.etcdPrefix ?? DEFAULT_ETCD_PREFIX,
          caFile: opts.etcdCafile,
          certFile: opts.etcdCertfile,
          keyFile: opts.etcdKeyfile,
          username: opts.etcdUsername,
          password: etcdPassword(opts),
          ttlMs,
          warn: log.warn,
        });
      }
      default:
        return new FileStore({ dir: opts.storeDir || DEFAULT_STORE_DIR, ttlMs, warn: log.warn });
    }
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new StoreOpenError(choice, e);
  }
}

/** Fields whose values are paths (made absolute when recorded). */
const PATH_FIELDS = new Set<string>([
  "etcdCafile",
  "etcdCertfile",
  "etcdKeyfile",
  "etcdPasswordFile",
  "storeDir",
  "kubeconfigFile",
  "netConfigPath",
]);

function absolute(p: string, cwd: string): string {
  return p.startsWith("/") ? p : `${cwd.replace(/\/$/, "")}/${p}`;
}

/** A record of `kind` with the fields of `values` that are set (paths made absolute against `cwd`). */
function recordOf<K extends StoreKind>(
  kind: K,
  values: Omit<RecordOf<K>, "kind">,
  cwd: string,
): RecordOf<K> {
  const r: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) {
    if (typeof v === "string" && v !== "") r[k] = PATH_FIELDS.has(k) ? absolute(v, cwd) : v;
  }
  return { kind, ...r } as RecordOf<K>;
}

/**
 * What a daemon with these store options records; `nodeName` is the node name it resolved (kube mode).
 * Only the chosen store's fields are kept.
 */
export function storeRecord(opts: StoreOptions, nodeName?: string | null, cwd = Deno.cwd()): StoreRecord {
  const { kind } = storeChoice(opts);
  if (kind === "file") return recordOf("file", { storeDir: opts.storeDir || DEFAULT_STORE_DIR }, cwd);
  if (kind === "kube") {
    return recordOf("kube", {
      kubeconfigFile: opts.kubeconfigFile,
      kubeApiUrl: opts.kubeApiUrl,
      nodeName: nodeName ?? opts.nodeName,
      kubeAnnotationPrefix: opts.kubeAnnotationPrefix,
      netConfigPath: opts.netConfigPath ?? DEFAULT_NET_CONFIG_PATH,
    }, cwd);
  }
  let user = opts.etcdUsername;
  const urls = (opts.etcdEndpoints || DEFAULT_ETCD_ENDPOINTS).split(",").map((u) => u.trim()).filter(Boolean)
    .map((u) => {
      const m = /^(https?:\/\/)([^/]*)@/.exec(u);
      if (!m) return u;
      // user[:password]@ — the user name is kept (as --etcd-username would be), never the password.
      user ??= decodeURIComponentSafe(m[2].split(":")[0]);
      return m[1] + u.slice(m[0].length);
    });
  return recordOf("etcd", {
    etcdEndpoints: urls.join(","),
    etcdPrefix: opts.etcdPrefix ?? DEFAULT_ETCD_PREFIX,
    etcdCafile: opts.etcdCafile,
    etcdCertfile: opts.etcdCertfile,
    etcdKeyfile: opts.etcdKeyfile,
    etcdUsername: user,
    etcdPasswordFile: opts.etcdPasswordFile,
  }, cwd);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Whether `given` (the store flags given on the command line or in the environment) chooses a store. */
export function choosesStore(given: StoreOptions): boolean {
  return !!(given.store || given.storeDir || given.etcdEndpoints || given.kubeSubnetMgr);
}

/**
 * The store options of a command run on a node (`doctor`, `status`, `trace`, `lease`): when no flag
 * chooses a store and the daemon recorded one (`record`, read from `recordPath`), that store — with any
 * other store flag given (`given`, e.g. `--kubeconfig-file` on the host) on top; else `all`, the flags
 * with their defaults, as before.
 */
export function withRecordedStore(
  all: StoreOptions,
  given: StoreOptions,
  record: StoreRecord | null,
  recordPath: string,
): StoreOptions {
  if (choosesStore(given) || !record) return all;
  const { kind, ...fields } = record;
  const o: StoreOptions = { ...fields, store: kind, recordedIn: recordPath };
  for (const [k, v] of Object.entries(given)) {
    if (v !== undefined) (o as Record<string, unknown>)[k] = v;
  }
  return o;
}
