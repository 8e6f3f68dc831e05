/**
 * The alloc and extension backends mixed with the real flanneld (v0.28.10, built by `install.sh --dev`)
 * over one etcd: each side takes its lease beside the other's (the same value shape), writes subnet.env
 * and makes no device; with extension, each side's SubnetAddCommand fires for the other's lease with the
 * same variables and the other's BackendData (its PreStartupCommand's output) on stdin, both
 * PostStartupCommands see the same variables, and a deleted lease runs SubnetRemoveCommand on both.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { linkNames } from "./netns.ts";
import { type TestNode, waitFor } from "./daemon_fixture.ts";
import { FAST, MixedCluster } from "./peers_fixture.ts";
import { requirePeers } from "./peers.ts";
import { events, extensionConf, postEnv } from "./alloc_ext_fixture.ts";

const HAVE = requirePeers(["flanneld", "etcd", "etcdctl"]);

/** Starts flanctl on `n` against the cluster's etcd with `env` added to its environment. */
function startFlanctl(c: MixedCluster, n: TestNode, env: Record<string, string> = {}): void {
  c.start(n, ["--etcd-endpoints", c.etcdUrl, ...FAST], env);
  c.runs.set(n, "flanctl");
}

/** The lease values in etcd, by subnet ("10.250.3.0/24"). */
async function etcdLeases(c: MixedCluster): Promise<Map<string, Record<string, unknown>>> {
  const r = await c.etcdctl("get", "--prefix", "/coreos.com/network/subnets/");
  const lines = r.stdout.trim().split("\n");
  const out = new Map<string, Record<string, unknown>>();
  for (let i = 0; i + 1 < lines.length; i += 2) {
    out.set(lines[i].split("/").pop()!.replace("-", "/"), JSON.parse(lines[i + 1]));
  }
  return out;
}

/** Links of `ns` other than lo and eth0. */
async function extraLinks(ns: string): Promise<string[]> {
  return (await linkNames(ns)).filter((x) => x !== "lo" && x !== "eth0");
}

needsRoot.test({
  name: "mixed with flanneld over etcd (alloc): both leases, the same shape, subnet.env, no device",
  ignore: !HAVE,
  async fn() {
    const c = new MixedCluster("10.75");
    try {
      const [a, b] = await c.initEtcd(
        JSON.stringify({ Network: "10.250.0.0/16", Backend: { Type: "alloc" } }),
      );
      startFlanctl(c, a);
      c.startFlanneld(b);
      await c.waitUp(a);
      await c.waitUp(b);
      const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
      assert(subA !== subB, `${subA} ${subB}`);
      const leases = await etcdLeases(c);
      // flanneld's alloc value and ours: PublicIP only.
      assertEquals(leases.get(subB), { PublicIP: b.ip, PublicIPv6: null });
      assertEquals(leases.get(subA), { PublicIP: a.ip, PublicIPv6: null });
      for (const n of [a, b]) {
        const env = await c.subnetEnv(n);
        assertEquals([env.FLANNEL_NETWORK, env.FLANNEL_MTU], ["10.250.0.0/16", "1500"], n.name);
        assertEquals(await extraLinks(n.ns), [], n.name);
      }
      // flanctl sees flanneld's lease (and programs nothing for it).
      await waitFor(
        c.explain("flanctl sees both leases"),
        async () => (await c.http(a, "/metrics"))[1].includes("\nflanctl_leases 2\n"),
      );
    } finally {
      await c.close();
    }
  },
});

needsRoot.test({
  name: "mixed with flanneld over etcd (extension): each side's commands fire with the same env and stdin",
  ignore: !HAVE,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "flanctl-ext-" });
    const c = new MixedCluster("10.76");
    try {
      const [a, b] = await c.initEtcd(JSON.stringify(await extensionConf(dir, "10.251.0.0/16")));
      startFlanctl(c, a, { EXT_NODE: a.name, OUT_DIR: a.dir });
      c.startFlanneld(b, [], { EXT_NODE: b.name, OUT_DIR: b.dir });
      await c.waitUp(a);
      await c.waitUp(b);
      const subA = await c.subnetOf(a), subB = await c.subnetOf(b);
      // The leases: the same value from both, BackendData the PreStartupCommand's trimmed output.
      const leases = await etcdLeases(c);
      assertEquals(leases.get(subB), {
        PublicIP: b.ip,
        PublicIPv6: null,
        BackendType: "extension",
        BackendData: "data of node2",
      });
      assertEquals(leases.get(subA), {
        PublicIP: a.ip,
        PublicIPv6: null,
        BackendType: "extension",
        BackendData: "data of node1",
      });
      // PostStartupCommand: the same five variables, formatted alike (an absent family as Go prints it).
      const keys = ["NETWORK", "SUBNET", "IPV6SUBNET", "PUBLIC_IP", "PUBLIC_IPV6"];
      const ea = await postEnv(a), eb = await postEnv(b);
      assertEquals(keys.map((k) => eb[k]), ["10.251.0.0/16", subB, "::/0", b.ip, "<nil>"], "flanneld's");
      assertEquals(keys.map((k) => ea[k]), ["10.251.0.0/16", subA, "::/0", a.ip, "<nil>"], "flanctl's");
      // SubnetAddCommand on each side for the other's lease, its BackendData on stdin.
      await waitFor(
        c.explain("flanctl's add for flanneld's lease"),
        async () => (await events(a)).includes(`add|${subB}|${b.ip}|data of node2`),
      );
      await waitFor(
        c.explain("flanneld's add for flanctl's lease"),
        async () => (await events(b)).includes(`add|${subA}|${a.ip}|data of node1`),
      );
      for (const n of [a, b]) assertEquals(await extraLinks(n.ns), [], n.name);
      // A lease deleted from etcd: SubnetRemoveCommand on the other side, with the last known data.
      assertEquals(await c.stop(b), 0);
      await c.etcdctl("del", `/coreos.com/network/subnets/${subB.replace("/", "-")}`);
      await waitFor(
        c.explain("flanctl's remove for flanneld's lease"),
        async () => (await events(a)).includes(`del|${subB}|${b.ip}|data of node2`),
      );
      c.startFlanneld(b, [], { EXT_NODE: b.name, OUT_DIR: b.dir });
      await c.waitUp(b);
      // (The restarted flanneld lists the leases: A's added again, as flanneld does after every start.)
      await waitFor(
        c.explain("the restarted flanneld's add for flanctl's lease"),
        async () => (await events(b)).filter((l) => l === `add|${subA}|${a.ip}|data of node1`).length === 2,
      );
      await c.stop(a);
      await c.etcdctl("del", `/coreos.com/network/subnets/${subA.replace("/", "-")}`);
      await waitFor(
        c.explain("flanneld's remove for flanctl's lease"),
        async () => (await events(b)).includes(`del|${subA}|${a.ip}|data of node1`),
      );
    } finally {
      await c.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
