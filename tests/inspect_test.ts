/**
 * `flanctl inspect`: every view in table and JSON form against a namespace built with iproute2, and the
 * error contract (bad arguments exit 2, a missing namespace exits 1 naming it).
 */
import { assert, assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctl, ipJson, ROOT, run, sh, withNetns } from "./netns.ts";
import type { InspectAll } from "../cli/inspect.ts";
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, RouteInfo } from "../lib/netlink/types.ts";

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

Deno.test("inspect: links/addrs/routes/neigh/fdb/all as JSON match iproute2", async () => {
  await withNetns(async (fx) => {
    const n = await fx.add("in");
    await fixture(n);
    const links = await json<LinkInfo[]>(["inspect", "links", "--netns", n]);
    const ipLinks = await ipJson<J[]>(n, "link", "show");
    assertEquals(links.map((l) => [l.index, l.name]), ipLinks.map((l: J) => [l.ifindex, l.ifname]));
    const vx = links.find((l) => l.name === "flannel.1")!;
    assertEquals(vx.vxlan, {
      vni: 1,
      port: 8472,
      local: "10.4.0.1",
      dev: links.find((l) => l.name === "ul0")!.index,
      learning: false,
      gbp: false,
    });
    assertEquals(links.find((l) => l.name === "ul1")!.bridgePort, { hairpin: true });

    const addrs = await json<AddrInfo[]>(["inspect", "addrs", "--netns", n]);
    assert(addrs.some((a) => a.ifname === "ul0" && a.local === "10.4.0.1" && a.prefix === 24));
    const routes = await json<RouteInfo[]>(["inspect", "routes", "--netns", n]);
    const r = routes.find((r) => r.dst === "10.244.2.0/24")!;
    assertEquals([r.gateway, r.devName, r.flags], ["10.244.2.0", "flannel.1", ["onlink"]]);
    const neigh = await json<NeighInfo[]>(["inspect", "neigh", "--netns", n]);
    assert(
      neigh.some((x) =>
        x.dst === "10.244.2.0" && x.lladdr === "aa:bb:cc:00:00:02" && x.state[0] === "PERMANENT"
      ),
    );
    const fdb = await json<FdbInfo[]>(["inspect", "fdb", "--netns", n]);
    assert(
      fdb.some((f) => f.ifname === "flannel.1" && f.mac === "aa:bb:cc:00:00:02" && f.dst === "10.4.0.2"),
    );

    const all = await json<InspectAll>(["inspect", "all", "--netns", n]);
    assertEquals(Object.keys(all), ["links", "veths", "addrs", "routes", "neigh", "fdb"]);
    assertEquals(all.links.map((l) => l.name), links.map((l) => l.name));
    assertEquals(all.veths.map((v) => [v.netns, v.peer.netns].every((x) => x === n)), [true]);
  });
});

Deno.test("inspect: readable aligned tables", async () => {
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
  assertStringIncludes(r2.stderr, "flanctl: cannot load libnl-3.so.200");
});
