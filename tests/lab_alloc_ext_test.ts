/**
 * `lab up --backend alloc` and `--backend extension` (file store): every daemon ready with no peer to
 * program, subnet.env and pods from the flannel CNI plugin, no device, the cross-node ping skipped (no data
 * plane) and `lab check` passing; with extension's commands from `--net-conf`, each node's
 * SubnetAddCommand ran for every other node's lease (its PreStartupCommand output on stdin).
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, run } from "./netns.ts";
import { withLab, withNetConf } from "./lab_fixture.ts";
import { waitFor } from "./daemon_fixture.ts";
import { hook } from "./alloc_ext_fixture.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";
import { IPNet } from "../lib/base/cidr.ts";

/** `n`'s subnet from its subnet.env ("10.249.3.0/24"). */
async function subnetOf(n: NodeState): Promise<string> {
  const env = await Deno.readTextFile(`${n.dir}/run/flannel/subnet.env`);
  return IPNet.parseWithHost(/FLANNEL_SUBNET=(\S+)/.exec(env)![1]).net.toString();
}

/** What every alloc/extension lab shows: subnet.env, no device, pods in their node's subnet, a passing check. */
async function leasesOnly(s: LabState, name: string): Promise<void> {
  for (const n of s.nodes) {
    const env = await Deno.readTextFile(`${n.dir}/run/flannel/subnet.env`);
    assertStringIncludes(env, "FLANNEL_MTU=1500\n");
    const links = JSON.parse((await run(["ip", "-n", n.netns, "-j", "link"])).stdout) as { ifname: string }[];
    assertEquals(links.filter((l) => l.ifname.startsWith("flannel")), [], n.name);
  }
  const check = await flanctl(["lab", "check", "--name", name]);
  assertEquals(check.code, 0, check.stdout + check.stderr);
  assertStringIncludes(check.stdout, "daemons: every one reports all 0 peers");
  assertStringIncludes(
    check.stdout,
    `cross-node ping: skipped, backend ${s.backend} has no data plane between nodes`,
  );
}

needsRoot.test({
  name: "lab alloc (file store, 2 nodes x 1 pod): leases, subnet.env and pods; no device, no ping expected",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    let out = "";
    await withLab(
      "al",
      ["--nodes", "2", "--pods-per-node", "1", "--backend", "alloc"],
      undefined,
      async (s, name) => {
        out = (await flanctl(["lab", "status", "--name", name])).stdout;
        await leasesOnly(s, name);
        assertEquals(s.pods.length, 2);
      },
    );
    assertStringIncludes(out, "backend alloc");
  },
});

needsRoot.test({
  name: "lab extension (--net-conf with commands): each node's SubnetAddCommand ran for the other's lease",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "flanctl-labext-" });
    try {
      // Each daemon sees its node's own /run/flannel: the hook's record is per node.
      const rec = await hook(
        `${dir}/rec`,
        `printf '%s|%s|%s|%s\\n' "$1" "$SUBNET" "$PUBLIC_IP" "$(cat)" >>/run/flannel/ext-events`,
      );
      const conf = {
        Network: "10.249.0.0/16",
        Backend: { Type: "extension", PreStartupCommand: "echo lab data", SubnetAddCommand: `${rec} add` },
      };
      await withNetConf(
        conf,
        (file) =>
          withLab(
            "ae",
            ["--nodes", "2", "--pods-per-node", "0", "--net-conf", file],
            undefined,
            async (s, name) => {
              await leasesOnly(s, name);
              for (const [me, other] of [[s.nodes[0], s.nodes[1]], [s.nodes[1], s.nodes[0]]]) {
                const want = `add|${await subnetOf(other)}|${other.publicIP}|lab data`;
                await waitFor(`${me.name}'s add for ${other.name}`, async () => {
                  const t = await Deno.readTextFile(`${me.dir}/run/flannel/ext-events`).catch(() => "");
                  return t.split("\n").includes(want);
                });
              }
            },
          ),
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
