/**
 * The udp backend's receive coalescing checks what it merges (issue 30): TCP segments with bad checksums,
 * sent as flannel UDP datagrams from a peer's address to a node's port (tests/udp_tcp_inject.ts, pairs
 * that arrive together and would be merged), never reach the pod as valid data — its kernel counts them as
 * checksum errors and answers none of them (a RST to port 9 would mean it took the data). The same pairs
 * with good checksums are answered, so the path works.
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { DaemonCluster, waitFor } from "./daemon_fixture.ts";
import { nsRun, nsSh } from "./netns.ts";

const NETCONF = JSON.stringify({ Network: "10.244.0.0/16", Backend: { Type: "udp" } });
const INJECT = new URL("./udp_tcp_inject.ts", import.meta.url).pathname;

/** The pod's TCP counters (/proc/net/snmp): OutRsts and InCsumErrors. */
async function tcpStats(ns: string): Promise<{ rsts: number; csumErrors: number }> {
  const lines = (await nsSh(ns, "cat", "/proc/net/snmp")).split("\n").filter((l) => l.startsWith("Tcp:"));
  const names = lines[0].split(/\s+/), vals = lines[1].split(/\s+/).map(Number);
  return { rsts: vals[names.indexOf("OutRsts")], csumErrors: vals[names.indexOf("InCsumErrors")] };
}

needsRoot.test("daemon udp: corrupted TCP segments are not coalesced into data the pod accepts", async () => {
  const c = new DaemonCluster("10.96");
  try {
    await c.init(NETCONF);
    const a = await c.addNode(), b = await c.addNode();
    c.start(a), c.start(b);
    await c.waitReady(a);
    await c.waitReady(b);
    const pa = await c.addPod(a);
    const subB = (await c.subnetOf(b)).split("/")[0].split(".");
    const innerSrc = `${subB[0]}.${subB[1]}.${subB[2]}.77`;
    await waitFor(c.explain("A knows B"), async () => {
      const r = await nsRun(a.ns, ["ip", "route", "get", innerSrc]);
      return r.stdout.includes("flannel0");
    });
    const inject = async (pairs: number, corrupt: boolean, firstPort: number) => {
      const args = [
        b.ip,
        a.ip,
        "8285",
        innerSrc,
        pa.ip,
        String(pairs),
        corrupt ? "1" : "0",
        String(firstPort),
      ];
      const r = await nsRun(b.ns, [Deno.execPath(), "run", "-A", "--no-check", "--quiet", INJECT, ...args]);
      assertEquals(r.code, 0, r.stderr);
    };
    const N = 50;
    // Good pairs first: the path works, the pod answers each flow (a RST: nothing listens on port 9).
    const s0 = await tcpStats(pa.ns);
    await inject(N, false, 20000);
    await waitFor("the pod answers good segments", async () => (await tcpStats(pa.ns)).rsts - s0.rsts >= N);
    // Corrupted pairs: every segment reaches the pod's kernel as it came, which drops it; none answered.
    const s1 = await tcpStats(pa.ns);
    await inject(N, true, 30000);
    // Waited for until all are counted (or, on a data path that merges them, until one is answered).
    await waitFor("the corrupted segments counted", async () => {
      const s = await tcpStats(pa.ns);
      return s.csumErrors - s1.csumErrors >= 2 * N || s.rsts > s1.rsts;
    }, 10_000).catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    const s2 = await tcpStats(pa.ns);
    assertEquals(s2.rsts - s1.rsts, 0, "the pod answered corrupted segments: it took them as valid data");
    assertEquals(s2.csumErrors - s1.csumErrors, 2 * N, "every corrupted segment reached the pod unmerged");
  } finally {
    await c.close();
  }
});
