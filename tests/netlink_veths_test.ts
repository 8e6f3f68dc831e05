/**
 * Veth pairing across namespaces: pairs spread over three namespaces, one peer moved (and renamed) after
 * creation, ifindexes that repeat across namespaces. Checked through the library and through
 * `flanctl inspect veths -o json`.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { flanctl, sh, withNetns } from "./netns.ts";
import { listHostNetns, listVethPairs, type VethPair } from "../lib/observe/veths.ts";

const ip = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

/** Builds the fixture and returns the expected pairs (as sorted "ns/name<->ns/name" strings). */
async function build(a: string, b: string, c: string): Promise<string[]> {
  // a <-> b, created with the peer directly in b.
  await ip(a, "link", "add", "va0", "type", "veth", "peer", "name", "vb0", "netns", b);
  // b <-> c, created inside b, then one end moved to c and renamed.
  await ip(b, "link", "add", "vb1", "type", "veth", "peer", "name", "tmp1");
  await ip(b, "link", "set", "tmp1", "netns", c, "name", "vc1");
  // a <-> a (same namespace).
  await ip(a, "link", "add", "va2", "type", "veth", "peer", "name", "va3");
  // c <-> a, created in c with the peer in a: ifindex 2 exists in all three namespaces.
  await ip(c, "link", "add", "vc4", "type", "veth", "peer", "name", "va4", "netns", a);
  return [
    `${a}/va0<->${b}/vb0`,
    `${b}/vb1<->${c}/vc1`,
    `${a}/va2<->${a}/va3`,
    `${c}/vc4<->${a}/va4`,
  ].map(norm).sort();
}

function norm(s: string): string {
  return s.split("<->").sort().join("<->");
}

function keys(pairs: VethPair[], mine: Set<string>): string[] {
  return pairs.filter((p) => mine.has(p.netns ?? "") || mine.has(p.peer.netns ?? ""))
    .map((p) => norm(`${p.netns}/${p.name}<->${p.peer.netns}/${p.peer.name}`)).sort();
}

needsRoot.test("veth pairing: 3 namespaces, moved peer, repeated ifindexes (library and inspect veths -o json)", async () => {
  await withNetns(async (fx) => {
    const a = await fx.add("va"), b = await fx.add("vb"), c = await fx.add("vc");
    const want = await build(a, b, c);
    const mine = new Set([a, b, c]);

    const all = listVethPairs();
    assertEquals(keys(all, mine), want);
    // ifindexes really repeat, and every pair carries the right ones.
    for (const p of all.filter((p) => mine.has(p.netns ?? ""))) {
      const [idx] = JSON.parse(await sh("ip", "-n", p.netns!, "-j", "link", "show", "dev", p.name));
      assertEquals(p.ifindex, idx.ifindex);
      const [peer] = JSON.parse(
        await sh("ip", "-n", p.peer.netns!, "-j", "link", "show", "dev", p.peer.name!),
      );
      assertEquals(p.peer.ifindex, peer.ifindex);
    }
    // Listed once per pair.
    assertEquals(all.filter((p) => mine.has(p.netns ?? "")).length, 4);

    // --netns: only the pairs with an end there, that end first.
    const onlyB = listVethPairs({ netns: b });
    assertEquals(onlyB.map((p) => `${p.netns}/${p.name}->${p.peer.netns}/${p.peer.name}`).sort(), [
      `${b}/vb0->${a}/va0`,
      `${b}/vb1->${c}/vc1`,
    ]);

    const r = await flanctl(["inspect", "veths", "-o", "json"]);
    assertEquals(r.code, 0, r.stderr);
    const cli = JSON.parse(r.stdout) as VethPair[];
    assertEquals(keys(cli, mine), want);
    for (const p of cli) {
      assertEquals(Object.keys(p), ["name", "ifindex", "netns", "peer"]);
      assertEquals(Object.keys(p.peer), ["name", "ifindex", "netns"]);
    }
    const rc = await flanctl(["inspect", "veths", "--netns", c, "-o", "json"]);
    assertEquals(rc.code, 0, rc.stderr);
    assertEquals(
      (JSON.parse(rc.stdout) as VethPair[]).map((p) => `${p.name}->${p.peer.netns}/${p.peer.name}`).sort(),
      [`vc1->${b}/vb1`, `vc4->${a}/va4`],
    );
    const table = await flanctl(["inspect", "veths", "--netns", a]);
    assertEquals(table.code, 0, table.stderr);
    assert(table.stdout.startsWith("NETNS"), table.stdout);
    assert(table.stdout.includes("va4") && table.stdout.includes(c));
  });
});

Deno.test("veth pairing: namespaces are listed once each, ours first as null", () => {
  const spaces = listHostNetns();
  assertEquals(spaces[0].label, null);
  assertEquals(new Set(spaces.map((s) => s.id)).size, spaces.length);
});

needsRoot.test("veth pairing: a process's anonymous namespace is named pid:PID", async () => {
  await withNetns(async (fx) => {
    const a = await fx.add("vp");
    // `unshare -n` gives sleep its own unnamed namespace; a veth is then moved into it.
    const child = new Deno.Command("unshare", { args: ["-n", "sleep", "30"], stdout: "null", stderr: "null" })
      .spawn();
    try {
      const deadline = Date.now() + 15_000;
      const self = Deno.statSync("/proc/self/ns/net").ino;
      while (Deno.statSync(`/proc/${child.pid}/ns/net`).ino === self) {
        if (Date.now() > deadline) throw new Error("unshare did not create a namespace");
        await new Promise((r) => setTimeout(r, 20));
      }
      await ip(a, "link", "add", "vp0", "type", "veth", "peer", "name", "vp1");
      await ip(a, "link", "set", "vp1", "netns", String(child.pid));
      const pairs = listVethPairs({ netns: a });
      assertEquals(pairs.map((p) => [p.name, p.peer.name, p.peer.netns]), [[
        "vp0",
        "vp1",
        `pid:${child.pid}`,
      ]]);
    } finally {
      child.kill("SIGKILL");
      await child.status;
    }
  });
});
