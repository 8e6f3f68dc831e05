/**
 * `flanctl doctor` finds iptables, file and lease faults induced in a fixture node: FORWARD policy,
 * masquerade chain, mixed iptables back-ends, blocked VXLAN port, subnet.env, cni0 address, CNI config
 * and binaries, leaked host-local IPs, stale CNI caches, leaked pod namespaces, VTEP MAC, device down,
 * duplicate/expiring leases, missing peer routes, overlapping host routes.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { nsSh, run as runCmd, sh } from "./netns.ts";
import {
  expectFinding,
  findings,
  NODE_IP,
  NODE_MAC,
  PEER_IP,
  PEER_MAC,
  runDoctorJson,
  withDoctorNode,
} from "./doctor_fixture.ts";
import { FileStore } from "../lib/store/file/file.ts";
import { IPNet } from "../lib/base/cidr.ts";

/** The tails of flannel's FORWARD and POSTROUTING jump rules (the comments keep their spaces). */
const FWD_JUMP = ["-m", "comment", "--comment", "flanneld forward", "-j", "FLANNEL-FWD"];
const MASQ_JUMP = ["-m", "comment", "--comment", "flanneld masq", "-j", "FLANNEL-POSTRTG"];

needsRoot.test("doctor: iptables faults (FORWARD policy, masquerade, mixed back-ends, VXLAN port blocked)", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await nsSh(N, "iptables", "-D", "FORWARD", ...FWD_JUMP);
    await nsSh(N, "iptables", "-t", "nat", "-D", "POSTROUTING", ...MASQ_JUMP);
    await nsSh(N, "iptables", "-A", "INPUT", "-p", "udp", "--dport", "8472", "-j", "DROP");
    await nsSh(N, "iptables-legacy", "-A", "OUTPUT", "-j", "ACCEPT");
    await sh("ip", "-n", N, ..."link add vx2 type vxlan id 2 dstport 8472 nolearning".split(" "));
    const run = await runDoctorJson(n);
    assertEquals(run.code, 2);
    const fwd = expectFinding(
      run,
      "forward-policy",
      "critical",
      "dropped at FORWARD by iptables-nft filter FORWARD policy DROP",
    );
    assertStringIncludes(fwd.detail, "iptables-nft FORWARD has no jump to FLANNEL-FWD");
    assertStringIncludes(
      fwd.fix.join("\n"),
      `ip netns exec ${N} iptables -I FORWARD 1 -s 10.244.0.0/16 -m comment --comment 'flannel forward' -j ACCEPT`,
    );
    const masq = expectFinding(
      run,
      "masq-rules",
      "critical",
      "FLANNEL_IPMASQ=true but POSTROUTING has no jump to FLANNEL-POSTRTG",
    );
    assertEquals(masq.fix, [
      `ip netns exec ${N} iptables -t nat -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`,
    ]);
    expectFinding(run, "iptables-backend", "warning", "iptables-legacy: 1 rule(s), iptables-nft:");
    const port = expectFinding(
      run,
      "vxlan-port",
      "critical",
      "VXLAN from 192.0.2.11 to UDP 8472: dropped at INPUT by iptables-nft filter INPUT rule 1 DROP: " +
        "-A INPUT -p udp -m udp --dport 8472 -j DROP",
    );
    assertStringIncludes(port.detail, "other VXLAN device(s) on UDP 8472: vx2 (VNI 2)");

    // One masquerade rule missing (chain and jump present): warning naming the rule.
    await nsSh(N, "iptables", "-t", "nat", "-A", "POSTROUTING", ...MASQ_JUMP);
    await nsSh(
      N,
      ..."iptables -t nat -D FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment".split(" "),
      ...["--comment", "flanneld masq", "-j", "MASQUERADE", "--random-fully"],
    );
    const run2 = await runDoctorJson(n, "--skip", "forward-policy,vxlan-port,iptables-backend");
    expectFinding(
      run2,
      "masq-rules",
      "warning",
      "FLANNEL-POSTRTG lacks 1 rule(s): -A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4",
    );
    assertEquals(run2.code, 1);
  });
});

