/**
 * Describes a store failure for logs and /readyz, by error class (never by message text): the file
 * store's raw filesystem errors (EPERM/EACCES, EROFS, ENOSPC, …), an unreachable store, a refusal by the
 * store (etcd auth or quota, API server), or a bad config. The lease keeper retries all of them; this only
 * names the kind so an operator sees what to fix.
 * @module
 */
import { ConfigError } from "../config/netconf.ts";
import { LeaseNotFoundError, NoNetworkConfigError, StoreError, StoreUnavailableError } from "./errors.ts";
import { errText } from "../base/errors.ts";

/** The kind of a store failure. */
export type StoreErrorKind =
  | "unreachable"
  | "refused"
  | "permission"
  | "read-only"
  | "no-space"
  | "io"
  | "no-config"
  | "bad-config"
  | "lease-gone"
  | "other";

/** Classifies `e` (a thrown store error) by its class. */
export function storeErrorKind(e: unknown): StoreErrorKind {
  if (e instanceof StoreUnavailableError) return "unreachable";
  if (e instanceof LeaseNotFoundError) return "lease-gone";
  if (e instanceof NoNetworkConfigError) return "no-config";
  if (e instanceof ConfigError) return "bad-config";
  if (e instanceof StoreError) return "refused";
  const code = e instanceof Error ? (e as { code?: unknown }).code : undefined;
  if (code === "EROFS") return "read-only";
  if (code === "ENOSPC" || code === "EDQUOT") return "no-space";
  if (e instanceof Deno.errors.PermissionDenied || e instanceof Deno.errors.NotCapable) return "permission";
  if (code === "EPERM" || code === "EACCES") return "permission";
  if (e instanceof Deno.errors.TimedOut) return "unreachable";
  if (typeof code === "string" || (e instanceof Error && e.name in Deno.errors)) return "io";
  return "other";
}

/** `<kind>: <message>` for one failure, e.g. `permission: Operation not permitted (os error 1): …`. */
export function storeErrorCause(e: unknown): string {
  return `${storeErrorKind(e)}: ${errText(e)}`;
}

/**
 * True for failures that may go away by themselves (the store comes back, its directory becomes writable,
 * etcd's quota alarm is disarmed, a permission is granted again); false for a bad config and for anything
 * that is not a store error.
 */
export function retryableStoreError(e: unknown): boolean {
  const k = storeErrorKind(e);
  return k !== "bad-config" && k !== "other" && k !== "lease-gone";
}
