/**
 * NetworkPolicy's dataplane cost: two pods (network namespaces on the bridge cni0 of a node namespace, as
 * tests/netpol_dataplane_test.ts builds a node; same-node traffic passes the inet forward hook through
 * br_netfilter), the client opening TCP connections to the server as fast as one Python loop can and an
 * iperf3 TCP stream between them, in three modes: "off" (no table of ours: this namespace then has no
 * conntrack at all, which no flannel node lacks, since its masquerade rules use it), "no policy" (our table,
 * enforcement on, no policy: the forward hook's `ct state established` accept and the empty verdict maps;
 * conntrack on, as on a node) and "policy" (a policy selects the server and allows the client: its chain,
 * peer set and port set in the path of each connection's first packet). Rounds rotate the modes so the shared
 * machine's load falls on all alike; the figures are medians and the ratios to "no policy" (the goal,
 * ≥ 0.95, is policy / no policy) and to "off".
 *
 *   deno run -A bench/netpol_dataplane_bench.ts [--rounds N] [--seconds S]   (part of `deno task bench netpol`)
 * @module
 */
import { arg, runInOwnNetns } from "./own_netns.ts";
import { runProcess } from "../lib/lab/proc.ts";
import { nftDriver } from "../lib/firewall/nft.ts";
import { NetpolEngine, removeNetpolTable } from "../lib/netpol/engine.ts";
import { keyOf, parseNamespace, parsePod, parsePolicy } from "../lib/netpol/model.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { nsJson, podJson, policyJson } from "../tests/netpol_fixture.ts";

await runInOwnNetns("FLANCTL_NETPOL_DP_BENCH_NODE", "fbnd", import.meta.url);

const ROUNDS = arg("--rounds", 15);
const SECONDS = arg("--seconds", 1);
const node = Deno.env.get("FLANCTL_NETPOL_DP_BENCH_NODE")!;
const PODS = { client: { ns: `${node}c`, ip: "10.99.1.2" }, server: { ns: `${node}s`, ip: "10.99.1.3" } };

async function sh(...args: string[]): Promise<string> {
  const r = await runProcess(args);
  if (r.code !== 0) throw new Error(`${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}
const inPod = (p: keyof typeof PODS, ...args: string[]) => sh("ip", "netns", "exec", PODS[p].ns, ...args);

/** Accepts and closes TCP connections on 8080. */
const ACCEPT = `
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8080)); s.listen(1024)
while True:
    c, _ = s.accept(); c.close()
`;
/** Connects and closes for argv[2] seconds; prints connections per second. */
const CONNECT = `
import socket, sys, time
ip, secs = sys.argv[1], float(sys.argv[2])
n, end = 0, time.monotonic() + secs
t0 = time.monotonic()
while time.monotonic() < end:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00")
    s.connect((ip, 8080)); s.close(); n += 1