needsRoot.test("doctor: file faults (subnet.env, cni0 address, CNI config/binaries, leaked IPs, caches, netns)", async () => {
  await withDoctorNode(async (n, fx) => {
    const N = n.node;
    await Deno.writeTextFile(
      n.subnetFile,
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\n",
    );
    await sh("ip", "-n", N, "addr", "add", "10.244.7.1/24", "dev", "cni0");
    await Deno.writeTextFile(`${n.confDir}/00-broken.conf`, "{ not json");
    await Deno.remove(`${n.binDir}/bridge`);
    await Deno.writeTextFile(`${n.dataDir}/cbr0/10.244.1.77`, "deadbeef00000077\r\neth0");
    await Deno.writeTextFile(`${n.dataDir}/cbr0/10.244.1.78`, "");
    await Deno.writeTextFile(`${n.flannelDir}/deadbeef00000077`, "{}");
    await Deno.writeTextFile(`${n.resultsDir}/cbr0-deadbeef00000077-eth0`, "{}");
    const leak = `${n.prefix}leak`;
    await sh("ip", "netns", "add", leak);
    fx.names.push(leak);

    const run = await runDoctorJson(n);
    assertEquals(run.code, 2, run.stdout);
    expectFinding(
      run,
      "subnet-env",
      "critical",
      `${n.subnetFile} is malformed: ${n.subnetFile} is missing FLANNEL_IPMASQ`,
    );
    // cni0-address needs FLANNEL_SUBNET: with subnet.env unreadable it cannot judge.
    assertEquals(findings(run, "cni0-address")[0].severity, "unknown");
    const conf = expectFinding(run, "cni-config", "critical", `${n.confDir}/00-broken.conf:`);
    assertStringIncludes(conf.fix[0], `python3 -m json.tool ${n.confDir}/00-broken.conf`);
    expectFinding(run, "cni-binaries", "critical", `missing in ${n.binDir}: bridge`);
    const ips = expectFinding(
      run,
      "hostlocal-ips",
      "warning",
      "1 leaked IP(s): 10.244.1.77 → container deadbeef00000077/eth0",
    );
    assertStringIncludes(ips.detail, `1 empty IP file(s): ${n.dataDir}/cbr0/10.244.1.78`);
    assertEquals(ips.fix.length, 1, ips.fix.join("\n"));
    assertStringIncludes(ips.fix[0], `find ${n.dataDir}/cbr0 -maxdepth 1 -type f`);
    const cache = expectFinding(run, "cni-cache", "warning", "2 entr(ies)");
    assertStringIncludes(cache.detail, `${n.resultsDir}/cbr0-deadbeef00000077-eth0`);
    assertStringIncludes(cache.detail, `${n.flannelDir}/deadbeef00000077`);
    expectFinding(run, "pod-netns", "warning", `1 pod namespace(s) with no veth on cni0: ${leak}`);

    // subnet.env readable again: cni0's extra address is flagged; a foreign first config is a warning.
    await Deno.writeTextFile(
      n.subnetFile,
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
    );
    await Deno.writeTextFile(
      `${n.confDir}/00-broken.conf`,
      JSON.stringify({ cniVersion: "0.3.1", name: "x", type: "calico" }),
    );
    const run2 = await runDoctorJson(n, "--skip", "hostlocal-ips,cni-cache,pod-netns");
    expectFinding(
      run2,
      "cni0-address",
      "critical",
      "cni0 has 10.244.1.1/24, 10.244.7.1/24, FLANNEL_SUBNET is 10.244.1.1/24",
    );
    // The foreign config sorting first is the root cause (critical); its missing binary only a consequence,
    // and flanctl is never proposed under the foreign plugin's name.
    const foreign = expectFinding(
      run2,
      "cni-config",
      "critical",
      `the runtime uses ${n.confDir}/00-broken.conf (plugins: calico), not a flannel config: it sorts first`,
    );
    assertEquals(foreign.fix, [
      `mkdir -p /root/cni-net.d.bak && mv ${n.confDir}/00-broken.conf /root/cni-net.d.bak/`,
    ]);
    const bins = expectFinding(run2, "cni-binaries", "warning", `missing in ${n.binDir}: calico`);
    assertStringIncludes(bins.detail, "consequence of cni-config");
    assert(!bins.fix.join("\n").includes("ln -sf"), bins.fix.join("\n"));
    expectFinding(run2, "subnet-env", "ok", "matches the lease");
    assertEquals(run2.code, 2);

    // Unsupported cniVersion.
    await Deno.writeTextFile(
      `${n.confDir}/00-broken.conf`,
      JSON.stringify({ cniVersion: "9.9.9", name: "x", type: "flannel" }),
    );
    const run3 = await runDoctorJson(n, "--skip", "cni0-address");
    expectFinding(run3, "cni-config", "critical", `cniVersion "9.9.9" is not supported`);
    // FLANNEL_SUBNET that is not our lease.
    await Deno.writeTextFile(
      n.subnetFile,
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
    );
    const run4 = await runDoctorJson(n);
    expectFinding(
      run4,
      "subnet-env",
      "critical",
      "FLANNEL_SUBNET 10.244.3.1/24 is not our lease 10.244.1.0/24",
    );

    // The pool nearly fills up: 10.244.1.3 .. 10.244.1.230 leaked, plus the pod's 10.244.1.2: 229 of 253.
    await Deno.writeTextFile(
      n.subnetFile,
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
    );
    for (let i = 3; i <= 230; i++) {
      await Deno.writeTextFile(
        `${n.dataDir}/cbr0/10.244.1.${i}`,
        `f${i.toString(16).padStart(15, "0")}\r\neth0`,
      );
    }
    const run5 = await runDoctorJson(n);
    const full = expectFinding(
      run5,
      "hostlocal-ips",
      "warning",
      "228 leaked IP(s): 10.244.1.3 → container f000000000000003/eth0, 10.244.1.4 → container",
    );
    assertStringIncludes(full.detail, "10.244.1.12 → container f00000000000000c/eth0, and 218 more; ");
    assertStringIncludes(full.detail, "pool 10.244.1.0/24 229/253 used (91%)");
    assertEquals(full.fix.length, 1, "one command releases them all");

    // Full (253 of 253): every new pod fails, so critical; the one fix, pasted, frees exactly the leaked IPs.
    for (let i = 231; i <= 254; i++) {
      await Deno.writeTextFile(
        `${n.dataDir}/cbr0/10.244.1.${i}`,
        `f${i.toString(16).padStart(15, "0")}\neth0`,
      );
    }
    const run6 = await runDoctorJson(n);
    const all = expectFinding(run6, "hostlocal-ips", "critical", "252 leaked IP(s)");
    assertStringIncludes(all.detail, "pool 10.244.1.0/24 253/253 used (100%)");
    assertStringIncludes(all.why ?? "", "no IP addresses available in range set");
    assertEquals(all.fix.length, 1);
    await Deno.writeTextFile(`${n.dataDir}/cbr0/last_reserved_ip.0`, "10.244.1.254");
    const pasted = await runCmd(["sh", "-c", all.fix[0]]);
    assertEquals(pasted.code, 0, pasted.stderr);
    const left = [...Deno.readDirSync(`${n.dataDir}/cbr0`)].map((e) => e.name).sort();
    assertEquals(left.filter((f) => f.startsWith("10.")), ["10.244.1.2"], "only the live pod's IP stays");
    assert(left.includes("last_reserved_ip.0"), left.join(" "));
    expectFinding(await runDoctorJson(n), "hostlocal-ips", "ok", "1 IP file(s)");
  });
});

