import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { formatResult, parseResult } from "./result.ts";
import {
  checkCommand,
  checkVersion,
  CniError,
  configError,
  parseCniArgs,
  parseNetConf,
  readEnv,
  validateIfName,
  versionInfo,
} from "./spec.ts";

const env = (vars: Record<string, string>) => (k: string) => vars[k];

Deno.test("cni env: required variables per verb, in the reference's order", () => {
  const e = assertThrows(() => readEnv(env({ CNI_COMMAND: "ADD" }), ""), CniError) as CniError;
  assertEquals(e.code, 4);
  assertEquals(e.msg, "required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH] missing");
  const del = assertThrows(
    () => readEnv(env({ CNI_COMMAND: "DEL", CNI_PATH: "/x" }), ""),
    CniError,
  ) as CniError;
  assertEquals(del.msg, "required env variables [CNI_CONTAINERID,CNI_IFNAME] missing");
  const a = readEnv(
    env({ CNI_COMMAND: "DEL", CNI_CONTAINERID: "c", CNI_IFNAME: "eth0", CNI_PATH: "/a:/b" }),
    "{}",
  );
  assertEquals([a.netns, a.path], ["", ["/a", "/b"]]);
  assertEquals(readEnv(env({ CNI_COMMAND: "VERSION" }), "").command, "VERSION");
  assertThrows(() => readEnv(env({}), ""), CniError, "CNI_COMMAND");
});

Deno.test("cni env: container ID and interface name rules", () => {
  const base = { command: "ADD" as const, netns: "/n", args: "", path: [], stdin: "" };
  checkCommand({ ...base, containerId: "a1_b.c-d", ifname: "eth0" });
  for (const id of ["-a", "a/b", "a b", "ä"]) {
    assertThrows(() => checkCommand({ ...base, containerId: id, ifname: "eth0" }), CniError, "containerID");
  }
  for (const n of ["", ".", "..", "a/b", "a:b", "a b", "a\tb", "x".repeat(16)]) {
    assertThrows(() => validateIfName(n), CniError);
  }
  validateIfName("x".repeat(15));
  assertThrows(
    () => checkCommand({ ...base, command: "NOPE" as "ADD", containerId: "a", ifname: "e" }),
    CniError,
  );
});

Deno.test("cni CNI_ARGS: known keys, IgnoreUnknown, malformed pairs", () => {
  assertEquals(parseCniArgs("IP=10.0.0.5", ["IP"]), { IP: "10.0.0.5" });
  assertEquals(parseCniArgs("IgnoreUnknown=1;K8S_POD_NAME=x;IP=1.2.3.4", ["IP"]), { IP: "1.2.3.4" });
  assertEquals(parseCniArgs("K8S_POD_NAME=x;IgnoreUnknown=true", []), {});
  assertThrows(() => parseCniArgs("K8S_POD_NAME=x", ["IP"]), CniError, "K8S_POD_NAME");
  assertThrows(() => parseCniArgs("IgnoreUnknown=0;X=1", []), CniError);
  assertThrows(() => parseCniArgs("IP", ["IP"]), CniError, "invalid pair");
  assertThrows(() => parseCniArgs("a=b=c", ["a"]), CniError, "invalid pair");
  assertThrows(() => parseCniArgs("IgnoreUnknown=yes", []), CniError, "boolean");
});

Deno.test("cni config: decode (6), name (7), version (1), default 0.1.0", () => {
  const code = (f: () => unknown) => (assertThrows(f, CniError) as CniError).code;
  assertEquals(code(() => parseNetConf("")), 6);
  assertEquals(code(() => parseNetConf("[]")), 6);
  assertEquals(code(() => parseNetConf('{"cniVersion":"1.0.0"}')), 7);
  assertEquals(code(() => parseNetConf('{"name":"a b"}')), 7);
  assertEquals(code(() => parseNetConf('{"name":"n","cniVersion":1}')), 6);
  assertEquals(parseNetConf('{"name":"n"}').version, "0.1.0");
  assertEquals(code(() => checkVersion("0.5.0")), 1);
  checkVersion("1.1.0");
  assertEquals(versionInfo(), {
    cniVersion: "1.1.0",
    supportedVersions: ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
  });
});

