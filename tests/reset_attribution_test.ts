/**
 * `flanctl reset` removes only routes it can attribute to flanctl: a host-gw route via a lease's PublicIP
 * and our own subnet's blackhole route go; a foreign static route via the underlay and a foreign blackhole
 * stay, even when subnet.env's FLANNEL_NETWORK is wrong (0.0.0.0/0 contains every route).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctl, ipJson, nsSh, withNetns } from "./netns.ts";
import { tempDir } from "./cni_helpers.ts";

interface Route {
  dst: string;
  gateway?: string;
  type?: string;
}

needsRoot.test("reset: a wrong FLANNEL_NETWORK never takes routes it cannot attribute to flanctl", () =>
  withNetns(async (fx) => {
    const ns = await fx.add("rst");
    const d = tempDir();
    try {
      const store = `${d.path}/store`, env = `${d.path}/run/subnet.env`;
      Deno.mkdirSync(`${d.path}/run`);
      await nsSh(ns, "ip", "link", "add", "under0", "type", "veth", "peer", "name", "under1");
      await nsSh(ns, "ip", "addr", "add", "192.168.50.2/24", "dev", "under0");
      await nsSh(ns, "ip", "link", "set", "under0", "up");
      // A peer's host-gw route (via its lease's PublicIP), our blackhole, and the node's own static routes.
      await nsSh(ns, "ip", "route", "add", "10.244.2.0/24", "via", "192.168.50.3");
      await nsSh(ns, "ip", "route", "add", "blackhole", "10.244.1.0/24");
      await nsSh(ns, "ip", "route", "add", "10.99.0.0/16", "via", "192.168.50.1");
      await nsSh(ns, "ip", "route", "add", "blackhole", "10.98.0.0/16");
      const conf = `${d.path}/net-conf.json`;
      Deno.writeTextFileSync(
        conf,
        JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "host-gw" } }),
      );
      const set = await flanctl(["lease", "config", "set", conf, "--store-dir", store]);
      assertEquals(set.code, 0, set.stderr);
      for (const [sub, ip] of [["10.244.1.0/24", "192.168.50.2"], ["10.244.2.0/24", "192.168.50.3"]]) {
        const r = await flanctl(["lease", "reserve", sub, "--public-ip", ip, "--store-dir", store]);
        assertEquals(r.code, 0, r.stderr);
      }
      Deno.writeTextFileSync(
        env,
        "FLANNEL_NETWORK=0.0.0.0/0\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n",
      );
      const routes = async () =>
        (await ipJson<Route[]>(ns, "-4", "route")).map((r) =>
          `${r.type === "blackhole" ? "blackhole " : ""}${r.dst}${r.gateway ? ` via ${r.gateway}` : ""}`
        ).sort();

      const r = await flanctl(
        ["reset", "--subnet-file", env, "--state-dir", `${d.path}/state`, "--store-dir", store, "-o", "json"],
        { ns },
      );
      assertEquals(r.code, 0, r.stdout + r.stderr);
      const rep = JSON.parse(r.stdout) as { removed: string[]; kept: string[]; failed: string[] };
      assertEquals(await routes(), [
        "10.99.0.0/16 via 192.168.50.1",
        "192.168.50.0/24",
        "blackhole 10.98.0.0/16",
      ]);
      assert(rep.removed.some((x) => x.startsWith("route 10.244.2.0/24 via 192.168.50.3")), r.stdout);
      assert(rep.removed.some((x) => x.startsWith("route blackhole 10.244.1.0/24")), r.stdout);
      assert(rep.kept.some((x) => x.includes("10.99.0.0/16") && x.includes("no lease's PublicIP")), r.stdout);

      // Without the store, no gateway route is attributable: the peer's route stays, with why.
      await nsSh(ns, "ip", "route", "add", "10.244.3.0/24", "via", "192.168.50.4");
      Deno.writeTextFileSync(
        env,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n",
      );
      const again = await flanctl(["reset", "--subnet-file", env, "--state-dir", `${d.path}/state`], {
        ns,
        env: { FLANNELD_ETCD_ENDPOINTS: "" },
      });
      assertEquals(again.code, 0, again.stdout + again.stderr);
      assert((await routes()).includes("10.244.3.0/24 via 192.168.50.4"), again.stdout);
      assert(
        /kept +route 10\.244\.3\.0\/24 via 192\.168\.50\.4 dev under0: no store given/.test(again.stdout),
        again.stdout,
      );
    } finally {
      d.cleanup();
    }
  }));
