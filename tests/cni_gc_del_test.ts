/**
 * GC, then DEL: a GC that runs while pods still exist (the runtime's list was stale) releases their IPs,
 * saved configs and chains but cannot reach into their netns. The DELs that follow have no saved config;
 * they must still remove CNI_IFNAME and its host veth when it is our bridge's (37 pods, as in the report),
 * and leave an interface that is not ours alone.
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { cni, cniOk, listFiles, pool, tempDir } from "./cni_helpers.ts";
import { nsRun, withNetns } from "./netns.ts";

const PODS = 37;

needsRoot.test("cni flannel: DEL after GC removes the pod's veth pair (37 pods); a foreign interface stays", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fgn");
    const pods: string[] = [];
    for (let i = 0; i < PODS; i++) pods.push(await fx.add("fgp"));
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.8.1/24\nFLANNEL_MTU=1410\nFLANNEL_IPMASQ=false\n",
      );
      const conf = {
        cniVersion: "1.1.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: `${d.path}/subnet.env`,
        dataDir: `${d.path}/flannel`,
        ipam: { dataDir: `${d.path}/networks` },
      };
      const call = (command: string, i: number) =>
        cniOk({ plugin: "flannel", command, node, netns: pods[i], containerId: `gc${i}`, conf });
      await pool(pods, 4, (_p, i) => call("ADD", i));
      const veths = async () =>
        (await nsRun(node, ["ip", "-o", "link", "show", "type", "veth"])).stdout.trim().split("\n")
          .filter(Boolean).length;
      assertEquals(await veths(), PODS);
      // A temp file of a save whose process died between write and rename, and one of a live process.
      Deno.writeTextFileSync(`${d.path}/flannel/.tmp/2147483646.deadbeef`, "{}");
      Deno.writeTextFileSync(`${d.path}/flannel/.tmp/${Deno.pid}.live0000`, "{}");
      await cniOk({
        plugin: "flannel",
        command: "GC",
        node,
        conf: { ...conf, "cni.dev/valid-attachments": [] },
      });
      assertEquals(listFiles(`${d.path}/flannel/.tmp`), [`${Deno.pid}.live0000`]);
      assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".tmp/")), []);
      // A foreign veth pair named eth0 in a pod netns (not a port of cni0) with no saved config.
      const other = await fx.add("fgo");
      await nsRun(other, ["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "peer0"]);
      await pool(pods, 4, (_p, i) => call("DEL", i));
      const odd = await cni({
        plugin: "flannel",
        command: "DEL",
        node,
        netns: other,
        containerId: "gcx",
        conf,
      });
      assertEquals(odd.code, 0, odd.stdout);
      assertEquals(await veths(), 0, "no host veth left");
      for (const p of pods) {
        assertEquals((await nsRun(p, ["ip", "link", "show", "eth0"])).code, 1, `eth0 in ${p}`);
      }
      assertEquals((await nsRun(other, ["ip", "link", "show", "eth0"])).code, 0, "a foreign eth0 is kept");
    } finally {
      d.cleanup();
    }
  }));
