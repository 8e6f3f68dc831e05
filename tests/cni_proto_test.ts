/**
 * Names that exist on Object.prototype (`constructor`, `toString`, `hasOwnProperty`, `valueOf`) are
 * ordinary unknown names everywhere a config or the environment names something: as a delegate type,
 * an IPAM type and CNI_COMMAND they get the same error as any other unknown name, never error 999.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { cni, tempDir } from "./cni_helpers.ts";
import { withNetns } from "./netns.ts";

const NAMES = ["constructor", "toString", "hasOwnProperty", "valueOf"];

needsRoot.test("cni: prototype names as delegate type, ipam type and CNI_COMMAND are plain unknown names", () =>
  withNetns(async (fx) => {
    const node = await fx.add("pro"), pod = await fx.add("prp");
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.5.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
      );
      const flannel = (delegate: Record<string, unknown>) => ({
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: `${d.path}/subnet.env`,
        dataDir: `${d.path}/flannel`,
        delegate,
      });
      const base = { plugin: "flannel", command: "ADD", node, netns: pod, containerId: "proto1" };
      const unknown = await cni({ ...base, conf: flannel({ type: "nosuchplugin" }) });
      assertEquals(unknown.json?.code, 102, unknown.stdout);
      for (const name of NAMES) {
        const r = await cni({ ...base, conf: flannel({ type: name }) });
        assertEquals(r.json?.code, 102, `delegate type ${name}: ${r.stdout}`);
        assertStringIncludes(String(r.json?.details), name);
        const b = await cni({
          plugin: "bridge",
          command: "ADD",
          node,
          netns: pod,
          containerId: "proto2",
          conf: { cniVersion: "1.0.0", name: "n", type: "bridge", bridge: "cnip0", ipam: { type: name } },
        });
        assertEquals(b.json?.code, 102, `ipam type ${name}: ${b.stdout}`);
        const c = await cni({ ...base, command: name, conf: flannel({}) });
        assertEquals(c.json?.code, 4, `CNI_COMMAND ${name}: ${c.stdout}`);
      }
    } finally {
      d.cleanup();
    }
  }));
