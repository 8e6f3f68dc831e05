/**
 * The verdict matrix's own parts, without a lab: the grid's text round trip and diff, the probe script and its
 * output's parsing, and the scenarios' tables (every cell present, the expected shape).
 */
import { assert, assertEquals, assertThrows } from "./assert.ts";
import {
  CELLS,
  diffMatrix,
  formatMatrix,
  MODEL_PODS,
  modelObjects,
  parseMatrix,
  parseProbes,
  podKey,
  probeScript,
} from "./netpol_matrix.ts";
import { EGRESS, INGRESS, SCENARIOS } from "./netpol_scenarios.ts";

const IPS = new Map(MODEL_PODS.map((p, i) => [podKey(p), `10.244.${p.node}.${i + 2}`]));

Deno.test("netpol matrix: every scenario's table names every pair once, four verdicts each", () => {
  for (const s of SCENARIOS) {
    const m = parseMatrix(s.want);
    assertEquals([...m.keys()], MODEL_PODS.map(podKey), s.name);
    for (const [src, row] of m) {
      assertEquals([...row.keys()], MODEL_PODS.map(podKey).filter((k) => k !== src), `${s.name} ${src}`);
      for (const c of row.values()) assert(/^[X.]{4}$/.test(c), `${s.name} ${src}: ${c}`);
    }
    // The text is the printer's: a probed grid and the table compare as text too.
    assertEquals(formatMatrix(m), s.want.replace(/^\n/, "").trimEnd());
    for (const p of s.policies(IPS)) assertEquals((p as { kind: string }).kind, "NetworkPolicy");
  }
});

Deno.test("netpol matrix: a diff names each differing cell with its port and protocol", () => {
  const a = parseMatrix(INGRESS.want), b = parseMatrix(EGRESS.want);
  const d = diffMatrix(a, b, ["ingress", "egress"]);
  assert(d.includes("x/a -> x/b 80/TCP: ingress allowed, egress denied"), d.join("\n"));
  assert(d.includes("x/b -> y/a 81/UDP: ingress allowed, egress denied"), d.join("\n"));
  assertEquals(diffMatrix(a, parseMatrix(INGRESS.want)), []);
  assertThrows(() => parseMatrix("  x/a x/b\nx/a - XXXX XXXX\n"));
});

Deno.test("netpol matrix: the probe script asks each target once, the output counts only its own lines", () => {
  const t = [
    { ip: "10.244.1.2", port: 80, proto: "TCP" as const },
    { ip: "10.244.2.3", port: 81, proto: "UDP" as const },
  ];
  const s = probeScript(t);
  assert(s.includes("p 0 10.244.1.2 80 TCP &\n"), s);
  assert(s.includes("p 1 10.244.2.3 81 UDP &\n"), s);
  assert(s.trimEnd().endsWith("wait"));
  assertThrows(() => probeScript([{ ip: "10.0.0.1; reboot", port: 80, proto: "TCP" }]));
  assertEquals([...parseProbes("1 ok\n0 no\n7 ok\nnoise ok\n  0 ok  \n", 2)].sort(), [0, 1]);
});

Deno.test("netpol matrix: the model's pods serve TCP and UDP on 80 and 81 under named ports", () => {
  interface Port {
    name: string;
    containerPort: number;
    protocol: string;
  }
  interface Obj {
    kind: string;
    metadata: { labels: Record<string, string> };
    spec: { nodeName: string; containers: { ports: Port[] }[] };
  }
  const list = modelObjects("img:1", 2) as { items: Obj[] };
  const pods = list.items.filter((o) => o.kind === "Pod");
  assertEquals(pods.length, MODEL_PODS.length);
  assertEquals(new Set(pods.map((p) => p.spec.nodeName)), new Set(["node1", "node2"]));
  const ports = pods[0].spec.containers.flatMap((c) =>
    c.ports.map((p) => `${p.name}=${p.containerPort}/${p.protocol}`)
  );
  assertEquals(ports, [
    "serve-80-tcp=80/TCP",
    "serve-80-udp=80/UDP",
    "serve-81-tcp=81/TCP",
    "serve-81-udp=81/UDP",
  ]);
  assertEquals(CELLS.length, 4);
  assertEquals(list.items.filter((o) => o.kind === "Namespace").map((n) => n.metadata.labels.ns), [
    "x",
    "y",
    "z",
  ]);
});
