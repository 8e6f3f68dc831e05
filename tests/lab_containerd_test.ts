/**
 * `flanctl lab up --runtime containerd`: a containerd per node, pods created and removed through CRI
 * (crictl runp / stopp + rmp). In dual stack: a pod with and one without a hostPort on every node, the
 * hostPort reached from the other node, pods ping across nodes in both families, `lab del-pod` (stopp + rmp)
 * leaves no veth, IP, saved config or rule, and the doctor asks each node's containerd and is clean.
 * `lab down` removes the sandboxes through CRI and leaves nothing (lab_fixture.ts).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctl, flanctlCmd, nsRun } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { listFiles } from "./cni_helpers.ts";
import { peerPath, requirePeers } from "./peers.ts";
import { loadState } from "../lib/lab/state.ts";
import { missingRuntime } from "../lib/lab/containerd.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

// install.sh --dev's peers (under CI a missing one fails the suite); crictl of the pinned version, also for
// the lab's flanctl processes (they inherit the variable).
const HAVE = requirePeers(["containerd", "ctr", "runc", "crictl", "busybox"]);
if (HAVE) Deno.env.set("FLANCTL_PEER_CRICTL", peerPath("crictl"));
const MISSING = HAVE ? missingRuntime() : ["peers"];

async function ping(from: string, ip: string): Promise<boolean> {
  return (await nsRun(from, ["ping", "-c", "1", "-W", "3", ip])).code === 0;
}

async function nodeLeft(n: NodeState): Promise<{ veths: number; ips: number; saved: number; dnat: number }> {
  const veths = (await nsRun(n.netns, ["ip", "-o", "link", "show", "master", "cni0"])).stdout.split("\n")
    .filter(Boolean).length;
  const ips = listFiles(`${n.dir}/var/lib/cni/networks`).filter((f) => /\/[0-9a-f.:]+$/.test(f)).length;
  const saved =
    listFiles(`${n.dir}/var/lib/cni/flannel`).filter((f) => !f.startsWith(".") && !f.includes("/"))
      .length;
  const dnat = (await nsRun(n.netns, ["iptables-save", "-t", "nat"])).stdout.split("\n")
    .filter((l) => l.startsWith(":CNI-DN-")).length;
  return { veths, ips, saved, dnat };
}

needsRoot.test({
  name: "lab --runtime containerd: hostPort and plain pods on every node through CRI, cross-node, doctor",
  ignore: MISSING.length > 0,
  fn: async () => {
    await withLab(
      "lctd",
      ["--nodes", "2", "--pods-per-node", "0", "--ip-family", "dual", "--runtime", "containerd"],
      undefined,
      async (s0: LabState, name) => {
        for (const node of ["node1", "node2"]) {
          for (const pub of [["--publish", "18080:8080"], []]) {
            const r = await flanctl(["lab", "add-pod", node, ...pub, "--name", name]);
            assertEquals(r.code, 0, r.stdout + r.stderr);
          }
        }
        const s = loadState(name);
        assertEquals(s.runtime, "containerd");
        assertEquals(s.pods.length, 4);
        for (const p of s.pods) {
          assert(/^[0-9a-f]{64}$/.test(p.containerId), `${p.name} is a CRI sandbox: ${p.containerId}`);
        }
        // Cross-node ping, both families.
        const [a, b] = [
          s.pods.find((p) => p.node === "node1")!,
          s.pods.find((p) => p.node === "node2")!,
        ];
        for (const [from, to] of [[a, b], [b, a]]) {
          assert(await ping(from.netns, to.ip!), `${from.name} -> ${to.name} ${to.ip}`);
          assert(await ping(from.netns, to.ipv6!), `${from.name} -> ${to.name} ${to.ipv6}`);
        }
        // The hostPort of each node, from the other node.
        for (const n of s.nodes) {
          const pod = s.pods.find((p) => p.node === n.name && p.ports?.length)!;
          const other = s.nodes.find((x) => x !== n)!;
          const server = new Deno.Command("ip", {
            args: [
              "netns",
              "exec",
              pod.netns,
              "timeout",
              "30",
              "sh",
              "-c",
              `echo hi-${n.name} | nc -N -l 8080`,
            ],
            stdout: "null",
            stderr: "null",
          }).spawn();
          try {
            let got = "";
            for (let i = 0; i < 50 && !got; i++) {
              got = (await nsRun(other.netns, ["timeout", "5", "nc", "-w", "3", "-d", n.publicIP, "18080"]))
                .stdout.trim();
              if (!got) await new Promise((r) => setTimeout(r, 100));
            }
            assertEquals(got, `hi-${n.name}`, `hostPort 18080 of ${n.name} from ${other.name}`);
          } finally {
            try {
              server.kill("SIGKILL");
            } catch { /* done */ }
            await server.status;
          }
        }
        // The doctor asks the node's containerd: every IP, veth and saved config belongs to a READY sandbox.
        const n1 = s.nodes.find((n) => n.name === "node1")!;
        const doc = await labExec(
          name,
          "node1",
          flanctlCmd("doctor", "-o", "json", "--cri-socket", `${n1.dir}/containerd/containerd.sock`),
        );
        const f = (JSON.parse(doc.stdout).checks as { id: FindingId; severity: string; detail: string }[])
          .find((c) => c.id === "cri-sandboxes")!;
        assertEquals(f.severity, "ok", f.detail);
        assert(f.detail.includes("2 READY sandbox"), f.detail);
        assertEquals(await nodeLeft(n1), { veths: 2, ips: 4, saved: 2, dnat: 1 });
        // del-pod goes through stopp + rmp and leaves nothing of the pod.
        for (const p of s.pods.filter((p) => p.node === "node1")) {
          const r = await flanctl(["lab", "del-pod", p.name, "--name", name]);
          assertEquals(r.code, 0, r.stdout + r.stderr);
          assert(r.stdout.includes("crictl stopp + rmp"), r.stdout);
        }
        assertEquals(await nodeLeft(n1), { veths: 0, ips: 0, saved: 0, dnat: 0 });
        // ... and the doctor is clean after.
        const after = await labExec(
          name,
          "node1",
          flanctlCmd("doctor", "-o", "json", "--cri-socket", `${n1.dir}/containerd/containerd.sock`),
        );
        const checks = JSON.parse(after.stdout).checks as {
          id: FindingId;
          severity: string;
          detail: string;
        }[];
        for (const id of ["cri-sandboxes", "hostlocal-ips", "veths", "pod-netns", "cni-cache"]) {
          const c = checks.find((x) => x.id === id)!;
          assertEquals(c.severity, "ok", `${id}: ${c.detail}`);
        }
        void s0;
      },
    );
  },
});
