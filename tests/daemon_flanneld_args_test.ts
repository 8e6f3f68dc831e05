/**
 * Drop-in for flanneld: two daemons started with flanneld-style argument lists as real unit files and
 * manifests write them — one invoked as `flanneld` with single-dash Go flags (a classic
 * /etc/systemd/system/flanneld.service ExecStart), one as `flanctl daemon` with double-dash flags, `=value`
 * booleans and FLANNELD_* env (as a DaemonSet passes them) — against an etcd with authentication, and each
 * flag's effect is checked: the key prefix, credentials from a file, the announced public IP, subnet.env,
 * the masquerade rules with and without --random-fully, forward rules off/on, the blackhole route, the
 * regex interface choice, -v, the health port, and the two nodes programming each other.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { DaemonCluster, routes, spawnEtcd, waitFor } from "./daemon_fixture.ts";
import { flanctlCmd, NetnsFixture, nsRun, ROOT, sh } from "./netns.ts";

needsRoot.test("daemon: flanneld unit-file and manifest argument lists, each flag's effect", async () => {
  const c = new DaemonCluster("10.97");
  let etcd: Deno.ChildProcess | null = null;
  const procs: Deno.ChildProcess[] = [];
  const logs: string[][] = [[], []];
  const url = "http://10.97.0.1:2379";
  const prefix = "/flanneld-unit/network";
  const ctl = (...args: string[]) =>
    nsRun(c.underlay, ["etcdctl", "--endpoints", url, "--user", "root:s3cret", ...args]);
  try {
    await c.init();
    const a = await c.addNode(), b = await c.addNode();
    etcd = spawnEtcd(c.underlay, `${c.tmp}/etcd`, url);
    await waitFor(
      "etcd up",
      async () =>
        (await nsRun(c.underlay, ["etcdctl", "--endpoints", url, "user", "add", "root:s3cret"])).code === 0,
    );
    assertEquals((await nsRun(c.underlay, ["etcdctl", "--endpoints", url, "auth", "enable"])).code, 0);
    const conf = JSON.stringify({ Network: "10.246.0.0/16", Backend: { Type: "vxlan" } });
    assertEquals((await ctl("put", `${prefix}/config`, conf)).code, 0);
    await Deno.writeTextFile(`${c.tmp}/etcd-password`, "s3cret\n");
    // The public IP node A announces: a second address on its underlay interface.
    await sh("ip", "-n", a.ns, "addr", "add", "10.97.0.200/24", "dev", "eth0");

    const spawn = (i: number, ns: string, args: string[], env: Record<string, string>) => {
      const p = new Deno.Command("ip", {
        args: ["netns", "exec", ns, ...flanctlCmd(...args)],
        env,
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      procs.push(p);
      (async () => {
        const dec = new TextDecoderStream();
        let buf = "";
        for await (const chunk of p.stderr.pipeThrough(dec)) {
          buf += chunk;
          const lines = buf.split("\n");
          buf = lines.pop() ?? "";
          logs[i].push(...lines);
        }
      })();
    };

    // A: a flanneld.service ExecStart, single-dash Go flags, invoked under the name flanneld.
    spawn(0, a.ns, [
      `-etcd-endpoints=${url}`,
      `-etcd-prefix=${prefix}`,
      "-etcd-username=root",
      `-etcd-password-file=${c.tmp}/etcd-password`,
      "-iface=eth0",
      "-public-ip=10.97.0.200",
      "-ip-masq",
      "-ip-masq-fully-random-disable",
      "-iptables-forward-rules=false",
      "-ip-blackhole-route",
      "-iptables-resync",
      "1",
      "-subnet-file",
      a.subnetFile,
      `-state-dir=${a.stateDir}`,
      "-healthz-ip=127.0.0.1",
      `-healthz-port=${a.port}`,
      "-subnet-lease-renew-margin=30",
      "-v=2",
      "-vmodule=main=3",
      "-log_backtrace_at=main.go:100",
    ], { FLANCTL_ARGV0: "/opt/bin/flanneld" });
    // B: DaemonSet-style double-dash flags, env for the rest (the regex has a comma: never split).
    spawn(1, b.ns, [
      "daemon",
      "--etcd-endpoints",
      url,
      `--etcd-prefix=${prefix}`,
      "--etcd-username=root",
      "--iface-regex",
      "^eth[0-9]{1,2}$",
      "--ip-masq=true",
      "--iptables-forward-rules",
      `--subnet-file=${b.subnetFile}`,
      "--state-dir",
      b.stateDir,
      "--healthz-ip",
      "127.0.0.1",
    ], {
      FLANNELD_HEALTHZ_PORT: String(b.port),
      FLANNELD_IPTABLES_RESYNC: "1",
      FLANNELD_ETCD_PASSWORD: "s3cret",
    });
    const why = () => `\nA:\n${logs[0].join("\n")}\nB:\n${logs[1].join("\n")}`;
    await waitFor(() => `A ready${why()}`, async () => (await c.http(a, "/readyz"))[0] === 200, 40_000);
    await waitFor(() => `B ready${why()}`, async () => (await c.http(b, "/readyz"))[0] === 200, 40_000);
    const subA = await c.subnetOf(a), subB = await c.subnetOf(b);

    // --etcd-prefix, --etcd-username/--etcd-password(-file), --public-ip: the leases under our prefix.
    const get = async (sub: string) =>
      JSON.parse(
        (await ctl("get", `${prefix}/subnets/${sub.replace("/", "-")}`, "--print-value-only")).stdout,
      );
    assertEquals((await get(subA)).PublicIP, "10.97.0.200");
    assertEquals((await get(subB)).PublicIP, b.ip, "--iface-regex chose eth0 (B's only match)");
    // --subnet-file and --ip-masq: subnet.env at the given path.
    assertEquals((await c.subnetEnv(a)).FLANNEL_IPMASQ, "true");
    assertEquals((await c.subnetEnv(b)).FLANNEL_IPMASQ, "true");
    // --ip-masq-fully-random-disable (A) vs the default --random-fully (B); forward rules off (A) / on (B).
    const natA = (await nsRun(a.ns, ["iptables-save", "-t", "nat"])).stdout;
    const natB = (await nsRun(b.ns, ["iptables-save", "-t", "nat"])).stdout;
    assertStringIncludes(natA, `-m comment --comment "flanneld masq" -j MASQUERADE\n`);
    assert(!natA.includes("--random-fully"), natA);
    assertStringIncludes(natB, `-m comment --comment "flanneld masq" -j MASQUERADE --random-fully`);
    assert(!(await nsRun(a.ns, ["iptables-save", "-t", "filter"])).stdout.includes("FLANNEL-FWD"));
    assertStringIncludes((await nsRun(b.ns, ["iptables-save", "-t", "filter"])).stdout, "-j FLANNEL-FWD");
    // --ip-blackhole-route on A only.
    const bh = async (ns: string) => (await sh("ip", "-n", ns, "route", "show", "type", "blackhole")).trim();
    assertEquals(await bh(a.ns), `blackhole ${subA}`, "as `ip route add blackhole` makes it");
    assertEquals(await bh(b.ns), "");
    // The two nodes program each other; B's FDB entry for A goes to A's announced public IP.
    await waitFor("A routes B's subnet", async () => (await routes(a.ns)).some((r) => r.dst === subB));
    await waitFor("B routes A's subnet", async () => (await routes(b.ns)).some((r) => r.dst === subA));
    const fdb = await sh("bridge", "-n", b.ns, "fdb", "show", "dev", "flannel.1");
    assertStringIncludes(fdb, "dst 10.97.0.200");
    // VXLAN device as flanneld >= 0.27.4: local = the external (public) address; accept_ra=0.
    const dev = await sh("ip", "-n", a.ns, "-d", "link", "show", "flannel.1");
    assertStringIncludes(dev, "local 10.97.0.200 ");
    assertEquals(
      (await nsRun(a.ns, ["cat", "/proc/sys/net/ipv6/conf/flannel.1/accept_ra"])).stdout.trim(),
      "0",
    );
    // -v=2 means debug logging (A); B logs at info.
    await waitFor(() => `A debug lines${why()}`, () => logs[0].some((l) => l.includes("level=debug")));
    assert(!logs[1].some((l) => l.includes("level=debug")), why());
    assert(logs[0].some((l) => l.includes("store chosen") && l.includes("--etcd-endpoints is set")), why());
    // The password never reaches the logs.
    assert(!logs.flat().some((l) => l.includes("s3cret")), why());
  } finally {
    for (const p of procs) {
      try {
        p.kill("SIGTERM");
      } catch { /* gone */ }
      await p.status;
    }
    try {
      etcd?.kill("SIGKILL");
      await etcd?.status;
    } catch { /* gone */ }
    await c.close();
  }
});

