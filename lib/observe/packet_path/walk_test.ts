import { assert, assertEquals, assertMatch } from "../../../tests/assert.ts";
import { IPAddr } from "../../base/cidr.ts";
import { atHook, FORWARD_HOOKS, INPUT_HOOKS, verdictText } from "./paths.ts";
import { readRuleset } from "./ruleset.ts";
import type { FirewallDumps } from "./ruleset.ts";
import type { Packet, PathVerdict } from "./types.ts";
import { walkPath } from "./walk.ts";

const vxlan: Packet = {
  family: 4,
  src: IPAddr.parse("192.168.50.2"),
  dst: IPAddr.parse("192.168.50.1"),
  iif: "eth0",
  oif: "",
  proto: 17,
  sport: null,
  dport: 8472,
  srcLocal: false,
  dstLocal: true,
};
const fwd: Packet = {
  family: 4,
  src: IPAddr.parse("10.244.0.2"),
  dst: IPAddr.parse("10.244.1.2"),
  iif: "cni0",
  oif: "flannel.1",
  proto: 6,
  sport: 40000,
  dport: 80,
  tcpFlags: 2,
  srcLocal: false,
  dstLocal: false,
};
const outside: Packet = { ...fwd, dst: IPAddr.parse("8.8.8.8"), oif: "eth0" };

function dumps(o: Partial<FirewallDumps>): FirewallDumps {
  return {
    legacy: null,
    nft: null,
    main: null,
    variant: "nf_tables",
    ip6: null,
    nftJson: null,
    nftError: null,
    ...o,
  };
}

function walk(
  d: Partial<FirewallDumps>,
  p: Packet,
  hooks = p.dstLocal ? INPUT_HOOKS : FORWARD_HOOKS,
): PathVerdict {
  return walkPath(readRuleset(dumps(d), 4).tables, p, hooks, atHook(p));
}

const FLANNEL_FWD = [
  '-A FLANNEL-FWD -s 10.244.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
  '-A FLANNEL-FWD -d 10.244.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
];

/** iptables-services' default /etc/sysconfig/iptables (RHEL/CentOS), flannel's chains appended. */
const RHEL = [
  "*filter",
  ":INPUT ACCEPT [0:0]",
  ":FORWARD ACCEPT [0:0]",
  ":OUTPUT ACCEPT [0:0]",
  ":FLANNEL-FWD - [0:0]",
  "-A INPUT -m state --state RELATED,ESTABLISHED -j ACCEPT",
  "-A INPUT -p icmp -j ACCEPT",
  "-A INPUT -i lo -j ACCEPT",
  "-A INPUT -p tcp -m state --state NEW -m tcp --dport 22 -j ACCEPT",
  "-A INPUT -j REJECT --reject-with icmp-host-prohibited",
  "-A FORWARD -j REJECT --reject-with icmp-host-prohibited",
  '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
  ...FLANNEL_FWD,
  "COMMIT",
  "",
].join("\n");

Deno.test("packet path: a catch-all REJECT in INPUT drops VXLAN, naming the rule", () => {
  const v = walk({ nft: RHEL }, vxlan);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.rule?.position, 5);
  assertEquals(v.dropped?.chain, "INPUT");
  assertEquals(v.dropped?.backend, "iptables-nft");
  assertMatch(verdictText(v), /iptables-nft filter INPUT rule 5 REJECT: -A INPUT -j REJECT/);
});

Deno.test("packet path: a REJECT before the jump to FLANNEL-FWD drops pod traffic", () => {
  const v = walk({ nft: RHEL }, fwd);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.chain, "FORWARD");
  assertEquals(v.dropped?.rule?.position, 1);
  // The jump placed first: the same ruleset forwards.
  const fixed = RHEL.replace(
    '-A FORWARD -j REJECT --reject-with icmp-host-prohibited\n-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD',
    '-A FORWARD -m comment --comment "flanneld forward" -j FLANNEL-FWD\n-A FORWARD -j REJECT --reject-with icmp-host-prohibited',
  );
  assertEquals(walk({ nft: fixed }, fwd).verdict, "pass");
});

