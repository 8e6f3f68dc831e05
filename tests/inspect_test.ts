/**
 * `flanctl inspect`: every view in table and JSON form against a namespace built with iproute2, and the
 * error contract (bad arguments exit 2, a missing namespace exits 1 naming it).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, ipJson, ROOT, run, sh, withNetns } from "./netns.ts";
import type { AddrView, FdbView, InspectView, LinkView, NeighView, RouteView } from "../cli/inspect.ts";

// deno-lint-ignore no-explicit-any
type J = any;

/** Runs one iproute2 command line (words separated by single spaces) in `ns`. */
const ip = (ns: string, line: string) => sh("ip", "-n", ns, ...line.split(" "));

async function fixture(n: string): Promise<void> {
  await ip(n, "link add ul0 type veth peer name ul1");
  await ip(n, "link add flannel.1 type vxlan id 1 dstport 8472 local 10.4.0.1 dev ul0 nolearning");
  await ip(n, "link add cni0 type bridge");
  await ip(n, "link set ul1 master cni0");
  await ip(n, "link set ul1 type bridge_slave hairpin on");
  for (const l of ["ul0", "ul1", "flannel.1", "cni0"]) await ip(n, `link set ${l} up`);
  await ip(n, "addr add 10.4.0.1/24 dev ul0");
  await ip(n, "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink");
  await ip(n, "neigh add 10.244.2.0 lladdr aa:bb:cc:00:00:02 dev flannel.1 nud permanent");
  await sh(
    "bridge",
    "-n",
    n,
    ..."fdb append aa:bb:cc:00:00:02 dev flannel.1 dst 10.4.0.2 self permanent".split(" "),
  );
}

