import { assertEquals } from "../../tests/assert.ts";
import { FlanctlError } from "../base/errors.ts";
import {
  LeaseNotFoundError,
  NoNetworkConfigError,
  ReadOnlyStoreError,
  StoreDirNotFoundError,
  StoreError,
  StoreUnavailableError,
  SubnetConflictError,
} from "./errors.ts";
import { StoreOpenError } from "./open.ts";
import { PodCidrNotAssignedError } from "./kube/kube.ts";
import { KubeApiError } from "./kube/kube_client.ts";
import { storeErrorKind } from "./classify.ts";

Deno.test("store errors: StoreError is the parent of every store error, each exiting 1", () => {
  const all: Error[] = [
    new StoreError("refused"),
    new StoreUnavailableError("down"),
    new LeaseNotFoundError("gone"),
    new NoNetworkConfigError("no config"),
    new SubnetConflictError("taken"),
    new StoreDirNotFoundError("/nowhere"),
    new ReadOnlyStoreError("put"),
    new PodCidrNotAssignedError("n1"),
  ];
  for (const e of all) {
    assertEquals(e instanceof StoreError && e instanceof FlanctlError, true, e.constructor.name);
    assertEquals((e as FlanctlError).exitCode, 1, e.constructor.name);
  }
  assertEquals(new KubeApiError(403, "forbidden") instanceof StoreError, true);
});

Deno.test("store errors: StoreOpenError is a StoreError that keeps its cause's exit code", () => {
  const choice = { kind: "etcd" as const, why: "--etcd-endpoints", implicit: false };
  const e = new StoreOpenError(choice, new FlanctlError("bad flag", 2));
  assertEquals(e instanceof StoreError, true);
  assertEquals(e.exitCode, 2);
  assertEquals(new StoreOpenError(choice, new Error("x")).exitCode, 1);
});

Deno.test("store errors: classified by the most specific class first", () => {
  assertEquals(storeErrorKind(new StoreUnavailableError("down")), "unreachable");
  assertEquals(storeErrorKind(new LeaseNotFoundError("gone")), "lease-gone");
  assertEquals(storeErrorKind(new NoNetworkConfigError("none")), "no-config");
  assertEquals(storeErrorKind(new StoreError("refused")), "refused");
});
