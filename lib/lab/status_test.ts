import { assertEquals } from "../../tests/assert.ts";
import { daemonStatus, formatStatus, labStatus } from "./status.ts";
import type { LabState, NodeState } from "./types.ts";

function state(dir: string, nodes: NodeState[]): LabState {
  return {
    version: 1,
    name: "t",
    dir,
    backend: "vxlan",
    store: "file",
    network: "10.244.0.0/16",
    createdAt: new Date(0).toISOString(),
    underlay: { netns: "t-underlay", bridge: "br0", cidr: "192.168.100.0/24", gateway: "192.168.100.1" },
    storeFlags: [],
    healthzPort: 10251,
    netns: [],
    nodes,
    pods: [],
    procs: [],
  };
}

Deno.test("lab status: JSON shape with each node's daemon pid and state (running, stopped, none)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-labstatus-" });
  // A process whose command line carries the lab directory, as the lab's daemons do.
  const child = new Deno.Command("sh", { args: ["-c", "sleep 30", `${dir}/node1/daemon`] }).spawn();
  try {
    await Deno.mkdir(`${dir}/node1/run/flannel`, { recursive: true });
    await Deno.writeTextFile(
      `${dir}/node1/run/flannel/subnet.env`,
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
    );
    const node = (name: string, daemonPid?: number): NodeState =>
      ({
        name,
        netns: `t-${name}`,
        dir: `${dir}/${name}`,
        publicIP: "192.168.100.11",
        daemonPid,
      }) as NodeState;
    const s = state(dir, [node("node1", child.pid), node("node2", 2 ** 22 + 7), node("node3")]);
    const st = await labStatus(s);
    assertEquals(st, {
      nodes: [
        {
          name: "node1",
          netns: "t-node1",
          publicIP: "192.168.100.11",
          subnet: "10.244.7.0/24",
          daemon: { pid: child.pid, state: "running" },
        },
        {
          name: "node2",
          netns: "t-node2",
          publicIP: "192.168.100.11",
          subnet: null,
          daemon: { pid: 2 ** 22 + 7, state: "stopped" },
        },
        {
          name: "node3",
          netns: "t-node3",
          publicIP: "192.168.100.11",
          subnet: null,
          daemon: { pid: null, state: "none" },
        },
      ],
      pods: [],
    });
    const text = formatStatus(s, st);
    const rows = text.split("\n").filter((l) => l.startsWith("node"));
    assertEquals(rows.map((r) => r.split(/\s{2,}/).slice(-1)[0]), [
      `pid ${child.pid}`,
      `stopped (was pid ${2 ** 22 + 7})`,
      "-",
    ]);
    child.kill("SIGKILL");
    await child.status;
    assertEquals(daemonStatus(s, s.nodes[0]).state, "stopped");
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
    await Deno.remove(dir, { recursive: true });
  }
});
