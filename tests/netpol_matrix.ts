/**
 * The NetworkPolicy verdict matrix (issue 36): pods with labels and named container ports in three namespaces
 * of a `lab up --kube` cluster, policies applied through the API, then every pod pair × port × protocol probed
 * from inside the source pod, giving a grid that tests compare with a table of expected verdicts and, cell by
 * cell, with the grid another enforcer gives for the same policies. The enforcer is not this module's business
 * (kube-router: tools/kube_router.ts; flanctl's own daemon flag): the model, the policies and the probes are the
 * same whoever enforces them.
 *
 * The model: namespaces x, y, z (label `ns: <name>`); pods x/a, x/b, x/c, y/a, y/b, z/a, z/b (label
 * `pod: <name>`; x/a also `tier: web`, x/b `tier: db`), a on node1, b on node2, c on node1 (same-node and
 * cross-node pairs). Each pod runs agnhost `serve-hostname` twice, serving TCP and UDP on 80 (container c80)
 * and on 81 (c81), its container ports named `serve-<port>-<tcp|udp>`. SCTP is not probed: this kernel has no
 * SCTP (no CONFIG_IP_SCTP; /proc/net/protocols lists none).
 *
 * A probe runs in the source pod (kubectl exec, netcat-openbsd of the agnhost image): TCP `nc -z`, UDP a
 * datagram that serve-hostname answers with its name; allowed = connected / answered. A cell that fails is
 * asked again once before it counts as denied (a loaded machine can lose a probe; an answer is never false).
 * @module
 */
import { runKubectl } from "../lib/lab/kube.ts";
import { findKubeRouter, startKubeRouter } from "../tools/kube_router.ts";
import { ROOT, run, TEST_PREFIX } from "./netns.ts";

/** The probed ports and protocols, in the order of a cell's characters. */
export const CELLS = [[80, "TCP"], [81, "TCP"], [80, "UDP"], [81, "UDP"]] as const;

/** A pod of the model. */
export interface ModelPod {
  ns: "x" | "y" | "z";
  name: string;
  node: number;
  labels: Record<string, string>;
}

/** The model's pods, in the grid's order. */
export const MODEL_PODS: ModelPod[] = [
  { ns: "x", name: "a", node: 1, labels: { pod: "a", tier: "web" } },
  { ns: "x", name: "b", node: 2, labels: { pod: "b", tier: "db" } },
  { ns: "x", name: "c", node: 1, labels: { pod: "c" } },
  { ns: "y", name: "a", node: 1, labels: { pod: "a" } },
  { ns: "y", name: "b", node: 2, labels: { pod: "b" } },
  { ns: "z", name: "a", node: 1, labels: { pod: "a" } },
  { ns: "z", name: "b", node: 2, labels: { pod: "b" } },
];
/** The model's namespaces. */
export const MODEL_NAMESPACES = ["x", "y", "z"] as const;
/** The label every object of the model carries (cleanup, listing). */
export const MODEL_LABEL = "flanctl-netpol-matrix";

/** `ns/name`. */
export const podKey = (p: { ns: string; name: string }): string => `${p.ns}/${p.name}`;

/** The namespaces and pods of the model (one v1 List for `kubectl apply`), pods on nodes 1..`nodes`. */
export function modelObjects(image: string, nodes: number): Record<string, unknown> {
  const items: Record<string, unknown>[] = MODEL_NAMESPACES.map((ns) => ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: ns, labels: { ns, [MODEL_LABEL]: "1" } },
  }));
  for (const p of MODEL_PODS) {
    items.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: p.name, namespace: p.ns, labels: { ...p.labels, [MODEL_LABEL]: "1" } },
      spec: {
        nodeName: `node${((p.node - 1) % nodes) + 1}`,
        terminationGracePeriodSeconds: 0,
        tolerations: [{ operator: "Exists" }],
        containers: [80, 81].map((port) => ({
          name: `c${port}`,
          image,
          imagePullPolicy: "Never",
          args: ["serve-hostname", "--tcp", "--udp", "--http=false", `--port=${port}`],
          ports: ["TCP", "UDP"].map((protocol) => ({
            name: `serve-${port}-${protocol.toLowerCase()}`,
            containerPort: port,
            protocol,
          })),
        })),
      },
    });
  }
  return { apiVersion: "v1", kind: "List", items };
}

/** The pods' addresses by `ns/name`, as the API reports them. */
export type PodIPs = Map<string, string>;

