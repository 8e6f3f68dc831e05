/**
 * The firewall part of the doctor's catalog (issue 37): each host-firewall failure the field reports,
 * injected into a doctor node's namespace in iptables-nft, iptables-legacy and native nftables, and
 * firewalld's native table (rebuilt by hand: tests/fixtures/firewall/firewalld.nft). For each, doctor's
 * finding (id, severity, the dropping rule named) must agree with a real packet's fate: a ping from the
 * peer node's flannel.1 to the node's pod crosses the node's INPUT (the VXLAN datagram) and FORWARD
 * (flannel.1 → cni0 and back). The printed fix lines are then run as pasted and the ping must pass. The
 * healthy variants (ufw-style accept behind a DROP policy, an nft table accepting the port, an idle
 * legacy back-end) must stay quiet.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { nsSh, sh } from "./netns.ts";
import {
  type DoctorNode,
  type DoctorRun,
  expectFinding,
  runDoctorJson,
  withDoctorNode,
} from "./doctor_fixture.ts";

/** The fixture's filter table as flannel leaves it (iptables-nft). */
const FILTER = [
  "*filter",
  ":INPUT ACCEPT [0:0]",
  ":FORWARD DROP [0:0]",
  ":OUTPUT ACCEPT [0:0]",
  ":FLANNEL-FWD - [0:0]",
  '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
  '-A FLANNEL-FWD -s 10.244.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
  '-A FLANNEL-FWD -d 10.244.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
  "COMMIT",
  "",
].join("\n");

/** Puts the node's firewall back: flannel's iptables-nft filter table, an empty legacy one, no nft tables. */
async function reset(N: string): Promise<void> {
  await sh("sh", "-c", `ip netns exec ${N} iptables-nft-restore <<'EOF'\n${FILTER}EOF`);
  const legacy = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n";
  await sh("sh", "-c", `ip netns exec ${N} iptables-legacy-restore <<'EOF'\n${legacy}EOF`);
  for (const t of ["inet filter", "inet firewalld"]) {
    await sh("sh", "-c", `ip netns exec ${N} nft delete table ${t} 2>/dev/null; true`);
  }
}

/** True when a ping from the peer's flannel.1 reaches the node's pod and comes back. */
async function pingPasses(n: DoctorNode): Promise<boolean> {
  const p = await new Deno.Command("ip", {
    args: ["netns", "exec", n.peer, "ping", "-c", "1", "-W", "1", "-n", "-q", "10.244.1.2"],
    stdout: "null",
    stderr: "null",
  }).output();
  return p.code === 0;
}

/** Runs nft commands in the node. */
async function nft(N: string, script: string): Promise<void> {
  await sh("sh", "-c", `ip netns exec ${N} nft -f - <<'EOF'\n${script}\nEOF`);
}

/** Runs the printed fix lines as an operator pastes them. */
/** Puts `-s 10.244.0.0/16 -j TARGET` first in nat POSTROUTING, through iptables-nft, ahead of flannel's jump. */
async function natFirst(N: string, target: "MASQUERADE" | "RETURN"): Promise<void> {
  await nsSh(N, "iptables-nft", "-t", "nat", "-I", "POSTROUTING", "1", "-s", "10.244.0.0/16", "-j", target);
}

async function paste(lines: string[]): Promise<void> {
  for (const l of lines) await sh("sh", "-c", l);
}

/** The finding `id` and a ping agree: critical (naming `rule`) with no reply, then fixed by its lines. */
async function dropsAndFixes(
  n: DoctorNode,
  id: "vxlan-port" | "forward-policy",
  rule: string[],
  runFix = true,
): Promise<DoctorRun> {
  const run = await runDoctorJson(n);
  const f = expectFinding(run, id, "critical", rule[0]);
  for (const r of rule.slice(1)) assertStringIncludes(f.detail, r);
  assertEquals(await pingPasses(n), false, `doctor says ${id} drops; the ping must not pass`);
  if (runFix) {
    await paste(f.fix);
    expectFinding(await runDoctorJson(n), id, "ok", "passes the firewall");
    assert(await pingPasses(n), `after ${JSON.stringify(f.fix)} the ping passes`);
  }
  return run;
}

