import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { parseNetConfig } from "../config/netconf.ts";
import type { Backend } from "../backend/types.ts";
import { backendStep, Draft } from "./steps.ts";
import { fakeNodeBase } from "../../tests/node_base_fixture.ts";

Deno.test("backend step: a dual-stack IPv6 backend whose prepare throws is closed, as the IPv4 one", async () => {
  const closed: number[] = [], lines: string[] = [];
  const make = (_nl: unknown, _cfg: unknown, _ext: unknown, _dir: string, o: { family?: 4 | 6 } = {}) => {
    const family = o.family ?? 4;
    const be: Backend = {
      type: "fake",
      overlayDev: `fake${family}`,
      mtu: 1450,
      prepare() {
        if (family === 6) throw new RangeError("the IPv6 device is in the way");
      },
      backendData: () => null,
      ensure: () => [],
      peer: () => "skipped",
      close: () => {
        closed.push(family);
        return Promise.resolve();
      },
    };
    return be;
  };
  const d = new Draft(fakeNodeBase(lines, { stateDir: "/nonexistent" }));
  d.cfg = parseNetConfig(JSON.stringify({
    Network: "10.244.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fc00::/48",
    Backend: { Type: "vxlan" },
  }));
  d.ext = {
    name: "eth0",
    index: 2,
    mtu: 1500,
    ifaceIP: "192.0.2.1",
    publicIP: "192.0.2.1",
    ifaceIPv6: "fc00:99::1",
    publicIPv6: "fc00:99::1",
  };
  await assertRejects(async () => await backendStep(make).run(d), RangeError, "in the way");
  assertEquals(closed.sort(), [4, 6], "both backends closed");
  assertEquals(d.v6, null);
});
