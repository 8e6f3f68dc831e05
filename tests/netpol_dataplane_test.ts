/**
 * NetworkPolicy enforcement with real traffic: two nodes in namespaces (each a bridge cni0 with its pods
 * behind veths, routed to each other as host-gw does), the verdict matrix's nine pods (x on n1, y and z on
 * n2), each node's {@link NetpolEngine} programming its own `inet flanctl-netpol` table. Every probe of
 * tests/netpol_cases.ts runs as a real TCP connection or UDP exchange, IPv4 and IPv6, same node (across
 * cni0: bridged, seen by the inet forward hook through br_netfilter) and across nodes; then label changes,
 * a deleted policy, a pod with a new address, `nft flush ruleset`, a restarted engine and the pending
 * default deny. SCTP is left to the unit tier (no SCTP client here).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { type NetnsFixture, nsRun, nsSh, withNetns } from "./netns.ts";
import { inNetns } from "../lib/sys/netns.ts";
import { nftLibrary } from "../lib/sys/nftables.ts";
import { type NftDriver, NftError } from "../lib/firewall/nft.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { NetpolEngine } from "../lib/netpol/engine.ts";
import { keyOf, parseNamespace, parsePod, parsePolicy } from "../lib/netpol/model.ts";
import {
  CASES,
  NAMESPACES,
  podIp4,
  podIp6,
  podNode,
  PODS,
  type Probe,
  type VerdictCase,
} from "./netpol_cases.ts";
import { caseObjects, type Json, podJson, policyJson } from "./netpol_fixture.ts";

const NODES = {
  n1: { v4: "10.99.1.1/24", v6: "fd99::1:1/112", cidrs: ["10.99.1.0/24", "fd99::1:0/112"] },
  n2: { v4: "10.99.2.1/23", v6: "fd99::2:1/111", cidrs: ["10.99.2.0/23", "fd99::2:0/111"] },
};

/** Serves TCP (accept, close) and UDP (echo) on every port given, dual stack. */
const SERVER = `
import socket, sys, threading
def tcp(p):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("::", p)); s.listen(64)
    while True:
        c, _ = s.accept(); c.close()
def udp(p):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", p))
    while True:
        d, a = s.recvfrom(64); s.sendto(d, a)
for spec in sys.argv[1:]:
    proto, p = spec.split("/")
    threading.Thread(target=tcp if proto == "TCP" else udp, args=(int(p),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
`;

/** Runs probes (`ip proto port` per line on stdin) in parallel; prints `ok` or `no` per line, in order. */
const PROBE = `
import socket, sys, threading
lines = [l.split() for l in sys.stdin.read().splitlines() if l.strip()]
out = [None] * len(lines)
def one(i, ip, proto, port):
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        if proto == "TCP":
            s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(1.5); s.connect((ip, int(port))); s.close()
        else:
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1.5); s.sendto(b"ping", (ip, int(port)))
            s.recvfrom(64)
        out[i] = "ok"
    except Exception:
        out[i] = "no"
ts = [threading.Thread(target=one, args=(i, *l)) for i, l in enumerate(lines)]
[t.start() for t in ts]; [t.join() for t in ts]
print("\\n".join(out))
`;

function driverIn(ns: string): NftDriver {
  const lib = nftLibrary();
  assert(lib, "libnftables.so.1 must load (Debian libnftables1)");
  return {
    via: "libnftables",
    run(text) {
      const r = inNetns({ name: ns }, () => lib.run(text));
      if (r.rc !== 0) return Promise.reject(new NftError("libnftables", r.error.trim()));
      return Promise.resolve(r.output);
    },
  };
}

interface Lab {
  nodes: Record<"n1" | "n2", string>;
  pods: Map<string, string>;
  engines: Record<"n1" | "n2", NetpolEngine>;
  servers: Deno.ChildProcess[];
}

