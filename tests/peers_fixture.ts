/**
 * Mixed clusters: flanctl and the real flanneld (built by `install.sh --dev`, see tests/peers.ts) side by
 * side in the test's namespaces, over one etcd in the underlay namespace. Each node runs either daemon; a
 * node can be switched from one to the other (stop, start the other: the rollout and rollback an operator
 * does).
 * @module
 */
import { collectLines, DaemonCluster, spawnEtcd, type TestNode, waitFor } from "./daemon_fixture.ts";
import { nsRun, nsSh, sh } from "./netns.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { peerPath } from "./peers.ts";

/** Resync knobs that make flanctl converge quickly in tests. */
export const FAST = ["--resync-interval", "1", "--iptables-resync", "1"];

/** A cluster of flanctl and flanneld nodes over etcd. */
export class MixedCluster extends DaemonCluster {
  etcd: Deno.ChildProcess | null = null;
  etcdUrl = "";
  /** Which daemon each node runs now. */
  readonly runs = new Map<TestNode, "flanctl" | "flanneld">();

  /**
   * Underlay, `nodes` nodes, etcd in the underlay namespace (on loopback and the segment's bridge address,
   * where the nodes reach it) and the network config. Returns the nodes.
   */
  async initEtcd(netConf: string, nodes = 2): Promise<TestNode[]> {
    await this.init();
    const out: TestNode[] = [];
    for (let i = 0; i < nodes; i++) out.push(await this.addNode());
    this.etcdUrl = `http://${this.base}.0.1:2379`;
    this.etcd = spawnEtcd(this.underlay, `${this.tmp}/etcd`, this.etcdUrl, {
      listen: `http://127.0.0.1:2379,${this.etcdUrl}`,
    });
    await waitFor("etcd up", async () => (await this.etcdctl("endpoint", "health")).code === 0, 30_000);
    const put = await this.etcdctl("put", "/coreos.com/network/config", netConf);
    if (put.code !== 0) throw new Error(`etcdctl put: ${put.stderr}`);
    return out;
  }

  /** etcdctl against the cluster's etcd. */
  etcdctl(...args: string[]) {
    return nsRun(this.underlay, ["etcdctl", "--endpoints", this.etcdUrl, ...args]);
  }

  /** Starts flanctl on `n` against the cluster's etcd. */
  startFlanctl(n: TestNode, extra: string[] = []): void {
    this.start(n, ["--etcd-endpoints", this.etcdUrl, ...FAST, ...extra]);
    this.runs.set(n, "flanctl");
  }

  /** Starts the real flanneld on `n` against the cluster's etcd (stderr in `n.log`). */
  startFlanneld(n: TestNode, extra: string[] = [], env?: Record<string, string>): void {
    const args = [
      "netns",
      "exec",
      n.ns,
      peerPath("flanneld"),
      ...(this.etcdUrl ? [`--etcd-endpoints=${this.etcdUrl}`] : []),
      `--subnet-file=${n.subnetFile}`,
      "--iface=eth0",
      "--healthz-ip=127.0.0.1",
      `--healthz-port=${n.port}`,
      ...extra,
    ];
    const p = new Deno.Command("ip", { args, env, stdin: "null", stdout: "null", stderr: "piped" }).spawn();
    n.proc = p;
    n.log = [];
    n.logDone = collectLines(p.stderr, n.log);
    this.runs.set(n, "flanneld");
  }

  /**
   * Waits until `n`'s daemon serves: flanctl's /readyz; flanneld's /healthz and its subnet.env (written once
   * the backend is up).
   */
  async waitUp(n: TestNode, ms = 60_000): Promise<void> {
    if (this.runs.get(n) === "flanctl") return await this.waitReady(n, ms);
    await waitFor(
      `flanneld on ${n.name} up\n${n.log.join("\n")}`,
      async () => {
        if (!n.proc) throw new Error("flanneld is not running");
        const ok = (await this.http(n, "/healthz"))[0] === 200;
        return ok && await Deno.stat(n.subnetFile).then(() => true, () => false);
      },
      ms,
    );
  }

