/**
 * kube-router's NetworkPolicy controller beside a `lab up --kube` cluster: the real peer issue 36 compares
 * flanctl's enforcement with. One process per node, inside the node's network namespace, with only its
 * firewall part, as k3s embeds it (`--run-firewall=true --run-router=false --run-service-proxy=false`, the
 * node's name as hostname override); the lab's admin kubeconfig (the API server on the underlay bridge is
 * reachable from every node). It programs the node's iptables (filter table: KUBE-ROUTER-INPUT/FORWARD/OUTPUT
 * and a chain per pod and policy) and ipset sets; both work in a node namespace of this kernel (IP_SET and
 * xt_set built in, `ipset` from Debian), and `net.bridge.bridge-nf-call-iptables` is 1 in every namespace, so
 * traffic between two pods of the same node, bridged by cni0, passes those chains too.
 *
 * The binary: tools/peers/build.sh kube-router (install.sh --dev), found by {@link findKubeRouter}. Used by the
 * verdict-matrix test (tests/netpol_kuberouter_test.ts) and `deno task e2e --netpol --enforcer kube-router`.
 * Nothing is cleaned up on stop (kube-router leaves its rules without `--cleanup-config`, which also runs its
 * router's and proxy's cleanups): its rules live in the node namespaces, which `lab down` deletes.
 * @module
 */
import { kubePaths, SERVICE_CIDR } from "../lib/lab/kube.ts";
import { nodeNetns } from "../lib/lab/paths.ts";
import { runProcess as run } from "../lib/lab/proc.ts";

/**
 * Where kube-router is, as tests/peers.ts finds the Go peers (tools/ may not import tests/):
 * FLANCTL_PEER_KUBE_ROUTER naming a file, else the dev cache's build of the version tools/peers/build.sh pins
 * (`$FLANCTL_DEV_CACHE/kube-router-<version>/bin`), else undefined.
 */
export function findKubeRouter(env: Record<string, string> = Deno.env.toObject()): string | undefined {
  const executable = (p: string) => {
    try {
      const st = Deno.statSync(p);
      return st.isFile && ((st.mode ?? 0o755) & 0o111) !== 0;
    } catch {
      return false;
    }
  };
  const override = env.FLANCTL_PEER_KUBE_ROUTER;
  if (override) return executable(override) ? override : undefined;
  const script = Deno.readTextFileSync(new URL("./peers/build.sh", import.meta.url));
  const version = /^KUBE_ROUTER_VERSION=(v[0-9][0-9A-Za-z.+-]*)$/m.exec(script)?.[1];
  if (!version) throw new Error("tools/peers/build.sh has no KUBE_ROUTER_VERSION= line");
  const cached = `${
    env.FLANCTL_DEV_CACHE || "/var/cache/flanctl-dev"
  }/kube-router-${version}/bin/kube-router`;
  return executable(cached) ? cached : undefined;
}

/** kube-router's processes on the nodes of one lab. */
export interface KubeRouterNodes {
  /** One per node, node1 first. */
  readonly children: Deno.ChildProcess[];
  /** Each node's log: `<lab dir>/node<i>/kube-router.log`. */
  readonly logs: string[];
  /** Stops every process (SIGTERM, then SIGKILL after 5 s) and waits for them. */
  stop(): Promise<void>;
}

/** The command line of node `i`'s (1-based) kube-router: firewall only, as k3s runs its policy controller. */
export function kubeRouterArgs(lab: string, i: number, opts: { ipv6?: boolean } = {}): string[] {
  return [
    "--run-firewall=true",
    "--run-router=false",
    "--run-service-proxy=false",
    `--kubeconfig=${kubePaths(lab).admin}`,
    `--hostname-override=node${i}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--enable-ipv4=true",
    `--enable-ipv6=${opts.ipv6 ? "true" : "false"}`,
    // Its own health and metrics servers are not needed: readiness is its chains in the node's iptables.
    "--health-port=0",
    "--metrics-port=0",
    "--v=1",
  ];
}

/** The last `n` lines of a file, for failure messages (empty when it cannot be read). */
export function tail(path: string, n = 20): string {
  try {
    return Deno.readTextFileSync(path).split("\n").slice(-n).join("\n");
  } catch {
    return "";
  }
}

/**
 * Starts kube-router on nodes 1..`nodes` of lab `lab` and waits (≤ `timeoutMs`) until each has programmed its
 * first sync (its KUBE-ROUTER-FORWARD chain exists in the node's iptables). On a timeout every process is
 * stopped and the error names the node and ends with its log.
 */
export async function startKubeRouter(
  lab: string,
  nodes: number,
  binary: string,
  opts: { ipv6?: boolean; timeoutMs?: number } = {},
): Promise<KubeRouterNodes> {
  const children: Deno.ChildProcess[] = [];
  const logs: string[] = [];
  for (let i = 1; i <= nodes; i++) {
    const log = `${kubePaths(lab).node(i)}/kube-router.log`;
    logs.push(log);
    children.push(
      new Deno.Command("sh", {
        args: [
          "-c",
          'log=$1; shift; exec "$@" >"$log" 2>&1',
          "sh",
          log,
          "ip",
          "netns",
          "exec",
          nodeNetns(lab, `node${i}`),
          binary,
          ...kubeRouterArgs(lab, i, opts),
        ],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn(),
    );
  }
  const stop = async () => {
    for (const c of children) {
      try {
        c.kill("SIGTERM");
      } catch { /* already gone */ }
    }
    const timer = setTimeout(() => {
      for (const c of children) {
        try {
          c.kill("SIGKILL");
        } catch { /* already gone */ }
      }
    }, 5000);
    await Promise.all(children.map((c) => c.status));
    clearTimeout(timer);
  };
  const end = Date.now() + (opts.timeoutMs ?? 90_000);
  for (let i = 1; i <= nodes; i++) {
    for (;;) {
      const r = await run([
        "ip",
        "netns",
        "exec",
        nodeNetns(lab, `node${i}`),
        "iptables",
        "-w",
        "-S",
        "KUBE-ROUTER-FORWARD",
      ]);
      if (r.code === 0) break;
      if (Date.now() > end) {
        await stop();
        throw new Error(
          `kube-router on node${i} did not program its chains in time; its log:\n${tail(logs[i - 1])}`,
        );
      }
      await new Promise((res) => setTimeout(res, 500));
    }
  }
  return { children, logs, stop };
}