async function addPod(
  fx: NetnsFixture,
  nodeNs: string,
  node: "n1" | "n2",
  v4: string,
  v6: string,
): Promise<string> {
  const pod = await fx.add("p");
  const host = `v${crypto.getRandomValues(new Uint32Array(1))[0].toString(36)}`.slice(0, 12);
  await nsSh(nodeNs, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", pod);
  await nsSh(nodeNs, "ip", "link", "set", host, "master", "cni0", "up");
  const [g4, l4] = NODES[node].v4.split("/"), [g6, l6] = NODES[node].v6.split("/");
  await nsSh(pod, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
  await nsSh(pod, "ip", "addr", "add", `${v4}/${l4}`, "dev", "eth0");
  await nsSh(pod, "ip", "addr", "add", `${v6}/${l6}`, "dev", "eth0", "nodad");
  await nsSh(pod, "ip", "link", "set", "eth0", "up");
  await nsSh(pod, "ip", "route", "add", "default", "via", g4);
  await nsSh(pod, "ip", "-6", "route", "add", "default", "via", g6);
  return pod;
}

async function buildLab(fx: NetnsFixture): Promise<Lab> {
  const n1 = await fx.add("n1"), n2 = await fx.add("n2");
  await nsSh(n1, "ip", "link", "add", "wire", "type", "veth", "peer", "name", "wire", "netns", n2);
  for (const [ns, me, other, node] of [[n1, "1", "2", "n1"], [n2, "2", "1", "n2"]] as const) {
    await nsSh(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1");
    await nsSh(ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
    await nsSh(ns, "ip", "addr", "add", `192.168.99.${me}/30`, "dev", "wire");
    await nsSh(ns, "ip", "addr", "add", `fd98::${me}/64`, "dev", "wire", "nodad");
    await nsSh(ns, "ip", "link", "set", "wire", "up");
    await nsSh(ns, "ip", "link", "add", "cni0", "type", "bridge");
    await nsSh(ns, "ip", "addr", "add", NODES[node].v4, "dev", "cni0");
    await nsSh(ns, "ip", "addr", "add", NODES[node].v6, "dev", "cni0", "nodad");
    await nsSh(ns, "ip", "link", "set", "cni0", "up");
    const far = node === "n1" ? NODES.n2.cidrs : NODES.n1.cidrs;
    await nsSh(ns, "ip", "route", "add", far[0], "via", `192.168.99.${other}`);
    await nsSh(ns, "ip", "-6", "route", "add", far[1], "via", `fd98::${other}`);
    // br_netfilter: bridged pod traffic passes the inet forward hook (the per-namespace default is 1).
    assertEquals((await nsSh(ns, "sysctl", "-n", "net.bridge.bridge-nf-call-iptables")).trim(), "1");
  }
  const nodes = { n1, n2 };
  const pods = new Map<string, string>();
  const servers: Deno.ChildProcess[] = [];
  const ports = [
    "TCP/80",
    "TCP/81",
    "TCP/443",
    "TCP/5000",
    "TCP/8080",
    "TCP/1500",
    "UDP/53",
    "UDP/54",
    "UDP/80",
  ];
  ports.push("UDP/1000", "UDP/2000", "UDP/2001", "UDP/5000", "UDP/8080", "TCP/7000");
  for (const ns of NAMESPACES) {
    for (const p of PODS) {
      const key = `${ns}/${p}`;
      const node = podNode(key) as "n1" | "n2";
      const pod = await addPod(fx, nodes[node], node, podIp4(key), podIp6(key));
      pods.set(key, pod);
      const child = new Deno.Command("ip", {
        args: ["netns", "exec", pod, "python3", "-c", SERVER, ...ports],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      servers.push(child);
      const reader = child.stdout.getReader();
      const { value } = await reader.read();
      assert(new TextDecoder().decode(value).startsWith("ready"), `server in ${key}`);
      reader.releaseLock();
    }
  }
  const engines = {
    n1: new NetpolEngine({
      nft: driverIn(n1),
      node: "n1",
      podCidrs: NODES.n1.cidrs.map((c) => IPNet.parse(c)),
    }),
    n2: new NetpolEngine({
      nft: driverIn(n2),
      node: "n2",
      podCidrs: NODES.n2.cidrs.map((c) => IPNet.parse(c)),
    }),
  };
  return { nodes, pods, engines, servers };
}

/** Loads raw objects into both engines (replacing their models) and syncs them. */
async function load(lab: Lab, o: { pods: Json[]; namespaces: Json[]; policies: Json[] }): Promise<void> {
  for (const e of Object.values(lab.engines)) {
    e.cluster.pods.clear(), e.cluster.namespaces.clear(), e.cluster.policies.clear();
    for (const p of o.pods.map(parsePod)) e.setPod(keyOf(p), p);
    for (const n of o.namespaces.map(parseNamespace)) e.setNamespace(n.name, n);
    for (const p of o.policies.map(parsePolicy)) e.setPolicy(keyOf(p), p);
    await e.sync();
  }
}

/** Runs probes for both families; returns the mismatches (empty: every verdict as expected). */
async function mismatches(lab: Lab, probes: Probe[]): Promise<string[]> {
  const bad: string[] = [];
  const bySrc = new Map<string, { line: string; what: string; want: boolean }[]>();
  for (const p of probes.filter((x) => x.proto !== "SCTP")) {
    for (const f of [4, 6]) {
      const ip = f === 4 ? podIp4(p.to) : podIp6(p.to);
      const list = bySrc.get(p.from) ?? [];
      list.push({
        line: `${ip} ${p.proto} ${p.port}`,
        what: `${p.from} -> ${p.to} ${p.proto}/${p.port} v${f}`,
        want: p.allowed,
      });
      bySrc.set(p.from, list);
    }
  }
  await Promise.all([...bySrc].map(async ([src, list]) => {
    const r = await nsRun(lab.pods.get(src)!, ["python3", "-c", PROBE], {
      stdin: list.map((x) => x.line).join("\n"),
    });
    const got = r.stdout.trim().split("\n");
    list.forEach((x, i) => {
      if ((got[i] === "ok") !== x.want) {
        bad.push(`${x.what}: want ${x.want ? "allowed" : "denied"}, got ${got[i]}`);
      }
    });
  }));
  return bad;
}

async function withLab(fn: (lab: Lab) => Promise<void>): Promise<void> {
  await withNetns(async (fx) => {
    const lab = await buildLab(fx);
    try {
      await fn(lab);
    } finally {
      for (const s of lab.servers) {
        try {
          s.kill("SIGKILL");
        } catch { /* gone */ }
        await s.status;
      }
    }
  });
}

needsRoot.test("netpol dataplane: the verdict matrix with real TCP/UDP traffic, v4 and v6, same node and across nodes", async () => {
  await withLab(async (lab) => {
    const bad: string[] = [];
    for (const c of CASES) {
      await load(lab, caseObjects(c));
      for (const m of await mismatches(lab, c.probes)) bad.push(`${c.name}: ${m}`);
    }
    assertEquals(bad, []);
  });
});

const B_TO_A = CASES.find((c) => c.name.startsWith("podSelector from the same namespace")) as VerdictCase;

needsRoot.test("netpol dataplane: labels re-evaluated, policy deleted, new pod address, flush repaired, restart, pending pod", async () => {
  await withLab(async (lab) => {
    const o = caseObjects(B_TO_A);
    await load(lab, o);
    const cToA = { from: "x/c", to: "x/a", proto: "TCP" as const, port: 80 };
    assertEquals(await mismatches(lab, [{ ...cToA, allowed: false }]), []);
    // A label change: x/c becomes pod=b and is let in; the change is a diff, not a rewrite.
    const relabel = o.pods.map((p) =>
      keyOf(parsePod(p)) === "x/c"
        ? podJson("x", "c", { labels: { pod: "b" }, ips: [podIp4("x/c"), podIp6("x/c")], node: "n1" })
        : p
    );
    await load(lab, { ...o, pods: relabel });
    assertEquals(
      await mismatches(lab, [{ ...cToA, allowed: true }, { ...cToA, port: 81, allowed: false }]),
      [],
    );
    // The policy deleted: open.
    await load(lab, { ...o, policies: [] });
    assertEquals(
      await mismatches(lab, [{ ...cToA, allowed: true }, { ...cToA, from: "y/b", allowed: true }]),
      [],
    );
    // x/a restarted with a new address: the policy follows it; its old address is no longer special.
    await load(lab, o);
    const aNs = lab.pods.get("x/a")!;
    await nsSh(aNs, "ip", "addr", "add", "10.99.1.99/24", "dev", "eth0");
    const moved = o.pods.map((p) =>
      keyOf(parsePod(p)) === "x/a"
        ? podJson("x", "a", { labels: { pod: "a" }, ips: ["10.99.1.99", podIp6("x/a")], node: "n1" })
        : p
    );
    await load(lab, { ...o, pods: moved });
    const viaNew = `10.99.1.99 TCP 80`;
    const probeNew = async (src: string) =>
      (await nsRun(lab.pods.get(src)!, ["python3", "-c", PROBE], { stdin: viaNew })).stdout.trim();
    assertEquals([await probeNew("x/b"), await probeNew("x/c")], ["ok", "no"]);
    await load(lab, o);
    // nft flush ruleset: open until the repair, closed after it.
    await nsSh(lab.nodes.n1, "nft", "flush", "ruleset");
    assertEquals(await mismatches(lab, [{ ...cToA, allowed: true }]), []);
    assert(await lab.engines.n1.ensure(), "ensure() repairs the flushed table");
    assert(!(await lab.engines.n1.ensure()), "a second ensure() finds nothing to repair");
    assertEquals(
      await mismatches(lab, [{ ...cToA, allowed: false }, { ...cToA, from: "x/b", allowed: true }]),
      [],
    );
    // A restart: a new engine has not synced; the old table holds, then is replaced whole in one transaction.
    const fresh = new NetpolEngine({
      nft: driverIn(lab.nodes.n1),
      node: "n1",
      podCidrs: NODES.n1.cidrs.map((c) => IPNet.parse(c)),
    });
    lab.engines.n1 = fresh;
    assertEquals(await mismatches(lab, [{ ...cToA, allowed: false }]), []);
    await load(lab, o);
    assertEquals(fresh.stats.fullApplies, 1);
    assertEquals(
      await mismatches(lab, [{ ...cToA, allowed: false }, { ...cToA, from: "x/b", allowed: true }]),
      [],
    );
    // Pending: a default deny in x and a pod x/new the API has no address for yet; its sandbox (address
    // 10.99.1.50, unknown to us) is closed from its first packet; once the API names it, its policy applies.
    const deny = [
      policyJson("x", "deny", {
        podSelector: {},
        ingress: [{ from: [{ podSelector: { matchLabels: { pod: "b" } } }] }],
      }),
    ];
    const pending = [...o.pods, podJson("x", "new", { labels: { pod: "new" }, node: "n1" })];
    await load(lab, { ...o, pods: pending, policies: deny });
    const newNs = lab.pods.get("x/b")!; // x/b serves as the new pod's sandbox: it takes a second address
    await nsSh(newNs, "ip", "addr", "add", "10.99.1.50/24", "dev", "eth0");
    const toNew = async (src: string) =>
      (await nsRun(lab.pods.get(src)!, ["python3", "-c", PROBE], { stdin: "10.99.1.50 TCP 80" })).stdout
        .trim();
    assertEquals(await toNew("y/a"), "no");
    assertEquals(await toNew("x/c"), "no");
    const named = [
      ...o.pods,
      podJson("x", "new", { labels: { pod: "new" }, ips: ["10.99.1.50"], node: "n1" }),
    ];
    await load(lab, { ...o, pods: named, policies: deny });
    assertEquals(await toNew("y/a"), "no");
    // x/b's own address is allowed in by pod=b; with no pending pod, an unknown address is open again.
    await load(lab, { ...o, pods: o.pods, policies: deny });
    assertEquals(await toNew("y/a"), "ok");
  });
});
