/** net-conf parsing: flannel's defaults and every error it produces, plus garbage input. */
import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { ConfigError, parseNetConfig } from "./netconf.ts";
import { FlanctlError } from "../base/errors.ts";

const quiet = { warn: () => {} };
const parse = (o: unknown) => parseNetConfig(typeof o === "string" ? o : JSON.stringify(o), quiet);

Deno.test("netconf: defaults (SubnetLen rule, SubnetMin/Max, backend)", () => {
  const table: [unknown, number, string, string][] = [
    [{ Network: "10.244.0.0/16" }, 24, "10.244.1.0/24", "10.244.255.0/24"],
    [{ Network: "10.0.0.0/8" }, 24, "10.0.1.0/24", "10.255.255.0/24"],
    [{ Network: "10.5.0.0/22" }, 24, "10.5.1.0/24", "10.5.3.0/24"],
    [{ Network: "10.5.0.0/23" }, 25, "10.5.0.128/25", "10.5.1.128/25"],
    [{ Network: "10.5.0.0/28" }, 30, "10.5.0.4/30", "10.5.0.12/30"],
    [{ Network: "10.5.0.0/16", SubnetLen: 20 }, 20, "10.5.16.0/20", "10.5.240.0/20"],
    [{ network: "10.5.0.0/16", subnetlen: 26, SUBNETMIN: "10.5.2.0" }, 26, "10.5.2.0/26", "10.5.255.192/26"],
    [{ Network: "10.5.0.7/16" }, 24, "10.5.1.0/24", "10.5.255.0/24"],
  ];
  for (const [input, len, min, max] of table) {
    const c = parse(input);
    assertEquals(
      [c.subnetLen, String(c.subnetMin), String(c.subnetMax)],
      [len, min, max],
      JSON.stringify(input),
    );
    assertEquals(c.enableIPv4, true);
    assertEquals(c.enableIPv6, false);
  }
});

Deno.test("netconf: IPv6 mirror and dual stack", () => {
  const c = parse({
    Network: "10.244.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fc00::/48",
    Backend: { Type: "vxlan" },
  });
  assertEquals([c.ipv6SubnetLen, String(c.ipv6SubnetMin), String(c.ipv6SubnetMax)], [
    64,
    "fc00:0:0:1::/64",
    "fc00:0:0:ffff::/64",
  ]);
  const v6only = parse({ EnableIPv4: false, EnableIPv6: true, IPv6Network: "fc00::/120" });
  assertEquals([v6only.network, v6only.ipv6SubnetLen], [null, 122]);
});

Deno.test("netconf: backend type, case-insensitive, default vxlan with a warning", () => {
  assertEquals(parse({ Network: "10.1.0.0/16", Backend: { Type: "host-gw" } }).backend.type, "host-gw");
  assertEquals(parse({ Network: "10.1.0.0/16", backend: { type: "VXLAN", VNI: 4 } }).backend, {
    type: "vxlan",
    raw: { type: "VXLAN", VNI: 4 },
  });
  const warnings: string[] = [];
  const c = parseNetConfig(JSON.stringify({ Network: "10.1.0.0/16" }), { warn: (m) => warnings.push(m) });
  assertEquals(c.backend.type, "vxlan");
  assert(warnings.length === 1 && warnings[0].includes("udp"), "warns that flanneld would use udp");
  const c2 = parseNetConfig(JSON.stringify({ Network: "10.1.0.0/16", Backend: { VNI: 2 } }), {
    warn: (m) => warnings.push(m),
  });
  assertEquals(c2.backend.type, "vxlan");
  assertEquals(warnings.length, 2);
});

