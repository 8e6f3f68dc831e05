/**
 * Errors every store raises, so the daemon and the CLI can react to the kind of failure (re-acquire on a
 * lost lease, retry while the store is unreachable) without knowing which store it is.
 * @module
 */
import { FlanctlError } from "../errors.ts";

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
