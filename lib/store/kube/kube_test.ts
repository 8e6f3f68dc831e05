/**
 * Kubernetes store against the in-test fake API server (tests/kube_fake_api.ts, Deno.serve on loopback).
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../../../tests/assert.ts";
import { ROOT, run } from "../../../tests/netns.ts";
import {
  KubeStartError,
  type KubeStoreOptions,
  leaseFromNode,
  NET_CONF_MAX,
  openKubeStore,
  PodCidrNotAssignedError,
} from "./kube.ts";
import { KubeApiError } from "./kube_client.ts";
import { ConfigError } from "../../config/netconf.ts";
import { retryableStoreError } from "../classify.ts";
import { VERSION } from "../../base/version.ts";
import type { LeaseEvent } from "../types.ts";
import { leaseCli, nextEvents } from "../../../tests/store_helpers.ts";
import { FakeApiServer, TOKEN } from "../../../tests/kube_fake_api.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } });

async function setup() {
  const api = new FakeApiServer();
  const dir = await Deno.makeTempDir({ prefix: "flanctl-kube-" });
  await Deno.writeTextFile(`${dir}/net-conf.json`, NETCONF);
  await Deno.writeTextFile(
    `${dir}/kubeconfig`,
    `apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster:
    server: ${api.url}
contexts:
- name: lab
  context: {cluster: lab, user: flanctl}
users:
- name: flanctl
  user:
    token: ${TOKEN}
`,
  );
  const open = (node: string, more: Partial<KubeStoreOptions> = {}) =>
    openKubeStore({
      kubeconfigFile: `${dir}/kubeconfig`,
      nodeName: node,
      netConfigPath: `${dir}/net-conf.json`,
      env: {},
      ...more,
    });
  return {
    api,
    dir,
    open,
    async cleanup() {
      await api.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const attrs = {
  PublicIP: "192.0.2.1",
  PublicIPv6: null,
  BackendType: "vxlan",
  BackendData: { VNI: 1, VtepMAC: "0e:aa:00:00:00:01" },
};

Deno.test("kube store: lease from podCIDR, annotations and NetworkUnavailable condition patched", async () => {
  const t = await setup();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
    t.api.forceConflicts = 1; // someone else modified the node between our GET and PATCH
    const s = await t.open("n1");
    const l = await s.acquireLease(attrs);
    assertEquals(String(l.subnet), "10.244.1.0/24");
    const ann = t.api.nodes.get("n1")!.metadata.annotations;
    assertEquals(ann, {
      "flannel.alpha.coreos.com/backend-type": "vxlan",
      "flannel.alpha.coreos.com/kube-subnet-manager": "true",
      "flannel.alpha.coreos.com/backend-data": `{"VNI":1,"VtepMAC":"0e:aa:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ip": "192.0.2.1",
    });
    // NetworkUnavailable is not touched by acquire: the daemon calls completeLease once the data plane is up.
    assertEquals(t.api.nodes.get("n1")!.status.conditions, []);
    await s.completeLease();
    const cond = t.api.nodes.get("n1")!.status.conditions;
    assertEquals(cond.map((c) => [c.type, c.status, c.reason]), [[
      "NetworkUnavailable",
      "False",
      "FlannelIsUp",
    ]]);
    assertEquals(t.api.patches.map((p) => [p.path, p.contentType]), [
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // 409: node changed meanwhile
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // annotations
      ["/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"], // condition (completeLease)
    ]);
    const r = await s.renewLease(l);
    assertEquals(String(r.subnet), "10.244.1.0/24");
    await assertRejects(() => s.revokeLease(l.subnet!), Error, "not supported with --kube-subnet-mgr");
    await s.close();
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: pod cidr not assigned / outside Network / unknown node / bad token", async () => {
  const t = await setup();
  try {
    t.api.upsert("bare", {});
    t.api.upsert("far", { podCIDR: "10.9.1.0/24" });
    await assertRejects(
      async () => (await t.open("bare")).acquireLease(attrs),
      PodCidrNotAssignedError,
      "pod cidr not assigned",
    );
    await assertRejects(
      async () => (await t.open("far")).acquireLease(attrs),
      Error,
      "is not inside Network 10.244.0.0/16",
    );
    // Our node missing: polled every 3 s for the start-up wait (flanneld: 30 s), then fatal (exit 1).
    const t0 = Date.now();
    const ghost = await assertRejects(
      async () => (await t.open("ghost", { startWaitMs: 3000 })).acquireLease(attrs),
      KubeStartError,
      `node "ghost" not found in the Kubernetes API after 3s`,
    );
    assert(Date.now() - t0 >= 2900, `gave up after ${Date.now() - t0} ms`);
    assertEquals(retryableStoreError(ghost), false);
    assertEquals(t.api.requests.filter((r) => r.url === "/api/v1/nodes/ghost").length, 2);
    await Deno.writeTextFile(
      `${t.dir}/kubeconfig`,
      (await Deno.readTextFile(`${t.dir}/kubeconfig`)).replace(TOKEN, "wrong"),
    );
    await assertRejects(async () => (await t.open("far")).listLeases(), Error, "HTTP 401");
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: a slow API shortens no start-up wait: the last poll is at its end", async () => {
  const t = await setup();
  try {
    // the first GET of the missing node answers its 404 after 800 ms: the second poll is still due at 3 s
    let first = true;
    t.api.intercept = async (_req, u) => {
      if (u.pathname === "/api/v1/nodes/ghost" && first) {
        first = false;
        await new Promise((r) => setTimeout(r, 800));
      }
      return null;
    };
    const t0 = Date.now();
    await assertRejects(
      async () => (await t.open("ghost", { startWaitMs: 3000 })).acquireLease(attrs),
      KubeStartError,
      `node "ghost" not found in the Kubernetes API after 3s`,
    );
    const polls = t.api.requests.filter((r) => r.url === "/api/v1/nodes/ghost");
    assertEquals(polls.length, 2);
    assert(polls[1].at - t0 >= 2900, `second poll ${polls[1].at - t0} ms after the start`);
    assert(Date.now() - t0 < 5500, `gave up after ${Date.now() - t0} ms`);
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: peers by list+watch, malformed annotations skipped, re-list on 410 Gone", async () => {
  const t = await setup();
  // The lists made when the release hook ran: a re-list is released before and after, as start-up's list,
  // with the binary's pages.
  const releases: string[] = [];
  const ann = (ip: string, mac: string) => ({
    "flannel.alpha.coreos.com/public-ip": ip,
    "flannel.alpha.coreos.com/backend-type": "vxlan",
    "flannel.alpha.coreos.com/backend-data": JSON.stringify({ VNI: 1, VtepMAC: mac }),
    "flannel.alpha.coreos.com/kube-subnet-manager": "true",
  });
  const s = await t.open("n1", {
    releaseMemory: (pages) => releases.push(`${t.api.listQueries.length}${pages ? " with pages" : ""}`),
  });
  const ac = new AbortController();
  let it: AsyncIterator<LeaseEvent[]> | null = null;
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, ann("192.0.2.1", "0e:00:00:00:00:01"));
    t.api.upsert("plain", { podCIDR: "10.244.9.0/24" }); // no flannel annotations: not a peer
    const { leases, cursor } = await s.listLeases();
    assertEquals(leases.map((l) => String(l.subnet)), ["10.244.1.0/24"]);
    it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    t.api.upsert("n2", { podCIDR: "10.244.2.0/24" }, ann("192.0.2.2", "0e:00:00:00:00:02"));
    t.api.upsert("bad", { podCIDR: "10.244.3.0/24" }, {
      ...ann("192.0.2.3", "x"),
      "flannel.alpha.coreos.com/backend-data": "{nope",
    });
    let evs = await nextEvents(it, (e) => e.some((x) => x.type === "added"));
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet), e.lease.attrs.PublicIP]), [
      ["added", "10.244.2.0/24", "192.0.2.2"],
    ]);
    t.api.remove("n2");
    evs = await nextEvents(it, (e) => e.some((x) => x.type === "removed"));
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]), [["removed", "10.244.2.0/24"]]);
    // History compacted while changes happen: the watch gets 410 and the store re-lists and diffs.
    t.api.hold = true;
    t.api.compact(); // closes the open watch; the reconnect is held
    t.api.upsert("n4", { podCIDR: "10.244.4.0/24" }, ann("192.0.2.4", "0e:00:00:00:00:04"));
    t.api.remove("n1");
    t.api.compact();
    t.api.release();
    evs = await nextEvents(it, (e) => e.length >= 2);
    assertEquals(t.api.goneSent, 1, "the watch was answered 410 Gone");
    const lists = t.api.listQueries.length;
    assertEquals(
      releases,
      [`${lists - 1} with pages`, `${lists} with pages`],
      "before and after the re-list",
    );
    assertEquals(evs.map((e) => [e.type, String(e.lease.subnet)]).sort(), [
      ["added", "10.244.4.0/24"],
      ["removed", "10.244.1.0/24"],
    ]);
    const cli = await leaseCli([
      "list",
      "-o",
      "json",
      "--kube-subnet-mgr",
      "--kubeconfig-file",
      `${t.dir}/kubeconfig`,
      "--net-config-path",
      `${t.dir}/net-conf.json`,
    ]);
    assertEquals(cli.code, 0, cli.stderr);
    assertEquals(JSON.parse(cli.stdout), [{
      subnet: "10.244.4.0/24",
      publicIP: "192.0.2.4",
      backendType: "vxlan",
      backendData: { VNI: 1, VtepMAC: "0e:00:00:00:00:04" },
      expiration: null,
      publicIPv6: null,
      backendV6Data: null,
      node: "n4",
    }]);
    // The table: a NODE column, and no etcd words ("reserved") for a Node's lease.
    const table = await leaseCli([
      "list",
      "--kube-subnet-mgr",
      "--kubeconfig-file",
      `${t.dir}/kubeconfig`,
      "--net-config-path",
      `${t.dir}/net-conf.json`,
    ]);
    assertEquals(table.stdout.split("\n")[0].split(/\s+/), [
      "NODE",
      "SUBNET",
      "PUBLIC-IP",
      "BACKEND",
      "EXPIRES",
      "BACKEND-DATA",
    ]);
    assertStringIncludes(table.stdout, "n4  ");
    assertStringIncludes(table.stdout, "never (kube node)");
    assert(!table.stdout.includes("reserved"), table.stdout);
    assertStringIncludes(cli.stderr, "node bad");
  } finally {
    ac.abort();
    await it?.return?.();
    await s.close();
    await t.cleanup();
  }
});

Deno.test("kube store: dual stack from spec.podCIDRs, public-ipv6 and backend-v6-data annotations", async () => {
  const t = await setup();
  try {
    await Deno.writeTextFile(
      `${t.dir}/net-conf.json`,
      JSON.stringify({
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: "fc00::/48",
        Backend: { Type: "vxlan" },
      }),
    );
    const v6Data = { VNI: 1, VtepMAC: "0e:bb:00:00:00:01" };
    const dual = { ...attrs, PublicIPv6: "fc00:99::1", BackendV6Data: v6Data };
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24", "fc00:0:0:1::/64"] });
    t.api.upsert("v4only", { podCIDR: "10.244.2.0/24", podCIDRs: ["10.244.2.0/24"] });
    t.api.upsert("far6", { podCIDR: "10.244.3.0/24", podCIDRs: ["10.244.3.0/24", "fd00:1::/64"] });
    const s = await t.open("n1");
    const l = await s.acquireLease(dual);
    assertEquals([String(l.subnet), String(l.ipv6Subnet)], ["10.244.1.0/24", "fc00:0:0:1::/64"]);
    assertEquals(t.api.nodes.get("n1")!.metadata.annotations, {
      "flannel.alpha.coreos.com/backend-type": "vxlan",
      "flannel.alpha.coreos.com/kube-subnet-manager": "true",
      "flannel.alpha.coreos.com/backend-data": `{"VNI":1,"VtepMAC":"0e:aa:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ip": "192.0.2.1",
      "flannel.alpha.coreos.com/backend-v6-data": `{"VNI":1,"VtepMAC":"0e:bb:00:00:00:01"}`,
      "flannel.alpha.coreos.com/public-ipv6": "fc00:99::1",
    });
    // The peer view of the node has both families and both data fields.
    const { leases } = await s.listLeases();
    const me = leases.find((x) => x.attrs.PublicIP === "192.0.2.1")!;
    assertEquals([String(me.ipv6Subnet), me.attrs.PublicIPv6, me.attrs.BackendV6Data], [
      "fc00:0:0:1::/64",
      "fc00:99::1",
      v6Data,
    ]);
    await s.close();
    // A node without an IPv6 pod cidr, and one outside IPv6Network.
    await assertRejects(
      async () => (await t.open("v4only")).acquireLease(dual),
      PodCidrNotAssignedError,
      "pod cidr not assigned",
    );
    await assertRejects(
      async () => (await t.open("far6")).acquireLease(dual),
      Error,
      "is not inside IPv6Network fc00::/48",
    );
  } finally {
    await t.cleanup();
  }
});
Deno.test("kube store: IPv6-only annotations as flanneld writes them (vxlan: none for IPv4; host-gw: null, 0.0.0.0)", async () => {
  const t = await setup();
  const P = "flannel.alpha.coreos.com/";
  try {
    const conf = (type: string) =>
      Deno.writeTextFile(
        `${t.dir}/net-conf.json`,
        JSON.stringify({
          EnableIPv4: false,
          EnableIPv6: true,
          IPv6Network: "fc00::/48",
          Backend: { Type: type },
        }),
      );
    // What the daemon passes for an IPv6-only node (PublicIP 0.0.0.0, no BackendData).
    const v6Data = { VNI: 1, VtepMAC: "0e:bb:00:00:00:01" };
    t.api.upsert("n1", { podCIDR: "fc00:0:0:1::/64", podCIDRs: ["fc00:0:0:1::/64"] });
    t.api.upsert("n2", { podCIDR: "fc00:0:0:2::/64", podCIDRs: ["fc00:0:0:2::/64"] });
    await conf("vxlan");
    const s1 = await t.open("n1");
    await s1.acquireLease({
      PublicIP: "0.0.0.0",
      PublicIPv6: "fc00:99::1",
      BackendType: "vxlan",
      BackendV6Data: v6Data,
    });
    assertEquals(t.api.nodes.get("n1")!.metadata.annotations, {
      [`${P}backend-type`]: "vxlan",
      [`${P}kube-subnet-manager`]: "true",
      [`${P}backend-v6-data`]: `{"VNI":1,"VtepMAC":"0e:bb:00:00:00:01"}`,
      [`${P}public-ipv6`]: "fc00:99::1",
    });
    assertEquals(await s1.storedBackendData(6), v6Data);
    assertEquals(await s1.storedBackendData(4), null);
    await s1.close();
    await conf("host-gw");
    const s2 = await t.open("n2");
    await s2.acquireLease({ PublicIP: "0.0.0.0", PublicIPv6: "fc00:99::2", BackendType: "host-gw" });
    assertEquals(t.api.nodes.get("n2")!.metadata.annotations, {
      [`${P}backend-type`]: "host-gw",
      [`${P}kube-subnet-manager`]: "true",
      [`${P}backend-data`]: "null",
      [`${P}public-ip`]: "0.0.0.0",
      [`${P}backend-v6-data`]: "null",
      [`${P}public-ipv6`]: "fc00:99::2",
    });
    // Both nodes read back as IPv6-only peers: no IPv4 subnet, their IPv6 endpoint and data.
    const { leases } = await s2.listLeases();
    const view = (l: (typeof leases)[number]) => [
      String(l.subnet),
      String(l.ipv6Subnet),
      l.attrs.PublicIPv6,
      l.attrs.BackendType,
      l.attrs.BackendV6Data ?? null,
    ];
    assertEquals(leases.map(view).sort(), [
      ["null", "fc00:0:0:1::/64", "fc00:99::1", "vxlan", v6Data],
      ["null", "fc00:0:0:2::/64", "fc00:99::2", "host-gw", null],
    ]);
    await s2.close();
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: node name from NODE_NAME, then the pod's spec.nodeName, then --node-name", async () => {
  const t = await setup();
  try {
    t.api.upsert("w1", { podCIDR: "10.244.1.0/24" });
    t.api.upsert("w2", { podCIDR: "10.244.2.0/24" });
    t.api.pods.set("kube-flannel/kube-flannel-ds-abcde", { spec: { nodeName: "w2" } });
    t.api.pods.set("kube-flannel/pending", { spec: {} });
    const pod = { POD_NAMESPACE: "kube-flannel", POD_NAME: "kube-flannel-ds-abcde" };
    const name = async (flag: string | undefined, env: Record<string, string>) =>
      await (await t.open(flag as string, { nodeName: flag, env })).nodeName();
    assertEquals(await name("w9", { NODE_NAME: "w1", ...pod }), "w1", "NODE_NAME first");
    assertEquals(await name("w9", pod), "w2", "then the pod's spec.nodeName (kube-flannel.yml)");
    assertEquals(await name("w9", {}), "w9", "then --node-name");
    assertEquals(await name("w9", { POD_NAMESPACE: "kube-flannel", POD_NAME: "pending" }), "w9");
    const s = await t.open(undefined as unknown as string, {
      nodeName: undefined,
      env: { POD_NAMESPACE: "kube-flannel", POD_NAME: "gone" },
    });
    // flanneld exits 1 at once for a missing pod or one without nodeName: not retried.
    const e = await assertRejects(() => s.acquireLease(attrs), KubeStartError);
    for (
      const want of [
        "NODE_NAME",
        "POD_NAME and POD_NAMESPACE",
        "error retrieving pod spec for 'kube-flannel/gone'",
      ]
    ) {
      assertStringIncludes(e.message, want);
    }
    const s2 = await t.open(undefined as unknown as string, {
      nodeName: undefined,
      env: { POD_NAMESPACE: "kube-flannel", POD_NAME: "pending" },
    });
    await assertRejects(
      () => s2.nodeName(),
      KubeStartError,
      "node name not present in pod spec 'kube-flannel/pending'",
    );
    // The lease is taken for the node the pod runs on.
    const l = await (await t.open("x", { nodeName: undefined, env: pod })).acquireLease(attrs);
    assertEquals(String(l.subnet), "10.244.2.0/24");
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: --kube-annotation-prefix for every annotation read and written", async () => {
  const t = await setup();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" });
    t.api.upsert("n2", { podCIDR: "10.244.2.0/24" }, {
      "example.com/flannel-public-ip": "192.0.2.2",
      "example.com/flannel-backend-type": "vxlan",
      "example.com/flannel-backend-data": JSON.stringify({ VNI: 1, VtepMAC: "0e:00:00:00:00:02" }),
      "example.com/flannel-kube-subnet-manager": "true",
      // The default prefix is someone else's now: not read.
      "flannel.alpha.coreos.com/public-ip": "192.0.2.99",
    });
    t.api.upsert("n3", { podCIDR: "10.244.3.0/24" }, { "flannel.alpha.coreos.com/public-ip": "192.0.2.3" });
    const s = await t.open("n1", { annotationPrefix: "example.com/flannel" });
    await s.acquireLease(attrs);
    assertEquals(Object.keys(t.api.nodes.get("n1")!.metadata.annotations).sort(), [
      "example.com/flannel-backend-data",
      "example.com/flannel-backend-type",
      "example.com/flannel-kube-subnet-manager",
      "example.com/flannel-public-ip",
    ]);
    const { leases } = await s.listLeases();
    assertEquals(leases.map((l) => [String(l.subnet), l.attrs.PublicIP]).sort(), [
      ["10.244.1.0/24", "192.0.2.1"],
      ["10.244.2.0/24", "192.0.2.2"],
    ]);
    // No slash: "/" appended, as flanneld.
    const d = await t.open("n1", { annotationPrefix: "example.com" });
    assertEquals((d as unknown as { prefix: string }).prefix, "example.com/");
    await assertRejects(
      () => t.open("n1", { annotationPrefix: "a/b/c" }),
      Error,
      "--kube-annotation-prefix:",
    );
    await assertRejects(
      () => t.open("n1", { annotationPrefix: "Not_A_Domain" }),
      Error,
      "--kube-annotation-prefix:",
    );
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: own public-ip-overwrite published as public-ip; node-public-ip; peers read public-ip only", async () => {
  const t = await setup();
  const P = "flannel.alpha.coreos.com/";
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, {
      [`${P}public-ip-overwrite`]: "203.0.113.1",
      [`${P}node-public-ip`]: "198.51.100.1",
      [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: "0e:aa:00:00:00:07" }),
    });
    // A peer with an overwrite it has not published yet (an old node): its public-ip is what counts.
    t.api.upsert("n2", { podCIDR: "10.244.2.0/24" }, {
      [`${P}public-ip`]: "192.0.2.2",
      [`${P}public-ip-overwrite`]: "203.0.113.2",
      [`${P}kube-subnet-manager`]: "true",
      [`${P}backend-type`]: "vxlan",
      [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: "0e:00:00:00:00:02" }),
    });
    const s = await t.open("n1");
    assertEquals(await s.storedPublicIP(), { publicIP: "198.51.100.1", publicIPv6: null });
    assertEquals(await s.storedBackendData(), { VNI: 1, VtepMAC: "0e:aa:00:00:00:07" });
    const l = await s.acquireLease(attrs);
    assertEquals(t.api.nodes.get("n1")!.metadata.annotations[`${P}public-ip`], "203.0.113.1");
    assertEquals(l.attrs.PublicIP, "203.0.113.1");
    const peers = (await s.listLeases()).leases.filter((x) => String(x.subnet) === "10.244.2.0/24");
    assertEquals(peers.map((x) => x.attrs.PublicIP), ["192.0.2.2"]);
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: the token file is re-read when it changes (rotated service-account tokens)", async () => {
  const t = await setup();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" });
    await Deno.writeTextFile(`${t.dir}/token`, `${TOKEN}\n`);
    await Deno.writeTextFile(
      `${t.dir}/kubeconfig`,
      (await Deno.readTextFile(`${t.dir}/kubeconfig`)).replace(`token: ${TOKEN}`, "tokenFile: token"),
    );
    const s = await t.open("n1");
    await s.listLeases();
    // The kubelet rotates the token (atomic rename of a new file); the server accepts only the new one.
    await Deno.writeTextFile(`${t.dir}/token.new`, "rotated-token\n");
    await Deno.rename(`${t.dir}/token.new`, `${t.dir}/token`);
    t.api.token = "rotated-token";
    await s.listLeases();
    assertEquals(t.api.auths.at(-1), "Bearer rotated-token");
    await s.close();
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: in-cluster config as client-go (KUBERNETES_SERVICE_HOST/PORT, SA token and CA)", async () => {
  const { inClusterConnection } = await import("./kube_client.ts");
  const sa = await Deno.makeTempDir({ prefix: "flanctl-sa-" });
  try {
    await Deno.writeTextFile(`${sa}/token`, "tok\n");
    const c = inClusterConnection(
      { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" },
      sa,
    );
    assertEquals([c.server, c.token, c.tokenFile, c.caPem], [
      "https://10.96.0.1:443",
      "tok",
      `${sa}/token`,
      undefined,
    ]);
    await Deno.writeTextFile(`${sa}/ca.crt`, "PEM");
    const v6 = inClusterConnection(
      { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" },
      sa,
    );
    assertEquals([v6.server, v6.caPem], ["https://[fd00::1]:6443", "PEM"]);
    for (const env of [{ KUBERNETES_SERVICE_HOST: "10.96.0.1" }, { KUBERNETES_SERVICE_PORT: "443" }]) {
      let msg = "";
      try {
        inClusterConnection(env, sa);
      } catch (e) {
        msg = (e as Error).message;
      }
      assertStringIncludes(msg, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set");
    }
  } finally {
    await Deno.remove(sa, { recursive: true });
  }
});

Deno.test("kube store: a token file swapped for a FIFO keeps the last token, never a hang", async () => {
  const t = await setup();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" });
    await Deno.writeTextFile(`${t.dir}/token`, `${TOKEN}\n`);
    // In a child process under timeout: a token read blocking on the FIFO would stop its event loop.
    const script = `
      import { KubeClient } from ${JSON.stringify(`${ROOT}lib/store/kube/kube_client.ts`)};
      const tokenFile = ${JSON.stringify(`${t.dir}/token`)};
      const c = new KubeClient({ server: ${JSON.stringify(t.api.url)}, tokenFile, source: "test" });
      await c.request("GET", "/api/v1/nodes/n1");
      await Deno.remove(tokenFile);
      const mk = await new Deno.Command("mkfifo", { args: [tokenFile] }).output();
      if (mk.code !== 0) throw new Error("mkfifo failed");
      await c.request("GET", "/api/v1/nodes/n1");
      c.close();
      console.log("done");
    `;
    const r = await run(["timeout", "30", Deno.execPath(), "eval", "--no-check", script]);
    assert(r.code !== 124, "the token re-read hung on the FIFO");
    assertEquals([r.code, r.stdout.trim()], [0, "done"], r.stderr);
    assertEquals(t.api.auths.slice(-2), [`Bearer ${TOKEN}`, `Bearer ${TOKEN}`]);
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube store: RBAC refusing nodes/status: retried every 3 s for the start-up wait, then fatal", async () => {
  const t = await setup();
  try {
    t.api.upsert("w1", { podCIDR: "10.244.1.0/24" });
    t.api.intercept = (req, u) =>
      req.method === "PATCH" && u.pathname.endsWith("/status")
        ? Response.json({
          kind: "Status",
          code: 403,
          reason: "Forbidden",
          message: 'nodes "w1" is forbidden',
        }, {
          status: 403,
        })
        : null;
    const t0 = Date.now();
    const e = await assertRejects(
      async () => (await t.open("w1", { startWaitMs: 3000 })).acquireLease(attrs),
      KubeStartError,
      `publishing our lease annotations on node "w1" still refused after 3s`,
    );
    assertStringIncludes(e.message, "grant patch on nodes/status");
    assert(Date.now() - t0 >= 2900);
    assertEquals(retryableStoreError(e), false);
    assertEquals(t.api.requests.filter((r) => r.method === "PATCH").length, 2);
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube client: User-Agent as client-go builds it, and client-go's list and watch queries", async () => {
  const t = await setup();
  try {
    t.api.upsert("w1", { podCIDR: "10.244.1.0/24" });
    const s = await t.open("w1");
    const { cursor } = await s.listLeases();
    const ac = new AbortController();
    const it = s.watchLeases(cursor, ac.signal)[Symbol.asyncIterator]();
    const next = it.next();
    await waitUntil(() => t.api.watchQueries.length > 0);
    t.api.upsert("w2", { podCIDR: "10.244.2.0/24" }, { "flannel.alpha.coreos.com/public-ip": "10.0.0.2" });
    ac.abort();
    await next.catch(() => {});
    await s.close();
    assertEquals(t.api.listQueries, ["?limit=500&resourceVersion=0"]);
    const m = /^\?allowWatchBookmarks=true&resourceVersion=(\d+)&timeoutSeconds=(\d+)&watch=true$/.exec(
      t.api.watchQueries[0],
    );
    assert(m, t.api.watchQueries[0]);
    assertEquals(m[1], cursor);
    assert(Number(m[2]) >= 300 && Number(m[2]) < 600, m[2]); // client-go: 5 min × (1 + rand)
    const uas = new Set(t.api.requests.map((r) => r.ua));
    assertEquals([...uas], [`flanctl/v${VERSION} (linux/amd64)`]);
  } finally {
    await t.cleanup();
  }
});

async function waitUntil(f: () => boolean, ms = 5000): Promise<void> {
  const t0 = Date.now();
  while (!f()) {
    if (Date.now() - t0 > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("kube watch: Nodes beyond the item or kept-data cap end the watch in a re-list, with backoff", async () => {
  const t = await setup();
  const { KubeStore } = await import("./kube.ts");
  const { KubeClient } = await import("./kube_client.ts");
  const { KUBE_LIMITS } = await import("../limits.ts");
  const ann = (i: number, pad: number) => ({
    "flannel.alpha.coreos.com/public-ip": `10.0.0.${i}`,
    "flannel.alpha.coreos.com/backend-type": "host-gw",
    "flannel.alpha.coreos.com/backend-data": JSON.stringify({ pad: "x".repeat(pad) }),
    "flannel.alpha.coreos.com/kube-subnet-manager": "true",
  });
  const warned: string[] = [];
  const store = new KubeStore(
    new KubeClient({ server: t.api.url, token: TOKEN, source: "test" }, {
      ...KUBE_LIMITS,
      maxItems: 3,
      maxKeptBytes: 4000,
    }),
    { netConfigPath: `${t.dir}/net-conf.json`, env: {}, warn: (l) => warned.push(l) },
  );
  const ac = new AbortController();
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, ann(1, 10));
    const { cursor } = await store.listLeases();
    const run = (async () => {
      for await (const _ of store.watchLeases(cursor, ac.signal)) { /* events */ }
    })();
    t.api.upsert("n2", { podCIDR: "10.244.2.0/24" }, ann(2, 5000)); // over the kept-data cap
    await waitUntil(() => warned.some((w) => w.includes("more than 4000 bytes of node data")), 10_000);
    t.api.remove("n2");
    for (let i = 3; i <= 6; i++) t.api.upsert(`n${i}`, { podCIDR: `10.244.${i}.0/24` }, ann(i, 10));
    await waitUntil(() => warned.some((w) => /more than 3 (Nodes|items)/.test(w)), 20_000).catch((e) => {
      throw new Error(`${e.message}: ${warned.join("\n")}`);
    });
    assert(warned.every((w) => /retrying in [\d.]+s$/.test(w)), warned.join("\n"));
    ac.abort();
    await run;
  } finally {
    ac.abort();
    await store.close();
    await t.cleanup();
  }
});

