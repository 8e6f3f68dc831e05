/**
 * `flanctl doctor` nftables-mode checks on the fixture node: flannel-ipv4 as the daemon makes it is ok;
 * a missing masquerade rule / forward chain / table are found with nft fix commands; flannel rules in both
 * iptables and nftables are a warning; hostPort rules (portmap, iptables and nftables backends) whose pod
 * is gone are a warning with the exact commands that remove them.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { nsRun, nsSh } from "./netns.ts";
import { expectFinding, runDoctorJson, withDoctorNode } from "./doctor_fixture.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { inNetns } from "../lib/sys/netns.ts";
import { nftLibrary } from "../lib/sys/nftables.ts";
import { nftFamilyScript } from "../lib/firewall/flannel.ts";
import { IPNet } from "../lib/base/cidr.ts";

const SPEC = {
  ipMasq: true,
  forward: true,
  network: IPNet.parse("10.244.0.0/16"),
  subnet: IPNet.parse("10.244.1.0/24"),
};

function nft(ns: string, text: string) {
  const r = inNetns({ name: ns }, () => nftLibrary()!.run(text));
  assertEquals(r.rc, 0, r.error);
}

async function nftMode(storeDir: string) {
  const store = new FileStore({ dir: storeDir });
  try {
    await store.setNetworkConfig(
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan" }, EnableNFTables: true }),
    );
  } finally {
    await store.close();
  }
}

async function dropIptablesFlannel(ns: string) {
  const c = (x: string) => ["-m", "comment", "--comment", `flanneld ${x}`];
  await nsSh(ns, "iptables", "-t", "nat", "-D", "POSTROUTING", ...c("masq"), "-j", "FLANNEL-POSTRTG");
  await nsSh(ns, "iptables", "-t", "nat", "-F", "FLANNEL-POSTRTG");
  await nsSh(ns, "iptables", "-t", "nat", "-X", "FLANNEL-POSTRTG");
  await nsSh(ns, "iptables", "-D", "FORWARD", ...c("forward"), "-j", "FLANNEL-FWD");
  await nsSh(ns, "iptables", "-F", "FLANNEL-FWD");
  await nsSh(ns, "iptables", "-X", "FLANNEL-FWD");
  // The fixture's FORWARD DROP policy now needs nft's forward accepts (and the iptables checks skip).
}

needsRoot.test("doctor: nftables mode (flannel-ipv4 ok, missing rule/table found), mixed modes", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    // Healthy iptables node: the nftables checks are ok.
    let run = await runDoctorJson(n);
    expectFinding(run, "nft-rules", "ok", "not in nftables mode");
    expectFinding(run, "firewall-mode", "ok", "in iptables");
    expectFinding(run, "hostports", "ok", "no hostPort");

    // iptables mode with flannel's nft table left over, holding another program's chain too: the fix
    // deletes flannel's chains, not the table (issue 30).
    nft(N, nftFamilyScript(SPEC, 4));
    nft(N, "add chain ip flannel-ipv4 mine { type filter hook input priority 0 ; }\n");
    run = await runDoctorJson(n);
    const left = expectFinding(run, "firewall-mode", "warning", "");
    assertEquals(left.fix.filter((f) => f.includes("nft delete")), [
      `ip netns exec ${N} nft delete chain ip flannel-ipv4 postrtg`,
      `ip netns exec ${N} nft delete chain ip flannel-ipv4 forward`,
    ]);
    nft(N, "delete table ip flannel-ipv4\n");

    // Mode switch that left the iptables rules: both sets present.
    await nftMode(n.storeDir);
    nft(N, nftFamilyScript(SPEC, 4));
    run = await runDoctorJson(n);
    expectFinding(run, "nft-rules", "ok", "table ip flannel-ipv4 has flannel's rules for 10.244.1.0/24");
    const mixed = expectFinding(run, "firewall-mode", "warning", "the network config says nftables mode");
    assertStringIncludes(mixed.fix.join("\n"), `ip netns exec ${N} iptables -t nat -X FLANNEL-POSTRTG`);
    assertEquals(mixed.fix.some((f) => f.includes("nft delete table")), false, "the configured mode stays");

    // nftables only, as the daemon leaves it: all ok; then break it.
    await dropIptablesFlannel(N);
    run = await runDoctorJson(n);
    expectFinding(run, "firewall-mode", "ok", "in nftables");
    expectFinding(run, "masq-rules", "ok", "see nft-rules");
    // The fixture's FORWARD DROP policy drops pod traffic whatever flannel's nft forward chain accepts.
    expectFinding(
      run,
      "forward-policy",
      "critical",
      "dropped at FORWARD by iptables-nft filter FORWARD policy DROP",
    );
    expectFinding(run, "nft-rules", "ok", "flannel-ipv4");
    const h = JSON.parse(
      inNetns(
        { name: N },
        () => nftLibrary()!.run("list chain ip flannel-ipv4 postrtg", { json: true, handles: true }),
      )
        .output,
    ).nftables.filter((o: Record<string, unknown>) => o.rule).at(-1).rule.handle;
    nft(N, `delete rule ip flannel-ipv4 postrtg handle ${h}\ndelete chain ip flannel-ipv4 forward\n`);
    run = await runDoctorJson(n);
    const f = expectFinding(
      run,
      "nft-rules",
      "warning",
      "postrtg lacks 1 rule(s): ip saddr != 10.244.0.0/16",
    );
    assertEquals(f.fix, [
      `ip netns exec ${N} nft add rule ip flannel-ipv4 postrtg ip saddr != 10.244.0.0/16 ip daddr 10.244.0.0/16 masquerade`,
    ]);
    assertStringIncludes(f.detail, "EnableNFTables");
    nft(N, "delete table ip flannel-ipv4\n");
    run = await runDoctorJson(n);
    expectFinding(run, "nft-rules", "critical", "table ip flannel-ipv4 does not exist");
  });
});

needsRoot.test("doctor: hostPort rules whose pod is gone (iptables and nftables portmap rules)", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    // The fixture's pod is 10.244.1.2 (running); 10.244.1.9 is no pod.
    const rules = [
      "*nat",
      ":CNI-HOSTPORT-DNAT - [0:0]",
      ":CNI-DN-aaaaaaaaaaaaaaaaaaaaa - [0:0]",
      ":CNI-DN-bbbbbbbbbbbbbbbbbbbbb - [0:0]",
      "-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"live\\"" -m multiport --dports 18080 -j CNI-DN-aaaaaaaaaaaaaaaaaaaaa`,
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"gone\\"" -m multiport --dports 18081 -j CNI-DN-bbbbbbbbbbbbbbbbbbbbb`,
      "-A CNI-DN-aaaaaaaaaaaaaaaaaaaaa -p tcp -m tcp --dport 18080 -j DNAT --to-destination 10.244.1.2:80",
      "-A CNI-DN-bbbbbbbbbbbbbbbbbbbbb -p tcp -m tcp --dport 18081 -j DNAT --to-destination 10.244.1.9:80",
      "COMMIT",
    ].join("\n") + "\n";
    const r = await nsRun(N, ["iptables-restore", "--noflush"], { stdin: rules });
    assertEquals(r.code, 0, r.stderr);
    nft(
      N,
      [
        "add table ip cni_hostport",
        "add chain ip cni_hostport hostports",
        'add rule ip cni_hostport hostports tcp dport 18082 dnat to 10.244.1.2:80 comment "live"',
        'add rule ip cni_hostport hostports tcp dport 18083 dnat to 10.244.1.10:80 comment "gone2"',
      ].join("\n"),
    );
    const run = await runDoctorJson(n);
    const f = expectFinding(
      run,
      "hostports",
      "warning",
      "2 hostPort rule(s) to addresses no running pod has",
    );
    assertStringIncludes(f.detail, "10.244.1.9 (iptables CNI-DN-bbbbbbbbbbbbbbbbbbbbb, container gone)");
    assertStringIncludes(f.detail, "10.244.1.10 (nftables ip cni_hostport hostports handle");
    assertEquals(f.detail.includes("10.244.1.2 "), false);
    const fix = f.fix.join("\n");
    assertStringIncludes(fix, `ip netns exec ${N} iptables -t nat -X CNI-DN-bbbbbbbbbbbbbbbbbbbbb`);
    assertStringIncludes(fix, `id: \\"gone\\"" -m multiport --dports 18081 -j CNI-DN-bbbbbbbbbbbbbbbbbbbbb`);
    assertStringIncludes(fix, `ip netns exec ${N} nft delete rule ip cni_hostport hostports handle`);
    assertEquals(fix.includes("aaaaaaaa"), false);
  });
});