Deno.test("netconf: every flannel error, with the field named", () => {
  const table: [unknown, string, string][] = [
    [{}, "Network", "please define a correct Network parameter"],
    [{ Network: "bogus" }, "Network", "please define a correct Network parameter"],
    [{ Network: "fc00::/48" }, "Network", "please define a correct Network parameter"],
    [{ Network: "10.0.0.0/29" }, "Network", "network is too small. Minimum useful network prefix is /28"],
    [{ Network: "10.0.0.0/16", SubnetLen: 31 }, "SubnetLen", "SubnetLen must be less than /31"],
    [
      { Network: "10.0.0.0/16", SubnetLen: 17 },
      "SubnetLen",
      "network must be able to accommodate at least four subnets",
    ],
    [
      { Network: "10.0.0.0/16", SubnetMin: "10.1.0.0" },
      "SubnetMin",
      "SubnetMin is not in the range of the Network",
    ],
    [
      { Network: "10.0.0.0/16", SubnetMax: "11.0.0.0" },
      "SubnetMax",
      "SubnetMax is not in the range of the Network",
    ],
    [
      { Network: "10.0.0.0/16", SubnetMin: "10.0.1.5" },
      "SubnetMin",
      "SubnetMin is not on a SubnetLen boundary",
    ],
    [
      { Network: "10.0.0.0/16", SubnetMax: "10.0.9.128" },
      "SubnetMax",
      "SubnetMax is not on a SubnetLen boundary",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true },
      "IPv6Network",
      "please define a correct IPv6Network parameter",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true, IPv6Network: "fc00::/125" },
      "IPv6Network",
      "IPv6Network is too small. Minimum useful network prefix is /124",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true, IPv6Network: "fc00::/48", IPv6SubnetLen: 127 },
      "IPv6SubnetLen",
      "SubnetLen must be less than /127",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true, IPv6Network: "fc00::/48", IPv6SubnetLen: 49 },
      "IPv6SubnetLen",
      "network must be able to accommodate at least four subnets",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true, IPv6Network: "fc00::/48", IPv6SubnetMin: "fc01::" },
      "IPv6SubnetMin",
      "IPv6SubnetMin is not in the range of the IPv6Network",
    ],
    [
      { Network: "10.0.0.0/16", EnableIPv6: true, IPv6Network: "fc00::/48", IPv6SubnetMax: "fc00:0:0:5::1" },
      "IPv6SubnetMax",
      "IPv6SubnetMax is not on a SubnetLen boundary",
    ],
    [
      { Network: "10.0.0.0/16", Backend: { Type: "carrier-pigeon" } },
      "Backend.Type",
      "is not a known backend type",
    ],
    [{ Network: "10.0.0.0/16", Backend: { Type: 5 } }, "Backend.Type", "must be a string"],
    [{ Network: "10.0.0.0/16", Backend: "vxlan" }, "Backend", "must be an object"],
    [{ Network: "10.0.0.0/16", SubnetLen: "24" }, "SubnetLen", "non-negative integer"],
    [{ Network: "10.0.0.0/16", SubnetLen: 24.5 }, "SubnetLen", "non-negative integer"],
    [{ Network: "10.0.0.0/16", EnableIPv6: "yes" }, "EnableIPv6", "must be true or false"],
    [{ Network: "10.0.0.0/16", SubnetMin: 7 }, "SubnetMin", "must be an IP address string"],
    [{ Network: "10.0.0.0/16", SubnetMin: "fc00::" }, "SubnetMin", "not a valid IPv4 address"],
    [{ EnableIPv4: false }, "EnableIPv4", "enable at least one"],
    ["", "json", "not valid JSON"],
    ['{"Network": ', "json", "not valid JSON"],
    ["[1,2]", "json", "must be a JSON object"],
    ["null", "json", "must be a JSON object"],
    ["\u0000\u00ff garbage", "json", "not valid JSON"],
  ];
  for (const [input, field, msg] of table) {
    const e = assertThrows(() => parse(input), ConfigError, msg) as ConfigError;
    assertEquals(e.field, field, `field for ${JSON.stringify(input)}`);
    assert(e instanceof FlanctlError);
  }
});

Deno.test("netconf: errors quote the config bounded and escaped", () => {
  // Found by netconf_prop_test.ts: the JSON error carried the text's control characters raw, and a bad
  // Network, SubnetMin or Backend.Type value was quoted whole.
  const long = "\u001b[2J" + "x".repeat(5000);
  const inputs: unknown[] = [
    "\u0000".repeat(300),
    { Network: long },
    { Network: "10.0.0.0/16", SubnetMin: long },
    { Network: "10.0.0.0/16", Backend: { Type: long } },
    { Network: "10.0.0.0/16", Backend: { Type: [long] } },
    { Network: "10.0.0.0/16", EnableIPv6: { x: long } },
  ];
  for (const input of inputs) {
    const e = assertThrows(() => parse(input), ConfigError) as ConfigError;
    // deno-lint-ignore no-control-regex
    assert(!/[\u0000-\u001f\u007f-\u009f]/.test(e.message), JSON.stringify(e.message));
    assert(e.message.length <= 400, `${e.message.length} characters`);
  }
});