Deno.test("cni config errors: one plugin's thrower gives code 7, its message and the details", () => {
  const cfgErr: (details: string) => never = configError("invalid bridge config");
  const e = assertThrows(() => cfgErr("'mtu' must be an integer"), CniError) as CniError;
  assertEquals([e.code, e.msg, e.details], [7, "invalid bridge config", "'mtu' must be an integer"]);
});

Deno.test("cni results: every version's shape, and back", () => {
  const r = {
    interfaces: [{ name: "cni0", mac: "aa:aa:aa:aa:aa:aa", mtu: 1450 }, {
      name: "eth0",
      mac: "bb:bb:bb:bb:bb:bb",
      mtu: 1450,
      sandbox: "/var/run/netns/p",
    }],
    ips: [{ interface: 1, address: "10.244.1.5/24", gateway: "10.244.1.1" }, {
      interface: 1,
      address: "fd00::5/64",
      gateway: "fd00::1",
    }],
    routes: [{ dst: "10.244.0.0/16" }, { dst: "0.0.0.0/0", gw: "10.244.1.1" }, { dst: "fd00::/8" }],
  };
  assertEquals(formatResult(r, "1.1.0").interfaces, r.interfaces);
  assertEquals((formatResult(r, "1.0.0").interfaces as unknown[])[1], {
    name: "eth0",
    mac: "bb:bb:bb:bb:bb:bb",
    sandbox: "/var/run/netns/p",
  });
  const v031 = formatResult(r, "0.3.1");
  assertEquals((v031.ips as unknown[])[0], {
    version: "4",
    interface: 1,
    address: "10.244.1.5/24",
    gateway: "10.244.1.1",
  });
  assertEquals(v031.dns, {});
  // A 1.x result leaves out an empty dns, as libcni's types/100 (v1.2+, the reference plugins v1.10).
  assertEquals("dns" in formatResult(r, "1.0.0"), false);
  assertEquals(formatResult({ ...r, dns: { nameservers: ["10.96.0.10"] } }, "1.1.0").dns, {
    nameservers: ["10.96.0.10"],
  });
  // ... and its keys sorted at every level (types/100 re-marshals through a map); 0.x in struct order.
  assertEquals(
    JSON.stringify(formatResult({ ...r, dns: { search: ["a"], nameservers: ["10.96.0.10"] } }, "1.0.0")),
    '{"cniVersion":"1.0.0","dns":{"nameservers":["10.96.0.10"],"search":["a"]},' +
      '"interfaces":[{"mac":"aa:aa:aa:aa:aa:aa","name":"cni0"},' +
      '{"mac":"bb:bb:bb:bb:bb:bb","name":"eth0","sandbox":"/var/run/netns/p"}],' +
      '"ips":[{"address":"10.244.1.5/24","gateway":"10.244.1.1","interface":1},' +
      '{"address":"fd00::5/64","gateway":"fd00::1","interface":1}],' +
      '"routes":[{"dst":"10.244.0.0/16"},{"dst":"0.0.0.0/0","gw":"10.244.1.1"},{"dst":"fd00::/8"}]}',
  );
  assertEquals(Object.keys(v031), ["cniVersion", "interfaces", "ips", "routes", "dns"]);
  const v020 = formatResult(r, "0.2.0");
  assertEquals(v020, {
    cniVersion: "0.2.0",
    ip4: {
      ip: "10.244.1.5/24",
      gateway: "10.244.1.1",
      routes: [{ dst: "10.244.0.0/16" }, { dst: "0.0.0.0/0", gw: "10.244.1.1" }],
    },
    ip6: { ip: "fd00::5/64", gateway: "fd00::1", routes: [{ dst: "fd00::/8" }] },
    dns: {},
  });
  // Round trips through every older shape keep addresses and routes.
  for (const v of ["0.2.0", "0.3.1", "0.4.0", "1.0.0"]) {
    const back = parseResult(formatResult(r, v), "1.1.0");
    assertEquals(back.ips?.map((i) => i.address), ["10.244.1.5/24", "fd00::5/64"]);
    assertEquals(back.routes?.length, 3);
  }
  assertThrows(() => formatResult({ interfaces: [{ name: "x" }] }, "0.2.0"), CniError);
});
