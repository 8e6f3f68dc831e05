import { assert, assertEquals } from "../../tests/assert.ts";
import { IPNet } from "../base/cidr.ts";
import {
  badPublicIP,
  badVtepMac,
  checkPeer,
  type GuardRules,
  PeerGuard,
  type PeerLike,
  RejectionReporter,
  type RejectReason,
} from "./peer_guard.ts";

const V4: GuardRules = {
  network: IPNet.parse("10.244.0.0/16"),
  subnetLen: 24,
  own: IPNet.parse("10.244.1.0/24"),
  ownIPs: ["192.0.2.11"],
};
const V6: GuardRules = {
  network: IPNet.parse("fd00:10:244::/56"),
  subnetLen: 64,
  own: IPNet.parse("fd00:10:244:1::/64"),
  ownIPs: ["2001:db8::11"],
};
const MAC = "02:aa:bb:cc:dd:02";

function peer(subnet: string, publicIP: string, mac: string | null = MAC, type = "vxlan"): PeerLike {
  return {
    subnet: IPNet.parse(subnet),
    publicIP,
    backendType: type,
    backendData: mac === null ? null : { VtepDevIndex: 1, VtepMAC: mac },
  };
}

const WGKEY = btoa("k".repeat(32));

function wg(subnet: string, data: unknown): PeerLike {
  return { subnet: IPNet.parse(subnet), publicIP: "192.0.2.12", backendType: "wireguard", backendData: data };
}

