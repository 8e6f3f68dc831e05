import { assertEquals } from "../tests/assert.ts";
import {
  DEFAULT_FOCUS,
  DUAL_STACK_FOCUS,
  LOCAL_REGISTRY,
  machineSkips,
  NETPOL_FOCUS,
  repoList,
  selectFocus,
  suiteRefs,
  summary,
} from "./e2e.ts";

Deno.test("e2e: every registry key of the override names the local repository", () => {
  const lines = repoList().trim().split("\n");
  assertEquals(lines.every((l) => l.endsWith(`: ${LOCAL_REGISTRY}`)), true);
  assertEquals(lines.includes(`promoterE2eRegistry: ${LOCAL_REGISTRY}`), true);
});

Deno.test("e2e: the newest of each suite image the list names, under the local repository only", () => {
  const refs = suiteRefs(
    [
      "flanctl.local/e2e/agnhost:2.55",
      "flanctl.local/e2e/agnhost:2.66.1",
      "flanctl.local/e2e/agnhost:2.6",
      "flanctl.local/e2e/glibc-dns-testing:2.1.1",
      "flanctl.local/e2e/nginx:1.28.0-2",
      "elsewhere.example/e2e/agnhost:9.9",
    ].join("\n"),
  );
  assertEquals([...refs.entries()], [
    ["agnhost", "flanctl.local/e2e/agnhost:2.66.1"],
    ["glibc-dns-testing", "flanctl.local/e2e/glibc-dns-testing:2.1.1"],
  ]);
});

Deno.test("e2e: the suite's own summary lines and failures, colours stripped", () => {
  const log = [
    "SSSS•S",
    "\x1b[31m[FAIL]\x1b[0m [sig-network] DNS should provide DNS for services [Conformance]",
    "Ran 30 of 3206 Specs in 812.3 seconds",
    "FAIL! -- 29 Passed | 1 Failed | 0 Pending | 3176 Skipped",
  ].join("\n");
  assertEquals(summary(log), [
    "[FAIL] [sig-network] DNS should provide DNS for services [Conformance]",
    "Ran 30 of 3206 Specs in 812.3 seconds",
    "FAIL! -- 29 Passed | 1 Failed | 0 Pending | 3176 Skipped",
  ]);
  assertEquals(
    new RegExp(DEFAULT_FOCUS).test(
      "[sig-network] Services should serve a basic endpoint from pods  [Conformance]",
    ),
    true,
  );
  assertEquals(new RegExp(DEFAULT_FOCUS).test("[sig-network] Netpol should deny ingress"), false);
  const ds = new RegExp(DUAL_STACK_FOCUS);
  assertEquals(
    ds.test("[sig-network] [Feature:IPv6DualStack] should create service with ipv6 cluster ip"),
    true,
  );
  assertEquals(
    ds.test("[sig-network] Services should serve a basic endpoint from pods  [Conformance]"),
    false,
  );
  assertEquals(
    new RegExp(NETPOL_FOCUS).test("[sig-network] Netpol NetworkPolicy between server and client"),
    true,
  );
});

Deno.test("e2e: SCTP tests are skipped by name only on a kernel without SCTP", () => {
  const without = "protocol  size sockets\nUDP 1 2\nTCP 1 2\n";
  const skips = machineSkips(without);
  assertEquals(skips.length, 2);
  const re = new RegExp(skips[0].skip);
  const netpol = new RegExp(skips[1].skip);
  assertEquals(
    netpol.test(
      "[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client " +
        "using SCTP should enforce policy based on Ports [Feature:NetworkPolicy]",
    ),
    true,
  );
  assertEquals(
    netpol.test(
      "[sig-network] Netpol NetworkPolicy between server and client should not mistakenly treat 'protocol: " +
        "SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP [Feature:NetworkPolicy]",
    ),
    false,
  );
  assertEquals(
    re.test(
      "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: sctp",
    ),
    true,
  );
  assertEquals(
    re.test(
      "[sig-network] Networking Granular Checks: Pods should function for node-pod communication: sctp",
    ),
    true,
  );
  assertEquals(
    re.test(
      "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: udp",
    ),
    false,
  );
  // The dual-stack selection's SCTP test too (a Service over the secondary family), nothing else of it.
  assertEquals(
    re.test(
      "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] " +
        "should function for pod-Service: sctp [Feature:SCTPConnectivity]",
    ),
    true,
  );
  assertEquals(
    re.test(
      "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] " +
        "should function for pod-Service: udp",
    ),
    false,
  );
  assertEquals(machineSkips(without + "SCTP 1 2\n"), []);
});

Deno.test("e2e: --netpol keeps its focus on a dual-stack lab; --focus wins over both", () => {
  assertEquals(selectFocus({ dual: true, netpol: true }), NETPOL_FOCUS);
  assertEquals(selectFocus({ dual: false, netpol: true }), NETPOL_FOCUS);
  assertEquals(selectFocus({ dual: true, netpol: false }), DUAL_STACK_FOCUS);
  assertEquals(selectFocus({ dual: false, netpol: false }), DEFAULT_FOCUS);
  assertEquals(selectFocus({ focus: "x", dual: true, netpol: true }), "x");
});