/** Both path findings ok and the ping passes. */
async function quiet(n: DoctorNode): Promise<void> {
  const run = await runDoctorJson(n);
  expectFinding(run, "vxlan-port", "ok", "VXLAN from 192.0.2.11 to UDP 8472: passes the firewall");
  expectFinding(run, "forward-policy", "ok", "passes the firewall");
  assert(await pingPasses(n), "doctor says the path is open: the ping passes");
}

needsRoot.test("doctor catalog: INPUT rejects of VXLAN in iptables-nft, iptables-legacy and nftables", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await reset(N);
    await quiet(n);

    // A distribution's catch-all REJECT at the end of INPUT (RHEL's iptables-services default).
    for (const tool of ["iptables-nft", "iptables-legacy"]) {
      await nsSh(N, tool, "-A", "INPUT", "-j", "REJECT", "--reject-with", "icmp-host-prohibited");
      await dropsAndFixes(n, "vxlan-port", [
        `dropped at INPUT by ${tool} filter INPUT rule 1 REJECT: -A INPUT -j REJECT`,
      ]);
      await reset(N);
    }
    await nft(N, "table inet filter {\n chain input { type filter hook input priority 0; reject; }\n}");
    await dropsAndFixes(n, "vxlan-port", ["dropped at INPUT by nftables inet filter input handle", "REJECT"]);
    await reset(N);

    // A protocol-wide REJECT (all of UDP).
    for (const tool of ["iptables-nft", "iptables-legacy"]) {
      await nsSh(N, tool, "-A", "INPUT", "-p", "udp", "-j", "REJECT");
      await dropsAndFixes(n, "vxlan-port", [`${tool} filter INPUT rule 1 REJECT: -A INPUT -p udp -j REJECT`]);
      await reset(N);
    }
    await nft(
      N,
      "table inet filter {\n chain input { type filter hook input priority 0; meta l4proto udp drop; }\n}",
    );
    await dropsAndFixes(n, "vxlan-port", [
      "nftables inet filter input handle",
      "DROP: meta l4proto udp drop",
    ]);
    await reset(N);

    // The other back-end's DROP rule for the port.
    await nsSh(N, "iptables-legacy", "-A", "INPUT", "-p", "udp", "--dport", "8472", "-j", "DROP");
    const run = await dropsAndFixes(n, "vxlan-port", ["iptables-legacy filter INPUT rule 1 DROP"]);
    const fix = run.checks.find((c) => c.id === "vxlan-port")!.fix.join("\n");
    assertStringIncludes(fix, `ip netns exec ${N} iptables-legacy -I INPUT 1 -p udp --dport 8472`);
    await reset(N);
  });
});

needsRoot.test("doctor catalog: FORWARD rejects before FLANNEL-FWD and the legacy back-end's DROP policy", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await reset(N);
    // A REJECT placed before the jump to FLANNEL-FWD.
    await nsSh(
      N,
      "iptables-nft",
      "-I",
      "FORWARD",
      "1",
      "-j",
      "REJECT",
      "--reject-with",
      "icmp-host-prohibited",
    );
    await dropsAndFixes(n, "forward-policy", [
      "dropped at FORWARD by iptables-nft filter FORWARD rule 1 REJECT: -A FORWARD -j REJECT",
    ]);
    await reset(N);
    await nft(N, "table inet filter {\n chain forward { type filter hook forward priority 0; reject; }\n}");
    await dropsAndFixes(n, "forward-policy", ["dropped at FORWARD by nftables inet filter forward handle"]);
    await reset(N);

    // iptables-legacy beside iptables-nft, holding a DROP policy: what iptables-nft accepts is dropped.
    await nsSh(N, "iptables-legacy", "-P", "FORWARD", "DROP");
    const run = await dropsAndFixes(n, "forward-policy", [
      "dropped at FORWARD by iptables-legacy filter FORWARD policy DROP",
    ]);
    expectFinding(
      run,
      "iptables-backend",
      "warning",
      "iptables-legacy: 0 rule(s) and DROP policy on FORWARD",
    );
    const backend = run.checks.find((c) => c.id === "iptables-backend")!;
    assert(!JSON.stringify(backend).includes("iptables-nf_tables"), "no path that does not exist");
    await reset(N);
    await quiet(n);
  });
});

