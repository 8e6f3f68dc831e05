/**
 * `flanctl status` on a lab node (etcd store): the JSON shape, numbers equal to the daemon's /metrics,
 * the store killed → unreachable, the daemon killed → down (exit 1); a dual-stack nftables lab (both
 * families' lease, device and peers; rules from nft-rules), an IPv6-only lab and a udp lab (flannel0).
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd } from "./netns.ts";
import { DUAL_NFT_NETCONF, killLabProc, labExec, withLab, withNetConf } from "./lab_fixture.ts";
import { parseMetrics, type StatusJson } from "../lib/status/status.ts";

const SHAPE: Record<string, string[]> = {
  "": ["backend", "daemon", "health", "lease", "neighbours", "node", "peers", "reconcile", "rules", "store"],
  daemon: ["detail", "pid", "running", "source", "startedAt", "uptimeSeconds", "version"],
  store: ["daemonSeesStore", "error", "kind", "reachable"],
  lease: ["expiration", "ipv6Subnet", "publicIP", "publicIPv6", "renewalErrors", "renewals", "subnet"],
  backend: ["device", "deviceUp", "deviceV6", "mtu", "type"],
  peers: ["daemonPeers", "leases", "missing", "programmed", "stale", "v6"],
  reconcile: ["errors", "lastAt", "lastRepairs", "lastSeconds", "repairsTotal", "runs"],
  rules: ["forward", "masquerade", "masqueradeV6", "mode", "ok"],
  health: ["address", "healthz", "metrics", "readyz"],
  "neighbours.0": [
    "entries",
    "family",
    "forcedGcRuns",
    "gcThresh1",
    "gcThresh2",
    "gcThresh3",
    "table",
    "tableFulls",
  ],
};

/** `flanctl status -o json` on lab node `node` (through `lab exec`): its exit code, view and run. */
async function labStatus(name: string, node = "node1") {
  const r = await labExec(name, node, flanctlCmd("status", "-o", "json"));
  return { code: r.code, st: JSON.parse(r.stdout) as StatusJson, r };
}

/** The view has exactly the documented keys, section by section. */
function assertShape(st: StatusJson): void {
  for (const [k, keys] of Object.entries(SHAPE)) {
    // deno-lint-ignore no-explicit-any
    const o = k.split(".").filter(Boolean).reduce((x: any, p) => x[p], st) as object;
    assertEquals(Object.keys(o).sort(), keys, `keys of ${k || "status"}`);
  }
}

