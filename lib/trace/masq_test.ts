import { assertEquals } from "../../tests/assert.ts";
import { masqDecision } from "./masq.ts";

const c = (w: string) => `-m comment --comment "flanneld ${w}"`;
const NAT = [
  "*nat",
  ":POSTROUTING ACCEPT [0:0]",
  ":FLANNEL-POSTRTG - [0:0]",
  `-A POSTROUTING ${c("masq")} -j FLANNEL-POSTRTG`,
  `-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 ${c("masq")} -j RETURN`,
  `-A FLANNEL-POSTRTG -s 10.244.1.0/24 -d 10.244.0.0/16 ${c("masq")} -j RETURN`,
  `-A FLANNEL-POSTRTG -s 10.244.0.0/16 -d 10.244.1.0/24 ${c("masq")} -j RETURN`,
  `-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.1.0/24 ${c("masq")} -j RETURN`,
  `-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 ${c("masq")} -j MASQUERADE --random-fully`,
  `-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 ${c("masq")} -j MASQUERADE --random-fully`,
  "COMMIT",
].join("\n");

Deno.test("masq decision: flannel's rules: pod→pod not NATed, pod→outside NATed, multicast not, no rules → not", () => {
  const pp = masqDecision(NAT, "10.244.1.2", "10.244.2.3", "flannel.1");
  assertEquals([pp.nat, pp.rule?.includes("-s 10.244.1.0/24 -d 10.244.0.0/16")], [false, true]);
  assertEquals(pp.skipped.length, 0); // the mark rule is evaluated: an unmarked packet does not match it
  const out = masqDecision(NAT, "10.244.1.2", "198.51.100.7", "eth0");
  assertEquals([out.nat, out.rule?.includes("! -d 224.0.0.0/4")], [true, true]);
  assertEquals(masqDecision(NAT, "10.244.1.2", "224.0.0.251", "eth0").nat, false);
  const host = masqDecision(NAT, "192.168.5.10", "10.244.2.3", "flannel.1");
  assertEquals([host.nat, host.rule?.includes("! -s 10.244.0.0/16 -d 10.244.0.0/16")], [true, true]);
  assertEquals(masqDecision("*nat\nCOMMIT", "10.244.1.2", "198.51.100.7", "eth0"), {
    nat: false,
    rule: null,
    skipped: [],
  });
});

Deno.test("masq decision: kube-proxy's KUBE-POSTROUTING NATs only marked packets; other matches skipped", () => {
  const kp = [
    "*nat",
    `-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
    `-A POSTROUTING ${c("masq")} -j FLANNEL-POSTRTG`,
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
    `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE ` +
    "--random-fully",
    ...NAT.split("\n").filter((l) => l.startsWith("-A FLANNEL-POSTRTG")),
    "COMMIT",
  ].join("\n");
  // Pod to pod: kube-proxy's chain returns (no mark), flannel's keeps the source.
  const pp = masqDecision(kp, "10.244.0.2", "10.244.1.2", "flannel.1");
  assertEquals([pp.nat, pp.rule?.includes("-s 10.244.0.0/16 -d 10.244.1.0/24")], [false, true]);
  assertEquals(pp.skipped, []);
  // Pod to outside: flannel's MASQUERADE, not kube-proxy's.
  const out = masqDecision(kp, "10.244.0.2", "198.51.100.7", "eth0");
  assertEquals([out.nat, out.rule?.includes("! -d 224.0.0.0/4")], [true, true]);
  // A rule with a match the walk does not evaluate is skipped, and reported.
  const ct = masqDecision(
    `*nat\n-A POSTROUTING -m conntrack --ctstate DNAT -j MASQUERADE\nCOMMIT`,
    "10.244.0.2",
    "10.244.1.2",
    "flannel.1",
  );
  assertEquals([ct.nat, ct.skipped.length], [false, 1]);
  // A mark match of a marked value only: not the traced packet's.
  assertEquals(
    masqDecision(
      `*nat\n-A POSTROUTING -m mark --mark 0x0/0xffff -j MASQUERADE\nCOMMIT`,
      "10.244.0.2",
      "10.244.1.2",
      "x",
    ).nat,
    true,
  );
});

Deno.test("masq decision: a comment's words are not the rule's target", () => {
  const nat = [
    "*nat",
    ":POSTROUTING ACCEPT [0:0]",
    '-A POSTROUTING -s 10.244.0.0/16 -m comment --comment "skip -j RETURN here" -j MASQUERADE',
    "COMMIT",
  ].join("\n");
  const d = masqDecision(nat, "10.244.1.2", "198.51.100.7", "eth0");
  assertEquals([d.nat, d.rule?.endsWith("-j MASQUERADE")], [true, true]);
});

Deno.test("masq decision: flannel's IPv6 rules, and an IPv6 host address without a prefix is a /128", () => {
  const nat6 = [
    "*nat",
    `-A POSTROUTING ${c("masq")} -j FLANNEL-POSTRTG`,
    `-A FLANNEL-POSTRTG -s fc00:244:0:1::/64 -d fc00:244::/48 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG ! -s fc00:244::/48 -d fc00:244:0:1::/64 ${c("masq")} -j RETURN`,
    `-A FLANNEL-POSTRTG -s fc00:244::/48 ! -d ff00::/8 ${c("masq")} -j MASQUERADE --random-fully`,
    `-A FLANNEL-POSTRTG ! -s fc00:244::/48 -d fc00:244::/48 ${c("masq")} -j MASQUERADE --random-fully`,
    "COMMIT",
  ].join("\n");
  assertEquals(masqDecision(nat6, "fc00:244:0:1::2", "fc00:244:0:2::3", "flannel-v6.1").nat, false);
  assertEquals(masqDecision(nat6, "fc00:244:0:1::2", "2001:db8::7", "eth0").nat, true);
  assertEquals(masqDecision(nat6, "fc00:244:0:1::2", "ff02::fb", "eth0").nat, false);
  assertEquals(masqDecision(nat6, "2001:db8::5", "fc00:244:0:2::3", "flannel-v6.1").nat, true);
  const host = `*nat\n-A POSTROUTING -s fc00:244:0:1::2 -j MASQUERADE\nCOMMIT`;
  assertEquals(masqDecision(host, "fc00:244:0:1::2", "fc00:244:0:2::3", "eth0").nat, true);
  assertEquals(masqDecision(host, "fc00:244:0:1::3", "fc00:244:0:2::3", "eth0").nat, false, "/128, not /32");
});
