/**
 * Errors every store raises, so the daemon and the CLI can react to the kind of failure (re-acquire on a
 * lost lease, retry while the store is unreachable) without knowing which store it is.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";

/** The store (etcd, API server, directory) cannot be reached. Retrying later may succeed. */
export class StoreUnavailableError extends FlanctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, 1, options);
  }
}

/** A lease asked for (renew, revoke, show) does not exist (expired, revoked or taken over). */
export class LeaseNotFoundError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** The store holds no network config yet. The message says how to write one. */
export class NoNetworkConfigError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** A subnet asked for (reserve) is held by another node. */
export class SubnetConflictError extends FlanctlError {
  constructor(message: string) {
    super(message, 1);
  }
}

/** The store refused the operation (HTTP error, auth, unsupported operation). */
export class StoreError extends FlanctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, 1, options);
  }
}

/** The file store's directory does not exist (a typo'd `--store-dir`, or no config written yet). */
export class StoreDirNotFoundError extends StoreError {
  /** The missing directory. */
  readonly dir: string;
  constructor(dir: string) {
    super(
      `file store directory ${dir} does not exist: check --store-dir, or create the store with ` +
        `'flanctl lease config set net-conf.json --store-dir ${dir}'`,
    );
    this.dir = dir;
  }
}

/** A write asked of a read-only store view (the doctor's, lib/store/file/file_reader.ts's). */
export class ReadOnlyStoreError extends StoreError {
  constructor(op: string) {
    super(`the store is opened read-only (${op} refused)`);
  }
}
