/**
 * Kernel layer, reading: state is built with iproute2 in throwaway namespaces and the library must read
 * exactly what `ip -j` / `bridge -j` report (iproute2 is the oracle).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { ipJson, sh, withNetns } from "./netns.ts";
import { teachPmtu } from "./pmtu.ts";
import { openNetlink } from "../lib/netlink/mod.ts";
import type { LinkInfo } from "../lib/netlink/types.ts";

// deno-lint-ignore no-explicit-any
type J = any;

const ip = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

/**
 * The kernel adds IPv6 link-local routes and multicast neighbours on its own shortly after links come
 * up, so library and oracle are compared until they agree (deadline 30 s: slower on a loaded machine); the
 * last difference fails.
 */
async function agree<T>(read: () => Promise<[T, T]>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const [got, want] = await read();
    if (JSON.stringify(got) === JSON.stringify(want) || Date.now() > deadline) {
      assertEquals(got, want);
      return got;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

needsRoot.test("netlink read: links (veth across namespaces, bridge port hairpin, vxlan) match ip -j -d link", async () => {
  await withNetns(async (fx) => {
    const n1 = await fx.add("rl"), n2 = await fx.add("rl");
    await ip(n1, "link", "add", "ul0", "type", "veth", "peer", "name", "ul1");
    await ip(n1, "link", "set", "ul0", "mtu", "1400", "address", "02:11:22:33:44:55", "up");
    await ip(n1, "link", "set", "ul1", "up");
    await ip(
      n1,
      "link",
      "add",
      "vx0",
      "type",
      "vxlan",
      "id",
      "42",
      "dstport",
      "4789",
      "local",
      "10.9.0.1",
      "dev",
      "ul0",
      "nolearning",
    );
    await ip(n1, "link", "add", "vx1", "type", "vxlan", "id", "7", "dstport", "8472", "gbp");
    await ip(n1, "link", "add", "br0", "type", "bridge");
    await ip(n1, "link", "add", "port0", "type", "veth", "peer", "name", "ceth0", "netns", n2);
    await ip(n1, "link", "add", "port1", "type", "veth", "peer", "name", "ceth1");
    await ip(n1, "link", "set", "port0", "master", "br0");
    await ip(n1, "link", "set", "port1", "master", "br0");
    await ip(n1, "link", "set", "port0", "type", "bridge_slave", "hairpin", "on");
    await ip(n1, "link", "set", "br0", "up");

    const h = openNetlink({ name: n1 });
    let links: LinkInfo[];
    try {
      links = h.links();
      assertEquals(h.link("vx0")?.name, "vx0");
      assertEquals(h.link(1)?.name, "lo");
      assertEquals(h.link("nope0"), null);
    } finally {
      h.close();
    }
    const oracle: J[] = await ipJson(n1, "-d", "link", "show");
    assertEquals(links.length, oracle.length);
    const byName = new Map(oracle.map((l: J) => [l.ifname, l]));
    const nameOf = new Map(oracle.map((l: J) => [l.ifindex, l.ifname]));
    for (const l of links) {
      const o = byName.get(l.name);
      assert(o, `ip does not list ${l.name}`);
      assertEquals(l.index, o.ifindex, `${l.name} index`);
      assertEquals(l.kind, o.linkinfo?.info_kind ?? null, `${l.name} kind`);
      assertEquals(l.flags, o.flags, `${l.name} flags`);
      assertEquals(l.up, o.flags.includes("UP"), `${l.name} up`);
      assertEquals(l.operstate, o.operstate, `${l.name} operstate`);
      assertEquals(l.mtu, o.mtu, `${l.name} mtu`);
      assertEquals(l.mac, o.address, `${l.name} mac`);
      assertEquals(l.master === null ? undefined : nameOf.get(l.master), o.master, `${l.name} master`);
      assertEquals(
        l.parent ?? undefined,
        o.link_index ?? (o.link ? byName.get(o.link)?.ifindex : undefined),
        `${l.name} parent`,
      );
      assertEquals(l.linkNetnsId ?? undefined, o.link_netnsid, `${l.name} link-netnsid`);
      if (o.linkinfo?.info_kind === "vxlan") {
        const d = o.linkinfo.info_data;
        assertEquals(l.vxlan, {
          vni: d.id,
          port: d.port,
          local: d.local ?? d.local6 ?? null,
          dev: d.link ? byName.get(d.link).ifindex : null,
          learning: d.learning,
          gbp: d.gbp === true,
        }, `${l.name} vxlan`);
      } else assertEquals(l.vxlan, undefined);
      if (o.linkinfo?.info_slave_kind === "bridge") {
        assertEquals(l.bridgePort, { hairpin: o.linkinfo.info_slave_data.hairpin }, `${l.name} hairpin`);
      } else assertEquals(l.bridgePort, undefined, `${l.name} bridgePort`);
    }
    // The fixture covers what it claims to.
    const get = (n: string) => links.find((l) => l.name === n)!;
    assertEquals(get("port0").bridgePort, { hairpin: true });
    assertEquals(get("port1").bridgePort, { hairpin: false });
    assertEquals(get("vx0").vxlan?.learning, false);
    assertEquals(get("vx0").vxlan?.dev, get("ul0").index);
    assertEquals(get("vx1").vxlan?.gbp, true);
    assert(get("port0").linkNetnsId !== null);
    assertEquals(get("port1").linkNetnsId, null);
    assertEquals(get("ul0").mac, "02:11:22:33:44:55");
  });
});

needsRoot.test("netlink read: addresses v4/v6 match ip -j addr", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("ra");
    await ip(n, "link", "add", "ve0", "type", "veth", "peer", "name", "ve1");
    await ip(n, "addr", "add", "10.20.30.40/24", "dev", "ve0");
    await ip(n, "addr", "add", "10.20.31.1/32", "dev", "ve0", "scope", "link");
    await ip(n, "addr", "add", "fd00:1:0::5/64", "dev", "ve0", "nodad");
    await ip(n, "addr", "add", "2001:db8::ffff:1.2.3.4/128", "dev", "ve1", "nodad");
    await ip(n, "link", "set", "ve0", "up");
    await ip(n, "link", "set", "ve1", "up");
    const h = openNetlink({ name: n });
    try {
      const got = h.addrs().map((a) => `${a.ifname}#${a.index} ${a.family} ${a.local}/${a.prefix} ${a.scope}`)
        .sort();
      const oracle: J[] = await ipJson(n, "addr", "show");
      const want = oracle.flatMap((l: J) =>
        l.addr_info.map((a: J) =>
          `${l.ifname}#${l.ifindex} ${a.family === "inet6" ? 6 : 4} ${a.local}/${a.prefixlen} ${a.scope}`
        )
      ).sort();
      assertEquals(got, want);
      assert(
        got.some((s) => s.includes("2001:db8::ffff:102:304/128")),
        "mixed IPv6 text as iproute2 prints it",
      );
      assertEquals(h.addrs(4).every((a) => a.family === 4), true);
      assertEquals(h.addrs(6).length, want.filter((s) => / 6 /.test(s)).length);
    } finally {
      h.close();
    }
  });
});