/** Applies the model and waits (≤ `timeoutS`) until every pod is Ready; returns their addresses. */
export async function applyModel(lab: string, image: string, nodes: number, timeoutS = 240): Promise<PodIPs> {
  const r = await runKubectl(lab, ["apply", "-f", "-"], JSON.stringify(modelObjects(image, nodes)));
  if (r.code !== 0) throw new Error(`kubectl apply (the model): ${r.stderr.slice(0, 2000)}`);
  for (const ns of MODEL_NAMESPACES) {
    const w = await runKubectl(lab, [
      "wait",
      "-n",
      ns,
      "--for=condition=Ready",
      "pod",
      "--all",
      `--timeout=${timeoutS}s`,
    ]);
    if (w.code !== 0) throw new Error(`pods of namespace ${ns} not Ready: ${w.stderr.slice(0, 2000)}`);
  }
  return await podIPs(lab);
}

/** The model pods' addresses (each validated as an IPv4 address). */
export async function podIPs(lab: string): Promise<PodIPs> {
  const r = await runKubectl(lab, ["get", "pods", "-A", "-l", `${MODEL_LABEL}=1`, "-o", "json"]);
  if (r.code !== 0) throw new Error(`kubectl get pods: ${r.stderr.slice(0, 2000)}`);
  const list = JSON.parse(r.stdout.slice(0, 4 << 20)) as {
    items?: { metadata?: { name?: unknown; namespace?: unknown }; status?: { podIP?: unknown } }[];
  };
  const ips: PodIPs = new Map();
  for (const it of list.items ?? []) {
    const key = `${it.metadata?.namespace}/${it.metadata?.name}`;
    const ip = it.status?.podIP;
    if (typeof ip === "string" && /^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) ips.set(key, ip);
  }
  for (const p of MODEL_PODS) {
    if (!ips.has(podKey(p))) throw new Error(`pod ${podKey(p)} has no IPv4 address in the API`);
  }
  return ips;
}

/** A verdict grid: `grid[src][dst]` = one character per {@link CELLS} entry, `X` allowed, `.` denied. */
export type Matrix = Map<string, Map<string, string>>;

/** The shell script a source pod runs: every probe in parallel, one `<index> ok|no` line each. */
export function probeScript(targets: { ip: string; port: number; proto: "TCP" | "UDP" }[]): string {
  const lines = [
    "p() {",
    '  if [ "$4" = TCP ]; then nc -z -w 2 "$2" "$3" >/dev/null 2>&1 && echo "$1 ok" || echo "$1 no"',
    '  else r=$(printf x | nc -u -w 2 "$2" "$3" 2>/dev/null); [ -n "$r" ] && echo "$1 ok" || echo "$1 no"; fi',
    "}",
  ];
  targets.forEach((t, i) => {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(t.ip)) throw new Error(`not an IPv4 address: ${t.ip.slice(0, 40)}`);
    lines.push(`p ${i} ${t.ip} ${t.port} ${t.proto} &`);
  });
  lines.push("wait");
  return lines.join("\n") + "\n";
}

/** The `<index> ok|no` lines of {@link probeScript}'s output, as a set of the indexes that answered. */
export function parseProbes(out: string, n: number): Set<number> {
  const ok = new Set<number>();
  for (const line of out.slice(0, 1 << 20).split("\n")) {
    const m = /^(\d{1,5}) ok$/.exec(line.trim());
    if (m && Number(m[1]) < n) ok.add(Number(m[1]));
  }
  return ok;
}

async function probeFrom(
  lab: string,
  src: ModelPod,
  targets: { key: string; ip: string; port: number; proto: "TCP" | "UDP" }[],
): Promise<Set<number>> {
  const r = await runKubectl(lab, [
    "exec",
    "-n",
    src.ns,
    src.name,
    "-c",
    "c80",
    "--",
    "sh",
    "-c",
    probeScript(targets),
  ]);
  if (r.code !== 0 && !r.stdout.trim()) {
    throw new Error(`kubectl exec ${podKey(src)}: ${r.stderr.slice(0, 1000)}`);
  }
  return parseProbes(r.stdout, targets.length);
}

/**
 * Probes every pair of distinct model pods on every {@link CELLS} entry (the sources in parallel); a failed
 * probe is asked once more.
 */
export async function probeMatrix(lab: string, ips: PodIPs): Promise<Matrix> {
  const rows = await Promise.all(MODEL_PODS.map(async (src) => {
    const targets = MODEL_PODS.filter((d) => d !== src).flatMap((d) =>
      CELLS.map(([port, proto]) => ({ key: podKey(d), ip: ips.get(podKey(d))!, port, proto }))
    );
    const ok = await probeFrom(lab, src, targets);
    const again = targets.map((t, i) => ({ t, i })).filter(({ i }) => !ok.has(i));
    if (again.length) {
      const ok2 = await probeFrom(lab, src, again.map(({ t }) => t));
      again.forEach(({ i }, j) => ok2.has(j) && ok.add(i));
    }
    const row = new Map<string, string>();
    MODEL_PODS.filter((d) => d !== src).forEach((d, k) => {
      row.set(podKey(d), CELLS.map((_, c) => ok.has(k * CELLS.length + c) ? "X" : ".").join(""));
    });
    return [podKey(src), row] as const;
  }));
  return new Map(rows);
}

