import { assertEquals } from "../../tests/assert.ts";
import { goFold, goFoldName, NET_CONF, type Shape } from "./gojson.ts";

Deno.test("gojson: keys matched as encoding/json matches struct fields", () => {
  const shape: Shape = {
    hostPort: null,
    nested: { subnet: null },
    list: [{ dst: null }],
    grid: [[{ a: null }]],
  };
  const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ["exact", { hostPort: 1 }, { hostPort: 1 }],
    ["Go field name (go-cni has no tags)", { HostPort: 1 }, { hostPort: 1 }],
    ["all lower", { hostport: 1 }, { hostPort: 1 }],
    ["all upper", { HOSTPORT: 1 }, { hostPort: 1 }],
    ["the last of two spellings wins", { hostPort: 1, HostPort: 2 }, { hostPort: 2 }],
    ["... in document order", { HostPort: 2, hostPort: 1 }, { hostPort: 1 }],
    ["unknown kept as sent", { HostPortX: 1 }, { HostPortX: 1 }],
    ["nested struct", { Nested: { SUBNET: "x", Other: 1 } }, { nested: { subnet: "x", Other: 1 } }],
    ["list of structs", { LIST: [{ Dst: "a" }, 5] }, { list: [{ dst: "a" }, 5] }],
    ["list of lists", { grid: [[{ A: 1 }]] }, { grid: [[{ a: 1 }]] }],
    ["wrong JSON type left for the plugin's check", { nested: "s", list: {} }, { nested: "s", list: {} }],
    ["Kelvin sign and long s fold as in Go", { "ho\u017FtPort": 1 }, { hostPort: 1 }],
    ["no Unicode fold beyond Go's", { "HOSTPORT\u00df": 1 }, { "HOSTPORT\u00df": 1 }],
  ];
  for (const [label, input, want] of cases) assertEquals(goFold(input, shape), want, label);
  assertEquals(goFoldName("\u212Aey"), "key");
});

Deno.test("gojson: NET_CONF folds the runtime's capability args and prevResult", () => {
  const c = goFold({
    CNIVersion: "1.0.0",
    Name: "cbr0",
    RuntimeConfig: {
      portMappings: [{ HostPort: 18080, ContainerPort: 80, Protocol: "tcp", HostIP: "" }],
      "io.kubernetes.cri.pod-annotations": { A: "b" },
    },
    PrevResult: { IPs: [{ Address: "10.0.0.2/24", Interface: 0 }], Interfaces: [{ Name: "eth0" }] },
    delegate: { HairpinMode: true },
  }, NET_CONF);
  assertEquals(c, {
    cniVersion: "1.0.0",
    name: "cbr0",
    runtimeConfig: {
      portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp", hostIP: "" }],
      "io.kubernetes.cri.pod-annotations": { A: "b" },
    },
    prevResult: { ips: [{ address: "10.0.0.2/24", interface: 0 }], interfaces: [{ name: "eth0" }] },
    delegate: { HairpinMode: true },
  });
});