  /** Stops everything (daemons, etcd), removes namespaces and files. Never throws. */
  override async close(): Promise<void> {
    await super.close();
    try {
      this.etcd?.kill("SIGKILL");
      await this.etcd?.status;
    } catch { /* gone */ }
  }
}

/** Pings `ip` from namespace `ns`: how many of `count` answered. */
export async function pingCount(ns: string, ip: string, count: number, interval = 0.2): Promise<number> {
  const r = await nsRun(ns, ["ping", "-n", "-q", "-c", String(count), "-W", "1", "-i", String(interval), ip]);
  const m = /(\d+) received/.exec(r.stdout);
  return m ? Number(m[1]) : 0;
}

/** Waits until pings from `ns` to `ip` answer (a fresh path may need a moment). */
export function waitPing(ns: string, ip: string, what: string | (() => Promise<string>), ms = 30_000) {
  return waitFor(what, async () => (await pingCount(ns, ip, 1)) === 1, ms);
}

/** The link named `dev` in `ns` (`ip -d -j link`), or null. */
export async function linkOf(ns: string, dev: string): Promise<{ linkinfo?: { info_kind: string } } | null> {
  const r = await nsRun(ns, ["ip", "-d", "-j", "link", "show", dev]);
  return r.code === 0 ? JSON.parse(r.stdout)[0] : null;
}

/** IPv6 underlay: the bridge gets ::1, node i ::<11+i>, forwarding on (as tests/daemon_dualstack_test.ts). */
export async function addV6Underlay(c: MixedCluster, V6BASE = "fc00:71"): Promise<void> {
  await sh("ip", "-n", c.underlay, "addr", "add", `${V6BASE}::1/64`, "dev", "br0", "nodad");
  await nsSh(c.underlay, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
  for (const [i, n] of c.nodes.entries()) {
    await sh(
      "ip",
      "-n",
      n.ns,
      "addr",
      "add",
      `${V6BASE}::${(11 + i).toString(16)}/64`,
      "dev",
      "eth0",
      "nodad",
    );
    await sh("ip", "-n", n.ns, "-6", "route", "add", "default", "via", `${V6BASE}::1`);
    await nsSh(n.ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1");
  }
}

/** A dual-stack pod on `n`: the subnets' .2 and ::2 behind a veth whose node end holds .1 and ::1. */
export async function addPod46(c: MixedCluster, n: TestNode) {
  const ns = await c.fx.add("p");
  const dev = `vp${c.fx.names.length}`;
  await sh("ip", "-n", n.ns, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns);
  await sh("ip", "-n", n.ns, "link", "set", dev, "up");
  await sh("ip", "-n", ns, "link", "set", "eth0", "up");
  const env = await c.subnetEnv(n);
  const out: string[] = [];
  for (const [s, v6] of [[env.FLANNEL_SUBNET, false], [env.FLANNEL_IPV6_SUBNET, true]] as const) {
    const net = IPNet.parse(s);
    const ip = net.nth(2).toString(), gw = net.nth(1).toString(), host = v6 ? 128 : 32;
    const fam = v6 ? ["-6"] : [];
    const nodad = v6 ? ["nodad"] : [];
    await sh("ip", "-n", n.ns, "addr", "add", `${gw}/${host}`, "dev", dev, ...nodad);
    await sh("ip", "-n", n.ns, ...fam, "route", "add", `${ip}/${host}`, "dev", dev);
    await sh("ip", "-n", ns, "addr", "add", `${ip}/${host}`, "dev", "eth0", ...nodad);
    await sh("ip", "-n", ns, ...fam, "route", "add", `${gw}/${host}`, "dev", "eth0");
    await sh("ip", "-n", ns, ...fam, "route", "add", "default", "via", gw, "dev", "eth0");
    out.push(ip);
  }
  return { ns, ip4: out[0], ip6: out[1] };
}

export { sh };