Deno.test("checkPeer: every rule, IPv4 and IPv6 (table)", () => {
  const cases: [string, GuardRules, PeerLike, RejectReason | null][] = [
    ["a good vxlan peer", V4, peer("10.244.2.0/24", "192.0.2.12"), null],
    ["a good host-gw peer (no MAC needed)", V4, peer("10.244.2.0/24", "192.0.2.12", null, "host-gw"), null],
    ["a good udp peer", V4, peer("10.244.2.0/24", "192.0.2.12", null, ""), null],
    ["the whole Network", V4, peer("10.244.0.0/16", "192.0.2.12"), "subnet_length"],
    ["a /23", V4, peer("10.244.2.0/23", "192.0.2.12"), "subnet_length"],
    ["a /25 inside our subnet", V4, peer("10.244.1.128/25", "192.0.2.12"), "subnet_length"],
    ["a /25 elsewhere", V4, peer("10.244.7.128/25", "192.0.2.12"), "subnet_length"],
    ["outside the Network", V4, peer("10.245.2.0/24", "192.0.2.12"), "outside_network"],
    ["a wider net holding the Network", V4, peer("10.0.0.0/8", "192.0.2.12"), "outside_network"],
    ["an IPv6 subnet in the IPv4 plane", V4, peer("fd00:10:244:2::/64", "192.0.2.12"), "outside_network"],
    ["our own subnet", V4, peer("10.244.1.0/24", "192.0.2.99"), "own_subnet"],
    ["PublicIP 0.0.0.0", V4, peer("10.244.2.0/24", "0.0.0.0"), "public_ip"],
    ["PublicIP 0.1.2.3", V4, peer("10.244.2.0/24", "0.1.2.3"), "public_ip"],
    ["PublicIP 127.0.0.1", V4, peer("10.244.2.0/24", "127.0.0.1"), "public_ip"],
    ["PublicIP 224.0.0.1", V4, peer("10.244.2.0/24", "224.0.0.1"), "public_ip"],
    ["PublicIP 239.1.1.1", V4, peer("10.244.2.0/24", "239.1.1.1"), "public_ip"],
    ["PublicIP 255.255.255.255", V4, peer("10.244.2.0/24", "255.255.255.255"), "public_ip"],
    ["PublicIP 240.0.0.1", V4, peer("10.244.2.0/24", "240.0.0.1"), "public_ip"],
    ["PublicIP link-local", V4, peer("10.244.2.0/24", "169.254.1.2"), "public_ip"],
    ["PublicIP inside the pod Network", V4, peer("10.244.2.0/24", "10.244.3.5"), "public_ip"],
    ["PublicIP not an address", V4, peer("10.244.2.0/24", "node-2"), "public_ip"],
    ["PublicIP of the other family", V4, peer("10.244.2.0/24", "2001:db8::12"), "public_ip"],
    ["PublicIP ours", V4, peer("10.244.2.0/24", "192.0.2.11"), "own_public_ip"],
    ["VtepMAC broadcast", V4, peer("10.244.2.0/24", "192.0.2.12", "ff:ff:ff:ff:ff:ff"), "vtep_mac"],
    ["VtepMAC zero", V4, peer("10.244.2.0/24", "192.0.2.12", "00:00:00:00:00:00"), "vtep_mac"],
    ["VtepMAC multicast", V4, peer("10.244.2.0/24", "192.0.2.12", "01:00:5e:00:00:01"), "vtep_mac"],
    ["VtepMAC missing", V4, peer("10.244.2.0/24", "192.0.2.12", null), "vtep_mac"],
    ["VtepMAC garbage", V4, peer("10.244.2.0/24", "192.0.2.12", "02:aa:bb"), "vtep_mac"],
    ["VtepMAC upper case is fine", V4, peer("10.244.2.0/24", "192.0.2.12", "02:AA:BB:CC:DD:EE"), null],
    ["vtepmac, the key in lower case, is VtepMAC", V4, {
      ...peer("10.244.2.0/24", "192.0.2.12", null),
      backendData: { vtepmac: "02:aa:bb:cc:dd:ee" },
    }, null],
    ["vtepmac broadcast", V4, {
      ...peer("10.244.2.0/24", "192.0.2.12", null),
      backendData: { vtepmac: "ff:ff:ff:ff:ff:ff" },
    }, "vtep_mac"],
    ["a good wireguard peer", V4, wg("10.244.2.0/24", { PublicKey: WGKEY, Port: 51820 }), null],
    ["wireguard publickey, the key in lower case", V4, wg("10.244.2.0/24", { publickey: WGKEY }), null],
    ["wireguard PublicKey missing", V4, wg("10.244.2.0/24", { Port: 51820 }), "public_key"],
    [
      "wireguard PublicKey 31 bytes",
      V4,
      wg("10.244.2.0/24", { PublicKey: btoa("k".repeat(31)) }),
      "public_key",
    ],
    [
      "wireguard PublicKey not base64",
      V4,
      wg("10.244.2.0/24", { PublicKey: "!".repeat(43) + "=" }),
      "public_key",
    ],
    ["wireguard PublicKey a number", V4, wg("10.244.2.0/24", { PublicKey: 7 }), "public_key"],
    ["wireguard data null", V4, wg("10.244.2.0/24", null), "public_key"],
    ["IPv6: a good peer", V6, peer("fd00:10:244:2::/64", "2001:db8::12"), null],
    ["IPv6: the whole network", V6, peer("fd00:10:244::/56", "2001:db8::12"), "subnet_length"],
    ["IPv6: a /65 inside ours", V6, peer("fd00:10:244:1:8000::/65", "2001:db8::12"), "subnet_length"],
    ["IPv6: outside", V6, peer("fd00:10:245:2::/64", "2001:db8::12"), "outside_network"],
    ["IPv6: our subnet", V6, peer("fd00:10:244:1::/64", "2001:db8::99"), "own_subnet"],
    ["IPv6: PublicIPv6 ::", V6, peer("fd00:10:244:2::/64", "::"), "public_ip"],
    ["IPv6: PublicIPv6 ::1", V6, peer("fd00:10:244:2::/64", "::1"), "public_ip"],
    ["IPv6: PublicIPv6 ff02::1", V6, peer("fd00:10:244:2::/64", "ff02::1"), "public_ip"],
    ["IPv6: PublicIPv6 fe80::1", V6, peer("fd00:10:244:2::/64", "fe80::1"), "public_ip"],
    ["IPv6: PublicIPv6 v4-mapped", V6, peer("fd00:10:244:2::/64", "::ffff:192.0.2.12"), "public_ip"],
    ["IPv6: PublicIPv6 empty (node without IPv6)", V6, peer("fd00:10:244:2::/64", ""), "public_ip"],
    ["IPv6: PublicIPv6 ours", V6, peer("fd00:10:244:2::/64", "2001:db8::11"), "own_public_ip"],
    ["IPv6: VtepMAC zero", V6, peer("fd00:10:244:2::/64", "2001:db8::12", "00:00:00:00:00:00"), "vtep_mac"],
  ];
  for (const [name, rules, p, want] of cases) {
    assertEquals(checkPeer(p, rules)?.reason ?? null, want, name);
  }
});