async function json<T>(args: string[]): Promise<T> {
  const r = await flanctl([...args, "-o", "json"]);
  assertEquals(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as T;
}

/** The JSON contract of `inspect`: the exact keys of every view, in order (docs/inspect.md documents them). */
const SHAPES = {
  link: [
    "name",
    "ifindex",
    "kind",
    "flags",
    "up",
    "operstate",
    "mtu",
    "mac",
    "master",
    "masterIfindex",
    "parent",
    "parentIfindex",
    "linkNetnsId",
  ],
  vxlan: ["vni", "port", "local", "dev", "devIfindex", "learning", "gbp"],
  addr: ["dev", "ifindex", "family", "local", "prefix", "scope"],
  route: [
    "family",
    "dst",
    "gateway",
    "dev",
    "ifindex",
    "scope",
    "flags",
    "table",
    "protocol",
    "type",
    "prefsrc",
    "metric",
  ],
  neigh: ["family", "dev", "ifindex", "dst", "lladdr", "state", "subnet"],
  fdb: ["dev", "ifindex", "mac", "dst", "master", "masterIfindex", "flags", "state", "vlan", "subnet"],
  veth: ["name", "ifindex", "netns", "peer"],
  all: ["links", "veths", "addrs", "routes", "neigh", "fdb"],
};

/** Every key is camelCase (no snake_case, no capitals first). */
function assertCamel(v: unknown, where = "$"): void {
  if (Array.isArray(v)) return v.forEach((x, i) => assertCamel(x, `${where}[${i}]`));
  if (v === null || typeof v !== "object") return;
  for (const [k, x] of Object.entries(v)) {
    assert(/^[a-z][a-zA-Z0-9]*$/.test(k), `${where}.${k} is not camelCase`);
    assertCamel(x, `${where}.${k}`);
  }
}

needsRoot.test("inspect: links/addrs/routes/neigh/fdb/all as JSON views match iproute2 (contract)", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("in");
    await fixture(n);
    const links = await json<LinkView[]>(["inspect", "links", "--netns", n]);
    const ipLinks = await ipJson<J[]>(n, "link", "show");
    assertEquals(links.map((l) => [l.ifindex, l.name]), ipLinks.map((l: J) => [l.ifindex, l.ifname]));
    const vx = links.find((l) => l.name === "flannel.1")!;
    const ul0 = links.find((l) => l.name === "ul0")!;
    assertEquals(vx.vxlan, {
      vni: 1,
      port: 8472,
      local: "10.4.0.1",
      dev: "ul0",
      devIfindex: ul0.ifindex,
      learning: false,
      gbp: false,
    });
    const ul1 = links.find((l) => l.name === "ul1")!;
    assertEquals(ul1.bridgePort, { hairpin: true });
    assertEquals([ul1.master, ul1.parent, ul1.parentIfindex], ["cni0", "ul0", ul0.ifindex]);
    for (const l of links) assertEquals(Object.keys(l).slice(0, SHAPES.link.length), SHAPES.link, l.name);
    assertEquals(Object.keys(vx.vxlan!), SHAPES.vxlan);

    const addrs = await json<AddrView[]>(["inspect", "addrs", "--netns", n]);
    const a = addrs.find((a) => a.dev === "ul0" && a.local === "10.4.0.1")!;
    assertEquals([a.ifindex, a.prefix], [ul0.ifindex, 24]);
    assertEquals(Object.keys(a), SHAPES.addr);
    const routes = await json<RouteView[]>(["inspect", "routes", "--netns", n]);
    const r = routes.find((r) => r.dst === "10.244.2.0/24")!;
    assertEquals([r.gateway, r.dev, r.ifindex, r.flags], ["10.244.2.0", "flannel.1", vx.ifindex, ["onlink"]]);
    assertEquals(Object.keys(r), SHAPES.route);
    const neigh = await json<NeighView[]>(["inspect", "neigh", "--netns", n]);
    const nb = neigh.find((x) => x.dst === "10.244.2.0")!;
    assertEquals(nb, {
      family: 4,
      dev: "flannel.1",
      ifindex: vx.ifindex,
      dst: "10.244.2.0",
      lladdr: "aa:bb:cc:00:00:02",
      state: ["PERMANENT"],
      subnet: "10.244.2.0/24",
    });
    assertEquals(Object.keys(nb), SHAPES.neigh);
    const fdb = await json<FdbView[]>(["inspect", "fdb", "--netns", n]);
    const f = fdb.find((f) => f.mac === "aa:bb:cc:00:00:02")!;
    assertEquals([f.dev, f.ifindex, f.dst, f.subnet], ["flannel.1", vx.ifindex, "10.4.0.2", "10.244.2.0/24"]);
    assertEquals(Object.keys(f), SHAPES.fdb);

    const all = await json<InspectView>(["inspect", "all", "--netns", n]);
    assertEquals(Object.keys(all), SHAPES.all);
    assertEquals(all.links.map((l) => l.name), links.map((l) => l.name));
    assertEquals(all.veths.map((v) => [v.netns, v.peer.netns].every((x) => x === n)), [true]);
    assertEquals(Object.keys(all.veths[0]), SHAPES.veth);
    assertCamel(all);
  });
});

