import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { BrNetfilterError, checkBrNetfilter } from "./preflight.ts";

const v4 = parseNetConfig(JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" } }));
const dual = parseNetConfig(
  JSON.stringify({
    Network: "10.244.0.0/16",
    EnableIPv6: true,
    IPv6Network: "fc00::/48",
    Backend: { Type: "vxlan" },
  }),
);
const nft = parseNetConfig(
  JSON.stringify({ Network: "10.244.0.0/16", EnableNFTables: true, Backend: { Type: "vxlan" } }),
);

Deno.test("br_netfilter: refused without bridge-nf-call-iptables (iptables mode), with the modprobe hint", () => {
  const asked: string[] = [];
  const none = (p: string) => (asked.push(p), false);
  const e = assertThrows(() => checkBrNetfilter(v4, none), BrNetfilterError);
  assertEquals(
    e.message.startsWith(
      "br_netfilter is not loaded: /proc/sys/net/bridge/bridge-nf-call-iptables is missing",
    ),
    true,
  );
  assertEquals(e.message.includes("'modprobe br_netfilter'"), true);
  // Loaded: fine. Dual stack also needs the ip6tables file. nftables mode checks nothing.
  checkBrNetfilter(v4, () => true);
  assertThrows(() => checkBrNetfilter(dual, (p) => p.endsWith("-iptables")), BrNetfilterError, "ip6tables");
  asked.length = 0;
  checkBrNetfilter(nft, none);
  assertEquals(asked, []);
  // This host (the test's own namespace) has the module: the real check passes.
  checkBrNetfilter(v4);
});