/** The grid as text: a header of destinations, one row per source, `-` on the diagonal. */
export function formatMatrix(m: Matrix): string {
  const keys = MODEL_PODS.map(podKey);
  const w = 6;
  const lines = [`${"".padEnd(w)}${keys.map((k) => k.padEnd(w)).join("")}`.trimEnd()];
  for (const s of keys) {
    const row = keys.map((d) => (s === d ? "-" : m.get(s)?.get(d) ?? "?").padEnd(w)).join("");
    lines.push(`${s.padEnd(w)}${row}`.trimEnd());
  }
  return lines.join("\n");
}

/** A grid written as {@link formatMatrix} prints it (whitespace-insensitive), back into a {@link Matrix}. */
export function parseMatrix(text: string): Matrix {
  const lines = text.trim().split("\n").map((l) => l.trim().split(/\s+/));
  const head = lines[0];
  const m: Matrix = new Map();
  for (const row of lines.slice(1)) {
    const [src, ...cells] = row;
    if (cells.length !== head.length) {
      throw new Error(`row ${src}: ${cells.length} cells, ${head.length} columns`);
    }
    const r = new Map<string, string>();
    cells.forEach((c, i) => {
      if (head[i] !== src) r.set(head[i], c);
    });
    m.set(src, r);
  }
  return m;
}

/** The cells where two grids differ, one `src -> dst port/proto: a vs b` line each. */
export function diffMatrix(a: Matrix, b: Matrix, names = ["got", "want"]): string[] {
  const out: string[] = [];
  for (const s of MODEL_PODS.map(podKey)) {
    for (const d of MODEL_PODS.map(podKey)) {
      if (s === d) continue;
      const x = a.get(s)?.get(d) ?? "????", y = b.get(s)?.get(d) ?? "????";
      CELLS.forEach(([port, proto], c) => {
        if (x[c] !== y[c]) {
          const v = (ch: string) => ch === "X" ? "allowed" : ch === "." ? "denied" : "unknown";
          out.push(`${s} -> ${d} ${port}/${proto}: ${names[0]} ${v(x[c])}, ${names[1]} ${v(y[c])}`);
        }
      });
    }
  }
  return out;
}

/**
 * Probes until the grid equals `want` or `timeoutMs` passes; returns the last grid and how long it took (the
 * first probe starts right away: the time includes the enforcer's reaction to the change just made).
 */
export async function waitMatrix(
  lab: string,
  ips: PodIPs,
  want: Matrix,
  timeoutMs = 60_000,
): Promise<{ matrix: Matrix; ms: number; rounds: number }> {
  const t0 = Date.now();
  let rounds = 0;
  for (;;) {
    const matrix = await probeMatrix(lab, ips);
    rounds++;
    if (!diffMatrix(matrix, want).length || Date.now() - t0 > timeoutMs) {
      return { matrix, ms: Date.now() - t0, rounds };
    }
  }
}

/** A set of NetworkPolicies applied together, with the grid the API's semantics give for them. */
export interface Scenario {
  name: string;
  /** The policies, built from the pods' addresses (ipBlock). */
  policies: (ips: PodIPs) => Record<string, unknown>[];
  /** The expected grid, as {@link formatMatrix} prints it. */
  want: string;
}

/** Applies a scenario's policies (after deleting every policy of the model's namespaces). */
export async function applyScenario(lab: string, s: Scenario, ips: PodIPs): Promise<void> {
  await deletePolicies(lab);
  const items = s.policies(ips);
  if (!items.length) return;
  const r = await runKubectl(
    lab,
    ["apply", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items }),
  );
  if (r.code !== 0) throw new Error(`kubectl apply (${s.name}): ${r.stderr.slice(0, 2000)}`);
}

/** Deletes every NetworkPolicy of the model's namespaces. */
export async function deletePolicies(lab: string): Promise<void> {
  for (const ns of MODEL_NAMESPACES) {
    const r = await runKubectl(lab, ["delete", "networkpolicy", "--all", "-n", ns, "--wait=true"]);
    if (r.code !== 0) throw new Error(`kubectl delete networkpolicy -n ${ns}: ${r.stderr.slice(0, 1000)}`);
  }
}

/** A NetworkPolicy object. */
export function policy(ns: string, name: string, spec: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name, namespace: ns, labels: { [MODEL_LABEL]: "1" } },
    spec,
  };
}

/** One scenario's outcome: the grid probed once it matched (or at the timeout) and how long that took. */
export interface ScenarioResult {
  scenario: Scenario;
  matrix: Matrix;
  ms: number;
  rounds: number;
}

