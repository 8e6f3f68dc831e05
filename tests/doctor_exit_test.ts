/**
 * `flanctl doctor` exit codes and degraded modes: missing netns and unreachable stores are "could not
 * check" (3); bad flags are usage errors (2); without any store the node is checked from kernel state
 * alone, lease-dependent checks are unknown with a hint and do not change the exit code.
 * @module
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, run, sh, TEST_PREFIX } from "./netns.ts";
import { doctorArgs, findings, PEER_MAC, withDoctorNode } from "./doctor_fixture.ts";
import type { CheckId, FindingId } from "../lib/doctor/mod.ts";

needsRoot.test("doctor: exit 3 for a missing netns or an unreachable store, 2 for bad flags", async () => {
  await withDoctorNode(async (n) => {
    const missing = `${TEST_PREFIX}doesnotexist0`;
    const gone = await flanctl(["doctor", "--netns", missing, "-o", "json"]);
    assertEquals(gone.code, 3, gone.stderr);
    const doc = JSON.parse(gone.stdout);
    assertEquals(doc.summary.status, "UNKNOWN");
    assertStringIncludes(doc.checks[0].detail, `network namespace '${missing}' not found`);

    const missingDir = await flanctl([...doctorArgs(n, "-o", "json"), "--store-dir", `${n.dir}/nope`]);
    assertEquals(missingDir.code, 3, missingDir.stdout);
    assertStringIncludes(missingDir.stdout, `no such directory`);

    // etcd on a port nobody listens on, dialled from inside the node namespace (its own loopback).
    const etcd = await flanctl(
      ["doctor", "--subnet-file", n.subnetFile, "--etcd-endpoints", "http://127.0.0.1:1", "-o", "json"],
      { ns: n.node },
    );
    assertEquals(etcd.code, 3, etcd.stdout + etcd.stderr);
    const e = JSON.parse(etcd.stdout);
    assertEquals(e.summary.status, "UNKNOWN");
    assertStringIncludes(
      e.checks.find((c: { id: FindingId }) => c.id === "doctor").detail,
      "store unreachable",
    );

    const badOut = await flanctl(doctorArgs(n, "-o", "yaml"));
    assertEquals(badOut.code, 2);
    assertStringIncludes(badOut.stderr, "-o/--output: 'yaml' is not an output format; use table or json");
    const badSkip = await flanctl(doctorArgs(n, "--skip", "nonsense"));
    assertEquals(badSkip.code, 2);
    assertStringIncludes(badSkip.stderr, "--skip: unknown check id 'nonsense'");
  });
});

needsRoot.test("doctor: without a store, peers come from kernel state and lease checks are unknown", async () => {
  await withDoctorNode(async (n) => {
    // No store flags and no default store: run inside the node namespace (as `lab exec` does) with an
    // empty tmpfs over /var/lib in a private mount namespace, so /var/lib/flanctl does not exist.
    // neigh-gc (the host-wide neighbour table, filled by the tests beside this one) has its own tests.
    const args = doctorArgs(n, "-o", "json", "--skip", "neigh-gc").filter((a, i, all) =>
      a !== "--netns" && all[i - 1] !== "--netns"
    )
      .filter((a, i, all) => a !== "--store-dir" && all[i - 1] !== "--store-dir");
    const noStore = () =>
      run([
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount -t tmpfs tmpfs /var/lib && exec ip netns exec "$0" "$@"',
        n!.node,
        ...flanctlCmd(...args),
      ]);
    const r = await noStore();
    const doc = JSON.parse(r.stdout);
    const by = (id: CheckId) => doc.checks.filter((c: { id: FindingId }) => c.id === id);
    assertEquals(r.code, 0, r.stdout + r.stderr);
    assertEquals(doc.summary.critical + doc.summary.warning, 0, r.stdout);
    assertEquals(by("store")[0].severity, "unknown");
    assertStringIncludes(by("store")[0].detail, "pass --store-dir DIR or --etcd-endpoints URL");
    assertEquals(by("peer-routes")[0].severity, "unknown");
    assertStringIncludes(by("peer-routes")[0].detail, "1 onlink route(s) on flannel.1");
    assertEquals(by("vtep-mac")[0].severity, "unknown");
    assertEquals(by("flannel-device")[0].severity, "ok");
    assertEquals(
      by("ip-forward")[0].detail,
      "net.ipv4.ip_forward = 1; forwarding on flannel.1, cni0, eth0",
    );

    // A kernel-only inconsistency is still found: the peer's ARP entry has no FDB entry.
    await sh("bridge", "-n", n.node, "fdb", "del", PEER_MAC, "dev", "flannel.1", "dst", "192.0.2.11");
    const r2 = await noStore();
    const doc2 = JSON.parse(r2.stdout);
    assertEquals(r2.code, 2, r2.stdout);
    const fdb = doc2.checks.find((c: { id: FindingId }) => c.id === "peer-fdb");
    assertEquals(fdb.severity, "critical");
    assertStringIncludes(fdb.detail, `ARP 10.244.2.0 → ${PEER_MAC} has no FDB entry on flannel.1`);
    assertEquals(
      findings({ ...doc2, code: r2.code, stdout: "", stderr: "" }, "peer-fdb").length,
      1,
    );
  });
});
