/**
 * Many pods at once through the flannel plugin: 200 ADDs (20 in flight) give 200 distinct IPs, 200 DELs
 * leave nothing (IP files, index entries, veths, masquerade rules, saved delegate configs). And ADDs killed
 * with SIGKILL at random points, followed by GC, leak nothing either.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, cniEnv, listFiles, pluginCmd, pool, tempDir, waitFor } from "./cni_helpers.ts";
import { ipJson, linkNames, nsSh, run, sh, uniqueName, withNetns } from "./netns.ts";

type J = Record<string, unknown>;

function setup(dir: string, masq: boolean): J {
  Deno.writeTextFileSync(
    `${dir}/subnet.env`,
    `FLANNEL_NETWORK=10.240.0.0/12\nFLANNEL_SUBNET=10.241.0.1/22\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=${!masq}\n`,
  );
  return {
    cniVersion: "1.1.0",
    name: "scale",
    type: "flannel",
    subnetFile: `${dir}/subnet.env`,
    dataDir: `${dir}/flannel`,
    ipam: { dataDir: `${dir}/networks` },
  };
}

async function natRules(node: string): Promise<string[]> {
  return (await nsSh(node, "iptables-save", "-t", "nat")).split("\n").filter((l) => l.includes("CNI-"));
}

needsRoot.test("cni scale: 200 parallel ADDs then 200 DELs leave nothing behind", () =>
  withNetns(async (fx) => {
    const node = await fx.add("scn");
    const d = tempDir();
    const pods: string[] = [];
    try {
      const conf = setup(d.path, true);
      const N = 200;
      for (let i = 0; i < N; i++) {
        const name = uniqueName("scp");
        await sh("ip", "netns", "add", name);
        fx.names.push(name);
        pods.push(name);
      }
      const adds = await pool(
        pods,
        20,
        (pod, i) => cni({ plugin: "flannel", command: "ADD", node, netns: pod, containerId: `s${i}`, conf }),
      );
      const failed = adds.filter((r) => r.code !== 0);
      assertEquals(failed.map((r) => r.stdout), [], "every ADD succeeds");
      const ips = adds.map((r) => ((r.json!.ips as J[])[0].address as string));
      assertEquals(new Set(ips).size, N, "distinct IPs");
      assertEquals(listFiles(`${d.path}/networks/scale`).filter((f) => /^\d/.test(f)).length, N);
      assertEquals((await ipJson<J[]>(node, "link", "show", "master", "cni0")).length, N);
      assertEquals((await natRules(node)).filter((l) => l.startsWith("-A POSTROUTING")).length, N);

      const dels = await pool(
        pods,
        20,
        (pod, i) => cni({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: `s${i}`, conf }),
      );
      assertEquals(
        dels.filter((r) => r.code !== 0).map((r) => r.stdout),
        [],
        "every DEL succeeds",
      );
      assertEquals(
        listFiles(`${d.path}/networks`).filter((f) => !/(^|\/)(lock|last_reserved_ip\.0)$/.test(f)),
        [],
      );
      assertEquals(listFiles(`${d.path}/flannel`), []);
      assertEquals((await linkNames(node)).sort(), ["cni0", "lo"]);
      assertEquals(await natRules(node), []);
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test("cni scale: ADDs killed with SIGKILL at random points, then GC: nothing leaked", () =>
  withNetns(async (fx) => {
    const node = await fx.add("kln");
    const d = tempDir();
    try {
      const conf = setup(d.path, true);
      const stdin = JSON.stringify(conf);
      const N = 12;
      const pods: string[] = [];
      for (let i = 0; i < N; i++) pods.push(await fx.add("klp"));
      let killed = 0;
      await pool(pods, 4, async (pod, i) => {
        const env = cniEnv({ plugin: "flannel", command: "ADD", netns: pod, containerId: `k${i}`, conf });
        const args = [`--net=/var/run/netns/${node}`, "env", "FLANCTL_ARGV0=flannel"];
        for (const [k, v] of Object.entries(env)) args.push(`${k}=${v}`);
        const p = new Deno.Command("nsenter", {
          args: [...args, ...pluginCmd()],
          stdin: "piped",
          stdout: "null",
          stderr: "null",
        }).spawn();
        const w = p.stdin.getWriter();
        await w.write(new TextEncoder().encode(stdin));
        await w.close();
        // Random point: anywhere from start-up to the end of the ADD (start-up alone takes ~50+ ms).
        const delay = Math.floor(Math.random() * 400);
        const timer = setTimeout(() => {
          try {
            // nsenter and env exec the plugin, so this pid is the plugin process.
            p.kill("SIGKILL");
            killed++;
          } catch { /* already done */ }
        }, delay);
        await p.status;
        clearTimeout(timer);
      });
      assert(killed > 0, "at least one ADD was killed");
      // The runtime tears the sandboxes down, then garbage-collects with no valid attachments.
      for (const pod of pods) await run(["ip", "netns", "del", pod]);
      const gc = await cni({
        plugin: "flannel",
        command: "GC",
        node,
        conf: { ...conf, "cni.dev/valid-attachments": [] },
      });
      assertEquals(gc.code, 0, gc.stdout);
      assertEquals(
        listFiles(`${d.path}/networks`).filter((f) => !/(^|\/)(lock|last_reserved_ip\.0)$/.test(f)),
        [],
        "no IP files or index entries",
      );
      assertEquals(listFiles(`${d.path}/flannel`), [], "no saved delegate configs");
      assertEquals(await natRules(node), [], "no masquerade chains");
      const veths = async () =>
        (await ipJson<J[]>(node, "link")).map((l) => String(l.ifname)).filter((l) => l.startsWith("veth"));
      // Deleting a netns destroys its veths asynchronously: poll.
      assert(await waitFor(async () => (await veths()).length === 0), `veths left: ${await veths()}`);
    } finally {
      d.cleanup();
    }
  }));
