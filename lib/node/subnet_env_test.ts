import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { formatSubnetEnv, parseSubnetEnv, SubnetEnvError, writeSubnetEnv } from "./subnet_env.ts";
import { IPNet } from "../base/cidr.ts";

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

Deno.test("subnet.env dual stack and IPv6-only, in flanneld's order (WriteSubnetFile)", () => {
  const dual = "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\n" +
    "FLANNEL_IPV6_NETWORK=fc00::/48\nFLANNEL_IPV6_SUBNET=fc00:0:0:3::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n";
  const d = parseSubnetEnv(dual);
  assertEquals([String(d.ipv6Network), String(d.ipv6Subnet!.net), String(d.ipv6Subnet!.ip)], [
    "fc00::/48",
    "fc00:0:0:3::/64",
    "fc00:0:0:3::1",
  ]);
  assertEquals(formatSubnetEnv(d), dual);
  // IPv6-only: flanneld writes no FLANNEL_NETWORK/FLANNEL_SUBNET at all.
  const v6 = "FLANNEL_IPV6_NETWORK=fc00::/48\nFLANNEL_IPV6_SUBNET=fc00:0:0:3::1/64\nFLANNEL_MTU=1430\n" +
    "FLANNEL_IPMASQ=false\n";
  const o = parseSubnetEnv(v6);
  assertEquals([o.network, o.subnet], [undefined, undefined]);
  assertEquals(formatSubnetEnv(o), v6);
  assertThrows(
    () => parseSubnetEnv("FLANNEL_IPV6_NETWORK=fc00::/48\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=false\n"),
    SubnetEnvError,
    "FLANNEL_IPV6_SUBNET",
  );
});

Deno.test("writeSubnetEnv: a write that fails (the path is a directory) leaves no temporary file", () => {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-subnetenv-" });
  try {
    Deno.mkdirSync(`${dir}/subnet.env`);
    const net = IPNet.parse("10.244.0.0/16");
    const sub = IPNet.parse("10.244.3.0/24");
    assertThrows(() =>
      writeSubnetEnv(
        { network: net, subnet: { ip: sub.ip.add(1), net: sub }, mtu: 1450, ipMasq: true },
        `${dir}/subnet.env`,
      )
    );
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), ["subnet.env"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