needsRoot.test("doctor: lease and device faults (VTEP MAC, device down, duplicates, expiry, peer route, overlap)", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    // Our lease is re-acquired with a 30 min TTL (renewals failing), a second lease shares the peer's IP.
    const short = new FileStore({ dir: n.storeDir, ttlMs: 30 * 60_000 });
    try {
      await short.revokeLease(IPNet.parse("10.244.1.0/24"));
      await short.acquireLease(
        { PublicIP: NODE_IP, BackendType: "vxlan", BackendData: { VNI: 1, VtepMAC: NODE_MAC } },
        { previousSubnet: IPNet.parse("10.244.1.0/24") },
      );
      // A third node that joined while this node's daemon was not watching: no entries for it here.
      await short.acquireLease(
        {
          PublicIP: "192.0.2.12",
          BackendType: "vxlan",
          BackendData: { VNI: 1, VtepMAC: "0a:00:00:00:03:03" },
        },
        { previousSubnet: IPNet.parse("10.244.3.0/24") },
      );
      await short.reserve(IPNet.parse("10.244.4.0/24"), "192.0.2.11");
    } finally {
      await short.close();
    }
    await sh("ip", "-n", N, "link", "set", "flannel.1", "down");
    await sh("ip", "-n", N, "link", "set", "flannel.1", "address", "0a:00:00:00:01:99");
    await sh("ip", "-n", N, "link", "add", "hostnet0", "type", "bridge");
    await sh("ip", "-n", N, "addr", "add", "10.244.200.1/24", "dev", "hostnet0");
    await sh("ip", "-n", N, "link", "set", "hostnet0", "up");

    const run = await runDoctorJson(n);
    assertEquals(run.code, 2, run.stdout);
    expectFinding(run, "flannel-device", "critical", "flannel.1 is down");
    const mac = expectFinding(
      run,
      "vtep-mac",
      "critical",
      `flannel.1 MAC 0a:00:00:00:01:99 != VtepMAC ${NODE_MAC} in lease 10.244.1.0/24`,
    );
    assertEquals(mac.fix, [`ip netns exec ${N} ip link set flannel.1 address ${NODE_MAC}`]);
    expectFinding(
      run,
      "lease-unique",
      "warning",
      "PublicIP 192.0.2.11 holds 10.244.2.0/24, 10.244.4.0/24",
    );
    expectFinding(run, "lease-expiry", "warning", "lease 10.244.1.0/24 expires");
    const route = expectFinding(
      run,
      "peer-routes",
      "critical",
      "no route to 10.244.3.0/24 (expected via 10.244.3.0 dev flannel.1 onlink)",
    );
    // (flannel.1 is down, so the kernel also dropped the route to 10.244.2.0/24.)
    assertStringIncludes(
      route.fix.join("\n"),
      `ip netns exec ${N} ip route replace 10.244.3.0/24 via 10.244.3.0 dev flannel.1 onlink`,
    );
    expectFinding(run, "pod-network-routes", "critical", "10.244.200.0/24 dev hostnet0");
    expectFinding(run, "public-ip", "ok", "PublicIP 192.0.2.10 on eth0");

    // The lease's PublicIP leaves the node (as behind NAT). TX checksum offload on is judged by its symptom
    // (bad UDP checksums arriving), not by NAT: none arrive, so it is ok.
    await sh("ip", "-n", N, "addr", "del", `${NODE_IP}/24`, "dev", "eth0");
    await sh("ip", "netns", "exec", N, "ethtool", "-K", "flannel.1", "tx-checksum-ip-generic", "on");
    const run2 = await runDoctorJson(n, "--skip", "pod-network-routes");
    expectFinding(
      run2,
      "vxlan-csum-offload",
      "ok",
      "flannel.1 tx-checksum-ip-generic: on; Udp: InCsumErrors steady",
    );
    expectFinding(
      run2,
      "public-ip",
      "critical",
      `lease PublicIP ${NODE_IP} is not assigned to any interface here`,
    );

    // A correct NAT set-up (--public-ip / public-ip-overwrite): the lease announces the NAT's address, the
    // device sends from the node's own. public-ip calls it NAT: not critical.
    await sh("ip", "-n", N, "addr", "add", `${NODE_IP}/24`, "dev", "eth0");
    const natLease = {
      PublicIP: "198.51.100.7",
      BackendType: "vxlan",
      BackendData: { VNI: 1, VtepMAC: NODE_MAC },
    };
    await Deno.writeTextFile(
      `${n.storeDir}/subnets/10.244.1.0-24`,
      JSON.stringify({ lease: natLease, seq: 98 }),
    );
    const nat = await runDoctorJson(n, "--skip", "pod-network-routes");
    expectFinding(nat, "public-ip", "ok", "PublicIP 198.51.100.7 (behind NAT: not an address of this node)");

    // The checksum-offload bug's symptom: UDP packets with bad checksums arrive (a peer sends them while
    // doctor watches Udp: InCsumErrors) — a warning, with the fix for every node.
    const sender = new Deno.Command("ip", {
      args: ["netns", "exec", n.peer, "python3", "-c", BAD_UDP, PEER_IP, NODE_IP, "120"],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    try {
      const bad = await runDoctorJson(n, "--skip", "pod-network-routes");
      const csum = expectFinding(bad, "vxlan-csum-offload", "warning", "Udp: InCsumErrors grew by");
      assertEquals(csum.fix, [
        `ip netns exec ${N} ethtool -K flannel.1 tx-checksum-ip-generic off  # on every node`,
      ]);
    } finally {
      await sender.output();
    }

    // Another node announces our PublicIP (both took the address of a NAT interface every VM has): critical,
    // with the cause, and the fix names this node's other interface.
    const ours = { PublicIP: NODE_IP, BackendType: "vxlan", BackendData: { VNI: 1, VtepMAC: NODE_MAC } };
    await Deno.writeTextFile(
      `${n.storeDir}/subnets/10.244.1.0-24`,
      JSON.stringify({ lease: ours, seq: 100 }),
    );
    const twin = {
      PublicIP: NODE_IP,
      BackendType: "vxlan",
      BackendData: { VNI: 1, VtepMAC: "0a:00:00:00:06:06" },
    };
    await Deno.writeTextFile(
      `${n.storeDir}/subnets/10.244.6.0-24`,
      JSON.stringify({ lease: twin, seq: 101 }),
    );
    await sh("ip", "-n", N, "link", "add", "eth1", "type", "veth", "peer", "name", "eth1p");
    await sh("ip", "-n", N, "addr", "add", "192.168.56.11/24", "dev", "eth1");
    const twins = await runDoctorJson(n, "--skip", "pod-network-routes");
    const dup = expectFinding(
      twins,
      "lease-unique",
      "critical",
      `2 nodes share PublicIP ${NODE_IP}: 10.244.1.0/24, 10.244.6.0/24`,
    );
    assertStringIncludes(dup.why ?? "", "a NAT interface every VM has");
    assertEquals(
      dup.fix[0],
      "restart the daemon with --iface=eth1 (192.168.56.11, the address peers reach this node on)",
    );
    await Deno.remove(`${n.storeDir}/subnets/10.244.6.0-24`);
    await sh("ip", "-n", N, "link", "del", "eth1");
    await sh("ip", "-n", N, "addr", "del", `${NODE_IP}/24`, "dev", "eth0");

    // Our lease disappears from the store (revoked by hand): this node is unknown to its peers.
    const st = new FileStore({ dir: n.storeDir });
    try {
      await st.revokeLease(IPNet.parse("10.244.1.0/24"));
    } finally {
      await st.close();
    }
    const run3 = await runDoctorJson(n, "--skip", "pod-network-routes");
    expectFinding(
      run3,
      "lease-own",
      "critical",
      "no lease for 10.244.1.0/24 and none with a local PublicIP",
    );
    expectFinding(run3, "subnet-env", "critical", "no lease in the store for FLANNEL_SUBNET 10.244.1.0/24");

    // Our lease is back but expired (the daemon stopped renewing); a lease file is garbage. The doctor
    // sees both: it reads the store without the store's own clean-up.
    const lease = { PublicIP: NODE_IP, BackendType: "vxlan", BackendData: { VNI: 1, VtepMAC: NODE_MAC } };
    await Deno.writeTextFile(
      `${n.storeDir}/subnets/10.244.1.0-24`,
      JSON.stringify({ lease, expiration: "2020-01-01T00:00:00.000Z", seq: 99 }),
    );
    await Deno.writeTextFile(`${n.storeDir}/subnets/10.244.5.0-24`, "{broken");
    const run4 = await runDoctorJson(n, "--skip", "pod-network-routes");
    expectFinding(run4, "lease-expiry", "critical", "lease 10.244.1.0/24 expires 2020-01-01T00:00:00.000Z");
    expectFinding(run4, "lease-own", "critical", "lease 10.244.1.0/24 expired at 2020-01-01T00:00:00.000Z");
    expectFinding(
      run4,
      "store",
      "warning",
      `1 malformed lease entr(ies): ${n.storeDir}/subnets/10.244.5.0-24`,
    );
    // Read-only: the expired and the malformed file are still there.
    await Deno.stat(`${n.storeDir}/subnets/10.244.1.0-24`);
    await Deno.stat(`${n.storeDir}/subnets/10.244.5.0-24`);
  });
});

