/**
 * `flanctl daemon` refusing bad input: a bad network config or backend option in the store, and bad
 * flags, end with a non-zero exit, a message naming the field, and no kernel state (no flannel.1, no
 * subnet.env, no rules). Also: flags from FLANNELD_* environment variables.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, runDaemonOnce } from "./daemon_fixture.ts";
import { nsRun } from "./netns.ts";

const BAD: [string, string, string][] = [
  ["bad Network", JSON.stringify({ Network: "10.244.0.0/33", Backend: { Type: "vxlan" } }), "Network"],
  ["network too small", JSON.stringify({ Network: "10.244.0.0/29" }), "network is too small"],
  [
    "unsupported backend",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "ipip" } }),
    "not supported",
  ],
  [
    "wireguard PSK not a key",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "wireguard", PSK: "nope" } }),
    "Backend.PSK is not a WireGuard key",
  ],
  [
    "wireguard Mode unknown",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "wireguard", Mode: "both" } }),
    "Backend.Mode",
  ],
  [
    "udp Port 0",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp", Port: 0 } }),
    "Backend.Port must be an integer from 1 to 65535",
  ],
  [
    "udp Port out of range",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp", Port: 70000 } }),
    "Backend.Port",
  ],
  [
    "bad VNI",
    JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan", VNI: "x" } }),
    "Backend.VNI",
  ],
  ["not JSON", "{nope", "not valid JSON"],
];

needsRoot.test("daemon: bad network config exits non-zero with a clear message and leaves no state", async () => {
  const c = new DaemonCluster();
  try {
    await c.init();
    const n = await c.addNode();
    for (const [what, conf, msg] of BAD) {
      await Deno.writeTextFile(`${c.storeDir}/config`, conf);
      const r = await runDaemonOnce(n.ns, c.daemonArgs(n, ["--ip-masq"]));
      assert(r.code !== 0, `${what}: exit code ${r.code}`);
      assertStringIncludes(r.stderr, msg, what);
      const links = (await nsRun(n.ns, ["ip", "-o", "link"])).stdout;
      assert(!links.includes("flannel"), `${what}: no device may be created`);
      const save = (await nsRun(n.ns, ["iptables-save"])).stdout;
      assert(!save.includes("FLANNEL"), `${what}: no rules may be installed`);
      assert(!(await Deno.stat(n.subnetFile).catch(() => null)), `${what}: no subnet.env`);
      // No lease: the daemon never got to a write, so `subnets/` is absent (reading creates nothing) or empty.
      const leases = await Array.fromAsync(Deno.readDir(`${c.storeDir}/subnets`)).catch((e) => {
        if (e instanceof Deno.errors.NotFound) return [];
        throw e;
      });
      assertEquals(leases.map((e) => e.name), [], `${what}: no lease`);
    }
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon: bad flags are usage errors; FLANNELD_* env vars set flags", async () => {
  const c = new DaemonCluster();
  try {
    await c.init(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }));
    const n = await c.addNode();
    let r = await runDaemonOnce(n.ns, c.daemonArgs(n, ["--iface", "nosuch0"]));
    assert(r.code !== 0);
    assertStringIncludes(r.stderr, "--iface");
    r = await runDaemonOnce(n.ns, c.daemonArgs(n, ["--resync-interval", "soon"]));
    assertEquals(r.code, 2);
    assertStringIncludes(r.stderr, "--resync-interval");
    r = await runDaemonOnce(n.ns, c.daemonArgs(n, ["--ip-masq", "false"]));
    assertEquals(r.code, 2);
    assertStringIncludes(
      r.stderr,
      "flanctl: false: unexpected argument; a boolean flag takes its value after '='",
    );
    // The interface named by env is used (and reported in the error when it does not exist); the value is
    // one interface, as flanneld reads it (no comma splitting).
    r = await runDaemonOnce(n.ns, c.daemonArgs(n), { FLANNELD_IFACE: "nosuch1" });
    assert(r.code !== 0);
    assertStringIncludes(r.stderr, "nosuch1");
    assert(!(await nsRun(n.ns, ["ip", "-o", "link"])).stdout.includes("flannel"));
  } finally {
    await c.close();
  }
});

needsRoot.test("daemon: its stderr is logfmt only — the store's and the config parser's warnings included", async () => {
  // No Backend.Type (the parser warns: flanneld would use udp) and two malformed lease files (the file store
  // warns): library code reports them through the daemon's Logger, never as plain `flanctl: …` lines.
  const c = new DaemonCluster("10.97");
  try {
    await c.init(JSON.stringify({ Network: "10.240.0.0/16" }));
    await Deno.mkdir(`${c.storeDir}/subnets`, { recursive: true });
    await Deno.writeTextFile(`${c.storeDir}/subnets/10.240.9.0-24`, "{not json");
    await Deno.writeTextFile(`${c.storeDir}/subnets/bogus`, "{}");
    const n = await c.addNode();
    c.start(n);
    await c.waitReady(n);
    assertEquals(await c.stop(n), 0, n.log.join("\n"));
    const lines = n.log.filter((l) => l.trim() !== "");
    const notLogfmt = lines.filter((l) => !/^(time=\S+ )?level=(debug|info|warn|error) msg=/.test(l));
    assertEquals(notLogfmt, [], `every stderr line is logfmt:\n${lines.join("\n")}`);
    const warns = lines.filter((l) => l.includes("level=warn"));
    assert(warns.some((l) => l.includes("udp")), `the parser's Backend.Type warning:\n${lines.join("\n")}`);
    assert(
      warns.some((l) => l.includes("10.240.9.0-24")),
      `the malformed lease warning:\n${lines.join("\n")}`,
    );
    assert(warns.some((l) => l.includes("bogus")), `the bad file name warning:\n${lines.join("\n")}`);
  } finally {
    await c.close();
  }
});