needsRoot.test({
  name:
    "status (etcd lab): JSON shape, numbers equal /metrics, store killed → unreachable, daemon killed → down",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const args = [
      "--nodes",
      "2",
      "--pods-per-node",
      "1",
      "--store",
      "etcd",
      "--daemon-arg=--resync-interval=3600",
    ];
    await withLab("ts", args, undefined, async (s, name) => {
      const status = () => labStatus(name);
      const { code, st, r } = await status();
      assertEquals(code, 0, r.stderr);
      assertShape(st);
      assertEquals([st.daemon.running, st.daemon.source, st.store.reachable, st.store.kind], [
        true,
        "state-file",
        true,
        "etcd",
      ]);
      assertEquals(st.daemon.pid, s.procs.find((p) => p.what === "daemon node1")!.pid);
      assertEquals([st.peers.leases, st.peers.programmed, st.peers.missing, st.peers.stale], [1, 1, [], []]);
      assertEquals([st.backend.type, st.backend.device, st.backend.deviceUp], ["vxlan", "flannel.1", true]);
      assertEquals([st.health.healthz, st.health.readyz, st.health.metrics], [200, 200, true]);
      assert(st.rules.ok, JSON.stringify(st.rules));
      // IPv4 only, iptables mode: the IPv6 fields are null and masquerade is doctor's masq-rules.
      assertEquals([st.lease.ipv6Subnet, st.backend.deviceV6, st.peers.v6, st.rules.masqueradeV6], [
        null,
        null,
        null,
        null,
      ]);
      assertEquals(st.rules.mode, "iptables");
      assertStringIncludes(st.rules.masquerade, "FLANNEL-POSTRTG");
      // The host's IPv4 neighbour table (only: the lab is IPv4), with the host's thresholds.
      assertEquals(st.neighbours!.map((t) => [t.table, t.family]), [["arp_cache", 4]]);
      assertEquals(
        st.neighbours![0].gcThresh3,
        Number(Deno.readTextFileSync("/proc/sys/net/ipv4/neigh/default/gc_thresh3").trim()),
      );
      assert(st.neighbours![0].entries >= 2, JSON.stringify(st.neighbours));

      // The numbers are the daemon's own (resyncs are slowed down so nothing moves in between).
      const m = parseMetrics(
        (await labExec(name, "node1", ["curl", "-s", `http://${st.health.address}/metrics`])).stdout,
      );
      assertEquals(st.reconcile.runs, m.get("flanctl_reconcile_runs_total"));
      assertEquals(st.reconcile.repairsTotal, m.get("flanctl_reconcile_repairs_total"));
      assertEquals(st.reconcile.errors, m.get("flanctl_reconcile_errors_total"));
      assertEquals(st.reconcile.lastRepairs, m.get("flanctl_last_reconcile_repairs"));
      assertEquals(st.reconcile.lastSeconds, m.get("flanctl_last_reconcile_duration_seconds"));
      assertEquals(
        Date.parse(st.reconcile.lastAt!) / 1000,
        m.get("flanctl_last_reconcile_timestamp_seconds"),
      );
      assertEquals(st.lease.renewals, m.get("flanctl_lease_renewals_total"));
      assertEquals(st.peers.daemonPeers, m.get("flanctl_peers"));
      assert(st.reconcile.runs! >= 1);

      // From the host with --netns: the daemon and its endpoints are found through the node's files.
      const sub = `${s.nodes[0].dir}/run/flannel/subnet.env`;
      const fromHost = await flanctl([
        "status",
        "-o",
        "json",
        "--netns",
        s.nodes[0].netns,
        "--subnet-file",
        sub,
      ]);
      assertEquals(fromHost.code, 0, fromHost.stderr);
      const fh = JSON.parse(fromHost.stdout) as StatusJson;
      assertEquals([fh.node, fh.daemon.pid, fh.health.metrics], [s.nodes[0].netns, st.daemon.pid, true]);
      assertEquals(fh.reconcile.runs, st.reconcile.runs);

      // --watch: one JSON document per line until interrupted.
      const w = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          s.nodes[0].netns,
          ...flanctlCmd(
            "status",
            "-o",
            "json",
            "--watch",
            "0.5",
            "--netns",
            s.nodes[0].netns,
            "--subnet-file",
            sub,
          ),
        ],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      // Interrupted once two documents are out (a fixed wait was too short when start-up took long under
      // load: one line, or none when SIGINT came before the handler was installed).
      const lines = await linesThenInterrupt(w, 2, 60_000);
      assert(lines.length >= 2, `--watch printed ${lines.length} line(s)`);
      for (const l of lines) assertEquals((JSON.parse(l) as StatusJson).daemon.pid, st.daemon.pid);

      // lab trace reads an etcd lab's leases from the underlay namespace, where etcd listens.
      const tr = await flanctl(["lab", "trace", "--name", name, "-o", "json", "node1-pod1", "node2-pod1"]);
      assertEquals(tr.code, 0, tr.stdout + tr.stderr);
      assertStringIncludes(JSON.parse(tr.stdout).hops[4].lease, "→ node2, PublicIP");
      const trp = await flanctl(["lab", "trace", "--name", name, "--probe", "node1-pod1", "node2-pod1"]);
      assertStringIncludes(trp.stdout, "probe: reply received; last seen rx on eth0");

      // Store killed: unreachable (the daemon keeps running).
      await killLabProc(s, "etcd");
      const noStore = await status();
      assertEquals([noStore.code, noStore.st.daemon.running, noStore.st.store.reachable], [0, true, false]);
      assert(noStore.st.store.error, "an unreachable store says why");

      // Daemon killed: down, exit 1, and the table says so.
      const pid = await killLabProc(s, "daemon node1");
      const down = await status();
      assertEquals([down.code, down.st.daemon.running, down.st.daemon.pid], [1, false, null]);
      assertStringIncludes(down.st.daemon.detail, `pid ${pid}`);
      const table = await labExec(name, "node1", flanctlCmd("status"));
      assertEquals(table.code, 1);
      assertStringIncludes(table.stdout, "daemon     DOWN (not running: pid");
      assertStringIncludes(table.stdout, "\n  neigh      arp_cache ");
    });
  },
});

