/**
 * The pipelined writer (NetlinkHandle.writeMany) and the reconciler's bulk path on it, in throwaway
 * namespaces with iproute2 as the oracle: one bad entry among 1000 is reported with its entry, does not
 * hide or stop the others, and leaves nothing half-programmed for its peer.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { ipJson, sh, withNetns } from "./netns.ts";
import { NetlinkError, type NetlinkWrite, openNetlink } from "../lib/netlink/mod.ts";
import { ParseError } from "../lib/base/errors.ts";
import { Reconciler } from "../lib/reconcile/reconciler.ts";
import type { DesiredPeer } from "../lib/reconcile/types.ts";
import { type Cidr, type Ip, IPNet, type Mac, parseCidr, parseIp, parseMac } from "../lib/base/cidr.ts";
import { Metrics } from "../lib/daemon/metrics.ts";
import { asIp, asMac } from "./addr.ts";

// deno-lint-ignore no-explicit-any
type J = any;

const N = 1000, BAD = 617;

/** An underlay veth with 10.50.0.1/16 and flannel.1 (vxlan, nolearning), all up. */
async function overlay(ns: string): Promise<void> {
  const ip = (...a: string[]) => sh("ip", "-n", ns, ...a);
  await ip("link", "add", "ul0", "type", "veth", "peer", "name", "ul1");
  await ip("link", "set", "ul0", "up");
  await ip("link", "set", "ul1", "up");
  await ip("addr", "add", "10.50.0.1/16", "dev", "ul0");
  await ip("link", "add", "flannel.1", "type", "vxlan", "id", "1", "dstport", "8472", "local", "10.50.0.1");
  await ip("link", "set", "flannel.1", "up");
}

function peer(i: number): { subnet: Cidr; gw: Ip; mac: Mac; pub: Ip } {
  const a = 1 + (i >> 8), b = i & 255;
  const hex = (x: number) => x.toString(16).padStart(2, "0");
  return {
    subnet: parseCidr(`10.${a}.${b}.0/24`),
    gw: parseIp(`10.${a}.${b}.0`),
    mac: parseMac(`0e:00:00:00:${hex(i >> 8)}:${hex(b)}`),
    pub: parseIp(`10.50.${1 + (i >> 8)}.${b}`),
  };
}

async function kernel(ns: string) {
  const routes = await ipJson<J[]>(ns, "route", "show", "dev", "flannel.1");
  const neigh = (await ipJson<J[]>(ns, "neigh", "show", "dev", "flannel.1"))
    .filter((n) => n.state?.includes("PERMANENT"));
  const fdb = (JSON.parse(await sh("bridge", "-n", ns, "-j", "fdb", "show", "dev", "flannel.1")) as J[])
    .filter((f) => f.dst);
  return { routes, neigh, fdb };
}

needsRoot.test("writeMany: 1000 requests, one refused by the kernel and one bad input: both reported by index, the rest applied", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("pw");
    await overlay(ns);
    const h = openNetlink({ name: ns });
    try {
      const writes: NetlinkWrite[] = [];
      for (let i = 0; i < N; i++) {
        const p = peer(i);
        // The bad one: no onlink, and its gateway is on no connected subnet → the kernel refuses it.
        writes.push({
          op: "replaceRoute",
          route: { dst: p.subnet, via: p.gw, dev: "flannel.1", onlink: i !== BAD },
        });
      }
      writes.push({
        op: "replaceNeigh",
        neigh: { dev: "flannel.1", dst: asIp("10.9.9.9"), lladdr: asMac("not-a-mac") },
      });
      writes.push({ op: "deleteRoute", route: { dst: "10.99.0.0/24", dev: "nosuchdev0" } });
      const res = h.writeMany(writes);
      assertEquals(res.length, N + 2);
      const failed = res.flatMap((e, i) => (e ? [i] : []));
      assertEquals(failed, [BAD, N, N + 1]);
      const e = res[BAD]!;
      assert(e instanceof NetlinkError, String(e));
      assertStringIncludes(e.op, `route replace ${peer(BAD).subnet} via ${peer(BAD).gw} dev flannel.1`);
      assert(e.errno !== null && e.errno > 0, "the kernel's errno is kept");
      assert(res[N] instanceof ParseError, String(res[N]));
      assert(res[N + 1] instanceof NetlinkError && (res[N + 1] as NetlinkError).notFound, String(res[N + 1]));
      const routes = await ipJson<J[]>(ns, "route", "show", "dev", "flannel.1");
      assertEquals(routes.length, N - 1);
      assert(!routes.some((r) => r.dst === peer(BAD).subnet));
      // The same writes again: all replace, nothing new fails.
      assertEquals(h.writeMany(writes.slice(0, BAD)).filter((x) => x !== null).length, 0);
    } finally {
      h.close();
    }
  });
});

