import { assertEquals } from "../../tests/assert.ts";
import {
  instanceTag,
  type MasqRule,
  nftComment,
  nftDeleteScript,
  nftSetupScript,
  ruleSource,
  tagged,
} from "./ipmasq_nft.ts";

Deno.test("bridge nft masquerade: the reference's tag and comment, cut to 128 bytes on a character", async () => {
  // The values the reference v1.10 wrote for this attachment (tests/cni_bridge_nft_test.ts compares tables).
  assertEquals(await instanceTag("nft-net", "eth0", "nft1"), "5f9c0f04cdee66db-5adddb713cb7f484");
  assertEquals(
    await nftComment("nft-net", "eth0", "nft1"),
    "5f9c0f04cdee66db-5adddb713cb7f484, net: nft-net, if: eth0, id: nft1",
  );
  assertEquals((await nftComment('n"et', "eth0", "x")).endsWith(", net: net, if: eth0, id: x"), true);
  const long = await nftComment("net", "eth0", "c".repeat(200));
  assertEquals(new TextEncoder().encode(long).length, 128);
  const multi = await nftComment("net", "eth0", "é".repeat(100));
  assertEquals(new TextEncoder().encode(multi).length <= 128, true);
  assertEquals(multi.includes("\ufffd"), false, "no character cut in half");
});

Deno.test("bridge nft masquerade: one transaction with the base chain refilled, stale rules deleted", () => {
  const s = nftSetupScript(["10.1.2.3/24", "fd00::5/64"], "tag, net: n", [7]).split("\n");
  assertEquals(
    s.filter((l) => l.startsWith("flush chain inet cni_plugins_masquerade postrouting")).length,
    1,
  );
  assertEquals(s.includes("delete rule inet cni_plugins_masquerade masq_checks handle 7"), true);
  assertEquals(
    s.includes(
      'add rule inet cni_plugins_masquerade masq_checks ip saddr == 10.1.2.3 ip daddr != 10.1.2.0/24 masquerade comment "tag, net: n"',
    ),
    true,
  );
  assertEquals(
    s.includes(
      'add rule inet cni_plugins_masquerade masq_checks ip6 saddr == fd00::5 ip6 daddr != fd00::/64 masquerade comment "tag, net: n"',
    ),
    true,
  );
});

Deno.test("bridge nft masquerade: rules found by tag, their source read from the JSON expression", () => {
  const rules: MasqRule[] = [
    {
      handle: 4,
      comment: "aa-bb, net: n",
      expr: [{
        match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: "10.0.0.2" },
      }],
    },
    { handle: 5, comment: "aa-cc, net: n", expr: [] },
    { handle: 6 },
  ];
  assertEquals(tagged(rules, "aa-bb").map((r) => r.handle), [4]);
  assertEquals(tagged(rules, "aa-").map((r) => r.handle), [4, 5]);
  assertEquals(ruleSource(rules[0]), "10.0.0.2");
  assertEquals(ruleSource(rules[1]), null);
  assertEquals(nftDeleteScript([]), null);
  assertEquals(
    nftDeleteScript(rules.slice(0, 2)),
    "delete rule inet cni_plugins_masquerade masq_checks handle 4\ndelete rule inet cni_plugins_masquerade masq_checks handle 5\n",
  );
});