print(n / (time.monotonic() - t0))
`;

const servers: Deno.ChildProcess[] = [];
try {
  await sh("sysctl", "-qw", "net.ipv4.ip_forward=1");
  await sh("ip", "link", "add", "cni0", "type", "bridge");
  await sh("ip", "addr", "add", "10.99.1.1/24", "dev", "cni0");
  await sh("ip", "link", "set", "cni0", "up");
  for (const [name, p] of Object.entries(PODS)) {
    await sh("ip", "netns", "add", p.ns);
    await sh("ip", "link", "add", `v${name}`, "type", "veth", "peer", "name", "eth0", "netns", p.ns);
    await sh("ip", "link", "set", `v${name}`, "master", "cni0", "up");
    await inPod(name as keyof typeof PODS, "ip", "addr", "add", `${p.ip}/24`, "dev", "eth0");
    await inPod(name as keyof typeof PODS, "ip", "link", "set", "eth0", "up");
    await inPod(name as keyof typeof PODS, "ip", "link", "set", "lo", "up");
  }
  if ((await sh("sysctl", "-n", "net.bridge.bridge-nf-call-iptables")).trim() !== "1") {
    throw new Error("br_netfilter is off in this namespace: same-node traffic would bypass the policy");
  }
  for (const cmd of [["python3", "-c", ACCEPT], ["iperf3", "-s", "-p", "5201"]]) {
    servers.push(
      new Deno.Command("ip", {
        args: ["netns", "exec", PODS.server.ns, ...cmd],
        stdout: "null",
        stderr: "null",
      })
        .spawn(),
    );
  }
  await new Promise((r) => setTimeout(r, 500));

  const nft = nftDriver();
  /** A fresh engine (as a daemon starting) holding the two pods and, with `policy`, the policy. */
  const apply = async (policy: boolean) => {
    const engine = new NetpolEngine({ nft, node: "n1", podCidrs: [IPNet.parse("10.99.1.0/24")] });
    engine.setNamespace("x", parseNamespace(nsJson("x", {})));
    for (const [name, p] of Object.entries(PODS)) {
      const pod = parsePod(podJson("x", name, { labels: { app: name }, ips: [p.ip], node: "n1" }));
      engine.setPod(keyOf(pod), pod);
    }
    const pol = parsePolicy(policyJson("x", "allow-client", {
      podSelector: { matchLabels: { app: "server" } },
      ingress: [{
        from: [{ podSelector: { matchLabels: { app: "client" } } }],
        ports: [{ port: 8080 }, { port: 5201 }],
      }],
    }));
    if (policy) engine.setPolicy(keyOf(pol), pol);
    await engine.sync();
    if (policy && ![...engine.applied!.chains.keys()].some((c) => c.startsWith("in-"))) {
      throw new Error("the policy selects no local pod");
    }
  };

  const MODES = ["off", "none", "policy"] as const;
  const conns = { off: [] as number[], none: [] as number[], policy: [] as number[] };
  const gbits = { off: [] as number[], none: [] as number[], policy: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    for (let m = 0; m < MODES.length; m++) {
      const mode = MODES[(r + m) % MODES.length];
      if (mode === "off") await removeNetpolTable(nft);
      else await apply(mode === "policy");
      conns[mode].push(Number(await inPod("client", "python3", "-c", CONNECT, PODS.server.ip, `${SECONDS}`)));
      const j = JSON.parse(
        await inPod("client", "iperf3", "-c", PODS.server.ip, "-p", "5201", "-t", `${SECONDS}`, "-J"),
      );
      gbits[mode].push(j.end.sum_received.bits_per_second / 1e9);
    }
  }
  // The policy really decides: a client port it does not allow is refused.
  await apply(true);
  const denied = await runProcess([
    "ip",
    "netns",
    "exec",
    PODS.client.ns,
    "python3",
    "-c",
    `import socket; s = socket.socket(); s.settimeout(1); s.connect(("${PODS.server.ip}", 5202))`,
  ]);
  if (denied.code === 0 || !/timed out/.test(denied.stderr)) throw new Error("port 5202 was not dropped");

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = (what: string, v: Record<(typeof MODES)[number], number[]>, digits: number) => {
    const [off, none, pol] = MODES.map((m) => median(v[m]));
    const cells = [off, none, pol].map((x) => x.toFixed(digits).padStart(12)).join("");
    console.log(
      `${what.padEnd(30)}${cells}   ${(pol / none).toFixed(3)}x (goal >= 0.95x)   ${(pol / off).toFixed(3)}x`,
    );
  };
  console.log(
    `same-node pods on cni0 (br_netfilter), medians of ${ROUNDS} rotating rounds of ${SECONDS} s; ` +
      `load average ${Deno.loadavg()[0].toFixed(1)} (2 cores here)`,
  );
  console.log(
    `${"".padEnd(30)}${["off", "no policy", "policy"].map((h) => h.padStart(12)).join("")}   ` +
      `policy / no policy           policy / off`,
  );
  row("TCP connections / s", conns, 0);
  row("iperf3 TCP, Gbit/s", gbits, 2);
} finally {
  for (const s of servers) {
    try {
      s.kill("SIGKILL");
      await s.status;
    } catch { /* gone */ }
  }
  for (const p of Object.values(PODS)) await runProcess(["ip", "netns", "del", p.ns]);
}
