/**
 * The daemon's memory with NetworkPolicy enforcement at scale: `flanctl daemon --kube-subnet-mgr` against the
 * fake API server (in the bench's underlay namespace) serving `--pods` pods (default 5,000, each padded to
 * ~6 KB of JSON as real Pods are: annotations, env, status), 100 namespaces and `--policies` policies
 * (default 1,000) beside its Node, once without and once with `--network-policy`: RSS and peak RSS (VmRSS,
 * VmHWM from /proc) after the daemon is ready (and, with the flag, enforcing) and has settled.
 *
 *   deno task bench netpol_rss     (or: deno run -A bench/netpol_rss_bench.ts [--pods N] [--policies N])
 * @module
 */
import { DaemonCluster, waitFor } from "../tests/daemon_fixture.ts";
import { FakeApiServer, kubeconfigYaml } from "../tests/kube_fake_api.ts";
import { KINDS, NetpolKinds, nsJson, podJson, policyJson } from "../tests/netpol_fixture.ts";
import { arg } from "./own_netns.ts";

const PODS = arg("--pods", 5000);
const POLICIES = arg("--policies", 1000);
const NODES = 50, NAMESPACES = 100;
const SETTLE_MS = 5000;

function pod(i: number) {
  const node = i % NODES, k = Math.floor(i / NODES);
  const p = podJson(`ns${k % NAMESPACES}`, `p${i}`, {
    labels: {
      app: `a${Math.floor(k / 2) % 50}`,
      tier: k % 3 ? "be" : "fe",
      "pod-template-hash": "5d4f8c7b9",
    },
    ips: [`10.244.${node + 1}.${(k % 250) + 2}`],
    node: `kn${node + 1}`,
    ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
  });
  // What a real Pod carries besides: annotations, env, conditions (~6 KB of JSON the projection drops).
  (p.metadata as Record<string, unknown>).annotations = {
    "kubectl.kubernetes.io/last-applied": "x".repeat(3000),
  };
  const spec = p.spec as { containers: Record<string, unknown>[] };
  spec.containers[0].env = Array.from(
    { length: 20 },
    (_, j) => ({ name: `VAR_${j}`, value: "v".repeat(60) }),
  );
  (p.status as Record<string, unknown>).conditions = Array.from({ length: 5 }, () => ({
    type: "Ready",
    status: "True",
    lastTransitionTime: "2026-12-06T00:00:00Z",
    message: "m".repeat(100),
  }));
  return p;
}

function policy(i: number) {
  const from = [{
    namespaceSelector: { matchLabels: { team: `t${i % 10}` } },
    podSelector: { matchLabels: { tier: "fe" } },
  }];
  return policyJson(`ns${i % NAMESPACES}`, `pol${i}`, {
    podSelector: { matchLabels: { app: `a${Math.floor((i % NAMESPACES) / 2) % 50}` } },
    ingress: [{ from, ports: [{ port: 80 }, { port: 443 }, { port: "http" }] }],
  });
}

function vm(pid: number): { rss: number; hwm: number } {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(s)?.[1] ?? 0);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

const c = new DaemonCluster("10.93");
const kinds = new NetpolKinds();
let api: FakeApiServer | null = null;
try {
  await c.init();
  const a = await c.addNode();
  api = new FakeApiServer({ hostname: "10.93.0.1", netns: c.underlay });
  api.intercept = kinds.handle;
  for (let n = 1; n <= NODES; n++) {
    api.upsert(`kn${n}`, { podCIDR: `10.244.${n}.0/24`, podCIDRs: [`10.244.${n}.0/24`] });
  }
  kinds.objs.set(KINDS[0], Array.from({ length: PODS }, (_, i) => pod(i)));
  kinds.objs.set(
    KINDS[1],
    Array.from({ length: NAMESPACES }, (_, i) => nsJson(`ns${i}`, { team: `t${i % 10}` })),
  );
  kinds.objs.set(KINDS[2], Array.from({ length: POLICIES }, (_, i) => policy(i)));
  await Deno.writeTextFile(`${c.tmp}/net-conf.json`, JSON.stringify({ Network: "10.244.0.0/16" }));
  await Deno.writeTextFile(`${c.tmp}/kubeconfig`, kubeconfigYaml(api.url));
  const rows: string[] = [];
  for (const on of [false, true]) {
    c.start(a, [
      "--kube-subnet-mgr",
      `--kubeconfig-file=${c.tmp}/kubeconfig`,
      `--net-config-path=${c.tmp}/net-conf.json`,
      ...(on ? ["--network-policy"] : []),
    ], { NODE_NAME: "kn1", DENO_V8_FLAGS: Deno.env.get("NETPOL_RSS_V8_FLAGS") ?? "--max-semi-space-size=1" });
    await c.waitReady(a, 120_000);
    const t0 = Date.now();
    if (on) {
      await waitFor(
        () => `enforcing\n${a.log.join("\n")}`,
        () => a.log.some((l) => l.includes("netpol: enforcing")),
        120_000,
      );
    }
    const ready = Date.now() - t0;
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const m = vm(a.proc!.pid);
    const line = a.log.find((l) => l.includes("netpol: enforcing")) ?? "";
    rows.push(
      `${(on ? "--network-policy" : "off").padEnd(18)} RSS ${m.rss.toFixed(1).padStart(6)} MiB  peak ${
        m.hwm.toFixed(1).padStart(6)
      } MiB${
        on ? `  enforcing ${ready} ms after ready (${/ms=(\d+)/.exec(line)?.[1] ?? "?"} ms to program)` : ""
      }`,
    );
    await c.stop(a);
  }
  console.log(
    `${PODS} pods (~6 KB JSON each), ${NAMESPACES} namespaces, ${POLICIES} policies, ${NODES} nodes:`,
  );
  for (const r of rows) console.log(`  ${r}`);
} finally {
  kinds.close();
  await c.close();
  await api?.close();
}