Deno.test("packet path: a protocol-wide REJECT drops, an accept for the port before it passes", () => {
  const t = (rules: string[]) => ["*filter", ":INPUT ACCEPT [0:0]", ...rules, "COMMIT", ""].join("\n");
  assertEquals(
    walk({ nft: t(["-A INPUT -p udp -j REJECT --reject-with icmp-port-unreachable"]) }, vxlan).verdict,
    "drop",
  );
  assertEquals(
    walk({ nft: t(["-A INPUT -p udp -m udp --dport 8472 -j ACCEPT", "-A INPUT -p udp -j REJECT"]) }, vxlan)
      .verdict,
    "pass",
  );
  // multiport, port ranges and a negated source.
  assertEquals(
    walk({ nft: t(["-A INPUT -p udp -m multiport --dports 53,8000:9000 -j DROP"]) }, vxlan).verdict,
    "drop",
  );
  assertEquals(walk({ nft: t(["-A INPUT ! -s 192.168.50.0/24 -p udp -j DROP"]) }, vxlan).verdict, "pass");
  assertEquals(walk({ nft: t(["-A INPUT -i eth+ -p tcp -j DROP"]) }, vxlan).verdict, "pass");
});

/** ufw's shape: INPUT policy DROP, the port accepted in a user chain behind a few jumps. */
const UFW = [
  "*filter",
  ":INPUT DROP [0:0]",
  ":FORWARD DROP [0:0]",
  ":OUTPUT ACCEPT [0:0]",
  ":ufw-before-input - [0:0]",
  ":ufw-user-input - [0:0]",
  ":ufw-after-input - [0:0]",
  ":ufw-reject-input - [0:0]",
  "-A INPUT -j ufw-before-input",
  "-A INPUT -j ufw-after-input",
  "-A INPUT -j ufw-reject-input",
  "-A ufw-before-input -i lo -j ACCEPT",
  "-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
  "-A ufw-before-input -m conntrack --ctstate INVALID -j DROP",
  "-A ufw-before-input -j ufw-user-input",
  "-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT",
  "-A ufw-user-input -p udp -m udp --dport 8472 -j ACCEPT",
  "-A ufw-after-input -p udp -m udp --dport 137 -j ufw-skip-to-policy-input",
  "COMMIT",
  "",
].join("\n").replace(
  ":ufw-reject-input - [0:0]",
  ":ufw-reject-input - [0:0]\n:ufw-skip-to-policy-input - [0:0]",
);

Deno.test("packet path: ufw accepting the port in a sub-chain behind a DROP policy passes", () => {
  const v = walk({ nft: UFW }, vxlan);
  assertEquals(v.verdict, "pass");
  assertEquals(v.steps.find((s) => s.chain === "INPUT")?.rule?.chain, "ufw-user-input");
  assertEquals(v.steps.find((s) => s.chain === "INPUT")?.via, [
    "INPUT",
    "ufw-before-input",
    "ufw-user-input",
  ]);
  // Without the accept, the policy drops it.
  const v2 = walk(
    { nft: UFW.replace("-A ufw-user-input -p udp -m udp --dport 8472 -j ACCEPT\n", "") },
    vxlan,
  );
  assertEquals(v2.verdict, "drop");
  assertEquals(v2.dropped?.rule, null);
  assertMatch(verdictText(v2), /iptables-nft filter INPUT policy DROP/);
});