needsRoot.test("inspect neigh/fdb: sorted, flannel.* only by default, --all, --dev", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("is");
    await fixture(n);
    // More flannel entries, added out of order (10.244.10.0 sorts after 10.244.2.0 numerically, not as text),
    // and neighbours on the underlay that the default view leaves out.
    await ip(n, "neigh add 10.244.10.0 lladdr aa:bb:cc:00:00:0a dev flannel.1 nud permanent");
    await ip(n, "neigh add 10.244.3.0 lladdr aa:bb:cc:00:00:03 dev flannel.1 nud permanent");
    await ip(n, "neigh add 10.4.0.9 lladdr 02:00:00:00:00:09 dev ul0 nud permanent");
    await ip(n, "neigh add 10.4.0.7 lladdr 02:00:00:00:00:07 dev ul0 nud permanent");
    // The IPv6 VXLAN device's triplet (dual stack): shown by default, with the subnet it serves.
    await ip(n, "addr add fc00:4::1/64 dev ul0 nodad");
    await ip(n, "link add flannel-v6.1 type vxlan id 1 dstport 8472 local fc00:4::1 dev ul0 nolearning");
    await ip(n, "link set flannel-v6.1 up");
    await ip(n, "-6 route add fc00:244:0:2::/64 via fc00:244:0:2:: dev flannel-v6.1 onlink");
    await ip(n, "-6 neigh add fc00:244:0:2:: lladdr aa:bb:cc:00:06:02 dev flannel-v6.1 nud permanent");
    await sh(
      "bridge",
      "-n",
      n,
      ..."fdb append aa:bb:cc:00:06:02 dev flannel-v6.1 dst fc00:4::2 self permanent".split(" "),
    );
    const def = await json<NeighView[]>(["inspect", "neigh", "--netns", n]);
    const v6 = def.filter((x) => x.dev === "flannel-v6.1" && x.state.includes("PERMANENT"));
    assertEquals(v6.map((x) => [x.family, x.dst, x.lladdr, x.subnet]), [
      [6, "fc00:244:0:2::", "aa:bb:cc:00:06:02", "fc00:244:0:2::/64"],
    ]);
    const fdb6 = (await json<FdbView[]>(["inspect", "fdb", "--netns", n])).filter((f) =>
      f.dev === "flannel-v6.1"
    );
    assertEquals(fdb6.map((f) => [f.mac, f.dst, f.subnet]), [[
      "aa:bb:cc:00:06:02",
      "fc00:4::2",
      "fc00:244:0:2::/64",
    ]]);
    const t6 = await flanctl(["inspect", "neigh", "--netns", n]);
    assert(
      t6.stdout.split("\n").some((l) =>
        /^fc00:244:0:2:: +aa:bb:cc:00:06:02 +flannel-v6\.1 .*fc00:244:0:2::\/64$/.test(l)
      ),
      t6.stdout,
    );
    await ip(n, "link del flannel-v6.1");
    assert(def.every((x) => x.dev === "flannel.1" || x.dev === "flannel-v6.1"), JSON.stringify(def));
    assertEquals(def.filter((x) => x.family === 4).map((x) => [x.dev, x.dst]), [
      ["flannel.1", "10.244.2.0"],
      ["flannel.1", "10.244.3.0"],
      ["flannel.1", "10.244.10.0"],
    ]);
    const all = await json<NeighView[]>(["inspect", "neigh", "--all", "--netns", n]);
    // (The kernel adds NOARP multicast entries of its own; the fixture's are the permanent ones.)
    assertEquals(all.filter((x) => x.state.includes("PERMANENT")).map((x) => [x.dev, x.dst]), [
      ["flannel.1", "10.244.2.0"],
      ["flannel.1", "10.244.3.0"],
      ["flannel.1", "10.244.10.0"],
      ["ul0", "10.4.0.7"],
      ["ul0", "10.4.0.9"],
    ]);
    const ul0 = await json<NeighView[]>(["inspect", "neigh", "--dev", "ul0", "--netns", n]);
    assertEquals(ul0.filter((x) => x.state.includes("PERMANENT")).map((x) => x.dst), [
      "10.4.0.7",
      "10.4.0.9",
    ]);
    assert(ul0.every((x) => x.dev === "ul0"));
    const table = await flanctl(["inspect", "neigh", "--netns", n]);
    assertEquals(table.code, 0, table.stderr);
    const rows = table.stdout.trimEnd().split("\n");
    assertEquals(rows[0].split(/\s+/), ["DST", "LLADDR", "DEV", "STATE", "SUBNET"]);
    assertEquals(rows.slice(1, 4).map((l) => l.split(/\s+/)[0]), ["10.244.2.0", "10.244.3.0", "10.244.10.0"]);
    assertStringIncludes(table.stdout, "on other devices not shown; --all shows them");
    const fdbDef = await json<FdbView[]>(["inspect", "fdb", "--netns", n]);
    assert(fdbDef.length > 0 && fdbDef.every((f) => f.dev === "flannel.1"), JSON.stringify(fdbDef));
    const fdbAll = await json<FdbView[]>(["inspect", "fdb", "--all", "--netns", n]);
    assert(fdbAll.some((f) => f.dev !== "flannel.1"), "--all shows the bridge's entries too");
    const badDev = await flanctl(["inspect", "neigh", "--dev", "a b"]);
    assertEquals(badDev.code, 2);
    assertStringIncludes(badDev.stderr, "--dev: 'a b' is not an interface name");
  });
});

