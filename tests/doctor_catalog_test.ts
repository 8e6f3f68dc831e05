/**
 * The catalog of the field's most reported flannel failures (issue 37), each injected into node1 of one
 * shared lab and diagnosed by `flanctl lab exec node1 -- flanctl doctor -o json` as an operator runs it:
 * the finding, its severity, the cause named, the fix pasted into the node and shown to work — and the
 * healthy variant of each asserted quiet. Cases run in order on the same lab and each leaves it healthy.
 * docs/doctor.md's "common failures" table is written from this file: a new row comes with its case here.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, run } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { loadState } from "../lib/lab/state.ts";
import { teachPmtu } from "./pmtu.ts";
import type { FindingId, Severity } from "../lib/doctor/mod.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";

interface Finding {
  id: FindingId;
  severity: Severity;
  detail: string;
  why?: string;
  fix: string[];
}

interface Report {
  summary: { status: string; exitCode: number };
  checks: Finding[];
}

/** What every case's doctor skips: the host-wide neighbour table other tests fill (its own tests prove it). */
const SKIP = "neigh-gc";

async function doctor(name: string, node = "node1"): Promise<Report & { raw: string }> {
  const r = await labExec(name, node, flanctlCmd("doctor", "-o", "json", "--skip", SKIP));
  try {
    return { ...(JSON.parse(r.stdout) as Report), raw: r.stdout };
  } catch {
    throw new Error(`doctor on ${node}: exit ${r.code}, not JSON:\n${r.stdout}\n${r.stderr}`);
  }
}

function finding(rep: Report & { raw: string }, id: FindingId): Finding {
  const f = rep.checks.filter((c) => c.id === id);
  assertEquals(f.length, 1, `${id}: ${rep.raw}`);
  return f[0];
}

/** Not ok findings, as `id severity`. */
function problems(rep: Report): string[] {
  return rep.checks.filter((c) => c.severity !== "ok").map((c) => `${c.id} ${c.severity}: ${c.detail}`);
}

/** Pastes fix lines into node1 as an operator would (one shell, the node's files at their paths). */
async function paste(name: string, lines: string[], node = "node1"): Promise<void> {
  const r = await labExec(name, node, ["sh", "-ec", lines.join("\n")]);
  assertEquals(r.code, 0, `pasting ${JSON.stringify(lines)}: ${r.stdout}${r.stderr}`);
}

function nodeOf(s: LabState, node: string): NodeState {
  return s.nodes.find((n) => n.name === node)!;
}

/** Everything a pod leaves on node1 outside its netns: the host-local files, cni0's ports, the netns list. */
async function podTraces(s: LabState, name: string) {
  const n = nodeOf(s, "node1");
  const dir = `${n.dir}/var/lib/cni/networks/cbr0`;
  const files = [...Deno.readDirSync(dir)].map((e) => e.name).filter((f) => f.includes(".") && f !== "lock")
    .filter((f) => !f.startsWith("last_reserved")).sort();
  const links = (await labExec(name, "node1", ["ip", "-o", "link", "show", "master", "cni0"])).stdout
    .split("\n").filter(Boolean).length;
  const netns = (await run(["ip", "netns", "list"])).stdout.split("\n").map((l) => l.split(" ")[0])
    .filter((x) => x.startsWith(`${name}-node1-`)).sort();
  const flannel = [...Deno.readDirSync(`${n.dir}/var/lib/cni/flannel`)].filter((e) => e.isFile).map((e) =>
    e.name
  )
    .sort();
  return { files, links, netns, flannel };
}

