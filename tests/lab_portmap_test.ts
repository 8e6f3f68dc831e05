/**
 * End to end in the lab: the node's whole conflist (flannel, then portmap) run as libcni does. A pod
 * published on node1 with `lab add-pod node1 --publish 18080:8080` answers TCP from a pod on node2 and
 * from node2 itself to node1's public IP:18080 (and from itself, hairpin, and node1's 127.0.0.1), in iptables mode and in nftables mode (`lab up --net-conf`
 * with EnableNFTables); `lab del-pod` (conflist DEL in reverse order) leaves no hostPort rule.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, nsRun } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { stopDaemon } from "../lib/lab/services.ts";
import { nodeSubnet6 } from "../lib/lab/status.ts";
import { loadState } from "../lib/lab/state.ts";
import type { LabState } from "../lib/lab/types.ts";
import { waitUntil } from "./lab_verify.ts";
import type { CheckId, FindingId } from "../lib/doctor/mod.ts";

/** Listens on :8080 in `netns`, connects from `clientNs` to ip:port, and returns what the client read. */
async function tcpThrough(netns: string, clientNs: string, ip: string, port: number): Promise<string> {
  const msg = `published ${crypto.randomUUID()}`;
  const six = ip.includes(":") ? "-6 " : "";
  const server = new Deno.Command("ip", {
    args: ["netns", "exec", netns, "timeout", "60", "sh", "-c", `echo '${msg}' | nc ${six}-N -l 8080`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    await waitUntil(
      "nc listening",
      async () => {
        return (await nsRun(netns, ["ss", "-Htln", "sport", "= :8080"])).stdout.includes("8080");
      },
      30_000,
      50,
    );
    const r = await nsRun(clientNs, ["timeout", "10", "nc", "-w", "5", "-d", ip, String(port)]);
    assertEquals(r.stdout.trim(), msg, `TCP ${clientNs} -> ${ip}:${port}: ${r.stderr}`);
    return r.stdout.trim();
  } finally {
    try {
      server.kill("SIGKILL");
    } catch { /* done */ }
    await server.status;
  }
}

async function hostportRules(ns: string): Promise<string[]> {
  const ipt = (await nsRun(ns, ["iptables-save", "-t", "nat"])).stdout.split("\n").filter((l) =>
    l.includes("CNI-DN-")
  );
  const nft = (await nsRun(ns, ["nft", "list", "table", "ip", "cni_hostport"])).stdout.split("\n")
    .filter((l) => l.includes("dnat to"));
  return [...ipt, ...nft];
}

async function publishedPodAnswers(name: string, nft: boolean) {
  const add = await flanctl(["lab", "add-pod", "node1", "--publish", "18080:8080", "--name", name]);
  assertEquals(add.code, 0, add.stdout + add.stderr);
  assertStringIncludes(add.stdout, ":18080->8080/tcp");
  const s: LabState = loadState(name);
  const pub = s.pods.find((p) => p.ports?.length)!;
  const n1 = s.nodes.find((n) => n.name === "node1")!, n2 = s.nodes.find((n) => n.name === "node2")!;
  const client = s.pods.find((p) => p.node === "node2")!;
  const rules = await hostportRules(n1.netns);
  assert(rules.length > 0, "hostPort rules on node1");
  if (nft) {
    assert(!rules.some((l) => l.includes("CNI-DN-")), `nftables mode uses no iptables: ${rules.join("\n")}`);
    assert(!(await nsRun(n1.netns, ["iptables-save"])).stdout.includes("FLANNEL"));
    assertEquals((await nsRun(n1.netns, ["nft", "list", "table", "ip", "flannel-ipv4"])).code, 0);
  }
  // The conflist result cached by the runtime carries the pod's address (prevResult chaining).
  const cached = JSON.parse(
    Deno.readTextFileSync(`${n1.dir}/var/lib/cni/results/cbr0-${pub.containerId}-eth0`),
  );
  assert(JSON.stringify(cached.ips).includes(pub.ip!), JSON.stringify(cached));
  await tcpThrough(pub.netns, client.netns, n1.publicIP, 18080);
  await tcpThrough(pub.netns, n2.netns, n1.publicIP, 18080);
  // Hairpin (the pod reaches itself through its node's hostPort: snat mark + masquerade) and the node's own
  // localhost (route_localnet on cni0, 127.0.0.1 masqueraded).
  await tcpThrough(pub.netns, pub.netns, n1.publicIP, 18080);
  await tcpThrough(pub.netns, n1.netns, "127.0.0.1", 18080);
  const del = await flanctl(["lab", "del-pod", pub.name, "--name", name]);
  assertEquals(del.code, 0, del.stdout + del.stderr);
  assertEquals(await hostportRules(n1.netns), [], "DEL leaves no hostPort rule");
  assert(!loadState(name).pods.some((p) => p.name === pub.name));
}

needsRoot.test({
  name: "lab e2e: portmap through the conflist, iptables mode",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "tp",
      ["--nodes", "2", "--pods-per-node", "1"],
      2,
      (_s, name) => publishedPodAnswers(name, false),
    );
  },
});