function routeKey(r: J): string {
  return [
    r.dst,
    r.gateway ?? "-",
    r.dev ?? "-",
    r.scope ?? "universe",
    r.protocol ?? "boot",
    r.table ?? "main",
    r.type ?? "unicast",
    r.prefsrc ?? "-",
    r.metric ?? "-",
    (r.flags ?? []).join(","),
  ].join(" ");
}

async function routeOracle(n: string): Promise<string[]> {
  const oracle: J[] = [
    ...await ipJson<J[]>(n, "-4", "route", "show", "table", "all"),
    ...await ipJson<J[]>(n, "-6", "route", "show", "table", "all"),
  ];
  return oracle.filter((r) => r.table !== "local").map((r) =>
    routeKey({ ...r, scope: r.scope === "global" ? undefined : r.scope })
  ).sort();
}

needsRoot.test("netlink read: routes (default, onlink, scope link, v6, other table, metric, src) match ip -j route", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("rr");
    await ip(n, "link", "add", "ve0", "type", "veth", "peer", "name", "ve1");
    await ip(n, "link", "set", "ve0", "up");
    await ip(n, "link", "set", "ve1", "up");
    await ip(n, "addr", "add", "10.1.0.1/24", "dev", "ve0");
    await ip(n, "addr", "add", "fd00::1/64", "dev", "ve0", "nodad");
    await ip(n, "route", "add", "default", "via", "10.1.0.254");
    await ip(n, "route", "add", "10.244.2.0/24", "via", "10.244.2.0", "dev", "ve0", "onlink");
    await ip(n, "route", "add", "10.244.3.0/24", "dev", "ve1", "proto", "static", "metric", "50");
    await ip(n, "route", "add", "10.5.5.5", "dev", "ve0", "src", "10.1.0.1", "table", "100");
    await ip(n, "route", "add", "blackhole", "10.66.0.0/16");
    await ip(n, "-6", "route", "add", "fd01::/48", "via", "fd00::2", "metric", "300");
    const h = openNetlink({ name: n });
    try {
      const got = await agree(async () => [
        h.routes().map((r) =>
          routeKey({
            dst: r.dst.endsWith(r.family === 4 ? "/32" : "/128") ? r.dst.replace(/\/\d+$/, "") : r.dst,
            gateway: r.gateway,
            dev: r.devName,
            scope: r.scope === "universe" ? undefined : r.scope,
            protocol: r.protocol,
            table: r.table === 254 ? "main" : String(r.table),
            type: r.type === "unicast" ? undefined : r.type,
            prefsrc: r.prefsrc,
            metric: r.metric,
            flags: r.flags,
          })
        ).sort(),
        await routeOracle(n),
      ]);
      assert(got.some((k) => k.startsWith("10.244.2.0/24 10.244.2.0 ve0") && k.endsWith("onlink")));
      assertEquals(h.routes({ table: 100 }).map((r) => r.dst), ["10.5.5.5/32"]);
      assert(h.routes({ table: 255 }).some((r) => r.type === "local"), "local table on request");
      assert(h.routes({ family: 6 }).every((r) => r.family === 6));
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink read: neighbours and FDB match ip -j neigh / bridge -j fdb", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("rn");
    await ip(n, "link", "add", "ve0", "type", "veth", "peer", "name", "ve1");
    await ip(n, "link", "add", "vx0", "type", "vxlan", "id", "1", "dstport", "8472", "nolearning");
    await ip(n, "link", "add", "br0", "type", "bridge");
    await ip(n, "link", "set", "ve1", "master", "br0");
    for (const l of ["ve0", "ve1", "vx0", "br0"]) await ip(n, "link", "set", l, "up");
    await ip(n, "neigh", "add", "10.1.0.9", "lladdr", "02:00:00:00:00:09", "dev", "ve0", "nud", "permanent");
    await ip(n, "neigh", "add", "10.1.0.10", "lladdr", "02:00:00:00:00:0a", "dev", "ve0", "nud", "reachable");
    await ip(n, "neigh", "add", "fd00::9", "lladdr", "02:00:00:00:00:19", "dev", "ve0", "nud", "permanent");
    await ip(
      n,
      "neigh",
      "add",
      "10.244.7.0",
      "lladdr",
      "aa:bb:cc:00:00:07",
      "dev",
      "vx0",
      "nud",
      "permanent",
    );
    await sh(
      "bridge",
      "-n",
      n,
      "fdb",
      "append",
      "aa:bb:cc:00:00:07",
      "dev",
      "vx0",
      "dst",
      "192.168.7.7",
      "self",
      "permanent",
    );
    await sh("bridge", "-n", n, "fdb", "add", "02:00:00:00:00:77", "dev", "ve1", "master", "static");
    const h = openNetlink({ name: n });
    try {
      const got = await agree(async () => [
        h.neighbours().map((x) => `${x.ifname} ${x.dst} ${x.lladdr ?? "-"} ${x.state.join(",")}`).sort(),
        (await ipJson<J[]>(n, "neigh", "show", "nud", "all")).map((x) =>
          `${x.dev} ${x.dst} ${x.lladdr ?? "-"} ${x.state.join(",")}`
        ).sort(),
      ]);
      assert(got.includes("vx0 10.244.7.0 aa:bb:cc:00:00:07 PERMANENT"));
      assertEquals(h.neighbours(6).map((x) => x.dst).filter((d) => d === "fd00::9"), ["fd00::9"]);

      const names = new Map(h.links().map((l) => [l.index, l.name]));
      // bridge(8) prints permanent / static (NOARP) / stale, and nothing for other states.
      const nud = (s: string[]) =>
        s.includes("PERMANENT")
          ? "permanent"
          : s.includes("NOARP")
          ? "static"
          : s.includes("STALE")
          ? "stale"
          : "-";
      const fdb = await agree(async () => [
        h.fdb().map((f) =>
          [
            f.mac,
            f.ifname,
            f.dst ?? "-",
            f.master === null ? "-" : names.get(f.master),
            f.vlan ?? "-",
            f.flags.join(","),
            nud(f.state),
          ]
            .join(" ")
        ).sort(),
        JSON.parse(await sh("bridge", "-n", n, "-j", "fdb", "show")).map((f: J) =>
          [f.mac, f.ifname, f.dst ?? "-", f.master ?? "-", f.vlan ?? "-", f.flags.join(","), f.state || "-"]
            .join(" ")
        ).sort(),
      ]);
      assert(fdb.includes("aa:bb:cc:00:00:07 vx0 192.168.7.7 - - self permanent"));
      assert(fdb.includes("02:00:00:00:00:77 ve1 - br0 -  static"), "bridge port entry (no NTF flags)");
    } finally {
      h.close();
    }
  });
});

