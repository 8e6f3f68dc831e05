/**
 * Which store `flanctl doctor` reads, and how it opens it. With no store flag the doctor reads the store
 * the daemon records in its state file (cli/store_flags.ts); without that, the default file store only if
 * it exists (never at flanneld's default etcd, which the daemon would use: a doctor run must not hang on
 * an absent etcd). The file store is opened read-only.
 * @module
 */
import { isDirectory } from "../base/exists.ts";
import type { SubnetStore } from "../store/types.ts";
import { openStore, storeChoice, type StoreOptions } from "../store/open.ts";
import { DEFAULT_STORE_DIR } from "../store/file/file.ts";
import { FileStoreReader } from "../store/file/file_reader.ts";

/** How the doctor opens its store: `open` null = no store to read; `explicit` = a store flag chose it. */
export interface DoctorStore {
  open: (() => Promise<SubnetStore>) | null;
  explicit: boolean;
}

/**
 * The doctor's store from the store flags. `storeDirGiven`: `--store-dir` came from the command line or
 * its env variable (not a default). A default file store that does not exist is "no store" (checks fall
 * back to kernel state); an explicit `--store-dir` that does not exist opens to an error (the doctor
 * reports "could not check"). A missing file store is never opened: opening could create the directory,
 * and the doctor changes nothing.
 */
export function doctorStore(flags: StoreOptions, storeDirGiven: boolean): DoctorStore {
  const choice = storeChoice(flags);
  const kind = choice.implicit ? "file" : choice.kind;
  // The store the daemon records (no flag given): checked like a flag's, but one it cannot reach from
  // here (a pod's in-cluster account, on the host) makes its checks "unknown", not the whole run.
  const explicit = !flags.recordedIn && (kind !== "file" || storeDirGiven);
  const recordedDir = !!flags.recordedIn && kind === "file";
  const dir = flags.storeDir ?? DEFAULT_STORE_DIR;
  const what = flags.recordedIn
    ? `the daemon's store directory ${dir} (${flags.recordedIn})`
    : `--store-dir ${dir}`;
  const missingDir = () => Promise.reject(new Error(`${what}: no such directory`));
  const open = kind !== "file"
    ? () => openStore(flags)
    : isDirectory(dir)
    ? () => Promise.resolve(new FileStoreReader(dir, { warnConfig: () => {} }))
    : explicit || recordedDir
    ? missingDir
    : null;
  return { open, explicit };
}
