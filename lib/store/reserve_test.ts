import { assertEquals, assertRejects, assertThrows } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import { reservationEntry } from "../lease/reservation.ts";
import type { NetConfig } from "../config/types.ts";
import type { Lease } from "./types.ts";
import { NoNetworkConfigError, SubnetConflictError } from "./errors.ts";
import { plannedReservation, replacedLeases } from "./reserve.ts";

const lease = (
  v4: string | null,
  ip: string,
  v6: string | null = null,
  ip6: string | null = null,
): Lease => ({
  subnet: v4 ? IPNet.parse(v4) : null,
  ipv6Subnet: v6 ? IPNet.parse(v6) : null,
  attrs: { PublicIP: ip, PublicIPv6: ip6, BackendType: "vxlan" },
  expiration: null,
});

Deno.test("replacedLeases: the reservation's own subnets go; another node's is a conflict before anything goes", () => {
  const r = reservationEntry(IPNet.parse("10.5.7.0/24"), "192.0.2.7");
  const leases: [string, Lease][] = [
    ["10.5.7.0-24", lease("10.5.7.0/24", "192.0.2.7")],
    ["10.5.8.0-24", lease("10.5.8.0/24", "192.0.2.8")],
    ["10.5.0.0-16", lease("10.5.0.0/16", "192.0.2.7")], // overlaps, same node: replaced too
  ];
  assertEquals(replacedLeases(r, leases), ["10.5.7.0-24", "10.5.0.0-16"]);
  const taken = [...leases, ["10.5.7.128-25", lease("10.5.7.128/25", "192.0.2.9")]] as [string, Lease][];
  const e = assertThrows(() => replacedLeases(r, taken), SubnetConflictError);
  assertEquals(e.message, "10.5.7.0/24 overlaps lease 10.5.7.128-25 of 192.0.2.9: revoke it first");
});

Deno.test("replacedLeases: a dual-stack reservation checks each family against its own public IP", () => {
  const r = reservationEntry(IPNet.parse("10.5.7.0/24"), "192.0.2.7", {
    subnet: IPNet.parse("fc00:0:0:7::/64"),
    publicIP: "2001:db8::7",
  });
  const mine = lease("10.5.7.0/24", "192.0.2.7", "fc00:0:0:7::/64", "2001:db8::7");
  assertEquals(replacedLeases(r, [["k", mine]]), ["k"]);
  const v6Elsewhere = lease(null, "0.0.0.0", "fc00:0:0:7::/64", "2001:db8::9");
  assertThrows(() => replacedLeases(r, [["k6", v6Elsewhere]]), SubnetConflictError, "of 2001:db8::9");
});

Deno.test("plannedReservation: one family refused in a dual-stack network; no config yet is no check", async () => {
  const dual = { enableIPv4: true, enableIPv6: true } as NetConfig;
  await assertRejects(
    () =>
      plannedReservation(
        { getNetworkConfig: () => Promise.resolve(dual) },
        IPNet.parse("10.5.7.0/24"),
        "192.0.2.7",
      ),
    Error,
    "both",
  );
  const none = { getNetworkConfig: () => Promise.reject(new NoNetworkConfigError("no config")) };
  assertEquals((await plannedReservation(none, IPNet.parse("10.5.7.0/24"), "192.0.2.7")).key, "10.5.7.0-24");
  const broken = { getNetworkConfig: () => Promise.reject(new Error("etcd down")) };
  await assertRejects(
    () => plannedReservation(broken, IPNet.parse("10.5.7.0/24"), "192.0.2.7"),
    Error,
    "etcd down",
  );
});