needsRoot.test("daemon: no store flag means flanneld's default etcd, and errors say so", async () => {
  const fx = new NetnsFixture();
  try {
    const ns = await fx.add("st");
    // Nothing listens in a fresh namespace: the error names the store, why it was chosen and the fix.
    const r = await nsRun(ns, flanctlCmd("lease", "list"));
    assertEquals(r.code, 1);
    assertStringIncludes(
      r.stderr,
      "flanctl: etcd store (no --etcd-endpoints, --kube-subnet-mgr or --store-dir: flanneld's default etcd " +
        "http://127.0.0.1:4001,http://127.0.0.1:2379): etcd unreachable",
    );
    // Two stores at once is a usage error, never a silent pick.
    const both = await nsRun(
      ns,
      flanctlCmd("daemon", "--store-dir", "/nonexistent", "--etcd-endpoints=http://x:1"),
    );
    assertEquals(both.code, 2);
    assertStringIncludes(both.stderr, "flanctl: --store-dir: conflicts with --etcd-endpoints;");
  } finally {
    await fx.cleanup();
  }
});

Deno.test("daemon path: commander is not in the code graph of cli/daemon_main.ts", async () => {
  const o = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${ROOT}cli/daemon_main.ts`],
    stdout: "piped",
  }).output();
  const g = JSON.parse(new TextDecoder().decode(o.stdout)) as {
    roots: string[];
    modules: { specifier: string; dependencies?: { specifier: string; code?: { specifier: string } }[] }[];
    redirects?: Record<string, string>;
  };
  const bySpec = new Map(g.modules.map((m) => [m.specifier, m]));
  // Walk only runtime ("code") edges, static and dynamic; type-only imports load nothing.
  const seen = new Set<string>();
  const todo = [...g.roots];
  while (todo.length) {
    const s = todo.pop()!;
    const spec = g.redirects?.[s] ?? s;
    if (seen.has(spec)) continue;
    seen.add(spec);
    for (const d of bySpec.get(spec)?.dependencies ?? []) if (d.code) todo.push(d.code.specifier);
  }
  assert(seen.size > 20, `graph walked (${seen.size} modules)`);
  assert(seen.has(`file://${ROOT}lib/daemon/run.ts`), "the daemon itself is in the graph");
  const cmd = [...seen].filter((s) => s.includes("commander"));
  assertEquals(cmd, [], "commander on the daemon path");
});
