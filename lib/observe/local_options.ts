/**
 * Snapshot options for "this node" as `flanctl trace` and `flanctl status` read it: the default paths, a
 * `--netns`, and the store from the store flags (a default file store that does not exist is "no store";
 * the file store is opened read-only).
 * @module
 */
import { isDirectory } from "../base/exists.ts";
import type { SnapshotOptions } from "./snapshot.ts";
import { DEFAULT_PATHS } from "./paths.ts";
import { FileStoreReader } from "../store/file/file_reader.ts";
import { openStore, storeKind, type StoreOptions } from "../store/open.ts";
import { DEFAULT_STORE_DIR } from "../store/file/file.ts";

/** Options for reading this node (or `netns`) with the store named by `store`. */
export function localSnapshotOptions(
  netns: string | null,
  subnetFile: string,
  store: StoreOptions,
): SnapshotOptions {
  const kind = storeKind(store);
  const dir = store.storeDir ?? DEFAULT_STORE_DIR;
  return {
    netns,
    subnetFile,
    cniConfDir: DEFAULT_PATHS.cniConfDir,
    cniBinDir: DEFAULT_PATHS.cniBinDir,
    hostLocalDir: DEFAULT_PATHS.hostLocalDir,
    flannelDataDir: DEFAULT_PATHS.flannelDataDir,
    cniResultsDir: DEFAULT_PATHS.cniResultsDir,
    podNetnsPrefix: DEFAULT_PATHS.podNetnsPrefix,
    readyzUrl: null,
    probe: false,
    openStore: kind !== "file"
      ? () => openStore(store)
      : isDirectory(dir)
      ? () => Promise.resolve(new FileStoreReader(dir))
      : null,
    storeExplicit: false,
    skip: new Set(),
  };
}