Deno.test("kube store: start-up reads our Node once (public IP, backend data, lease); a change since is re-read", async () => {
  const t = await setup();
  const P = "flannel.alpha.coreos.com/";
  try {
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, {
      [`${P}node-public-ip`]: "198.51.100.1",
      [`${P}backend-data`]: JSON.stringify({ VNI: 1, VtepMAC: "0e:aa:00:00:00:07" }),
    });
    const s = await t.open("n1");
    const gets = () =>
      t.api.requests.filter((r) => r.method === "GET" && r.url.startsWith("/api/v1/nodes/n1")).length;
    const before = gets();
    assertEquals(await s.storedPublicIP(), { publicIP: "198.51.100.1", publicIPv6: null });
    assertEquals(await s.storedBackendData(), { VNI: 1, VtepMAC: "0e:aa:00:00:00:07" });
    await s.acquireLease(attrs);
    assertEquals(gets() - before, 1);
    // Someone writes our Node between the start-up read and the lease: the patch's precondition fails (409)
    // and the lease is taken on a fresh read, keeping the other writer's annotation.
    const s2 = await t.open("n1");
    await s2.storedPublicIP();
    t.api.upsert("n1", { podCIDR: "10.244.1.0/24" }, {
      ...t.api.nodes.get("n1")!.metadata.annotations,
      [`${P}backend-type`]: "host-gw",
      "example.com/other": "x",
    });
    const at = gets();
    await s2.acquireLease(attrs);
    assert(gets() - at >= 1, "the lease re-read the changed Node");
    const a = t.api.nodes.get("n1")!.metadata.annotations;
    assertEquals(a["example.com/other"], "x");
    assertEquals(a[`${P}backend-type`], "vxlan");
  } finally {
    await t.cleanup();
  }
});