needsRoot.test("doctor: DirectRouting peers (route via PublicIP, no ARP/FDB) are consistent", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    await Deno.writeTextFile(
      `${n.storeDir}/config`,
      JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "vxlan", DirectRouting: true } }),
    );
    // The peer is on our L2 segment: the daemon routes to it directly, without encapsulation.
    await sh("ip", "-n", N, "neigh", "del", "10.244.2.0", "dev", "flannel.1");
    await sh("bridge", "-n", N, "fdb", "del", PEER_MAC, "dev", "flannel.1", "dst", "192.0.2.11");
    await sh("ip", "-n", N, "route", "replace", "10.244.2.0/24", "via", "192.0.2.11", "dev", "eth0");
    // neigh-gc (the host-wide neighbour table, filled by the tests beside this one) has its own tests.
    const run = await runDoctorJson(n, "--skip", "neigh-gc");
    for (const id of ["peer-routes", "peer-arp", "peer-fdb", "peer-entries"] as const) {
      assertEquals(findings(run, id)[0].severity, "ok", `${id}: ${findings(run, id)[0].detail}`);
    }
    assertEquals(run.code, 0, run.stdout);
    // The direct route pointing at another address is wrong.
    await sh("ip", "-n", N, "route", "replace", "10.244.2.0/24", "via", "192.0.2.77", "dev", "eth0");
    const bad = await runDoctorJson(n);
    expectFinding(
      bad,
      "peer-routes",
      "critical",
      "10.244.2.0/24 routed via 192.0.2.77 dev eth0, expected via 192.0.2.11 (DirectRouting) or via 10.244.2.0 " +
        "dev flannel.1 onlink",
    );
  });
});

