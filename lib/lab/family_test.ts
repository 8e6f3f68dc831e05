import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { labNetConfFor, labNetworks, subnet6FromEnv, underlayAddrs6, validateIpFamily } from "./family.ts";
import { underlayOctet } from "./paths.ts";
import { readLabNetConf, validateUpOptions } from "./build.ts";

Deno.test("lab ip family: ULA underlay per lab, net-conf per family, --ip-family checked", () => {
  const x = underlayOctet("lab").toString(16);
  const u = underlayAddrs6("lab");
  assertEquals([u.cidr, u.gateway, u.nodeIP(3)], [
    `fc00:1ab:${x}::/64`,
    `fc00:1ab:${x}::1`,
    `fc00:1ab:${x}::d`,
  ]);
  const base = { network: "10.244.0.0/16", backend: "vxlan" as const };
  assertEquals(labNetConfFor(base), `{"Network":"10.244.0.0/16","Backend":{"Type":"vxlan"}}`);
  assertEquals(
    labNetConfFor({ ...base, ipFamily: "dual" }),
    `{"Network":"10.244.0.0/16","EnableIPv6":true,"IPv6Network":"fc00:244::/48","Backend":{"Type":"vxlan"}}`,
  );
  assertEquals(
    labNetConfFor({ ...base, ipFamily: "ipv6" }),
    `{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"fc00:244::/48","Backend":{"Type":"vxlan"}}`,
  );
  validateIpFamily(undefined);
  validateIpFamily("dual");
  assertThrows(() => validateIpFamily("v6"), UsageError, "--ip-family 'v6'");
  assertEquals(
    subnet6FromEnv("FLANNEL_IPV6_SUBNET=fc00:244:0:3::1/64\nFLANNEL_MTU=1430\n"),
    "fc00:244:0:3::/64",
  );
  assertEquals(subnet6FromEnv("FLANNEL_SUBNET=10.244.3.1/24\n"), null);
});

Deno.test("lab up --net-conf: the IP families come from the file; a disagreeing --ip-family is refused", () => {
  const file = Deno.makeTempFileSync({ suffix: ".json" });
  const read = (conf: unknown, ipFamily?: "ipv4" | "dual" | "ipv6") => {
    Deno.writeTextFileSync(file, JSON.stringify(conf));
    const r = readLabNetConf(file, { network: "10.244.0.0/16", ipFamily });
    return [r.ipFamily, r.network, r.backend];
  };
  try {
    const v6 = { EnableIPv6: true, IPv6Network: "fc00:99::/48", Backend: { Type: "vxlan" } };
    const v4 = { Network: "10.9.0.0/16", Backend: { Type: "vxlan" } };
    assertEquals(read(v4), ["ipv4", "10.9.0.0/16", "vxlan"]);
    assertEquals(read({ Network: "10.9.0.0/16", ...v6 }), ["dual", "10.9.0.0/16", "vxlan"]);
    assertEquals(read({ Network: "10.9.0.0/16", ...v6 }, "dual"), ["dual", "10.9.0.0/16", "vxlan"]);
    assertEquals(read({ EnableIPv4: false, ...v6, Backend: { Type: "host-gw" } }), [
      "ipv6",
      "10.244.0.0/16",
      "host-gw",
    ]);
    assertThrows(() => read(v4, "dual"), UsageError, "--ip-family dual: --net-conf");
    assertThrows(() => read({ Backend: { Type: "vxlan" } }), UsageError, "Network");
    assertThrows(() => read({ EnableIPv4: false, EnableIPv6: true }), UsageError, "IPv6Network");
    assertEquals(read({ ...v4, Backend: { Type: "udp" } }), ["ipv4", "10.9.0.0/16", "udp"]);
    assertEquals(read({ ...v4, Backend: { Type: "extension", SubnetAddCommand: "/x" } }), [
      "ipv4",
      "10.9.0.0/16",
      "extension",
    ]);
    assertThrows(() => read({ ...v4, ...v6, Backend: { Type: "udp" } }), UsageError, "carries IPv4 only");
    assertEquals(read({ ...v4, Backend: { Type: "wireguard" } }), ["ipv4", "10.9.0.0/16", "wireguard"]);
    assertThrows(
      () => read({ ...v4, Backend: { Type: "ipip" } }),
      UsageError,
      "vxlan, host-gw, udp, wireguard, alloc, extension",
    );
    // A FIFO (or /dev/stdin) is refused, not waited on.
    const fifo = `${file}.fifo`;
    new Deno.Command("mkfifo", { args: [fifo] }).outputSync();
    try {
      assertThrows(() => readLabNetConf(fifo), UsageError, "is a FIFO, not a regular file");
    } finally {
      Deno.removeSync(fifo);
    }
  } finally {
    Deno.removeSync(file);
  }
});

Deno.test("lab networks: IPv4 and/or IPv6 as the lab's net-conf has them", () => {
  const network = "10.244.0.0/16";
  assertEquals(labNetworks({ network }), [network]);
  assertEquals(labNetworks({ network, ipFamily: "dual" }), [network, "fc00:244::/48"]);
  assertEquals(labNetworks({ network, ipFamily: "ipv6" }), ["fc00:244::/48"]);
  const netConf = JSON.stringify({
    EnableIPv4: false,
    EnableIPv6: true,
    IPv6Network: "fc00:99::/48",
    Backend: { Type: "vxlan" },
  });
  assertEquals(labNetworks({ network, ipFamily: "ipv6", netConf }), ["fc00:99::/48"]);
});

Deno.test("lab up --backend udp with an IPv6 family is refused before anything is made", () => {
  const o = {
    name: "lab",
    nodes: 2,
    podsPerNode: 1,
    backend: "udp" as const,
    store: "file" as const,
    network: "10.244.0.0/16",
  };
  validateUpOptions(o);
  validateUpOptions({ ...o, ipFamily: "ipv4" });
  assertThrows(() => validateUpOptions({ ...o, ipFamily: "dual" }), UsageError, "--ip-family dual: the udp");
});

Deno.test("lab up --wireguard-way: one of the three ways, and only for the wireguard backend", () => {
  const o = {
    name: "lab",
    nodes: 2,
    podsPerNode: 1,
    backend: "wireguard" as const,
    store: "file" as const,
    network: "10.244.0.0/16",
  };
  for (const way of ["kernel", "userspace", "auto"] as const) validateUpOptions({ ...o, wireguardWay: way });
  assertThrows(
    () => validateUpOptions({ ...o, wireguardWay: "boringtun" as "auto" }),
    UsageError,
    "--wireguard-way 'boringtun': use kernel, userspace or auto",
  );
  const vx = { ...o, backend: "vxlan" as const };
  validateUpOptions({ ...vx, wireguardWay: "auto" });
  assertThrows(
    () => validateUpOptions({ ...vx, wireguardWay: "userspace" }),
    UsageError,
    "only for --backend wireguard (this lab: vxlan)",
  );
  validateUpOptions({ ...vx, wireguardWay: "userspace", netConf: "/some/net-conf.json" }); // its backend decides
});