/** A two-node lab (one pod each) from `lab up --net-conf` with `conf` written to a temporary file. */
async function withNetConfLab(
  tag: string,
  conf: Record<string, unknown>,
  okCount: number,
  fn: (s: LabState, name: string) => Promise<void>,
): Promise<void> {
  const file = Deno.makeTempFileSync({ suffix: ".json" });
  try {
    Deno.writeTextFileSync(file, JSON.stringify(conf));
    await withLab(tag, ["--nodes", "2", "--pods-per-node", "1", "--net-conf", file], okCount, fn);
  } finally {
    Deno.removeSync(file);
  }
}

needsRoot.test({
  name: "lab e2e: portmap through the conflist, nftables mode (lab up --net-conf with EnableNFTables)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withNetConfLab(
      "tn",
      { Network: "10.245.0.0/16", Backend: { Type: "vxlan" }, EnableNFTables: true },
      2,
      async (s, name) => {
        assertEquals(s.network, "10.245.0.0/16");
        const conflist = JSON.parse(
          Deno.readTextFileSync(`${s.nodes[0].dir}/etc/cni/net.d/10-flannel.conflist`),
        );
        assertEquals(conflist.plugins.map((p: { type: string }) => p.type), ["flannel", "portmap"]);
        assertEquals(conflist.plugins[1].backend, "nftables");
        await publishedPodAnswers(name, true);
      },
    );
  },
});