needsRoot.test("reconciler bulk pass: one bad peer among 1000 is reported and left with no entries, the 999 others are programmed", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("pr");
    await overlay(ns);
    const h = openNetlink({ name: ns });
    const warnings: Record<string, unknown>[] = [];
    const log = {
      info() {},
      debug() {},
      warn(msg: string, f?: Record<string, unknown>) {
        warnings.push({ msg, ...f });
      },
    };
    try {
      const r = new Reconciler({
        nl: h,
        network: IPNet.parse("10.0.0.0/8"),
        overlayDev: "flannel.1",
        log,
        stats: new Metrics(),
      });
      const want = new Map<string, DesiredPeer>();
      for (let i = 0; i < N; i++) {
        const p = peer(i);
        want.set(p.subnet, {
          route: { dst: p.subnet, via: p.gw, dev: "flannel.1", onlink: i !== BAD },
          neigh: { ip: p.gw, mac: p.mac },
          fdb: { mac: p.mac, dst: p.pub },
        });
      }
      const res = r.fullPass(() => want);
      assertEquals(res.errors, 1);
      assertEquals(res.programmed, 3 * (N - 1));
      assertEquals(warnings.length, 1);
      assertEquals(warnings[0].subnet, peer(BAD).subnet);
      assertStringIncludes(String(warnings[0].error), `route replace ${peer(BAD).subnet}`);
      const k = await kernel(ns);
      assertEquals([k.routes.length, k.neigh.length, k.fdb.length], [N - 1, N - 1, N - 1]);
      const bad = peer(BAD);
      assert(!k.routes.some((x) => x.dst === bad.subnet), "no route for the bad peer");
      assert(!k.neigh.some((x) => x.dst === bad.gw), "its ARP entry was undone");
      assert(!k.fdb.some((x) => x.mac === bad.mac), "its FDB entry was undone");
      // The others are exactly what was asked for.
      const ok = peer(3);
      const n3 = k.neigh.find((x) => x.dst === ok.gw);
      assertEquals(n3?.lladdr, ok.mac);
      assertEquals(k.fdb.find((x) => x.mac === ok.mac)?.dst, ok.pub);
      const r3 = k.routes.find((x) => x.dst === ok.subnet);
      assertEquals([r3?.gateway, r3?.flags], [ok.gw, ["onlink"]]);
      // A second pass changes nothing but retries (and again reports) the bad peer.
      const again = r.fullPass();
      assertEquals([again.programmed, again.removed, again.errors], [0, 0, 1]);
      // Stale entries go in the same pipelined way: drop 10 peers from the desired state.
      for (let i = 0; i < 10; i++) want.delete(peer(i).subnet);
      want.delete(bad.subnet);
      const shrink = r.fullPass(() => want);
      assertEquals([shrink.removed, shrink.errors], [30, 0]);
      const k2 = await kernel(ns);
      assertEquals([k2.routes.length, k2.neigh.length, k2.fdb.length], [N - 11, N - 11, N - 11]);
    } finally {
      h.close();
    }
  });
});

needsRoot.test("reconciler bulk pass: a peer MAC's moved FDB remote is moved back by one replace, nothing removed", async () => {
  await withNetns(async (fx) => {
    const ns = await fx.add("pf");
    await overlay(ns);
    const h = openNetlink({ name: ns });
    try {
      const r = new Reconciler({
        nl: h,
        network: IPNet.parse("10.0.0.0/8"),
        overlayDev: "flannel.1",
        log: { info() {}, debug() {}, warn() {} },
        stats: new Metrics(),
      });
      const want = new Map<string, DesiredPeer>();
      for (const p of [peer(1), peer(2)]) {
        want.set(p.subnet, {
          route: { dst: p.subnet, via: p.gw, dev: "flannel.1", onlink: true },
          neigh: { ip: p.gw, mac: p.mac },
          fdb: { mac: p.mac, dst: p.pub },
        });
      }
      assertEquals(r.fullPass(() => want).errors, 0);
      // The kernel keeps one remote per unicast MAC: replace moves it (append would not add a second).
      const p = peer(1);
      await sh(
        "bridge",
        "-n",
        ns,
        "fdb",
        "replace",
        p.mac,
        "dev",
        "flannel.1",
        "dst",
        "10.50.9.9",
        "self",
        "permanent",
      );
      assertEquals((await kernel(ns)).fdb.filter((f) => f.mac === p.mac).map((f) => f.dst), ["10.50.9.9"]);
      assertEquals(r.fullPass(), { programmed: 1, removed: 0, errors: 0 });
      assertEquals((await kernel(ns)).fdb.filter((f) => f.mac === p.mac).map((f) => f.dst), [p.pub]);
    } finally {
      h.close();
    }
  });
});