Deno.test("packet path: the legacy back-end's DROP policy drops what iptables-nft accepts", () => {
  const nft = [
    "*filter",
    ":FORWARD ACCEPT [0:0]",
    ":FLANNEL-FWD - [0:0]",
    "-A FORWARD -j FLANNEL-FWD",
    ...FLANNEL_FWD,
    "COMMIT",
    "",
  ]
    .join("\n");
  const legacy = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD DROP [0:0]", "COMMIT", ""].join("\n");
  const v = walk({ nft, legacy }, fwd);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.backend, "iptables-legacy");
  // iptables-nft alone forwards: the drop is the other back-end's (same hook, a base chain of its own).
  assertEquals(walk({ nft }, fwd).verdict, "pass");
  const rule = walk(
    { nft, legacy: legacy.replace("COMMIT", "-A INPUT -p udp --dport 8472 -j DROP\nCOMMIT") },
    vxlan,
  );
  assertEquals(rule.dropped?.backend, "iptables-legacy");
  assertEquals(rule.dropped?.rule?.position, 1);
});

const firewalld = JSON.parse(
  Deno.readTextFileSync(new URL("../../../tests/fixtures/firewall/firewalld.json", import.meta.url)),
);

Deno.test("packet path: firewalld's native table rejects VXLAN and forwarded pod traffic", () => {
  const v = walk({ nftJson: firewalld }, vxlan);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.backend, "nftables");
  assertEquals(v.dropped?.table, "firewalld");
  assertEquals(v.dropped?.chain, "filter_INPUT");
  assertEquals(v.dropped?.verdict, "reject");
  assertMatch(
    verdictText(v),
    /nftables inet firewalld filter_INPUT handle \d+ REJECT: reject with icmpx admin-prohibited/,
  );
  const f = walk({ nftJson: firewalld }, fwd);
  assertEquals(f.verdict, "drop");
  assertEquals(f.dropped?.chain, "filter_FORWARD");
  // SSH passes (the zone's allow chain), and the masquerade path is not touched by firewalld's nat chains.
  assertEquals(
    walk({ nftJson: firewalld }, { ...vxlan, proto: 6, dport: 22, sport: 50000, tcpFlags: 2 }).verdict,
    "pass",
  );
  // Intra-zone forwarding: pod traffic out eth0 passes.
  assertEquals(walk({ nftJson: firewalld }, outside).verdict, "pass");
});

Deno.test("packet path: firewalld with the port added and the pod network in trusted passes", () => {
  const doc = structuredClone(firewalld);
  const rules = doc.nftables as Record<string, Record<string, unknown>>[];
  const allow = rules.find((o) => o.rule?.chain === "filter_IN_public_allow")!;
  rules.push({
    rule: {
      family: "inet",
      table: "firewalld",
      chain: "filter_IN_public_allow",
      handle: 999,
      expr: [
        { match: { op: "==", left: { payload: { protocol: "udp", field: "dport" } }, right: 8472 } },
        { match: { op: "==", left: { ct: { key: "state" } }, right: { set: ["new", "untracked"] } } },
        { accept: null },
      ],
    },
  });
  assert(allow);
  assertEquals(walk({ nftJson: doc }, vxlan).verdict, "pass");
});

Deno.test("packet path: an ACCEPT in one base chain does not stop a DROP in another", () => {
  const doc = {
    nftables: [
      { table: { family: "inet", name: "a" } },
      {
        chain: {
          family: "inet",
          table: "a",
          name: "in",
          type: "filter",
          hook: "input",
          prio: -10,
          policy: "accept",
        },
      },
      { rule: { family: "inet", table: "a", chain: "in", handle: 2, expr: [{ accept: null }] } },
      { table: { family: "ip", name: "b" } },
      {
        chain: {
          family: "ip",
          table: "b",
          name: "in",
          type: "filter",
          hook: "input",
          prio: 5,
          policy: "drop",
        },
      },
    ],
  };
  const v = walk({ nftJson: doc }, vxlan);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.table, "b");
  assertEquals(v.steps.map((s) => `${s.table}:${s.verdict}`), ["a:accept", "b:drop"]);
});