needsRoot.test({
  name:
    "lab e2e: dual stack in nftables mode (--net-conf with EnableIPv6): doctor ok, hostPort over IPv4 and IPv6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withNetConfLab(
      "tpd",
      {
        Network: "10.245.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00:245::/48",
        Backend: { Type: "vxlan" },
        EnableNFTables: true,
      },
      4,
      async (s, name) => {
        assertEquals([s.ipFamily, s.network], ["dual", "10.245.0.0/16"]);
        const n1 = s.nodes.find((n) => n.name === "node1")!, n2 = s.nodes.find((n) => n.name === "node2")!;
        assert(n1.publicIPv6, "the lab built the IPv6 underlay");

        // doctor: IPv6 masquerade is table ip6 flannel-ipv6 here, not ip6tables.
        // neigh-gc reads the host-wide neighbour table, which the tests running beside this one fill: it is
        // skipped here and proven by its own tests (lib/doctor/checks/neigh_test.ts, tests/doctor_kernel_test.ts).
        const doc = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json", "--skip", "neigh-gc"));
        const rep = JSON.parse(doc.stdout) as {
          checks: { id: FindingId; severity: string; detail: string }[];
        };
        assertEquals(rep.checks.filter((c) => c.severity !== "ok"), [], doc.stdout);
        const detail = (id: CheckId) => rep.checks.find((c) => c.id === id)!.detail;
        const sub6 = nodeSubnet6(n1)!;
        assertStringIncludes(detail("nft-rules"), `table ip6 flannel-ipv6 has flannel's rules for ${sub6}`);
        assertStringIncludes(detail("ip6tables-masq"), "see nft-rules");
        // An ip6tables chain left by an iptables-mode run is flannel's rules in both modes.
        await nsRun(n1.netns, ["ip6tables", "-t", "nat", "-N", "FLANNEL-POSTRTG"]);
        const mixed = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json"));
        const fm = (JSON.parse(mixed.stdout) as {
          checks: { id: FindingId; severity: string; detail: string; fix: string[] }[];
        })
          .checks.find((c) => c.id === "firewall-mode")!;
        assertEquals(fm.severity, "warning", mixed.stdout);
        assertStringIncludes(fm.detail, "iptables ip6 nat FLANNEL-POSTRTG");
        assert(fm.fix.some((f) => f.endsWith("ip6tables -t nat -X FLANNEL-POSTRTG")), fm.fix.join("\n"));
        assert(!fm.fix.some((f) => /(^| )iptables /.test(f)), "no IPv4 chain to remove");
        await nsRun(n1.netns, ["ip6tables", "-t", "nat", "-X", "FLANNEL-POSTRTG"]);

        const add = await flanctl(["lab", "add-pod", "node1", "--publish", "18080:8080", "--name", name]);
        assertEquals(add.code, 0, add.stdout + add.stderr);
        const pub = loadState(name).pods.find((p) => p.ports?.length)!;
        assert(pub.ip && pub.ipv6, JSON.stringify(pub));
        assertStringIncludes(
          add.stdout,
          `IP ${pub.ip} ${pub.ipv6}, published ${n1.publicIP}:18080->8080/tcp, [${n1.publicIPv6}]:18080->8080/tcp`,
        );
        const v6rules = (await nsRun(n1.netns, ["nft", "list", "table", "ip6", "cni_hostport"])).stdout;
        assertStringIncludes(v6rules, `dnat to [${pub.ipv6}]:8080`);
        await tcpThrough(pub.netns, n2.netns, n1.publicIP, 18080);
        await tcpThrough(pub.netns, n2.netns, n1.publicIPv6!, 18080);
        const del = await flanctl(["lab", "del-pod", pub.name, "--name", name]);
        assertEquals(del.code, 0, del.stdout + del.stderr);
        const left = (await nsRun(n1.netns, ["nft", "list", "table", "ip6", "cni_hostport"])).stdout;
        assert(!left.includes("dnat to"), left);

        // With the daemon stopped, a flushed IPv6 masquerade chain is found by nft-rules.
        await stopDaemon(s, n1);
        await nsRun(n1.netns, ["nft", "flush", "chain", "ip6", "flannel-ipv6", "postrtg"]);
        const bad = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json"));
        const nft = (JSON.parse(bad.stdout) as typeof rep).checks.find((c) => c.id === "nft-rules")!;
        assertEquals(nft.severity, "warning", bad.stdout);
        assertStringIncludes(nft.detail, "flannel-ipv6 postrtg lacks 6 rule(s)");
      },
    );
  },
});

needsRoot.test({
  name: "lab e2e: portmap in a dual-stack lab (--ip-family dual, iptables mode): hostPort over IPv4 and IPv6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "tpi",
      ["--nodes", "2", "--pods-per-node", "1", "--ip-family", "dual"],
      4,
      async (s, name) => {
        const n1 = s.nodes.find((n) => n.name === "node1")!, n2 = s.nodes.find((n) => n.name === "node2")!;
        const add = await flanctl(["lab", "add-pod", "node1", "--publish", "18080:8080", "--name", name]);
        assertEquals(add.code, 0, add.stdout + add.stderr);
        const pub = loadState(name).pods.find((p) => p.ports?.length)!;
        const dnat6 = (await nsRun(n1.netns, ["ip6tables-save", "-t", "nat"])).stdout;
        assertStringIncludes(dnat6, `-j DNAT --to-destination [${pub.ipv6}]:8080`);
        await tcpThrough(pub.netns, n2.netns, n1.publicIP, 18080);
        await tcpThrough(pub.netns, n2.netns, n1.publicIPv6!, 18080);
        const del = await flanctl(["lab", "del-pod", pub.name, "--name", name]);
        assertEquals(del.code, 0, del.stdout + del.stderr);
        assertEquals(await hostportRules(n1.netns), [], "DEL leaves no IPv4 hostPort rule");
        const left6 = (await nsRun(n1.netns, ["ip6tables-save", "-t", "nat"])).stdout;
        assert(!left6.includes("CNI-DN-"), left6);
      },
    );
  },
});