needsRoot.test("doctor catalog: firewalld's native table and ufw-style chains", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await reset(N);
    // firewalld (nftables back-end, eth0 in zone public): VXLAN and forwarded pod traffic rejected.
    const fw = await Deno.readTextFile(new URL("fixtures/firewall/firewalld.nft", import.meta.url));
    await nft(N, fw);
    const run = await dropsAndFixes(n, "vxlan-port", [
      "dropped at INPUT by nftables inet firewalld filter_INPUT handle",
      "REJECT: reject with icmpx admin-prohibited",
    ], false);
    const port = expectFinding(run, "vxlan-port", "critical", "firewalld");
    assertEquals(port.fix, [`ip netns exec ${N} firewall-cmd --add-port=8472/udp`]);
    const fwd = expectFinding(run, "forward-policy", "critical", "nftables inet firewalld filter_FORWARD");
    assertEquals(fwd.fix, [`ip netns exec ${N} firewall-cmd --zone=trusted --add-source=10.244.0.0/16`]);
    // What those two commands make firewalld write: the port in the zone's allow chain, the pod network
    // dispatched to zone trusted (which accepts). The same walk then passes, and so does the ping.
    await nft(
      N,
      [
        "add rule inet firewalld filter_IN_public_allow udp dport 8472 ct state { new, untracked } accept",
        "add chain inet firewalld filter_FWD_trusted",
        "add rule inet firewalld filter_FWD_trusted accept",
        "insert rule inet firewalld filter_FORWARD_ZONES ip saddr 10.244.0.0/16 goto filter_FWD_trusted",
        "insert rule inet firewalld filter_FORWARD_ZONES ip daddr 10.244.0.0/16 goto filter_FWD_trusted",
      ].join("\n"),
    );
    await quiet(n);
    await reset(N);

    // ufw's shape: INPUT policy DROP, the port accepted in a user chain behind jumps: ok, and it flows.
    const ufw = [
      "*filter",
      ":INPUT DROP [0:0]",
      ":FORWARD DROP [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":FLANNEL-FWD - [0:0]",
      ":ufw-before-input - [0:0]",
      ":ufw-user-input - [0:0]",
      ":ufw-reject-input - [0:0]",
      "-A INPUT -j ufw-before-input",
      "-A INPUT -j ufw-reject-input",
      '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
      "-A FLANNEL-FWD -s 10.244.0.0/16 -j ACCEPT",
      "-A FLANNEL-FWD -d 10.244.0.0/16 -j ACCEPT",
      "-A ufw-before-input -i lo -j ACCEPT",
      "-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      "-A ufw-before-input -m conntrack --ctstate INVALID -j DROP",
      "-A ufw-before-input -j ufw-user-input",
      "-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT",
      "-A ufw-user-input -p udp -m udp --dport 8472 -j ACCEPT",
      "COMMIT",
      "",
    ].join("\n");
    await sh("sh", "-c", `ip netns exec ${N} iptables-nft-restore <<'EOF'\n${ufw}EOF`);
    await quiet(n);
    // The same without the port: the policy drops it; the fix is ufw's own command.
    await nsSh(
      N,
      "iptables-nft",
      "-D",
      "ufw-user-input",
      "-p",
      "udp",
      "-m",
      "udp",
      "--dport",
      "8472",
      "-j",
      "ACCEPT",
    );
    const closed = await dropsAndFixes(n, "vxlan-port", ["iptables-nft filter INPUT policy DROP"], false);
    assertEquals(expectFinding(closed, "vxlan-port", "critical", "").fix, [
      `ip netns exec ${N} ufw allow 8472/udp`,
    ]);
    await reset(N);

    // An nft table with policy drop that accepts the port, and an idle legacy back-end: quiet.
    await nft(
      N,
      "table inet filter {\n chain input { type filter hook input priority 0; policy drop; udp dport 8472 accept; }\n}",
    );
    await quiet(n);
  });
});