needsRoot.test("netlink read: a route-cache exception (learned PMTU) is not a route, for routes() nor scanRoutes()", async () => {
  await withNetns(async (fx) => {
    const a = await fx.add("rc"), b = await fx.add("rc");
    await sh("ip", "link", "add", "rca", "netns", a, "type", "veth", "peer", "name", "rcb", "netns", b);
    await ip(a, "addr", "add", "10.31.0.1/24", "dev", "rca");
    await ip(b, "addr", "add", "10.31.0.2/24", "dev", "rcb");
    await ip(a, "link", "set", "rca", "up");
    await ip(b, "link", "set", "rcb", "up");
    await ip(a, "route", "add", "10.32.0.0/24", "via", "10.31.0.2");
    await teachPmtu(b, "10.31.0.1", "10.32.0.9", 1300);
    assert((await ip(a, "route", "get", "10.32.0.9")).includes("mtu 1300"), "the kernel learned the PMTU");
    const h = openNetlink({ name: a });
    try {
      assertEquals(h.routes({ family: 4 }).map((r) => r.dst).filter((d) => d.startsWith("10.32.")), [
        "10.32.0.0/24",
      ]);
      const scanned: string[] = [];
      h.scanRoutes({ family: 4 }, (r) => scanned.push(r.dst));
      assertEquals(scanned.filter((d) => d.startsWith("10.32.")), ["10.32.0.0/24"]);
    } finally {
      h.close();
    }
  });
});
