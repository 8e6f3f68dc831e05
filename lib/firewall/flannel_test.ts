import { assertEquals } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import { FlannelRules, iptablesRules, nftCleanupScript, nftFamilyScript } from "./flannel.ts";
import { type NftDriver, NftError } from "./nft.ts";

const SPEC = {
  ipMasq: true,
  forward: true,
  network: IPNet.parse("10.244.0.0/16"),
  subnet: IPNet.parse("10.244.1.0/24"),
  ipv6Network: IPNet.parse("fd00:10::/56"),
  ipv6Subnet: IPNet.parse("fd00:10:0:1::/64"),
};

Deno.test("nftFamilyScript: flanneld's table, chains and rules per family", () => {
  const v6 = nftFamilyScript(SPEC, 6).split("\n");
  assertEquals(v6[0], 'add table ip6 flannel-ipv6 { comment "rules for flannel-ipv6" ; }');
  assertEquals(v6.filter((l) => l.startsWith("add rule")), [
    "add rule ip6 flannel-ipv6 postrtg meta mark 0x4000 return",
    "add rule ip6 flannel-ipv6 postrtg ip6 saddr fd00:10:0:1::/64 ip6 daddr fd00:10::/56 return",
    "add rule ip6 flannel-ipv6 postrtg ip6 saddr fd00:10::/56 ip6 daddr fd00:10:0:1::/64 return",
    "add rule ip6 flannel-ipv6 postrtg ip6 saddr != fd00:10:0:1::/64 ip6 daddr fd00:10::/56 return",
    "add rule ip6 flannel-ipv6 postrtg ip6 saddr fd00:10::/56 ip6 daddr != ff00::/8 masquerade fully-random",
    "add rule ip6 flannel-ipv6 postrtg ip6 saddr != fd00:10::/56 ip6 daddr fd00:10::/56 masquerade fully-random",
    "add rule ip6 flannel-ipv6 forward ip6 saddr fd00:10::/56 accept",
    "add rule ip6 flannel-ipv6 forward ip6 daddr fd00:10::/56 accept",
  ]);
  // Each chain is flushed in the same transaction that refills it.
  assertEquals(
    v6.indexOf("flush chain ip6 flannel-ipv6 postrtg") < v6.indexOf(v6.find((l) => l.includes("0x4000"))!),
    true,
  );
  const plain = nftFamilyScript({ ...SPEC, randomFully: false, forward: false }, 4);
  assertEquals(plain.includes("fully-random"), false);
  assertEquals(plain.includes("forward"), false);
  // Only the table when the family has no network (flanneld creates both tables).
  assertEquals(
    nftFamilyScript({ ...SPEC, ipv6Network: null }, 6),
    'add table ip6 flannel-ipv6 { comment "rules for flannel-ipv6" ; }\n',
  );
  // iptables mode's cleanup: a table of flannel's chains only goes whole; another program's objects stay.
  const ours =
    'table ip flannel-ipv4 {\n\tcomment "rules for flannel-ipv4"\n\tchain postrtg {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t}\n\tchain forward {\n\t}\n}\n';
  assertEquals(nftCleanupScript("ip", "flannel-ipv4", ours), "delete table ip flannel-ipv4\n");
  assertEquals(
    nftCleanupScript("ip", "flannel-ipv4", ours.replace("}\n}", "}\n\tchain mine {\n\t}\n}")),
    "delete chain ip flannel-ipv4 postrtg\ndelete chain ip flannel-ipv4 forward\n",
  );
  assertEquals(
    nftCleanupScript(
      "ip",
      "flannel-ipv4",
      ours.replace("}\n}", "}\n\tset blocked {\n\t\ttype ipv4_addr\n\t}\n}"),
    ),
    "delete chain ip flannel-ipv4 postrtg\ndelete chain ip flannel-ipv4 forward\n",
  );
  assertEquals(
    nftCleanupScript("ip", "flannel-ipv4", "table ip flannel-ipv4 {\n\tchain mine {\n\t}\n}\n"),
    "",
  );
  assertEquals(iptablesRules(SPEC).map((t) => `${t.family} ${t.table} ${t.chain}`), [
    "4 nat FLANNEL-POSTRTG",
    "4 filter FLANNEL-FWD",
    "6 nat FLANNEL-POSTRTG",
    "6 filter FLANNEL-FWD",
  ]);
});

/** An nft stand-in: tables as text; `list table` prints the applied script, a missing table is ENOENT. */
function fakeNft() {
  const tables = new Map<string, string>();
  const runs: string[] = [];
  const d: NftDriver = {
    via: "libnftables",
    run(text) {
      runs.push(text);
      const m = /^list table (\S+) (\S+)/.exec(text);
      if (m) {
        const t = tables.get(`${m[1]} ${m[2]}`);
        if (t === undefined) {
          return Promise.reject(new NftError("libnftables", "No such file or directory"));
        }
        return Promise.resolve(t);
      }
      const a = /^add table (\S+) (\S+)/.exec(text);
      if (a) tables.set(`${a[1]} ${a[2]}`, text);
      return Promise.resolve("");
    },
  };
  return { d, tables, runs };
}

Deno.test("FlannelRules (nftables): applies both families once, re-applies only a table that changed", async () => {
  const { d, tables, runs } = fakeNft();
  const r = new FlannelRules("nftables", { nft: d });
  r.set(SPEC);
  assertEquals(await r.ensure(), ["ip flannel-ipv4", "ip6 flannel-ipv6"]);
  assertEquals(await r.ensure(), []);
  tables.delete("ip flannel-ipv4");
  runs.length = 0;
  assertEquals(await r.ensure(), ["ip flannel-ipv4"]);
  assertEquals(runs.filter((t) => t.startsWith("add table")).length, 1);
  tables.set("ip6 flannel-ipv6", "changed by hand");
  assertEquals(await r.ensure(), ["ip6 flannel-ipv6"]);
  // A new subnet re-applies everything.
  r.set({ ...SPEC, subnet: IPNet.parse("10.244.7.0/24") });
  assertEquals((await r.ensure()).length, 2);
  assertEquals(tables.get("ip flannel-ipv4")!.includes("10.244.7.0/24"), true);
});

Deno.test("FlannelRules (nftables): a kernel refusing fully-random gets plain masquerade, once", async () => {
  const { d, tables } = fakeNft();
  const strict: NftDriver = {
    via: "libnftables",
    run: (text, o) =>
      text.includes("fully-random")
        ? Promise.reject(new NftError("libnftables", "Error: Could not process rule"))
        : d.run(text, o),
  };
  const warned: string[] = [];
  const r = new FlannelRules("nftables", { nft: strict, log: { info() {}, warn: (m) => warned.push(m) } });
  r.set({ ...SPEC, ipv6Network: null });
  assertEquals(await r.ensure(), ["ip flannel-ipv4", "ip6 flannel-ipv6"]);
  assertEquals(tables.get("ip flannel-ipv4")!.includes(" masquerade\n"), true);
  assertEquals(warned.length, 1);
  tables.delete("ip flannel-ipv4");
  assertEquals(await r.ensure(), ["ip flannel-ipv4"]);
  assertEquals(warned.length, 1, "the choice is kept");
});
