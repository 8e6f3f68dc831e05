/**
 * The nftables driver against the kernel, in a throwaway namespace: libnftables by FFI commits a buffer as
 * one transaction, lists (text and JSON), reports nft's error text and leaves nothing of a failed buffer;
 * the `nft` binary fallback programs the same tables; flannel's rules for both families in both modes, and
 * the switch between them.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { nsRun, withNetns } from "./netns.ts";
import { inNetns } from "../lib/sys/netns.ts";
import { nftLibrary } from "../lib/sys/nftables.ts";
import { type NftDriver, nftDriver } from "../lib/firewall/nft.ts";
import { FlannelRules, nftFamilyScript } from "../lib/firewall/flannel.ts";
import { IPNet } from "../lib/base/cidr.ts";
import { FirewallError } from "../lib/firewall/types.ts";

const SPEC = {
  ipMasq: true,
  forward: true,
  network: IPNet.parse("10.244.0.0/16"),
  subnet: IPNet.parse("10.244.1.0/24"),
};

needsRoot.test("libnftables FFI: one transaction per buffer, text/JSON listing, error text", async () => {
  const lib = nftLibrary();
  assert(lib, "libnftables.so.1 must load (Debian libnftables1, installed by install.sh)");
  await withNetns(async (fx) => {
    const ns = await fx.add("nft");
    const ok = inNetns({ name: ns }, () => lib.run(nftFamilyScript(SPEC, 4)));
    assertEquals(ok.rc, 0, ok.error);
    const listed = (await nsRun(ns, ["nft", "list", "table", "ip", "flannel-ipv4"])).stdout;
    assertStringIncludes(listed, "ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random");
    const text = inNetns({ name: ns }, () => lib.run("list table ip flannel-ipv4"));
    assertEquals(text.output, listed);
    const json = inNetns(
      { name: ns },
      () => lib.run("list chain ip flannel-ipv4 forward", { json: true, handles: true }),
    );
    const rules = (JSON.parse(json.output).nftables as Record<string, { handle?: number }>[]).filter((o) =>
      o.rule
    );
    assertEquals(rules.length, 2);
    assert(rules.every((o) => typeof o.rule.handle === "number"), json.output);
    // A buffer with a bad line commits nothing of it (the first line would have added a table).
    const bad = inNetns(
      { name: ns },
      () => lib.run("add table ip partial\nadd rule ip partial nochain accept\n"),
    );
    assert(bad.rc !== 0);
    assertStringIncludes(bad.error, "No such file or directory");
    assertEquals((await nsRun(ns, ["nft", "list", "table", "ip", "partial"])).code, 1);
    // Nothing leaks into the root namespace's view of the test namespace's tables.
    assertEquals((await nsRun(ns, ["nft", "list", "tables"])).stdout.trim(), "table ip flannel-ipv4");
  });
});

needsRoot.test("nft driver: the binary fallback programs the same rules and raises FirewallError", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("nfb");
    const run = (cmd: string[], stdin?: string) => nsRun(ns, cmd, { stdin });
    const bin = nftDriver({ forceBinary: true, run });
    assertEquals(bin.via, "nft");
    await bin.run(nftFamilyScript(SPEC, 4));
    const viaBinary = await bin.run("list table ip flannel-ipv4\n");
    const lib = nftLibrary()!;
    const viaLib = inNetns({ name: ns }, () => lib.run("list table ip flannel-ipv4")).output;
    assertEquals(viaBinary, viaLib);
    const e = await bin.run("delete table ip absent\n").catch((x) => x);
    assert(e instanceof FirewallError && e.tool === "nft", String(e));
  });
});

/** An nft driver that runs libnftables inside netns `ns`. */
function nsDriver(lib: NonNullable<ReturnType<typeof nftLibrary>>, ns: string): NftDriver {
  return {
    via: "libnftables",
    run(text, o) {
      const r = inNetns({ name: ns }, () => lib.run(text, o));
      return r.rc === 0
        ? Promise.resolve(r.output)
        : Promise.reject(new FirewallError("libnftables", r.error));
    },
  };
}