needsRoot.test("doctor catalog: --probe explains an overlay fault by the rule, and finds the path MTU", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await reset(N);
    // This node's INPUT drops the peer's VXLAN: the VTEP does not answer, and the probe names the rule.
    await nsSh(N, "iptables-nft", "-A", "INPUT", "-p", "udp", "--dport", "8472", "-j", "DROP");
    let run = await runDoctorJson(n, "--probe", "--skip", "readyz");
    let probe = expectFinding(run, "peer-probe", "critical", "VTEP 10.244.2.0 does not (overlay fault)");
    assertStringIncludes(
      probe.detail,
      "the replies are dropped here: dropped by iptables-nft filter INPUT rule 1 DROP: " +
        "-A INPUT -p udp -m udp --dport 8472 -j DROP",
    );
    await paste(probe.fix);
    run = await runDoctorJson(n, "--probe", "--skip", "readyz");
    expectFinding(run, "peer-probe", "ok", "DF probes of 1450 bytes pass");

    // The peer's underlay carries 1400 bytes: 1450-byte pod packets (1500 encapsulated) vanish; the DF
    // probes find the largest that passes: 1400 − 50, plus the 4 bytes of a VLAN header a veth accepts
    // beyond its MTU (is_skb_forwardable).
    await nsSh(n.peer, "ip", "link", "set", "eth0", "mtu", "1400");
    run = await runDoctorJson(n, "--probe", "--skip", "readyz");
    probe = expectFinding(
      run,
      "peer-probe",
      "critical",
      "a DF probe of 1450 bytes (FLANNEL_MTU) to VTEP 10.244.2.0",
    );
    assertStringIncludes(probe.detail, "the path MTU through the overlay is 1354");
  });
});

needsRoot.test("doctor catalog: a NAT rule before flannel's decides the masquerade (flannel #1337)", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await reset(N);
    expectFinding(await runDoctorJson(n), "masq-rules", "ok", "FLANNEL-POSTRTG has the 6 masquerade rules");
    // A MASQUERADE placed before flannel's RETURNs: pod → remote pod leaves with the node's address.
    await natFirst(N, "MASQUERADE");
    let f = expectFinding(
      await runDoctorJson(n),
      "masq-rules",
      "warning",
      "pod 10.244.1.2 → remote pod 10.244.2.2 (cni0 → flannel.1) is NATed by iptables-nft nat POSTROUTING rule 1 " +
        "MASQUERADE: -A POSTROUTING -s 10.244.0.0/16 -j MASQUERADE",
    );
    assertEquals(f.fix, [`ip netns exec ${N} iptables -t nat -D POSTROUTING 1`]);
    await paste(f.fix);
    expectFinding(await runDoctorJson(n), "masq-rules", "ok", "FLANNEL-POSTRTG has the 6 masquerade rules");
    // A RETURN before flannel's jump: pods reach nothing outside.
    await natFirst(N, "RETURN");
    f = expectFinding(
      await runDoctorJson(n),
      "masq-rules",
      "warning",
      "pod 10.244.1.2 → 8.8.8.8 (cni0 → eth0) is not masqueraded",
    );
    await paste(f.fix);
    expectFinding(await runDoctorJson(n), "masq-rules", "ok", "FLANNEL-POSTRTG has the 6 masquerade rules");
  });
});
