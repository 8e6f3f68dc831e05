import { assert, assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { ALL_DAEMON_FLAGS, daemonHelp, envName, parseDaemonArgs, toDaemonOptions } from "./options.ts";
import { flagEnv } from "../base/goflag.ts";

const parse = (args: string[], env: Record<string, string> = {}) => parseDaemonArgs(args, env).daemon;
const store = (args: string[], env: Record<string, string> = {}) => parseDaemonArgs(args, env).store;

Deno.test("daemon options: flanneld defaults", () => {
  const o = parse([]);
  assertEquals(o.subnetFile, "/run/flannel/subnet.env");
  assertEquals(o.subnetLeaseRenewMargin, 60);
  assertEquals(o.ipMasq, false);
  assertEquals(o.ipMasqFullyRandomDisable, false);
  assertEquals(o.iptablesResync, 5);
  assertEquals(o.iptablesForwardRules, true);
  assertEquals(o.ipBlackholeRoute, false);
  assertEquals(o.setNodeNetworkUnavailable, true);
  assertEquals(o.healthzIP, "0.0.0.0");
  assertEquals(o.healthzPort, 0);
  assertEquals(o.resyncInterval, 10);
  assertEquals(o.stateDir, "/var/lib/flanctl/state");
  assertEquals(o.iface, []);
  assertEquals(o.publicIPv6, null);
  assertEquals(o.logLevel, "info");
  assertEquals(o.vxlanTxChecksumOffload, "auto");
  const s = store([]);
  assertEquals([s.etcdPrefix, s.kubeAnnotationPrefix, s.netConfigPath, s.kubeSubnetMgr, s.storeDir], [
    "/coreos.com/network",
    "flannel.alpha.coreos.com",
    "/etc/kube-flannel/net-conf.json",
    false,
    undefined,
  ]);
});

Deno.test("daemon options: Go flag syntax (single dash, =value, bool=false, repeatable)", () => {
  const o = parse([
    "-iface",
    "eth1",
    "--iface=10.0.0.5",
    "-ip-masq",
    "--iptables-forward-rules=false",
    "-healthz-port=8471",
    "--public-ip",
    "192.0.2.7",
    "--resync-interval",
    "3",
    "--ip-blackhole-route=true",
    "-set-node-network-unavailable=false",
    "--ip-masq-fully-random-disable",
    "-v=2",
  ]);
  assertEquals(o.iface, ["eth1", "10.0.0.5"]);
  assertEquals(o.ipMasq, true);
  assertEquals(o.iptablesForwardRules, false);
  assertEquals(o.healthzPort, 8471);
  assertEquals(o.publicIP, "192.0.2.7");
  assertEquals(o.resyncInterval, 3);
  assertEquals(o.ipBlackholeRoute, true);
  assertEquals(o.setNodeNetworkUnavailable, false);
  assertEquals(o.ipMasqFullyRandomDisable, true);
  assertEquals(o.logLevel, "debug");
  // Go's ParseBool spellings.
  for (const [t, want] of [["T", true], ["0", false], ["FALSE", false], ["True", true]] as const) {
    assertEquals(parse([`--ip-masq=${t}`]).ipMasq, want, t);
  }
  // -v 0 stays info; an explicit --log-level wins over -v.
  assertEquals(parse(["-v", "0"]).logLevel, "info");
  assertEquals(parse(["-v", "3", "--log-level", "warn"]).logLevel, "warn");
  // glog's other flags are accepted.
  parse(["--vmodule=foo=2,bar=1", "--log_backtrace_at=main.go:10"]);
  assertEquals(parse(["--vxlan-tx-checksum-offload=true"]).vxlanTxChecksumOffload, true);
  assertEquals(parse(["--vxlan-tx-checksum-offload", "false"]).vxlanTxChecksumOffload, false);
  assertEquals(parse(["--vxlan-tx-checksum-offload=auto"]).vxlanTxChecksumOffload, "auto");
  // Parsing stops at "--".
  assertEquals(parse(["--ip-masq", "--"]).ipMasq, true);
});

Deno.test("daemon options: values are never split on commas", () => {
  const o = parse(["--iface-regex", "^eth[0-9]{1,2}$", "--iface-regex=^en.*,x$"]);
  assertEquals(o.ifaceRegex, ["^eth[0-9]{1,2}$", "^en.*,x$"]);
  assertEquals(parse([], { FLANNELD_IFACE: "eth1,eth2" }).iface, ["eth1,eth2"]);
  // --etcd-endpoints is one string (the store splits it, as flanneld does).
  assertEquals(
    store(["--etcd-endpoints=http://a:2379,http://b:2379"]).etcdEndpoints,
    "http://a:2379,http://b:2379",
  );
});

Deno.test("daemon options: every flanneld flag is accepted", () => {
  const flanneld = [
    "etcd-endpoints",
    "etcd-prefix",
    "etcd-keyfile",
    "etcd-certfile",
    "etcd-cafile",
    "etcd-username",
    "etcd-password",
    "iface",
    "iface-regex",
    "iface-can-reach",
    "subnet-file",
    "public-ip",
    "public-ipv6",
    "subnet-lease-renew-margin",
    "ip-masq",
    "ip-masq-fully-random-disable",
    "kube-subnet-mgr",
    "kube-api-url",
    "kube-annotation-prefix",
    "kubeconfig-file",
    "version",
    "healthz-ip",
    "healthz-port",
    "iptables-resync",
    "iptables-forward-rules",
    "ip-blackhole-route",
    "net-config-path",
    "set-node-network-unavailable",
    "v",
    "vmodule",
    "log_backtrace_at",
  ];
  const names = new Set(ALL_DAEMON_FLAGS.map((s) => s.name));
  for (const f of flanneld) assert(names.has(f), `missing flag ${f}`);
  assertEquals(ALL_DAEMON_FLAGS.length, names.size, "each flag once");
  assert(names.has("etcd-password-file"));
});

Deno.test("daemon options: FLANNELD_* env from the table, command line wins", () => {
  const env = {
    FLANNELD_IFACE: "eth1",
    FLANNELD_IP_MASQ: "true",
    FLANNELD_IPTABLES_FORWARD_RULES: "false",
    FLANNELD_HEALTHZ_PORT: "9000",
    FLANNELD_SUBNET_FILE: "/tmp/x.env",
    FLANNELD_V: "1",
    FLANNELD_PUBLIC_IPV6: "2001:db8::7",
    FLANNELD_IP_BLACKHOLE_ROUTE: "1",
    FLANNELD_IFACE_REGEX: "",
  };
  const o = parse(["--healthz-port", "9100"], env);
  assertEquals(o.iface, ["eth1"]);
  assertEquals(o.ifaceRegex, [], "an empty env value is ignored, as flanneld's flagutil");
  assertEquals(o.ipMasq, true);
  assertEquals(o.iptablesForwardRules, false);
  assertEquals(o.healthzPort, 9100);
  assertEquals(o.subnetFile, "/tmp/x.env");
  assertEquals(o.logLevel, "debug");
  assertEquals(o.publicIPv6, "2001:db8::7");
  assertEquals(o.ipBlackholeRoute, true);
  // A flag on the command line replaces the env list, it does not add to it.
  assertEquals(parse(["--iface", "eth9"], env).iface, ["eth9"]);
  assertEquals(parse([], { FLANNELD_VXLAN_TX_CHECKSUM_OFFLOAD: "true" }).vxlanTxChecksumOffload, true);
  assertEquals(store([], { FLANNELD_KUBE_SUBNET_MGR: "true" }).kubeSubnetMgr, true);
  assertEquals(store([], { FLANNELD_ETCD_PASSWORD_FILE: "/p" }).etcdPasswordFile, "/p");
  assertEquals(store([], { FLANCTL_LEASE_TTL: "30" }).leaseTtl, "30");
  assertThrows(
    () => parse([], { FLANNELD_HEALTHZ_PORT: "x" }),
    UsageError,
    "--healthz-port (from FLANNELD_HEALTHZ_PORT)",
  );
  assertThrows(
    () => parse([], { FLANNELD_IP_MASQ: "maybe" }),
    UsageError,
    "--ip-masq (from FLANNELD_IP_MASQ)",
  );
  // --version has no env variable.
  assertEquals(parseDaemonArgs([], { FLANNELD_VERSION: "true" }).version, false);
});

Deno.test("daemon options: usage errors are '<flag>: <problem>; <hint>'", () => {
  const cases: [string[], string][] = [
    [["--ifcae", "eth0"], "--ifcae: unknown flag; did you mean --iface?"],
    [["--nonsense"], "--nonsense: unknown flag; see 'flanctl daemon --help'"],
    [["--iface"], "--iface: needs a value; write --iface <name|ip>"],
    [
      ["--ip-masq", "false"],
      "false: unexpected argument; a boolean flag takes its value after '=' (--ip-masq=false)",
    ],
    [["eth0"], "eth0: unexpected argument; flanctl daemon takes flags only"],
    [["--healthz-port=70000"], "--healthz-port: '70000' is not an integer from 0 to 65535"],
    [
      ["--subnet-lease-renew-margin=1440"],
      "--subnet-lease-renew-margin: '1440' is not an integer from 1 to 1439",
    ],
    [["--ip-masq=maybe"], "--ip-masq: 'maybe' is not a boolean; use true or false"],
    [["---x"], "---x: bad flag syntax"],
    [["--log-level=loud"], "--log-level: 'loud' is not valid; use one of debug, info, warn, error"],
    [["--public-ip=2001:db8::1"], "--public-ip: '2001:db8::1' is not an IPv4 address"],
    [["--public-ipv6=10.0.0.1"], "--public-ipv6: '10.0.0.1' is not an IPv6 address"],
    [["--vxlan-tx-checksum-offload=sometimes"], "--vxlan-tx-checksum-offload: 'sometimes' is not valid"],
    [["--healthz-ip=nope"], "--healthz-ip: 'nope' is not an IP address"],
  ];
  for (const [args, msg] of cases) {
    const e = assertThrows(() => parseDaemonArgs(args, {}), UsageError);
    assertStringIncludes(e.message, msg, args.join(" "));
    assertEquals((e as UsageError).exitCode, 2);
  }
});

Deno.test("daemon options: help lists every flag with its env; envName", () => {
  const h = daemonHelp();
  for (const s of ALL_DAEMON_FLAGS.filter((x) => !x.hidden)) {
    assertStringIncludes(h, s.name.length === 1 ? `  -${s.name}` : `  --${s.name}`);
  }
  // Wrapped as commander wraps every other command's help off a terminal: 80 columns.
  for (const line of h.split("\n")) assert(line.length <= 80, `over 80 columns: ${line}`);
  const flat = h.replace(/\s+/g, " ");
  assertStringIncludes(flat, "env FLANNELD_IFACE_CAN_REACH");
  assertStringIncludes(flat, "env FLANNELD_LOG_BACKTRACE_AT");
  for (const s of ALL_DAEMON_FLAGS.filter((x) => !x.hidden && flagEnv(x))) {
    assertStringIncludes(flat, flagEnv(s)!);
  }
  assert(!h.includes("lease-ttl"));
  assertEquals(parseDaemonArgs(["-h"], {}).help, true);
  assertEquals(parseDaemonArgs(["--help"], {}).help, true);
  assertEquals(parseDaemonArgs(["-version"], {}).version, true);
  assertEquals(envName("--iface-can-reach"), "FLANNELD_IFACE_CAN_REACH");
  assertEquals(envName("--lease-ttl"), "FLANCTL_LEASE_TTL");
  assertThrows(() => toDaemonOptions({ healthzIp: "nope" }), UsageError, "--healthz-ip");
});
