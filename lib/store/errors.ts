/**
 * Errors every store raises, so the daemon and the CLI can react to the kind of failure (re-acquire on a
 * lost lease, retry while the store is unreachable) without knowing which store it is.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";

/**
 * The parent of every store error, so a caller can tell a store failure from any other with one
 * `instanceof`. Thrown as itself: the store refused the operation (HTTP error, auth, unsupported
 * operation); the subclasses below name the failures callers react to. Exit code 1 unless given.
 */
export class StoreError extends FlanctlError {
  /**
   * Makes the error.
   *
   * @param message what failed
   * @param options the standard `cause`
   * @param exitCode the exit code (1 unless given)
   */
  constructor(message: string, options?: ErrorOptions, exitCode = 1) {
    super(message, exitCode, options);
  }
}

/** The store (etcd, API server, directory) cannot be reached. Retrying later may succeed. */
export class StoreUnavailableError extends StoreError {
  /**
   * Makes the error.
   *
   * @param message which store, and why it cannot be reached
   * @param options the standard `cause`
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A lease asked for (renew, revoke, show) does not exist (expired, revoked or taken over). */
export class LeaseNotFoundError extends StoreError {
  /**
   * Makes the error.
   *
   * @param message which lease
   */
  constructor(message: string) {
    super(message);
  }
}

/** The store holds no network config yet. The message says how to write one. */
export class NoNetworkConfigError extends StoreError {
  /**
   * Makes the error.
   *
   * @param message how to write a config
   */
  constructor(message: string) {
    super(message);
  }
}

/** A subnet asked for (reserve) is held by another node. */
export class SubnetConflictError extends StoreError {
  /**
   * Makes the error.
   *
   * @param message which subnet, and who holds it
   */
  constructor(message: string) {
    super(message);
  }
}

/** The file store's directory does not exist (a typo'd `--store-dir`, or no config written yet). */
export class StoreDirNotFoundError extends StoreError {
  /** The missing directory. */
  readonly dir: string;
  /**
   * Makes the error.
   *
   * @param dir the missing directory
   */
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
  /**
   * Makes the error.
   *
   * @param op the refused operation
   */
  constructor(op: string) {
    super(`the store is opened read-only (${op} refused)`);
  }
}
