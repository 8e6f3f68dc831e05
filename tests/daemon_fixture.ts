/**
 * A small multi-node cluster for the daemon tests: an underlay namespace with a bridge, node namespaces
 * attached by veth (addresses on the underlay subnet, default route via the bridge), a file store in a
 * temp dir, and `flanctl daemon` processes started inside the node namespaces. Everything is removed by
 * `close()` (also on failure). Nothing touches the root namespace.
 * @module
 */
import { httpGet } from "../lib/observe/http_get.ts";
import { flanctlCmd, ipJson, NetnsFixture, nsRun, nsSh, sh } from "./netns.ts";

/** One node of the test cluster. */
export interface TestNode {
  name: string;
  ns: string;
  /** Underlay address. */
  ip: string;
  dir: string;
  subnetFile: string;
  stateDir: string;
  port: number;
  proc: Deno.ChildProcess | null;
  /** Daemon stderr collected so far. */
  log: string[];
  /** Settles once the last daemon's stderr is read to its end (all of it in `log`). */
  logDone: Promise<void>;
}

/**
 * Polls `fn` until it returns a truthy value or `ms` pass (30 s by default: CI shares 2 cores, so a step
 * that is quick alone can take long under the full suite), then throws with `what`.
 */
export async function waitFor<T>(
  what: string | (() => string | Promise<string>),
  fn: () => Promise<T> | T,
  ms = 30_000,
): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: unknown = null;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const w = typeof what === "string"
    ? what
    : await Promise.resolve().then(what).catch((e) => `(describing failed: ${e})`);
  throw new Error(`timed out waiting for ${w}${last ? ` (last error: ${(last as Error).message})` : ""}`);
}

/**
 * Runs `flanctl ARGS` once in `ns` to its end (a daemon that is expected to fail); exit code and stderr.
 * A daemon that has not exited after `ms` (it started instead of failing) is killed and the call throws,
 * so the test fails with its stderr instead of hanging until the runner's own timeout.
 */