Deno.test("packet path: an undecidable match is reported, never guessed; one that cannot change the end is not", () => {
  const t = (rules: string[]) => ["*filter", ":INPUT ACCEPT [0:0]", ...rules, "COMMIT", ""].join("\n");
  const v = walk({ nft: t(["-A INPUT -m set --match-set blocked src -j DROP"]) }, vxlan);
  assertEquals(v.verdict, "unknown");
  assertEquals(v.reason, "unknown match: -m set --match-set blocked src");
  // A logging rule with a rate limit: whatever it does, the packet goes on.
  assertEquals(walk({ nft: t(["-A INPUT -m limit --limit 5/min -j LOG"]) }, vxlan).verdict, "pass");
  // Both branches drop: the verdict stands.
  const both = walk(
    { nft: t(["-A INPUT -m set --match-set x src -j DROP", "-A INPUT -p udp -j DROP"]) },
    vxlan,
  );
  assertEquals(both.verdict, "drop");
  // VXLAN's source port varies: a match on it cannot be decided.
  assertEquals(walk({ nft: t(["-A INPUT -p udp --sport 4789 -j DROP"]) }, vxlan).verdict, "unknown");
  // An unknown target.
  assertMatch(walk({ nft: t(["-A INPUT -j NOSUCH"]) }, vxlan).reason ?? "", /unknown target: -j NOSUCH/);
});

Deno.test("packet path: marks, RETURN, goto and the nat chain that masquerades", () => {
  const nat = [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ":KUBE-POSTROUTING - [0:0]",
    ":FLANNEL-POSTRTG - [0:0]",
    "-A POSTROUTING -j KUBE-POSTROUTING",
    "-A POSTROUTING -j FLANNEL-POSTRTG",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
    "-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 -j RETURN",
    "-A FLANNEL-POSTRTG -s 10.244.0.0/24 -d 10.244.0.0/16 -j RETURN",
    "-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -j MASQUERADE --random-fully",
    "COMMIT",
    "",
  ].join("\n");
  const v = walk({ nft: nat }, outside);
  assertEquals(v.verdict, "pass");
  assertEquals(v.nat?.rule?.chain, "FLANNEL-POSTRTG");
  assertEquals(v.nat?.rule?.position, 3);
  assertEquals(walk({ nft: nat }, fwd).nat, null);
  // A mark set earlier (mangle) sends it through KUBE-POSTROUTING's masquerade instead.
  const marked = nat.replace(
    "*nat",
    "*mangle\n:FORWARD ACCEPT [0:0]\n-A FORWARD -j MARK --set-xmark 0x4000/0x4000\nCOMMIT\n*nat",
  );
  assertEquals(walk({ nft: marked }, outside).nat?.rule?.chain, "KUBE-POSTROUTING");
  // goto from a sub-chain returns to the caller's caller.
  const g = [
    "*filter",
    ":INPUT ACCEPT [0:0]",
    ":a - [0:0]",
    ":b - [0:0]",
    "-A INPUT -j a",
    "-A INPUT -j DROP",
    "-A a -g b",
    "-A a -j ACCEPT",
    "COMMIT",
    "",
  ].join("\n");
  assertEquals(walk({ nft: g }, vxlan).verdict, "drop");
});

Deno.test("packet path: hostile dumps stay bounded (a jump loop, a huge line, a missing chain)", () => {
  const loop = ["*filter", ":INPUT ACCEPT [0:0]", ":a - [0:0]", "-A INPUT -j a", "-A a -j a", "COMMIT", ""]
    .join("\n");
  const v = walk({ nft: loop }, vxlan);
  assertEquals(v.verdict, "unknown");
  assertMatch(v.reason ?? "", /cannot follow jump to a/);
  const long = ["*filter", ":INPUT ACCEPT [0:0]", `-A INPUT ${"-m x ".repeat(5000)}-j DROP`, "COMMIT", ""]
    .join("\n");
  assertEquals(walk({ nft: long }, vxlan).verdict, "unknown");
  const missing = ["*filter", ":INPUT ACCEPT [0:0]", "-A INPUT -j GONE", "COMMIT", ""].join("\n");
  assertEquals(walk({ nft: missing }, vxlan).verdict, "unknown");
  // Untrusted text reaches reports escaped.
  const esc = [
    "*filter",
    ":INPUT ACCEPT [0:0]",
    '-A INPUT -m comment --comment "\x1b[31m" -j DROP',
    "COMMIT",
    "",
  ]
    .join("\n");
  assert(!verdictText(walk({ nft: esc }, vxlan)).includes("\x1b"));
});

