import { assert, assertEquals, assertRejects, assertStringIncludes } from "../../tests/assert.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { createBackend } from "../backend/mod.ts";
import { FileStore } from "../store/file/file.ts";
import { IPNet } from "../base/cidr.ts";
import type { Lease } from "../lease/types.ts";
import { PeerGate } from "./peer_gate.ts";
import { RejectionReporter } from "../reconcile/peer_guard.ts";
import { backendStep, Draft, NODE_STEPS } from "./steps.ts";
import { fakeNodeBase } from "../../tests/node_base_fixture.ts";
import { Reconciler } from "../reconcile/reconciler.ts";
import { FakeNetlink } from "../netlink/fake/fake_netlink.ts";
import { Peers } from "./peers.ts";

const EXT = {
  name: "eth0",
  index: 2,
  mtu: 1500,
  ifaceIP: "192.0.2.1",
  publicIP: "198.51.100.1",
  ifaceIPv6: "fc00:99::1",
  publicIPv6: "fc00:99::1",
};
const lease = NODE_STEPS.find((s) => s.name === "lease")!;

/** Runs the backend and lease steps of `netConf` against a file store in a temp dir; the lease file's text. */
async function start(netConf: Record<string, unknown>, lines: string[] = []) {
  const dir = await Deno.makeTempDir();
  const store = new FileStore({ dir: `${dir}/store`, warn: () => {} });
  await store.setNetworkConfig(JSON.stringify(netConf));
  const base = {
    ...fakeNodeBase(lines, { stateDir: `${dir}/state`, subnetFile: `${dir}/subnet.env` }),
    store,
  };
  const d = new Draft(base);
  d.cfg = parseNetConfig(JSON.stringify(netConf));
  d.ext = EXT;
  d.family = 4;
  d.network = d.cfg.network!;
  try {
    await backendStep(createBackend).run(d);
    await lease.run(d);
    const files = [...Deno.readDirSync(`${dir}/store/subnets`)].map((e) => e.name);
    assertEquals(files.length, 1, files.join(" "));
    const value = JSON.parse(Deno.readTextFileSync(`${dir}/store/subnets/${files[0]}`)).lease;
    return { d, dir, value };
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
}

Deno.test("alloc: the lease flanneld's alloc writes (PublicIP only), no device, the interface's MTU", async () => {
  const { d, dir, value } = await start({ Network: "10.244.0.0/16", Backend: { Type: "alloc" } });
  try {
    assertEquals(value, { PublicIP: "198.51.100.1", PublicIPv6: null });
    assertEquals([d.backend!.type, d.backend!.overlayDev, d.backend!.mtu, d.backend!.ensure(d.state!.own)], [
      "alloc",
      null,
      1500,
      [],
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extension: PreStartupCommand's output in the lease, PostStartupCommand after the lease", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/post`, `#!/bin/sh\nenv >"$1"\n`, { mode: 0o755 });
    const { d, value, dir: sdir } = await start({
      Network: "10.244.0.0/16",
      EnableIPv6: true,
      IPv6Network: "fc00::/48",
      Backend: {
        Type: "extension",
        PreStartupCommand: "echo from-pre",
        PostStartupCommand: `${dir}/post ${dir}/env`,
      },
    });
    await Deno.remove(sdir, { recursive: true });
    // flanneld's extension: the interface's addresses, BackendType extension, the output as a JSON string.
    assertEquals(value, {
      PublicIP: "192.0.2.1",
      PublicIPv6: "fc00:99::1",
      BackendType: "extension",
      BackendData: "from-pre",
    });
    assertEquals([d.backend!.type, d.v6!.backend.type, d.v6!.backend.overlayDev], [
      "extension",
      "extension",
      null,
    ]);
    const env = await Deno.readTextFile(`${dir}/env`);
    const own = d.state!.lease;
    assertStringIncludes(env, `SUBNET=${own.subnet}\n`);
    assertStringIncludes(env, `IPV6SUBNET=${own.ipv6Subnet}\n`);
    assertStringIncludes(env, "NETWORK=10.244.0.0/16\nPUBLIC_IP=192.0.2.1\n".split("\n")[0]);
    assertStringIncludes(env, "PUBLIC_IPV6=fc00:99::1\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extension: a failing PostStartupCommand fails the lease step", async () => {
  await assertRejects(
    () => start({ Network: "10.244.0.0/16", Backend: { Type: "extension", PostStartupCommand: "false" } }),
    Error,
    "PostStartupCommand: failed to run command: false Err: exit status 1",
  );
});

Deno.test("peer gate: a backend without a data plane programs nothing and refuses no peer", () => {
  const rejected: string[] = [];
  const be = createBackend(
    {} as never,
    parseNetConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "alloc" } })),
    EXT,
    "/nonexistent",
  );
  const gate = new PeerGate({
    family: 4,
    network: IPNet.parse("10.244.0.0/16"),
    subnetLen: 24,
    ownIPs: ["192.0.2.1"],
    backend: be,
    reporter: new RejectionReporter({
      log: { warn: (m: string) => rejected.push(m) } as never,
      count: (r) => rejected.push(r),
    }),
  }, IPNet.parse("10.244.1.0/24"));
  const peer: Lease = {
    subnet: IPNet.parse("10.244.2.0/24"),
    ipv6Subnet: null,
    attrs: { PublicIP: "192.0.2.2", PublicIPv6: null, BackendType: "" },
    expiration: null,
  };
  const keys = gate.apply({ type: "added", lease: peer });
  assertEquals(keys, ["10.244.2.0/24"]);
  assertEquals(gate.desired(keys[0], gate.accepted(keys[0])!, () => null), null);
  assert(rejected.length === 0, rejected.join("\n"));
});

Deno.test("peers: a lease-event backend gets the other nodes' listing and events, never our own", () => {
  const lines: string[] = [];
  const base = fakeNodeBase(lines);
  const listed: string[][] = [], events: string[] = [];
  const be = createBackend(
    {} as never,
    parseNetConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "alloc" } })),
    EXT,
    "/nonexistent",
  );
  be.leasesListed = (others) => listed.push(others.map((l) => String(l.subnet)));
  be.leaseEvent = (ev) => events.push(`${ev.type} ${ev.lease.subnet}`);
  const l = (n: number, pub = `192.0.2.${n}`): Lease => ({
    subnet: IPNet.parse(`10.244.${n}.0/24`),
    ipv6Subnet: null,
    attrs: { PublicIP: pub, PublicIPv6: null, BackendType: "" },
    expiration: null,
  });
  const own = l(1, "198.51.100.1");
  const network = IPNet.parse("10.244.0.0/16");
  const reconciler = new Reconciler({
    nl: new FakeNetlink(),
    network,
    overlayDev: null,
    log: base.log,
    stats: base.metrics,
  });
  const peers = new Peers({
    log: base.log,
    metrics: base.metrics,
    family: 4,
    network,
    subnetLen: 24,
    ext: EXT,
    backend: be,
    reconciler,
    v6: null,
    reporter: new RejectionReporter({ log: base.log, count: (r) => base.metrics.rejectPeer(r) }),
    state: { own: own.subnet!, lease: own },
  });
  peers.reset([own, l(2)]);
  peers.fullPass();
  peers.apply([
    { type: "added", lease: own },
    { type: "added", lease: l(3) },
    { type: "removed", lease: l(2) },
  ], () => {});
  assertEquals(listed, [["10.244.2.0/24"]]);
  assertEquals(events, ["added 10.244.3.0/24", "removed 10.244.2.0/24"]);
  assertEquals(reconciler.size, 0, "nothing programmed");
  assert(!lines.some((x) => x.includes("skipping peer") || x.includes("refused")), lines.join("\n"));
});