export async function runDaemonOnce(
  ns: string,
  args: string[],
  env: Record<string, string> = {},
  ms = 120_000,
): Promise<{ code: number; stderr: string }> {
  const p = new Deno.Command("ip", {
    args: ["netns", "exec", ns, ...flanctlCmd(...args)],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    try {
      p.kill("SIGKILL");
    } catch { /* exited meanwhile */ }
  }, ms);
  try {
    const o = await p.output();
    const stderr = new TextDecoder().decode(o.stderr);
    if (killed) {
      throw new Error(`flanctl ${args.join(" ")} still running after ${ms} ms (killed):\n${stderr}`);
    }
    return { code: o.code, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** The test cluster. */
/**
 * Appends the lines of `stream` (a daemon's stderr) to `into` as they come, the last one also without its
 * newline; reading stops quietly when the stream does. Resolves once it has (never rejects).
 */
export function collectLines(stream: ReadableStream<Uint8Array>, into: string[]): Promise<void> {
  return (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of stream) {
      buf += dec.decode(chunk, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop()!;
      into.push(...lines);
    }
    if (buf) into.push(buf);
  })().catch(() => {});
}

export class DaemonCluster {
  readonly fx = new NetnsFixture();
  readonly nodes: TestNode[] = [];
  underlay = "";
  storeDir = "";
  tmp = "";
  /** Underlay base: segment k is `${base}.k.0/24` on bridge `br<k>` (gateway `.1`, routed between segments). */
  readonly base: string;
  readonly #segments = new Set<number>();

  constructor(base = "10.99") {
    this.base = base;
  }

  /** Creates the underlay and the store directory (with `netConf` as config when given). */
  async init(netConf?: string): Promise<void> {
    this.tmp = await Deno.makeTempDir({ prefix: "flanctl-daemon-test-" });
    this.storeDir = `${this.tmp}/store`;
    await Deno.mkdir(this.storeDir, { recursive: true });
    if (netConf !== undefined) await Deno.writeTextFile(`${this.storeDir}/config`, netConf);
    this.underlay = await this.fx.add("u");
    await nsSh(this.underlay, "sysctl", "-qw", "net.ipv4.ip_forward=1");
  }

  async #segment(seg: number): Promise<void> {
    if (this.#segments.has(seg)) return;
    const br = `br${seg}`;
    await sh("ip", "-n", this.underlay, "link", "add", br, "type", "bridge");
    await sh("ip", "-n", this.underlay, "addr", "add", `${this.base}.${seg}.1/24`, "dev", br);
    await sh("ip", "-n", this.underlay, "link", "set", br, "up");
    this.#segments.add(seg);
  }

  /** Adds a node namespace on underlay segment `seg` (different segments are one router hop apart). */
  async addNode(seg = 0): Promise<TestNode> {
    await this.#segment(seg);
    const i = this.nodes.length + 1;
    const ns = await this.fx.add(`d${i}`);
    const port = `vn${i}`;
    await sh(
      "ip",
      "-n",
      this.underlay,
      "link",
      "add",
      port,
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      ns,
    );
    await sh("ip", "-n", this.underlay, "link", "set", port, "master", `br${seg}`, "up");
    const ip = `${this.base}.${seg}.${10 + i}`;
    await sh("ip", "-n", ns, "addr", "add", `${ip}/24`, "dev", "eth0");
    await sh("ip", "-n", ns, "link", "set", "eth0", "up");
    await sh("ip", "-n", ns, "route", "add", "default", "via", `${this.base}.${seg}.1`);
    await nsSh(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1");
    const dir = `${this.tmp}/node${i}`;
    await Deno.mkdir(dir, { recursive: true });
    const n: TestNode = {
      name: `node${i}`,
      ns,
      ip,
      dir,
      subnetFile: `${dir}/subnet.env`,
      stateDir: `${dir}/state`,
      port: 9900 + i,
      proc: null,
      log: [],
      logDone: Promise.resolve(),
    };
    this.nodes.push(n);
    return n;
  }

  /** The daemon command line for `n` (the cluster's file store unless `extra` chooses another store). */
  daemonArgs(n: TestNode, extra: string[] = []): string[] {
    const otherStore = extra.some((a) => /^--?(etcd-endpoints|kube-subnet-mgr|store)(=|$)/.test(a));
    return [
      "daemon",
      ...(otherStore ? [] : ["--store-dir", this.storeDir]),
      "--subnet-file",
      n.subnetFile,
      "--state-dir",
      n.stateDir,
      "--healthz-ip",
      "127.0.0.1",
      "--healthz-port",
      String(n.port),
      ...extra,
    ];
  }

  /** Starts the daemon in `n`'s namespace (extra env optional); its stderr is collected in `n.log`. */
  start(
    n: TestNode,
    extra: string[] = [],
    env?: Record<string, string>,
    /** The daemon's command without its arguments (default: `flanctl daemon` from this checkout). */
    daemon?: string[],
  ): Deno.ChildProcess {
    const argv = daemon
      ? [...daemon, ...this.daemonArgs(n, extra).slice(1)]
      : flanctlCmd(...this.daemonArgs(n, extra));
    const cmd = ["ip", "netns", "exec", n.ns, ...argv];
    const p = new Deno.Command(cmd[0], {
      args: cmd.slice(1),
      env,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    })
      .spawn();
    n.proc = p;
    n.log = [];
    n.logDone = collectLines(p.stderr, n.log);
    return p;
  }

  /** Stops `n`'s daemon with `signal` and waits for it; returns its exit code. */
  async stop(n: TestNode, signal: Deno.Signal = "SIGTERM"): Promise<number> {
    const p = n.proc;
    if (!p) return 0;
    // `ip netns exec` execs the command, so the child's pid is deno's.
    try {
      p.kill(signal);
    } catch { /* already gone */ }
    const st = await p.status;
    n.proc = null;
    return st.code;
  }

  /**
   * GETs `path` from `n`'s health server (inside its namespace); returns [status, body] (status 0: no
   * answer within 10 s — a daemon busy on a loaded machine can take more than a second or two).
   */
  async http(n: TestNode, path: string): Promise<[number, string]> {
    const r = await httpGet(n.ns, `http://127.0.0.1:${n.port}${path}`, 10_000);
    return [r.status ?? 0, r.body];
  }

  /** Waits until `n`'s /readyz answers 200. */
  async waitReady(n: TestNode, ms = 40_000): Promise<void> {
    await waitFor(
      `${n.name} ready\n${n.log.join("\n")}`,
      async () => (await this.http(n, "/readyz"))[0] === 200,
      ms,
    );
  }

  /** The subnet.env variables of `n`. */
  async subnetEnv(n: TestNode): Promise<Record<string, string>> {
    const t = await Deno.readTextFile(n.subnetFile);
    return Object.fromEntries(t.trim().split("\n").map((l) => l.split("=", 2) as [string, string]));
  }

  /** `n`'s subnet ("10.244.3.0/24") from its subnet.env. */
  async subnetOf(n: TestNode): Promise<string> {
    const e = await this.subnetEnv(n);
    const [ip, prefix] = e.FLANNEL_SUBNET.split("/");
    const p = ip.split(".").map(Number);
    const v = ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
    const mask = prefix === "0" ? 0 : (~0 << (32 - Number(prefix))) >>> 0;
    const net = (v & mask) >>> 0;
    return `${net >>> 24}.${(net >>> 16) & 255}.${(net >>> 8) & 255}.${net & 255}/${prefix}`;
  }

  /**
   * Adds a pod to node `n`: a namespace with `eth0` (the subnet's .2+k) attached by veth to the node, the
   * node side holding the subnet's .1 as gateway and a /32 route to the pod. Returns the pod ns and IP.
   */
  async addPod(n: TestNode, k = 0): Promise<{ ns: string; ip: string }> {
    const sub = await this.subnetOf(n);
    const base = sub.split("/")[0].split(".").map(Number);
    const ip = `${base[0]}.${base[1]}.${base[2]}.${base[3] + 2 + k}`;
    const gw = `${base[0]}.${base[1]}.${base[2]}.${base[3] + 1}`;
    const ns = await this.fx.add(`p${k}`);
    const dev = `vpod${k}`;
    await sh("ip", "-n", n.ns, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns);
    await sh("ip", "-n", n.ns, "addr", "add", `${gw}/32`, "dev", dev);
    await sh("ip", "-n", n.ns, "link", "set", dev, "up");
    await sh("ip", "-n", n.ns, "route", "add", `${ip}/32`, "dev", dev);
    await sh("ip", "-n", ns, "addr", "add", `${ip}/32`, "dev", "eth0");
    await sh("ip", "-n", ns, "link", "set", "eth0", "up");
    await sh("ip", "-n", ns, "route", "add", `${gw}/32`, "dev", "eth0");
    await sh("ip", "-n", ns, "route", "add", "default", "via", gw, "dev", "eth0");
    return { ns, ip };
  }

  /**
   * What a failed wait needs to be explained: every node's daemon log and its kernel state (addresses,
   * IPv4/IPv6 routes and neighbours, the VXLAN FDB, the nftables ruleset) and every pod namespace's.
   */
  async state(): Promise<string> {
    const views = [
      ["ip", "-br", "link"],
      ["ip", "-br", "addr"],
      ["ip", "route"],
      ["ip", "-6", "route"],
      ["ip", "neigh"],
      ["ip", "-6", "neigh"],
      ["bridge", "fdb", "show"],
      ["nft", "list", "ruleset"],
    ];
    const out: string[] = [];
    for (const n of this.nodes) {
      out.push(`=== ${n.name} (${n.ns}) daemon log`, ...n.log);
    }
    for (const ns of this.fx.names) {
      for (const v of views) {
        const r = await nsRun(ns, v);
        out.push(`--- ${ns}: ${v.join(" ")}`, (r.stdout || r.stderr).trimEnd());
      }
    }
    return out.join("\n");
  }

  /** A description for {@link waitFor} that, when the wait fails, carries {@link state} after `what`. */
  explain(what: string): () => Promise<string> {
    return async () => `${what}\n${await this.state()}`;
  }

  /** Kills daemons, removes namespaces and the temp dir. Never throws. */
  async close(): Promise<void> {
    for (const n of this.nodes) {
      if (n.proc) await this.stop(n, "SIGKILL").catch(() => {});
    }
    await this.fx.cleanup();
    if (this.tmp) await Deno.remove(this.tmp, { recursive: true }).catch(() => {});
  }
}

/** Route/neigh/fdb views as `ip -j` / `bridge -j` print them. */
export interface IpRoute {
  dst: string;
  gateway?: string;
  dev: string;
  flags: string[];
}
/** `ip -j neigh` entry. */
export interface IpNeigh {
  dst: string;
  dev: string;
  lladdr?: string;
  state: string[];
}
/** `bridge -j fdb` entry. */
export interface BridgeFdb {
  mac: string;
  ifname: string;
  dst?: string;
  flags: string[];
  state?: string;
}

/** One series' value from a Prometheus text body (`/metrics`), 0 when absent. */
export function metric(body: string, series: string): number {
  const line = body.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** Routes of node `ns`. */
export function routes(ns: string): Promise<IpRoute[]> {
  return ipJson<IpRoute[]>(ns, "route", "show");
}
/** Neighbours on `dev` in `ns`. */
export function neighs(ns: string, dev: string): Promise<IpNeigh[]> {
  return ipJson<IpNeigh[]>(ns, "neigh", "show", "dev", dev);
}
/** FDB entries on `dev` in `ns`. */
export async function fdbs(ns: string, dev: string): Promise<BridgeFdb[]> {
  const out = await nsSh(ns, "bridge", "-j", "fdb", "show", "dev", dev);
  return (out.trim() ? JSON.parse(out) : []) as BridgeFdb[];
}

/** The trimmed, non-empty lines of `nft list table FAMILY NAME` in `ns`, or null when the table is not there. */
export async function nftTable(ns: string, family: string, name: string): Promise<string[] | null> {
  const r = await nsRun(ns, ["nft", "list", "table", family, name]);
  return r.code === 0 ? r.stdout.split("\n").map((l) => l.trim()).filter(Boolean) : null;
}

/** flanneld's nft table for family `f` with masquerading and forward rules, as `nft list table` prints it. */
export function flannelNftListing(f: "ip" | "ip6", network: string, subnet: string): string[] {
  const name = f === "ip" ? "flannel-ipv4" : "flannel-ipv6";
  const mcast = f === "ip" ? "224.0.0.0/4" : "ff00::/8";
  return [
    `table ${f} ${name} {`,
    `comment "rules for ${name}"`,
    "chain postrtg {",
    'comment "chain to manage traffic masquerading by flannel"',
    "type nat hook postrouting priority srcnat; policy accept;",
    "meta mark 0x00004000 return",
    `${f} saddr ${subnet} ${f} daddr ${network} return`,
    `${f} saddr ${network} ${f} daddr ${subnet} return`,
    `${f} saddr != ${subnet} ${f} daddr ${network} return`,
    `${f} saddr ${network} ${f} daddr != ${mcast} masquerade fully-random`,
    `${f} saddr != ${network} ${f} daddr ${network} masquerade fully-random`,
    "}",
    "chain forward {",
    'comment "chain to accept flannel traffic"',
    "type filter hook forward priority filter; policy accept;",
    `${f} saddr ${network} accept`,
    `${f} daddr ${network} accept`,
    "}",
    "}",
  ];
}

/**
 * Starts etcd inside namespace `netns` serving clients on `url` (peers on 127.0.0.1:2380 of that namespace),
 * data in `dataDir`, output discarded. The caller stops it. `o.listen`: the client URLs it listens on when
 * more than `url` (comma-separated); `o.extra`: more etcd flags.
 */
export function spawnEtcd(
  netns: string,
  dataDir: string,
  url: string,
  o: { listen?: string; extra?: string[] } = {},
): Deno.ChildProcess {
  return new Deno.Command("ip", {
    args: [
      ...["netns", "exec", netns, "etcd", "--data-dir", dataDir],
      ...["--listen-client-urls", o.listen ?? url, "--advertise-client-urls", url],
      ...["--listen-peer-urls", "http://127.0.0.1:2380", ...(o.extra ?? [])],
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
}