needsRoot.test("doctor: host-gw peers beyond this node's L2 segment: no route fix, host-gw needs L2", async () => {
  await withDoctorNode(async (n) => {
    const N = n.node;
    const hostgw = (ip: string) =>
      JSON.stringify({ lease: { PublicIP: ip, BackendType: "host-gw" }, seq: 200 });
    // One peer on our segment (192.0.2.0/24 on eth0) whose route is missing, one behind a router.
    await Deno.writeTextFile(`${n.storeDir}/subnets/10.244.7.0-24`, hostgw("192.0.2.12"));
    await Deno.writeTextFile(`${n.storeDir}/subnets/10.244.8.0-24`, hostgw("203.0.113.9"));
    const run = await runDoctorJson(n);
    const l2 = run.checks.filter((c) => c.id === "peer-routes");
    assertEquals(l2.map((c) => c.severity), ["critical", "critical"], run.stdout);
    assertEquals(run.checks[0].id, "peer-routes", "host-gw beyond L2 is the root cause, first");
    assertStringIncludes(
      l2[0].detail,
      "host-gw needs every node on one L2 segment: 10.244.8.0/24: peer PublicIP 203.0.113.9 is not on a network",
    );
    assert(!l2[0].fix.some((f) => f.includes("ip route")), l2[0].fix.join("\n"));
    assertStringIncludes(l2[0].fix[0], '"Type": "vxlan"');
    // The adjacent peer's fix is a route via its PublicIP, and it works when pasted.
    assertEquals(l2[1].fix, [`ip netns exec ${N} ip route replace 10.244.7.0/24 via 192.0.2.12`]);
    await sh("sh", "-c", l2[1].fix[0]);
    const after = await runDoctorJson(n);
    assertEquals(after.checks.filter((c) => c.id === "peer-routes").length, 1, after.stdout);
  });
});

/** Sends argv[3] UDP datagrams with a wrong checksum from argv[1] to argv[2]:8472, 50 ms apart. */
const BAD_UDP = String.raw`
import socket, struct, sys, time
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
payload = b"x" * 64
udp = struct.pack("!HHHH", 40000, 8472, 8 + len(payload), 0x1234) + payload
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(n):
    s.sendto(ip + udp, (dst, 0))
    time.sleep(0.05)
`;