Deno.test("packet path: kube-proxy's nft verdict maps (named, concatenated keys) are decided", () => {
  const kp = JSON.parse(
    Deno.readTextFileSync(new URL("../../../tests/fixtures/firewall/kube-proxy.json", import.meta.url)),
  );
  // VXLAN to a NodePort address: the map has no udp . 8472 entry, the packet goes on.
  assertEquals(walk({ nftJson: kp }, vxlan).verdict, "pass");
  // tcp . 30080 (a NodePort without endpoints) is dropped by the map's verdict.
  const np = walk({ nftJson: kp }, { ...vxlan, proto: 6, dport: 30080, sport: 40000, tcpFlags: 2 });
  assertEquals(np.verdict, "drop");
  assertEquals(np.dropped?.via, ["filter-input", "nodeport-endpoints-check"]);
  // A Service without endpoints: the map's goto reaches reject-chain.
  const svc = walk({ nftJson: kp }, {
    ...vxlan,
    dst: IPAddr.parse("10.96.0.20"),
    proto: 6,
    dport: 80,
    sport: 40000,
    tcpFlags: 2,
  });
  assertEquals(svc.verdict, "drop");
  assertEquals(svc.dropped?.rule?.chain, "reject-chain");
});

Deno.test("packet path: nft marks set from the mark (xor) steer a later match", () => {
  const doc = {
    nftables: [
      { table: { family: "ip", name: "m" } },
      {
        chain: {
          family: "ip",
          table: "m",
          name: "in",
          type: "filter",
          hook: "input",
          prio: 0,
          policy: "accept",
        },
      },
      {
        rule: {
          family: "ip",
          table: "m",
          chain: "in",
          handle: 2,
          expr: [{
            mangle: { key: { meta: { key: "mark" } }, value: { "^": [{ meta: { key: "mark" } }, 16384] } },
          }],
        },
      },
      {
        rule: {
          family: "ip",
          table: "m",
          chain: "in",
          handle: 3,
          expr: [
            { match: { op: "==", left: { "&": [{ meta: { key: "mark" } }, 16384] }, right: 16384 } },
            { drop: null },
          ],
        },
      },
    ],
  };
  const v = walk({ nftJson: doc }, vxlan);
  assertEquals(v.verdict, "drop");
  assertEquals(v.dropped?.rule?.handle, 3);
});

Deno.test("packet path: NOTRACK makes the packet UNTRACKED (no NEW match, no NAT)", () => {
  const t = [
    "*raw",
    ":PREROUTING ACCEPT [0:0]",
    "-A PREROUTING -p udp -m udp --dport 8472 -j NOTRACK",
    "COMMIT",
    "*filter",
    ":INPUT DROP [0:0]",
    "-A INPUT -m conntrack --ctstate NEW -j REJECT",
    "-A INPUT -m conntrack --ctstate UNTRACKED -j ACCEPT",
    "COMMIT",
    "",
  ].join("\n");
  assertEquals(walk({ nft: t }, vxlan).verdict, "pass");
  assertEquals(walk({ nft: t.replace("-j NOTRACK", "-j CT --zone 1") }, vxlan).verdict, "drop");
  assertEquals(walk({ nft: t.replace("-j NOTRACK", "-j CT --notrack") }, vxlan).verdict, "pass");
});