needsRoot.test({
  name: "doctor catalog: the field's common failures, each injected, diagnosed, fixed by pasting",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await withLab("dcat", ["--nodes", "2", "--pods-per-node", "1"], undefined, async (s0, name) => {
      const n1 = nodeOf(s0, "node1");
      const conflist = `${n1.dir}/etc/cni/net.d/10-flannel.conflist`;
      const pool = `${n1.dir}/var/lib/cni/networks/cbr0`;

      await t.step("healthy: doctor on node1 is quiet", async () => {
        const rep = await doctor(name);
        assertEquals(problems(rep), [], rep.raw);
      });

      await t.step(
        "add-pod whose CNI ADD fails late leaks nothing (netns, veth, IP, saved config)",
        async () => {
          const before = await podTraces(loadState(name), name);
          const orig = Deno.readTextFileSync(conflist);
          const list = JSON.parse(orig);
          list.plugins.push({ type: "no-such-plugin" });
          Deno.writeTextFileSync(conflist, JSON.stringify(list));
          try {
            const r = await flanctl(["lab", "add-pod", "--name", name, "node1"]);
            assert(r.code !== 0, r.stdout);
            assertStringIncludes(r.stderr, "no-such-plugin");
          } finally {
            Deno.writeTextFileSync(conflist, orig);
          }
          assertEquals(await podTraces(loadState(name), name), before);
          assertEquals(loadState(name).pods.length, s0.pods.length);
        },
      );

      await t.step(
        "host-local pool 100% full of leaked IPs: critical, one fix frees only the leaked",
        async () => {
          const s = loadState(name);
          const own = s.pods.find((p) => p.node === "node1")!;
          const sub = own.ip!.split(".").slice(0, 3).join(".");
          for (let i = 2; i <= 254; i++) {
            const ip = `${sub}.${i}`;
            if (ip === own.ip) continue;
            Deno.writeTextFileSync(`${pool}/${ip}`, `leaked${i.toString(16).padStart(10, "0")}\neth0`);
          }
          const before = await podTraces(s, name);
          const add = await flanctl(["lab", "add-pod", "--name", name, "node1"]);
          assert(add.code !== 0, add.stdout);
          assertStringIncludes(
            add.stderr,
            `failed to allocate for range 0: no IP addresses available in range set: ${sub}.1-${sub}.254`,
          );
          assertEquals(await podTraces(loadState(name), name), before, "the failed ADD leaves nothing");
          const rep = await doctor(name);
          const f = finding(rep, "hostlocal-ips");
          assertEquals(f.severity, "critical", f.detail);
          assertStringIncludes(f.detail, "252 leaked IP(s)");
          assertStringIncludes(f.detail, "253/253 used (100%)");
          assertEquals(f.fix.length, 1, f.fix.join("\n"));
          await paste(name, f.fix);
          const after = await podTraces(loadState(name), name);
          assertEquals(after.files, [own.ip], "only the live pod's reservation stays");
          assertEquals(finding(await doctor(name), "hostlocal-ips").severity, "ok");
          // The pool works again: a pod starts, and goes.
          const ok = await flanctl(["lab", "add-pod", "--name", name, "node1"]);
          assertEquals(ok.code, 0, ok.stderr);
          const added = loadState(name).pods.find((p) => !s.pods.some((q) => q.name === p.name))!;
          const del = await flanctl(["lab", "del-pod", "--name", name, added.name]);
          assertEquals(del.code, 0, del.stderr);
        },
      );

      await t.step(
        "a foreign CNI config sorting first: critical root cause, no flanctl symlink",
        async () => {
          const foreign = `${n1.dir}/etc/cni/net.d/00-calico.conflist`;
          Deno.writeTextFileSync(
            foreign,
            JSON.stringify({ cniVersion: "0.3.1", name: "k8s-pod-network", plugins: [{ type: "calico" }] }),
          );
          const rep = await doctor(name);
          const c = finding(rep, "cni-config");
          assertEquals(c.severity, "critical", c.detail);
          assertStringIncludes(c.detail, "00-calico.conflist (plugins: calico), not a flannel config");
          assertEquals(rep.checks[0].id, "cni-config", "the root cause comes first");
          const b = finding(rep, "cni-binaries");
          assert(b.severity !== "critical" && b.detail.includes("consequence of cni-config"), b.detail);
          assert(!b.fix.join("\n").includes("ln -sf"), b.fix.join("\n"));
          await paste(name, c.fix);
          assertEquals(problems(await doctor(name)), []);
        },
      );

      await t.step("a learned path MTU (route cache) to a remote pod is no stale peer route", async () => {
        const s = loadState(name);
        const p1 = s.pods.find((p) => p.node === "node1")!, p2 = s.pods.find((p) => p.node === "node2")!;
        const vtep1 = p1.ip!.split(".").slice(0, 3).join(".") + ".0";
        await teachPmtu(nodeOf(s, "node2").netns, vtep1, p2.ip!, 1300);
        const got = await labExec(name, "node1", ["ip", "route", "get", p2.ip!]);
        assertStringIncludes(got.stdout, "mtu 1300", "node1 learned the path MTU");
        const rep = await doctor(name);
        assertEquals(problems(rep), [], rep.raw);
        await labExec(name, "node1", ["ip", "route", "flush", "cache"]);
      });

      await t.step("pods below FLANNEL_MTU (the node's MTU grew): quiet, never told to raise", async () => {
        const s = loadState(name);
        const p1 = s.pods.find((p) => p.node === "node1")!;
        await run(["ip", "-n", p1.netns, "link", "set", "eth0", "mtu", "1400"]);
        try {
          const rep = await doctor(name);
          assertEquals(problems(rep), [], rep.raw);
          assertStringIncludes(finding(rep, "mtu").detail, "1 pod(s) below 1450");
        } finally {
          await run(["ip", "-n", p1.netns, "link", "set", "eth0", "mtu", "1450"]);
        }
        // Above what the overlay carries is the fault: lowered by the fix.
        await run(["ip", "-n", p1.netns, "link", "set", "eth0", "mtu", "1500"]);
        const rep = await doctor(name);
        const m = finding(rep, "mtu");
        assertEquals(m.severity, "warning", m.detail);
        assertStringIncludes(m.detail, `pod netns ${p1.netns} eth0 MTU 1500 > 1450`);
        await paste(name, m.fix);
        assertEquals(problems(await doctor(name)), []);
      });
    });
  },
});
