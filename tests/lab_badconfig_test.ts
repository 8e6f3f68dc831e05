/**
 * A node whose store holds a bad network config: the daemon exits non-zero with a message naming what is
 * wrong, and leaves no half-made state (no VXLAN device, no subnet.env, no lease, no iptables chains).
 * Runs in a throwaway namespace shaped like a lab node (an interface with the default route).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, linkNames, nsRun, run, sh, withNetns } from "./netns.ts";

const CASES: { conf: string; mentions: string }[] = [
  { conf: `{"Network":"10.244.0.0/16","Backend":{"Type":"bogus"}}`, mentions: "bogus" },
  { conf: `{"Network":"10.244.0.0/30","Backend":{"Type":"vxlan"}}`, mentions: "too small" },
  { conf: `{"Network":"10.244.0.0/16","SubnetLen":33}`, mentions: "SubnetLen" },
  { conf: `{"Network": "10.244.0.0/16", `, mentions: "json" },
];

needsRoot.test({
  name: "lab e2e: bad network config in the store -> daemon exits with a clear message, nothing made",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withNetns(async (fx) => {
      const ns = await fx.add("bad");
      // A veth pair inside the namespace stands in for the node's NIC (no dummy module on every kernel).
      await sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p");
      await sh("ip", "-n", ns, "link", "set", "eth0p", "up");
      await sh("ip", "-n", ns, "addr", "add", "192.0.2.2/24", "dev", "eth0");
      await sh("ip", "-n", ns, "link", "set", "eth0", "up");
      await sh("ip", "-n", ns, "route", "add", "default", "via", "192.0.2.1");
      for (const c of CASES) {
        const dir = await Deno.makeTempDir({ prefix: "flanctl-badconf-" });
        try {
          Deno.mkdirSync(`${dir}/store`);
          Deno.writeTextFileSync(`${dir}/store/config`, c.conf);
          // `timeout`: a daemon that waits instead of exiting fails the test rather than hanging it.
          const r = await nsRun(ns, [
            "timeout",
            "30",
            ...flanctlCmd(
              "daemon",
              "--iface=eth0",
              "--store-dir",
              `${dir}/store`,
              "--subnet-file",
              `${dir}/subnet.env`,
              "--state-dir",
              `${dir}/state`,
              "--ip-masq=true",
            ),
          ]);
          assert(r.code !== 0, `daemon accepted ${c.conf}`);
          assertStringIncludes(
            r.stderr.toLowerCase(),
            c.mentions.toLowerCase(),
            `for ${c.conf}: ${r.stderr}`,
          );
          assertEquals((await linkNames(ns)).sort(), ["eth0", "eth0p", "lo"]);
          const routes = (await run(["ip", "-n", ns, "-4", "route", "show"])).stdout.trim().split("\n");
          assertEquals(routes.length, 2, routes.join("\n"));
          let leases: string[] = [];
          try {
            leases = [...Deno.readDirSync(`${dir}/store/subnets`)].map((e) => e.name);
          } catch { /* none */ }
          assertEquals(leases, []);
          assertEquals(await exists(`${dir}/subnet.env`), false);
          const ipt = await run(["ip", "netns", "exec", ns, "iptables-save"]);
          assert(!ipt.stdout.includes("FLANNEL"), ipt.stdout);
        } finally {
          Deno.removeSync(dir, { recursive: true });
        }
      }
    });
  },
});

async function exists(p: string): Promise<boolean> {
  try {
    await Deno.stat(p);
    return true;
  } catch {
    return false;
  }
}