needsRoot.test("FlannelRules dual stack: ip6tables chains and the flannel-ipv6 table render and apply", async () => {
  const lib = nftLibrary()!;
  const spec = {
    ...SPEC,
    ipv6Network: IPNet.parse("fd00:10::/56"),
    ipv6Subnet: IPNet.parse("fd00:10:0:1::/64"),
  };
  await withNetns(async (fx) => {
    const ns = await fx.add("fw6");
    const run = (cmd: string[], stdin?: string) => nsRun(ns, cmd, { stdin });
    const inNs = nsDriver(lib, ns);
    const ipt = new FlannelRules("iptables", { run, nft: inNs });
    ipt.set(spec);
    assertEquals(await ipt.ensure(), ["nat", "filter", "ip6:nat", "ip6:filter"]);
    const save6 = (await nsRun(ns, ["ip6tables-save"])).stdout;
    assertStringIncludes(
      save6,
      `-A FLANNEL-POSTRTG -s fd00:10::/56 ! -d ff00::/8 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`,
    );
    assertStringIncludes(
      save6,
      `-A FLANNEL-FWD -d fd00:10::/56 -m comment --comment "flanneld forward" -j ACCEPT`,
    );
    // Switching to nftables mode removes the iptables chains of both families and programs both tables.
    const nft = new FlannelRules("nftables", { run, nft: inNs });
    nft.set(spec);
    const removed = await nft.cleanupOtherMode();
    assertEquals(removed.length, 4, removed.join(","));
    assertEquals((await nsRun(ns, ["ip6tables-save"])).stdout.includes("FLANNEL"), false);
    assertEquals(await nft.ensure(), ["ip flannel-ipv4", "ip6 flannel-ipv6"]);
    const t6 = (await nsRun(ns, ["nft", "list", "table", "ip6", "flannel-ipv6"])).stdout;
    assertStringIncludes(t6, "ip6 saddr fd00:10::/56 ip6 daddr != ff00::/8 masquerade fully-random");
    assertStringIncludes(t6, "ip6 daddr fd00:10::/56 accept");
    // And back: iptables mode removes both tables.
    assertEquals((await ipt.cleanupOtherMode()).sort(), ["ip flannel-ipv4", "ip6 flannel-ipv6"]);
    // (iptables-nft keeps its own, now empty, ip/ip6 nat and filter tables.)
    assertEquals((await nsRun(ns, ["nft", "list", "tables"])).stdout.includes("flannel"), false);
  });
});

needsRoot.test("FlannelRules (iptables mode): removes only flannel's nft chains, keeps a foreign chain and its table", async () => {
  const lib = nftLibrary()!;
  await withNetns(async (fx) => {
    const ns = await fx.add("fwf");
    const run = (cmd: string[], stdin?: string) => nsRun(ns, cmd, { stdin });
    const inNs = nsDriver(lib, ns);
    const nft = new FlannelRules("nftables", { run, nft: inNs });
    nft.set(SPEC);
    await nft.ensure();
    // Another program's chain and set in flannel's IPv4 table; flannel's IPv6 table holds only its own.
    await inNs.run(
      "add chain ip flannel-ipv4 mine { type filter hook input priority 0 ; }\n" +
        "add set ip flannel-ipv4 blocked { type ipv4_addr ; }\nadd rule ip flannel-ipv4 mine ip saddr @blocked drop\n",
    );
    const warned: string[] = [];
    const ipt = new FlannelRules("iptables", {
      run,
      nft: inNs,
      log: { info() {}, warn: (m) => warned.push(m) },
    });
    ipt.set(SPEC);
    assertEquals(
      (await ipt.cleanupOtherMode()).sort(),
      ["ip flannel-ipv4 forward", "ip flannel-ipv4 postrtg", "ip6 flannel-ipv6"],
    );
    const left = (await nsRun(ns, ["nft", "list", "table", "ip", "flannel-ipv4"])).stdout;
    assertStringIncludes(left, "chain mine");
    assertStringIncludes(left, "ip saddr @blocked drop");
    assertStringIncludes(left, "set blocked");
    assertEquals(
      left.includes("postrtg") || left.includes("masquerade") || left.includes("chain forward"),
      false,
    );
    assertEquals(
      (await nsRun(ns, ["nft", "list", "table", "ip6", "flannel-ipv6"])).code,
      1,
      "ours alone: gone",
    );
    assertEquals(warned.length, 1, warned.join("; "));
    // Nothing of ours is left: a second cleanup removes nothing and leaves the foreign chain.
    assertEquals(await ipt.cleanupOtherMode(), []);
    assertStringIncludes(
      (await nsRun(ns, ["nft", "list", "table", "ip", "flannel-ipv4"])).stdout,
      "chain mine",
    );
  });
});