needsRoot.test("inspect: readable aligned tables", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("it");
    await fixture(n);
    const links = await flanctl(["inspect", "links", "--netns", n]);
    assertEquals(links.code, 0, links.stderr);
    const lines = links.stdout.trimEnd().split("\n");
    assertEquals(lines[0].split(/\s+/).slice(0, 4), ["INDEX", "NAME", "KIND", "STATE"]);
    // Columns are aligned: every row has its NAME where the header has it.
    const col = lines[0].indexOf("NAME");
    for (const l of lines.slice(1)) assert(l[col - 1] === " " && l[col] !== " ", `aligned: ${l}`);
    assertStringIncludes(links.stdout, "vni 1 port 8472 local 10.4.0.1 dev ul0 nolearning");
    assertStringIncludes(links.stdout, "hairpin on");
    const routes = await flanctl(["inspect", "routes", "--netns", n]);
    assertStringIncludes(routes.stdout, "10.244.2.0/24");
    assert(
      /10\.244\.2\.0\/24\s+10\.244\.2\.0\s+flannel\.1\s+universe\s+boot\s+main/.test(routes.stdout),
      routes.stdout,
    );
    // flannel.* ARP and FDB entries name the subnet they serve.
    const neigh = await flanctl(["inspect", "neigh", "--netns", n]);
    assert(
      /10\.244\.2\.0\s+aa:bb:cc:00:00:02\s+flannel\.1\s+PERMANENT\s+10\.244\.2\.0\/24/.test(neigh.stdout),
      neigh.stdout,
    );
    const fdb = await flanctl(["inspect", "fdb", "--netns", n]);
    assert(/aa:bb:cc:00:00:02\s+flannel\.1\s+10\.4\.0\.2\s.*10\.244\.2\.0\/24/.test(fdb.stdout), fdb.stdout);
    const all = await flanctl(["inspect", "--netns", n]);
    assertEquals(all.code, 0, all.stderr);
    for (const h of ["LINKS", "VETHS", "ADDRESSES", "ROUTES", "NEIGHBOURS", "FDB"]) {
      assertStringIncludes(all.stdout, `${h}\n`);
    }
  });
});

Deno.test("inspect: bad arguments exit 2, missing netns exits 1 naming it, --help works", async () => {
  const bad = await flanctl(["inspect", "bogus"]);
  assertEquals(bad.code, 2);
  assertStringIncludes(bad.stderr, "'bogus' is not one of links, veths, addrs, routes, neigh, fdb, all");
  const badOut = await flanctl(["inspect", "links", "-o", "yaml"]);
  assertEquals(badOut.code, 2);
  assertStringIncludes(badOut.stderr, "-o/--output: 'yaml'");
  const badNs = await flanctl(["inspect", "links", "--netns", "a/b"]);
  assertEquals(badNs.code, 2);
  for (const what of ["links", "veths"]) {
    const missing = await flanctl(["inspect", what, "--netns", "flanctl-missing-ns"]);
    assertEquals(missing.code, 1, what);
    assertStringIncludes(missing.stderr, "network namespace 'flanctl-missing-ns' not found");
  }
  const help = await flanctl(["inspect", "--help"]);
  assertEquals(help.code, 0);
  assertStringIncludes(help.stdout, "--netns <name>");
  // libnl is loaded lazily: without FFI permission --help still works, and a read fails cleanly.
  const noFfi = (args: string[]) =>
    run([
      Deno.execPath(),
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-net",
      "--allow-sys",
      "--no-check",
      "--quiet",
      `${ROOT}main.ts`,
      ...args,
    ]);
  const h2 = await noFfi(["inspect", "--help"]);
  assertEquals(h2.code, 0, h2.stderr);
  const r2 = await noFfi(["inspect", "links"]);
  assertEquals(r2.code, 1);
  // The netlink socket is libc's (socket(2)): libc is the first library a kernel read loads.
  assertStringIncludes(r2.stderr, "flanctl: cannot load libc.so.6");
});