needsRoot.test({
  name: "status (dual-stack lab, nftables mode): both subnets, both devices, peers per family, nft-rules",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const args = ["--nodes", "2", "--pods-per-node", "1", "--daemon-arg=--resync-interval=3600"];
    await withNetConf(DUAL_NFT_NETCONF, async (file) => {
      await withLab("ts6", [...args, "--net-conf", file], undefined, async (s, name) => {
        const { code, st, r } = await labStatus(name);
        assertEquals(code, 0, r.stderr);
        assertShape(st);
        const n1 = s.nodes.find((n) => n.name === "node1")!;
        assertEquals(st.lease.publicIPv6, n1.publicIPv6);
        assert(st.lease.ipv6Subnet?.startsWith("fc00:246:"), `ipv6Subnet ${st.lease.ipv6Subnet}`);
        assert(st.lease.subnet?.startsWith("10.246."), `subnet ${st.lease.subnet}`);
        assertEquals([st.backend.device, st.backend.deviceUp], ["flannel.1", true]);
        assertEquals([st.backend.deviceV6?.name, st.backend.deviceV6?.up], ["flannel-v6.1", true]);
        assertEquals([st.peers.leases, st.peers.programmed, st.peers.missing, st.peers.stale], [
          1,
          1,
          [],
          [],
        ]);
        assertEquals(st.peers.v6, { leases: 1, programmed: 1, missing: [], stale: [] });
        // nftables mode: the rules line is doctor's nft-rules result (both tables), not masq-rules' text.
        assertEquals([st.rules.mode, st.rules.masqueradeV6], ["nftables", null]);
        assertStringIncludes(st.rules.masquerade, "table ip flannel-ipv4");
        assertStringIncludes(st.rules.masquerade, "table ip6 flannel-ipv6");
        assert(st.rules.ok, JSON.stringify(st.rules));
        const table = await labExec(name, "node1", flanctlCmd("status"));
        assertStringIncludes(table.stdout, "flannel-v6.1 up");
        assertStringIncludes(table.stdout, "peers v6   1 leases: 1 programmed, 0 missing, 0 stale");

        // An IPv6 peer route removed: counted missing for IPv6 only.
        const sub6 = (await labStatus(name, "node2")).st.lease.ipv6Subnet;
        assert(sub6, "node2 has an IPv6 subnet");
        assertEquals((await labExec(name, "node1", ["ip", "-6", "route", "del", sub6!])).code, 0);
        const st2 = (await labStatus(name)).st;
        assertEquals(st2.peers.v6?.missing, [sub6]);
        assertEquals(st2.peers.missing, []);
      });
    });
  },
});

needsRoot.test({
  name: "status (IPv6-only lab, udp lab): the IPv6 lease, device and peers; udp's device is flannel0",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const status = async (name: string) => {
      const { code, st, r } = await labStatus(name);
      assertEquals(code, 0, r.stderr);
      return st;
    };
    await withLab("ts6o", ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "ipv6"], undefined, async (
      s,
      name,
    ) => {
      const st = await status(name);
      assertEquals(st.lease.publicIPv6, s.nodes.find((n) => n.name === "node1")!.publicIPv6);
      assert(st.lease.ipv6Subnet, "IPv6-only: the lease line has the IPv6 subnet");
      assert(st.lease.expiration, "IPv6-only: the lease's expiry is shown");
      assertEquals([st.backend.deviceV6?.name, st.backend.deviceV6?.up], ["flannel-v6.1", true]);
      assertEquals(st.peers.v6, { leases: 1, programmed: 1, missing: [], stale: [] });
      assert(st.rules.ok, JSON.stringify(st.rules));
      assertStringIncludes(st.rules.masqueradeV6 ?? "", "ok");
    });
    await withLab(
      "tsu",
      [
        "--nodes",
        "2",
        "--pods-per-node",
        "1",
        "--backend",
        "udp",
        "--daemon-arg=--resync-interval=3600",
      ],
      undefined,
      async (
        _s,
        name,
      ) => {
        const st = await status(name);
        assertEquals([st.backend.type, st.backend.device, st.backend.deviceUp], ["udp", "flannel0", true]);
        assertEquals([st.peers.leases, st.peers.programmed, st.peers.missing, st.peers.stale], [
          1,
          1,
          [],
          [],
        ]);
        assertEquals(st.peers.v6, null);
        // The peer's route into flannel0 removed: missing.
        const peer = (await labStatus(name, "node2")).st.lease.subnet!;
        assertEquals((await labExec(name, "node1", ["ip", "route", "del", peer])).code, 0);
        const st2 = await status(name);
        assertEquals([st2.peers.programmed, st2.peers.missing], [0, [peer]]);
      },
    );
  },
});

/**
 * Reads `p`'s stdout until it has printed `n` complete lines (or `ms` passed), then sends SIGINT and
 * returns every complete line it printed.
 */
async function linesThenInterrupt(p: Deno.ChildProcess, n: number, ms: number): Promise<string[]> {
  const lines: string[] = [];
  let buf = "";
  const reader = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const end = Date.now() + ms;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<null>((r) => timer = setTimeout(() => r(null), ms));
  try {
    while (lines.length < n && Date.now() < end) {
      const r = await Promise.race([reader.read(), timeout]);
      if (r === null || r.done) break;
      buf += r.value;
      const parts = buf.split("\n");
      buf = parts.pop()!;
      lines.push(...parts.filter((l) => l.trim()));
    }
    try {
      p.kill("SIGINT");
    } catch { /* exited already */ }
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      buf += r.value;
    }
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
    await p.status;
  }
  return [...lines, ...buf.split("\n").filter((l) => l.trim())];
}
