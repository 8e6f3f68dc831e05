/**
 * Duplicate ADDs race (runtimes retry an ADD after a timeout): six identical flannel ADDs at once, 30
 * rounds. One wins; the losers must not remove the winner's saved delegate config, so the DEL that follows
 * removes everything: eth0 in the pod, the host veth, the host-local IP and the CNI- masquerade chain.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, cniEnv, listFiles, pluginCmd, tempDir } from "./cni_helpers.ts";
import { nsRun, withNetns } from "./netns.ts";

const ROUNDS = 30;
const WAY = 6;

/**
 * Starts `n` identical ADDs, waits until all of them are up and blocked reading stdin, then releases them
 * at once (so they reach the saved-config step together, as retried ADDs of a busy runtime do).
 */
async function racingAdds(n: number, node: string, pod: string, id: string, conf: unknown) {
  const env = cniEnv({ plugin: "flannel", command: "ADD", netns: pod, containerId: id, conf });
  const envArgs = ["env", "-i", `PATH=${Deno.env.get("PATH")}`, "FLANCTL_ARGV0=flannel"];
  for (const [k, v] of Object.entries(env)) envArgs.push(`${k}=${v}`);
  const cmd = ["nsenter", `--net=/var/run/netns/${node}`, ...envArgs, ...pluginCmd()];
  const procs = Array.from(
    { length: n },
    () =>
      new Deno.Command(cmd[0], { args: cmd.slice(1), stdin: "piped", stdout: "piped", stderr: "piped" })
        .spawn(),
  );
  await new Promise((r) => setTimeout(r, 400)); // all started and waiting on stdin
  const text = new TextEncoder().encode(JSON.stringify(conf));
  await Promise.all(procs.map(async (p) => {
    const w = p.stdin.getWriter();
    await w.write(text);
    await w.close();
  }));
  const dec = new TextDecoder();
  return await Promise.all(procs.map(async (p) => {
    const o = await p.output();
    return { code: o.code, stdout: dec.decode(o.stdout) };
  }));
}

needsRoot.test("cni flannel: 6-way duplicate ADD race, then DEL leaves nothing (30 rounds)", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fdn"), pod = await fx.add("fdp");
    const d = tempDir();
    try {
      // FLANNEL_IPMASQ=false: the delegate masquerades itself (a CNI- chain per container).
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        `FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.9.1/24\nFLANNEL_MTU=1410\nFLANNEL_IPMASQ=false\n`,
      );
      const conf = {
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: `${d.path}/subnet.env`,
        dataDir: `${d.path}/flannel`,
        ipam: { dataDir: `${d.path}/networks` },
      };
      const leaks: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const id = `dup${round}`;
        const call = (command: string) =>
          cni({ plugin: "flannel", command, node, netns: pod, containerId: id, conf });
        const outs = await racingAdds(WAY, node, pod, id, conf);
        const ok = outs.filter((o) => o.code === 0).length;
        assert(ok >= 1, `round ${round}: no ADD succeeded: ${outs.map((o) => o.stdout).join(" ")}`);
        const del = await call("DEL");
        assertEquals(del.code, 0, del.stdout);
        const eth0 = (await nsRun(pod, ["ip", "link", "show", "eth0"])).code === 0;
        const veths = (await nsRun(node, ["ip", "-o", "link", "show", "type", "veth"])).stdout.trim();
        const ips = listFiles(`${d.path}/networks`).filter((f) => /^cbr0\/\d/.test(f));
        const chains = (await nsRun(node, ["iptables", "-t", "nat", "-S"])).stdout
          .split("\n").filter((l) => /^-N CNI-/.test(l));
        const saved = listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith("."));
        if (eth0 || veths || ips.length || chains.length || saved.length) {
          leaks.push(
            `round ${round} (${ok} ADDs ok): eth0=${eth0} veths=[${veths}] ips=${ips} chains=${chains} saved=${saved}`,
          );
          break; // a leak spoils the next rounds' checks
        }
      }
      assertEquals(leaks, []);
    } finally {
      d.cleanup();
    }
  }));
