/**
 * Kube mode: doctor reads this node's Node with the daemon's credentials (a kubeconfig here, against the
 * fake API server in a namespace of the test's). A Node without spec.podCIDR (kube-controller-manager
 * without --allocate-node-cidrs: the daemon crash-loops) is the root cause, first, with a patch that
 * works; a podCIDR outside the net-conf Network is named too, also the Network of the kube-flannel-cfg
 * ConfigMap read from the API (on the host, where the DaemonSet's mount of it is not); a healthy Node is quiet.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, nsRun, withNetns } from "./netns.ts";
import { FakeApiServer, kubeconfigYaml } from "./kube_fake_api.ts";
import { tempDir } from "./cni_helpers.ts";

interface Report {
  checks: { id: string; severity: string; detail: string; fix: string[]; rootCause?: boolean }[];
}

needsRoot.test({
  name: "doctor (kube): a Node without podCIDR is the root cause (CIDRNotAvailable too); outside Network too",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withNetns(async (fx) => {
      const ns = await fx.add("dkn");
      const d = tempDir();
      const api = new FakeApiServer({ netns: ns });
      try {
        Deno.writeTextFileSync(`${d.path}/kubeconfig`, kubeconfigYaml(api.url));
        Deno.writeTextFileSync(
          `${d.path}/net-conf.json`,
          JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }),
        );
        const lease = { "flannel.alpha.coreos.com/kube-subnet-manager": "true" };
        api.upsert("n2", { podCIDR: "10.244.0.0/24", podCIDRs: ["10.244.0.0/24"] }, {
          ...lease,
          "flannel.alpha.coreos.com/public-ip": "192.0.2.2",
          "flannel.alpha.coreos.com/backend-type": "vxlan",
          "flannel.alpha.coreos.com/backend-data": '{"VNI":1,"VtepMAC":"0a:00:00:00:00:02"}',
        });
        api.upsert("n1", {});
        let netConf = `${d.path}/net-conf.json`;
        const doctor = async () => {
          const r = await nsRun(ns, [
            ...flanctlCmd(
              "doctor",
              "-o",
              "json",
              "--kube-subnet-mgr",
              "--kubeconfig-file",
              `${d.path}/kubeconfig`,
              "--node-name",
              "n1",
              "--net-config-path",
              netConf,
              "--subnet-file",
              `${d.path}/subnet.env`,
              "--cni-conf-dir",
              `${d.path}/net.d`,
              "--cni-bin-dir",
              `${d.path}/bin`,
              "--cni-data-dir",
              `${d.path}/networks`,
              "--cri-socket",
              "none",
            ),
          ]);
          try {
            return JSON.parse(r.stdout) as Report;
          } catch {
            throw new Error(`doctor: exit ${r.code}\n${r.stdout}\n${r.stderr}`);
          }
        };
        const rep = await doctor();
        const f = rep.checks[0];
        assertEquals([f.id, f.severity, f.rootCause], ["lease-own", "critical", true], JSON.stringify(rep));
        assertStringIncludes(f.detail, "Node n1 has no spec.podCIDR");
        assertEquals(
          f.fix[0].split("  #")[0],
          `kubectl patch node n1 -p '{"spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24"]}}'`,
        );

        // The controller-manager tried and found the cluster CIDR full: its CIDRNotAvailable event is the cause.
        api.intercept = (_req, u) =>
          u.pathname === "/api/v1/events" && (u.searchParams.get("fieldSelector") ?? "").includes("name=n1")
            ? Response.json({
              kind: "EventList",
              items: [{ message: "Node n1 status is now: CIDRNotAvailable" }],
            })
            : null;
        const full = (await doctor()).checks[0];
        assertEquals([full.id, full.severity], ["lease-own", "critical"]);
        assertStringIncludes(full.detail, "event CIDRNotAvailable: Node n1 status is now: CIDRNotAvailable");
        assertStringIncludes(full.fix[0], "kubectl get nodes");
        api.intercept = null;

        // Assigned, but outside the Network the daemons route (--cluster-cidr and net-conf differ).
        api.upsert("n1", { podCIDR: "10.42.1.0/24", podCIDRs: ["10.42.1.0/24"] });
        const out = (await doctor()).checks.find((c) => c.id === "lease-own")!;
        assertEquals(out.severity, "critical", out.detail);
        assertStringIncludes(
          out.detail,
          "Node n1 podCIDR 10.42.1.0/24 is outside the net-conf Network 10.244.0.0/16",
        );

        // Inside the Network: no such finding (the lease itself is the daemon's to publish).
        api.upsert("n1", { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] });
        const fine = (await doctor()).checks.find((c) => c.id === "lease-own")!;
        assertEquals(fine.detail.includes("podCIDR"), false, fine.detail);

        // The net-conf ConfigMap, read with the daemon's credentials: edited to another Network since the
        // daemon read its mount of it, the podCIDR is outside what the daemon's next start reads.
        const cm = (network: string) =>
          api.configMaps.set("kube-flannel/kube-flannel-cfg", {
            data: { "net-conf.json": JSON.stringify({ Network: network, Backend: { Type: "vxlan" } }) },
          });
        cm("10.42.0.0/16");
        const edited = (await doctor()).checks.find((c) => c.id === "lease-own")!;
        assertEquals(edited.severity, "critical", edited.detail);
        assertStringIncludes(
          edited.detail,
          "Node n1 podCIDR 10.244.1.0/24 is outside the net-conf Network 10.42.0.0/16 (ConfigMap " +
            "kube-flannel/kube-flannel-cfg, not yet read by the daemon)",
        );
        // On the host, where the DaemonSet's mount of net-conf.json is not: the ConfigMap is the net-conf.
        netConf = `${d.path}/not-mounted/net-conf.json`;
        const host = await doctor();
        const hostOwn = host.checks.find((c) => c.id === "lease-own")!;
        assertStringIncludes(
          hostOwn.detail,
          "Node n1 podCIDR 10.244.1.0/24 is outside the net-conf Network 10.42.0.0/16 (ConfigMap " +
            "kube-flannel/kube-flannel-cfg)",
        );
        assertStringIncludes(
          host.checks.find((c) => c.id === "store")!.detail,
          "network 10.42.0.0/16, backend vxlan (net-conf from ConfigMap kube-flannel/kube-flannel-cfg)",
        );
        cm("10.244.0.0/16");
        const agree = (await doctor()).checks.find((c) => c.id === "lease-own")!;
        assertEquals(agree.detail.includes("podCIDR"), false, agree.detail);
      } finally {
        await api.close();
        d.cleanup();
      }
    }),
});
