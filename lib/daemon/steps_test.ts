import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { parseNetConfig } from "../config/netconf.ts";
import type { Backend } from "../backend/types.ts";
import type { NodeBase } from "./context.ts";
import { Logger } from "./log.ts";
import { Metrics } from "./metrics.ts";
import { MemoryRelease } from "./memory.ts";
import { Readiness } from "./readiness.ts";
import { backendStep, Draft } from "./steps.ts";

/** A base whose kernel and store are never touched (the backends are the test's own). */
function base(lines: string[]): NodeBase {
  const log = new Logger({ sink: (l) => lines.push(l), time: false });
  const metrics = new Metrics();
  return {
    o: { stateDir: "/nonexistent" } as NodeBase["o"],
    nl: {} as NodeBase["nl"],
    store: {} as NodeBase["store"],
    log,
    notify: () => {},
    metrics,
    readiness: new Readiness(metrics, log),
    memory: new MemoryRelease({}, log),
    jitless: false,
    signal: new AbortController().signal,
  };
}

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
  const d = new Draft(base(lines));
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