Deno.test("kube: an unparsable annotation is quoted bounded and escaped in the warning, never raw", () => {
  const hostile = "{\x1b[2J" + "x".repeat(100_000);
  const node = {
    metadata: {
      name: "bad",
      annotations: {
        "flannel.alpha.coreos.com/kube-subnet-manager": "true",
        "flannel.alpha.coreos.com/public-ip": "192.0.2.9",
        "flannel.alpha.coreos.com/backend-type": "vxlan",
        "flannel.alpha.coreos.com/backend-data": hostile,
      },
    },
    spec: { podCIDR: "10.244.9.0/24" },
  };
  let msg = "";
  try {
    leaseFromNode(node);
  } catch (e) {
    msg = (e as Error).message;
  }
  assertStringIncludes(msg, "backend-data is not JSON: {\\x1b[2J");
  assert(!msg.includes("\x1b"), "no raw ESC");
  assert(msg.length < 400, `bounded: ${msg.length} chars`);
});

Deno.test("kube store: net-conf.json from the kube-flannel ConfigMap, validated, bounded, errors typed", async () => {
  const t = await setup();
  try {
    const s = await t.open("n1");
    try {
      // Not there (or RBAC): the API's error, typed.
      const gone = await assertRejects(() => s.netConfigMap(), KubeApiError);
      assertStringIncludes(gone.message, "404");
      const put = (text: string, ns = "kube-flannel") =>
        t.api.configMaps.set(`${ns}/kube-flannel-cfg`, { data: { "net-conf.json": text } });
      put(JSON.stringify({ Network: "10.42.0.0/16", Backend: { Type: "vxlan" } }));
      const got = await s.netConfigMap();
      assertEquals([got.where, String(got.config.network)], [
        "ConfigMap kube-flannel/kube-flannel-cfg",
        "10.42.0.0/16",
      ]);
      // Invalid content: a ConfigError naming the ConfigMap, with no raw control characters.
      put('{"Network": "10.42.0.0/33\u001b[31m", "Backend": {"Type": "vxlan"}}');
      const bad = await assertRejects(() => s.netConfigMap(), ConfigError);
      assertStringIncludes(bad.message, "ConfigMap kube-flannel/kube-flannel-cfg");
      assert(!bad.message.includes("\u001b"), bad.message);
      put(" ".repeat(NET_CONF_MAX + 1) + "{}");
      assertStringIncludes((await assertRejects(() => s.netConfigMap(), ConfigError)).message, "over");
      t.api.configMaps.set("kube-flannel/kube-flannel-cfg", { data: {} });
      assertStringIncludes(
        (await assertRejects(() => s.netConfigMap(), ConfigError)).message,
        "has no net-conf.json",
      );
    } finally {
      await s.close();
    }
    // Inside the DaemonSet's pod, its own namespace.
    const inPod = await t.open("n1", { env: { POD_NAMESPACE: "flannel-system" } });
    try {
      t.api.configMaps.set("flannel-system/kube-flannel-cfg", {
        data: { "net-conf.json": JSON.stringify({ Network: "10.99.0.0/16", Backend: { Type: "vxlan" } }) },
      });
      assertEquals(String((await inPod.netConfigMap()).config.network), "10.99.0.0/16");
    } finally {
      await inPod.close();
    }
  } finally {
    await t.cleanup();
  }
});
