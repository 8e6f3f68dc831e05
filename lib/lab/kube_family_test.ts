import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import { parseNetConfig } from "../config/netconf.ts";
import {
  clusterCidrs,
  dualStackManifest,
  kubeFamily,
  manifestNetConf,
  nodeMaskFlags,
  SERVICE_CIDR6,
  serviceCidrs,
} from "./kube_family.ts";
import { pkiScript } from "./kube.ts";

const MANIFEST = new URL("../../deploy/kube-flanctl.yml", import.meta.url);

Deno.test("kube family: the manifest's net-conf made dual stack parses with both networks", () => {
  const text = Deno.readTextFileSync(MANIFEST);
  const before = parseNetConfig(manifestNetConf(text)!);
  assertEquals(before.enableIPv6, false);
  const dual = dualStackManifest(text);
  const c = parseNetConfig(manifestNetConf(dual)!);
  assertEquals(c.enableIPv4, true);
  assertEquals(c.enableIPv6, true);
  assertEquals(c.network?.toString(), "10.244.0.0/16");
  assertEquals(c.ipv6Network?.toString(), "fc00:244::/48");
  assertEquals(c.backend.type, before.backend.type);
  // Only the ConfigMap changed.
  assertEquals(dual.split("\n").length, text.split("\n").length + 2);
  // The last field of its object, too, and never twice.
  const last = '{\n  "Backend": {"Type": "vxlan"},\n  "Network": "10.244.0.0/16"\n}';
  assertEquals(JSON.parse(dualStackManifest(last)).IPv6Network, "fc00:244::/48");
  // White space after the comma (an editor's trailing blanks), and a blank line above.
  const spaced = '{\n\n  "Network": "10.244.0.0/16" , \t\n  "Backend": {"Type": "vxlan"}\n}';
  const d = JSON.parse(dualStackManifest(spaced));
  assertEquals([d.Network, d.EnableIPv6, d.IPv6Network, d.Backend.Type], [
    "10.244.0.0/16",
    true,
    "fc00:244::/48",
    "vxlan",
  ]);
  assertThrows(() => dualStackManifest(dual), Error, "already sets IPv6");
  assertThrows(() => dualStackManifest("kind: List\n"), Error, 'no net-conf "Network" line');
  assertEquals(manifestNetConf("kind: List\n"), null);
});

Deno.test("kube family: dual stack's ranges and mask flags; IPv6-only refused", () => {
  assertEquals(kubeFamily(undefined), "ipv4");
  assertEquals(kubeFamily("dual"), "dual");
  assertThrows(() => kubeFamily("ipv6"), Error, "--ip-family ipv6 is not offered");
  assertEquals(clusterCidrs("ipv4", "10.244.0.0/16"), ["10.244.0.0/16"]);
  assertEquals(clusterCidrs("dual", "10.244.0.0/16"), ["10.244.0.0/16", "fc00:244::/48"]);
  assertEquals(serviceCidrs("dual"), ["10.96.0.0/16", SERVICE_CIDR6]);
  // kube-controller-manager refuses --node-cidr-mask-size with a dual-stack --cluster-cidr.
  assertEquals(nodeMaskFlags("ipv4"), ["--node-cidr-mask-size=24"]);
  assertEquals(nodeMaskFlags("dual"), ["--node-cidr-mask-size-ipv4=24", "--node-cidr-mask-size-ipv6=64"]);
  // The API server's certificate names the IPv6 VIP, each kubelet's its IPv6 node address.
  const p = pkiScript("/l/pki", "192.0.2.1", ["192.0.2.11"], ["fc00:1ab:64::b"]);
  assertStringIncludes(p, "IP:10.96.0.1,IP:fd00:10:96::1,DNS:kubernetes");
  assertStringIncludes(p, '"IP:192.0.2.11,IP:fc00:1ab:64::b"');
});
