import { Command } from "commander";
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../errors.ts";
import { addDaemonOptions, applyEnv, envName, parseBool, toDaemonOptions } from "./options.ts";

function parse(args: string[], env: Record<string, string> = {}) {
  const cmd = addDaemonOptions(new Command("daemon").exitOverride());
  cmd.parse(args, { from: "user" });
  applyEnv(cmd, env);
  return toDaemonOptions(cmd.opts());
}

Deno.test("daemon options: flanneld defaults", () => {
  const o = parse([]);
  assertEquals(o.subnetFile, "/run/flannel/subnet.env");
  assertEquals(o.subnetLeaseRenewMargin, 60);
  assertEquals(o.ipMasq, false);
  assertEquals(o.iptablesResync, 5);
  assertEquals(o.iptablesForwardRules, true);
  assertEquals(o.healthzIP, "0.0.0.0");
  assertEquals(o.healthzPort, 0);
  assertEquals(o.resyncInterval, 10);
  assertEquals(o.stateDir, "/var/lib/flanctl/state");
  assertEquals(o.iface, []);
  assertEquals(o.vxlanTxChecksumOffload, "auto");
});

Deno.test("daemon options: flags, repeatable --iface, booleans with values", () => {
  const o = parse([
    "--iface",
    "eth1",
    "--iface",
    "10.0.0.5",
    "--ip-masq",
    "--iptables-forward-rules=false",
    "--healthz-port",
    "8471",
    "--public-ip",
    "192.0.2.7",
    "--resync-interval",
    "3",
  ]);
  assertEquals(o.iface, ["eth1", "10.0.0.5"]);
  assertEquals(o.ipMasq, true);
  assertEquals(o.iptablesForwardRules, false);
  assertEquals(o.healthzPort, 8471);
  assertEquals(o.publicIP, "192.0.2.7");
  assertEquals(o.resyncInterval, 3);
  assertEquals(parse(["--vxlan-tx-checksum-offload"]).vxlanTxChecksumOffload, true);
  assertEquals(parse(["--vxlan-tx-checksum-offload=false"]).vxlanTxChecksumOffload, false);
  assertEquals(parse(["--vxlan-tx-checksum-offload=auto"]).vxlanTxChecksumOffload, "auto");
  assertThrows(
    () => parse(["--vxlan-tx-checksum-offload=sometimes"]),
    UsageError,
    "--vxlan-tx-checksum-offload",
  );
});

Deno.test("daemon options: FLANNELD_* env, command line wins", () => {
  const env = {
    FLANNELD_IFACE: "eth1,eth2",
    FLANNELD_IP_MASQ: "true",
    FLANNELD_IPTABLES_FORWARD_RULES: "false",
    FLANNELD_HEALTHZ_PORT: "9000",
    FLANNELD_SUBNET_FILE: "/tmp/x.env",
  };
  const o = parse(["--healthz-port", "9100"], env);
  assertEquals(o.iface, ["eth1", "eth2"]);
  assertEquals(o.ipMasq, true);
  assertEquals(o.iptablesForwardRules, false);
  assertEquals(o.healthzPort, 9100);
  assertEquals(o.subnetFile, "/tmp/x.env");
  assertEquals(parse([], { FLANNELD_VXLAN_TX_CHECKSUM_OFFLOAD: "true" }).vxlanTxChecksumOffload, true);
  assertThrows(() => parse([], { FLANNELD_HEALTHZ_PORT: "x" }), UsageError, "--healthz-port");
  assertThrows(() => parse([], { FLANNELD_IP_MASQ: "maybe" }), UsageError, "--ip-masq");
});

Deno.test("daemon options: envName and parseBool", () => {
  assertEquals(envName("--iface-can-reach"), "FLANNELD_IFACE_CAN_REACH");
  assertEquals(parseBool("FALSE", "--x"), false);
  assertEquals(parseBool("1", "--x"), true);
  assertThrows(() => toDaemonOptions({ healthzIp: "nope" }), UsageError, "--healthz-ip");
});
