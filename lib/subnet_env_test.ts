import { assertEquals, assertThrows } from "../tests/assert.ts";
import { formatSubnetEnv, parseSubnetEnv, SubnetEnvError } from "./subnet_env.ts";

Deno.test("subnet.env round trip", () => {
  const text =
    "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";
  const e = parseSubnetEnv(text);
  assertEquals(e.subnet!.ip.toString(), "10.244.1.1");
  assertEquals(e.subnet!.net.toString(), "10.244.1.0/24");
  assertEquals(e.mtu, 1450);
  assertEquals(formatSubnetEnv(e), text);
});

Deno.test("subnet.env errors name the variable", () => {
  assertThrows(
    () => parseSubnetEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true"),
    SubnetEnvError,
    "FLANNEL_SUBNET",
  );
  assertThrows(
    () =>
      parseSubnetEnv(
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=x\nFLANNEL_IPMASQ=true",
      ),
    SubnetEnvError,
    "FLANNEL_MTU",
  );
  assertThrows(() => parseSubnetEnv("garbage"), SubnetEnvError, "malformed");
});