Deno.test("checkPeer: a hostile PublicIP is quoted bounded and escaped", () => {
  const r = checkPeer(peer("10.244.2.0/24", "\u001b[2J" + "x".repeat(1e5)), V4);
  assertEquals(r?.reason, "public_ip");
  assert(r!.detail.length < 300 && !r!.detail.includes("\u001b"), r!.detail.slice(0, 300));
});

Deno.test("badPublicIP: link-local peers are fine when our underlay is link-local", () => {
  assertEquals(badPublicIP("169.254.1.2", 4, true), null);
  assertEquals(badPublicIP("fe80::2", 6, true), null);
  const ll: GuardRules = { ...V4, ownIPs: ["169.254.0.11"] };
  assertEquals(checkPeer(peer("10.244.2.0/24", "169.254.0.12"), ll), null);
  assertEquals(badVtepMac("0a:00:00:00:00:01"), null);
});

/** A guard with its verdicts recorded as `id reason` lines ("id ok" when accepted again). */
function guard(rules = V4) {
  const said: string[] = [];
  const g = new PeerGuard<PeerLike>(rules, (id, _p, r) => said.push(`${id} ${r ? r.reason : "ok"}`));
  return { g, said };
}

Deno.test("PeerGuard: two leases claim one subnet: the older wins, the other takes over when it goes", () => {
  const { g, said } = guard();
  assertEquals(g.upsert("node b", peer("10.244.2.0/24", "192.0.2.13"), 2000), ["10.244.2.0/24"]);
  assertEquals(g.accepted("10.244.2.0/24")?.publicIP, "192.0.2.13");
  // An older lease for the same subnet (its Node was created first): it wins, b is refused and reported.
  g.upsert("node a", peer("10.244.2.0/24", "192.0.2.12"), 1000);
  assertEquals(g.accepted("10.244.2.0/24")?.publicIP, "192.0.2.12");
  assertEquals(said, ["node b conflict"]);
  // A newer claimant is refused at once.
  g.upsert("node c", peer("10.244.2.0/24", "192.0.2.14"), 3000);
  assertEquals(g.accepted("10.244.2.0/24")?.publicIP, "192.0.2.12");
  assertEquals(said, ["node b conflict", "node c conflict"]);
  // A renewal (same lease again) says nothing new.
  g.upsert("node c", peer("10.244.2.0/24", "192.0.2.14"), 3000);
  assertEquals(said.length, 2);
  // The winner leaves: the next oldest is accepted (and says so).
  assertEquals(g.remove("node a"), ["10.244.2.0/24"]);
  assertEquals(g.accepted("10.244.2.0/24")?.publicIP, "192.0.2.13");
  // c is still refused, now in favour of b (reported again: the conflict names the new winner).
  assertEquals(said.slice(2), ["node b ok", "node c conflict"]);
  assertEquals(g.size, 1);
  // Leases without an age lose to those with one; between two without, the id decides (stable).
  g.upsert("k1", peer("10.244.3.0/24", "192.0.2.21"));
  g.upsert("k0", peer("10.244.3.0/24", "192.0.2.20"));
  assertEquals(g.accepted("10.244.3.0/24")?.publicIP, "192.0.2.20");
});

