/**
 * `flanctl daemon` failing late in start-up: it exits non-zero, logs which step failed and what was undone
 * (`msg="daemon start-up failed" step=… undone=… left=…`), and leaves no half-made kernel state it created —
 * while what flanneld keeps across a restart (the lease, a device that existed before, subnet.env, rules)
 * stays in place.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, runDaemonOnce, type TestNode } from "./daemon_fixture.ts";
import { nsRun } from "./netns.ts";

const CONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } });

/** The index of `dev` in `ns`, or null when it does not exist. */
async function ifindex(ns: string, dev: string): Promise<number | null> {
  const r = await nsRun(ns, ["ip", "-j", "link", "show", "dev", dev]);
  return r.code === 0 ? (JSON.parse(r.stdout) as { ifindex: number }[])[0].ifindex : null;
}

async function leaseCount(storeDir: string): Promise<number> {
  return (await Array.fromAsync(Deno.readDir(`${storeDir}/subnets`)).catch(() => [])).length;
}

/** The daemon's "start-up failed" line. */
function failLine(stderr: string): string {
  const l = stderr.split("\n").find((x) => x.includes(`msg="daemon start-up failed"`));
  assert(l, `no start-up failure logged:\n${stderr}`);
  return l;
}

/** A one-node cluster on underlay `base` with the vxlan config, removed afterwards (also on failure). */
async function withNode(base: string, fn: (c: DaemonCluster, n: TestNode) => Promise<void>): Promise<void> {
  const c = new DaemonCluster(base);
  try {
    await c.init(CONF);
    await fn(c, await c.addNode());
  } finally {
    await c.close();
  }
}

/** Points `n`'s subnet.env at a directory: writing it fails (EISDIR) after the device step. */
async function unwritableSubnetEnv(n: TestNode): Promise<string[]> {
  const dir = `${n.dir}/bad`;
  const file = `${dir}/subnet.env`;
  await Deno.mkdir(file, { recursive: true });
  return ["--subnet-file", file];
}

needsRoot.test("daemon start-up failing after the device step removes the device it created, keeps the lease", () =>
  withNode("10.89", async (c, n) => {
    const bad = await unwritableSubnetEnv(n);
    const r = await runDaemonOnce(n.ns, [...c.daemonArgs(n, ["--ip-masq"]), ...bad]);
    assertEquals(r.code, 1, r.stderr);
    const line = failLine(r.stderr);
    assertStringIncludes(line, "step=subnet.env");
    assertStringIncludes(line, "undone=device,backend,state-file,http");
    assertStringIncludes(line, "left=preflight,firewall,lease");
    // The operator still sees the step's own error, as before (not a wrapper naming the step).
    const said = r.stderr.split("\n").find((l) => l.startsWith("flanctl: "));
    assert(said?.includes("Is a directory") && !said.includes("StepError"), r.stderr);
    assertStringIncludes(r.stderr, `msg="removed the device this start created" device=flannel.1`);
    assertEquals(await ifindex(n.ns, "flannel.1"), null, "the device made by this start is gone");
    // No state file naming a daemon, no half-written subnet.env beside the directory in its way.
    assertEquals((await Array.fromAsync(Deno.readDir(`${n.dir}/bad`))).map((e) => e.name), ["subnet.env"]);
    // Kept on purpose, as flanneld: the lease (the next start gets the same subnet back).
    assertEquals(await leaseCount(c.storeDir), 1);
    const save = (await nsRun(n.ns, ["iptables-save"])).stdout;
    assert(!save.includes("FLANNEL-POSTRTG"), "the rules step never ran");
  }));

needsRoot.test("daemon start-up failing keeps what a previous run left (device, subnet.env, rules); a taken health port fails at step=http", () =>
  withNode("10.88", async (c, n) => {
    c.start(n, ["--ip-masq"]);
    await c.waitReady(n);
    const env = await Deno.readTextFile(n.subnetFile);
    const dev = await ifindex(n.ns, "flannel.1");
    assert(dev !== null);

    // A second daemon on the same health port: nothing of its own is made, the running node is untouched.
    const taken = await runDaemonOnce(n.ns, c.daemonArgs(n, ["--ip-masq"]));
    assert(taken.code !== 0, taken.stderr);
    const l1 = failLine(taken.stderr);
    assertStringIncludes(l1, "step=http");
    assertStringIncludes(l1, `undone="" left=""`);
    assertEquals((await c.http(n, "/readyz"))[0], 200, "the running daemon still serves");
    // A second daemon with this subnet file and no health port, failing later (no such interface): the
    // running daemon's state file (status and doctor find it there) is neither replaced nor removed.
    const statePath = n.subnetFile.replace(/[^/]*$/, "flanctl.json");
    const owner = JSON.parse(await Deno.readTextFile(statePath)).pid;
    const second = await runDaemonOnce(
      n.ns,
      c.daemonArgs(n, ["--ip-masq", "--healthz-port=0", "--iface", "nosuch"]),
    );
    assert(second.code !== 0, second.stderr);
    assertStringIncludes(second.stderr, "its state file is kept");
    assertEquals(
      JSON.parse(await Deno.readTextFile(statePath)).pid,
      owner,
      "the running daemon's state file",
    );
    assertEquals(await c.stop(n), 0);

    // Restarted with a subnet.env it cannot write (another path): the device from the previous run stays
    // (same index), and so do the rules and the previous run's subnet.env.
    const bad = await unwritableSubnetEnv(n);
    const r = await runDaemonOnce(n.ns, [...c.daemonArgs(n, ["--ip-masq"]), ...bad]);
    assertEquals(r.code, 1, r.stderr);
    assertStringIncludes(failLine(r.stderr), "step=subnet.env");
    assert(!r.stderr.includes("removed the device"), r.stderr);
    assertEquals(await ifindex(n.ns, "flannel.1"), dev, "the device that existed before is kept");
    assertEquals(await Deno.readTextFile(n.subnetFile), env);
    assertStringIncludes((await nsRun(n.ns, ["iptables-save"])).stdout, "FLANNEL-POSTRTG");
    assertEquals(await leaseCount(c.storeDir), 1);
  }));