/**
 * Runs `scenarios` in order on lab `lab` (the model applied and Ready first, agnhost as `image`): each one's
 * policies applied, then probed until its grid is the expected one or `timeoutMs` passes. Whoever enforces
 * (kube-router, flanctl) must be running already; the results are compared by the caller, with the table
 * ({@link Scenario.want}) or with another enforcer's results ({@link diffMatrix}).
 */
export async function runScenarios(
  lab: string,
  image: string,
  nodes: number,
  scenarios: Scenario[],
  timeoutMs = 60_000,
): Promise<ScenarioResult[]> {
  const ips = await applyModel(lab, image, nodes);
  const out: ScenarioResult[] = [];
  for (const scenario of scenarios) {
    await applyScenario(lab, scenario, ips);
    const r = await waitMatrix(lab, ips, parseMatrix(scenario.want), timeoutMs);
    out.push({ scenario, ...r });
  }
  return out;
}

/**
 * Who enforces the policies of a matrix run: a peer started beside the lab once it is up (kube-router:
 * tools/kube_router.ts `startKubeRouter`), or flanctl's own DaemonSet — a manifest whose daemon has its
 * policy flag, applied by `lab up --kube --manifest` (nothing to start).
 */
export interface MatrixEnforcer {
  name: string;
  /** The manifest `lab up --kube` applies (default deploy/kube-flanctl.yml: flanctl without policy). */
  manifest?: string;
  /** Starts the enforcer on the lab's nodes once they are Ready. */
  start?(lab: string, nodes: number): Promise<{ stop(): Promise<void> }>;
}

/** kube-router beside flanctl's DaemonSet (which enforces nothing without its policy flag). */
export const KUBE_ROUTER: MatrixEnforcer = {
  name: "kube-router",
  start: (lab, nodes) => {
    const bin = findKubeRouter();
    if (!bin) throw new Error("kube-router not built: tools/peers/build.sh kube-router (./install.sh --dev)");
    return startKubeRouter(lab, nodes, bin);
  },
};

/** The agnhost image the model's pods run (`deploy/build-image.sh --peer agnhost` names it so by default). */
export const AGNHOST_IMAGE = "flanctl.local/e2e/agnhost:2.66.1";

/**
 * The whole run for one enforcer: the images (flanctl's, kube-proxy, CoreDNS, agnhost) built into a temporary
 * directory, a `lab up --kube` of `nodes` nodes (named after FLANCTL_TEST_PREFIX), the enforcer, the model and
 * `scenarios` ({@link runScenarios}); the lab is always taken down. Two runs (kube-router, flanctl) give grids
 * to compare cell by cell with {@link diffMatrix}.
 */
export async function matrixLab(
  e: MatrixEnforcer,
  scenarios: Scenario[],
  say: (line: string) => void,
  nodes = 2,
): Promise<ScenarioResult[]> {
  const name = `${TEST_PREFIX}np${crypto.getRandomValues(new Uint32Array(1))[0].toString(36).slice(0, 4)}`
    .slice(0, 12);
  const work = await Deno.makeTempDir({ prefix: "flanctl-netpol-" });
  const flanctl = (...a: string[]) =>
    run([Deno.execPath(), "run", "-A", "--no-check", "--quiet", `${ROOT}main.ts`, ...a]);
  let started: { stop(): Promise<void> } | undefined;
  try {
    const must = (what: string, r: { code: number; stdout: string; stderr: string }) => {
      if (r.code !== 0) {
        throw new Error(`${what} exited ${r.code}:\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-3000)}`);
      }
    };
    must("build-image.sh", await run([`${ROOT}deploy/build-image.sh`, `${work}/image.tar`]));
    for (const peer of ["kube-proxy", "coredns", "agnhost"]) {
      must(
        `build-image.sh --peer ${peer}`,
        await run([`${ROOT}deploy/build-image.sh`, "--peer", peer, `${work}/${peer}.tar`], {
          env: { FLANCTL_AGNHOST_REF: AGNHOST_IMAGE },
        }),
      );
    }
    const t0 = Date.now();
    must(
      "lab up --kube",
      await flanctl(
        "lab",
        "up",
        "--kube",
        "--nodes",
        String(nodes),
        "--name",
        name,
        "--image",
        `${work}/image.tar`,
        "--manifest",
        e.manifest ?? `${ROOT}deploy/kube-flanctl.yml`,
        "--kube-proxy-image",
        `${work}/kube-proxy.tar`,
        "--coredns-image",
        `${work}/coredns.tar`,
        "--import-image",
        `${work}/agnhost.tar`,
      ),
    );
    say(`lab up --kube --nodes ${nodes}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    if (e.start) {
      const t1 = Date.now();
      started = await e.start(name, nodes);
      say(`${e.name} programmed every node in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    }
    return await runScenarios(name, AGNHOST_IMAGE, nodes, scenarios);
  } finally {
    await started?.stop();
    await flanctl("lab", "down", "--name", name);
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}