Deno.test("PeerGuard: a lease moving to a bad subnet, a bad lease fixed, reset and new rules", () => {
  const { g, said } = guard();
  g.upsert("x", peer("10.244.2.0/24", "192.0.2.12"), 1);
  // x now claims our subnet: refused, and its old subnet has no peer any more.
  assertEquals(g.upsert("x", peer("10.244.1.0/24", "192.0.2.12"), 1), ["10.244.2.0/24", "10.244.1.0/24"]);
  assertEquals(g.accepted("10.244.2.0/24"), undefined);
  assertEquals(g.size, 0);
  assertEquals(said, ["x own_subnet"]);
  g.upsert("x", peer("10.244.2.0/24", "192.0.2.12"), 1);
  assertEquals(said, ["x own_subnet", "x ok"]);
  // A listing replaces everything: x is gone, y is new and bad.
  g.reset([{ id: "y", peer: peer("10.244.4.0/24", "127.0.0.1"), created: 5 }]);
  assertEquals([...g.entries()], []);
  assertEquals(said.slice(2), ["y public_ip"]);
  // Our subnet changes to 10.244.4.0/24: y is checked again (now it also claims our subnet).
  g.setRules({ ...V4, own: IPNet.parse("10.244.4.0/24") });
  assertEquals(said.slice(3), ["y own_subnet"]);
});

Deno.test("RejectionReporter: counts every refusal, warns at most `burst` per window, sums up the rest", () => {
  let t = 0;
  const warns: string[] = [];
  const counts = new Map<string, number>();
  const rep = new RejectionReporter({
    log: { warn: (m, f) => warns.push(`${m} ${JSON.stringify(f)}`), info: () => {} },
    count: (r) => counts.set(r, (counts.get(r) ?? 0) + 1),
    now: () => t,
    burst: 2,
    windowMs: 1000,
  });
  for (let i = 0; i < 5; i++) {
    rep.reject(`k${i}`, { reason: "public_ip", detail: "PublicIP 0.0.0.0 is unspecified" });
  }
  assertEquals(counts.get("public_ip"), 5);
  assertEquals(warns.length, 2);
  t = 1500;
  rep.flush();
  assertEquals(warns.length, 3);
  assertEquals(warns[2].includes('"not_logged":3'), true, warns[2]);
});

Deno.test("PeerGuard: random upserts and removals agree with picking the oldest valid claimant per subnet", () => {
  let seed = 7;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const { g } = guard();
  const model = new Map<string, { subnet: string; created: number; ok: boolean }>();
  const ipOf = (id: string) => `192.0.2.${Number(id.slice(1)) + 100}`;
  for (let step = 0; step < 3000; step++) {
    const id = `k${rnd(40)}`;
    if (rnd(4) === 0) {
      g.remove(id);
      model.delete(id);
    } else {
      const subnet = `10.244.${2 + rnd(6)}.0/24`;
      const ok = rnd(5) !== 0;
      const created = rnd(10);
      g.upsert(id, peer(subnet, ok ? ipOf(id) : "127.0.0.1"), created);
      model.set(id, { subnet, created, ok });
    }
    if (step % 100 !== 99) continue;
    const want = new Map<string, string>();
    for (const [id, m] of [...model].sort(([a], [b]) => a < b ? -1 : 1)) {
      const cur = want.get(m.subnet);
      if (m.ok && (cur === undefined || m.created < model.get(cur)!.created)) want.set(m.subnet, id);
    }
    assertEquals(g.size, want.size, `step ${step}`);
    assertEquals(g.leases, model.size);
    for (const [subnet, id] of want) assertEquals(g.accepted(subnet)?.publicIP, ipOf(id), `step ${step}`);
  }
});
