/**
 * The store a daemon records in its state file (lib/node/daemon_state.ts) and how it is read back: the
 * types and the untrusted-input parser, without the store opener (lib/store/open.ts makes the record).
 * @module
 */
import { isObj } from "../base/json.ts";
import type { StoreKind, StoreOptions } from "./options.ts";

/** The {@link StoreOptions} fields a daemon records for each store kind (the chosen store's only). */
export const RECORD_FIELDS = {
  etcd: [
    "etcdEndpoints",
    "etcdPrefix",
    "etcdCafile",
    "etcdCertfile",
    "etcdKeyfile",
    "etcdUsername",
    "etcdPasswordFile",
  ],
  file: ["storeDir"],
  kube: ["kubeconfigFile", "kubeApiUrl", "nodeName", "kubeAnnotationPrefix", "netConfigPath"],
} as const satisfies Record<StoreKind, readonly (keyof StoreOptions)[]>;

/** The record of one store kind: its kind and its recorded fields. */
export type RecordOf<K extends StoreKind> =
  & { kind: K }
  & Pick<StoreOptions, typeof RECORD_FIELDS[K][number]>;

/**
 * The store a daemon uses, as its state file records it (lib/node/daemon_state.ts): what `doctor`, `status`,
 * `trace` and `lease` need to open the same store when no store flag is given. One shape per kind, each with
 * that store's {@link StoreOptions} fields only: etcd's endpoints (without userinfo), key prefix, TLS files,
 * user name and password file; the file store's directory; kube's kubeconfig (absent: in-cluster service
 * account), API URL, node name, annotation prefix and net-conf.json. Never a password or a token:
 * credentials embedded in an etcd endpoint URL are left out, a password file is recorded by path. Paths are
 * absolute.
 */
export type StoreRecord = RecordOf<"etcd"> | RecordOf<"file"> | RecordOf<"kube">;

/** Longest field value read back from a state file. */
const RECORD_FIELD_MAX = 4096;

/**
 * A {@link StoreRecord} read back from a state file (untrusted): null when absent or not an object with a
 * known kind; fields that are not its kind's, or not short printable strings, are dropped.
 */
export function parseStoreRecord(o: unknown): StoreRecord | null {
  if (!isObj(o)) return null;
  if (o.kind !== "kube" && o.kind !== "etcd" && o.kind !== "file") return null;
  const r: Record<string, string> = {};
  for (const k of RECORD_FIELDS[o.kind]) {
    const v = o[k];
    // deno-lint-ignore no-control-regex
    if (typeof v === "string" && v && v.length <= RECORD_FIELD_MAX && !/[\x00-\x1f\x7f]/.test(v)) r[k] = v;
  }
  return { kind: o.kind, ...r } as StoreRecord;
}
