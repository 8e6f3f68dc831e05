/**
 * A repeated DEL answered by the launcher (lib/cni/deleted.ts, lib/cni/launch.ts earlyDelSh) against the
 * full DEL on the same inputs: loopback, flannel (bridge + host-local in-process) and portmap with a
 * hostPort (iptables), ADD then DEL in a node netns through a launcher like the installed ones. The second
 * DEL (no netns, as containerd's at remove) must be answered without starting Deno (no trace line) with
 * exit 0 and no output, change nothing (links, addresses, routes, nat rules, files), and the full DEL run
 * on the same environment and stdin must answer the same and change nothing either. An ADD empties the
 * record even when it fails (a crashed ADD gets a full DEL); no record (a node upgraded from a version that
 * kept none), a netns that exists, and an environment the full path refuses all go to Deno.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, type CniCall, cniOk, listFiles, pluginCmd, tempDir } from "./cni_helpers.ts";
import { nsRun, withNetns } from "./netns.ts";
import { earlyDelSh, shQuote } from "../lib/cni/launch.ts";
import { DELETED_DIR_ENV } from "../lib/cni/deleted.ts";
import { CNI_PLUGIN_NAMES } from "../lib/cni/names.ts";

/** A launcher like install.sh's: the early DEL, then our plugin through main.ts. */
function launchers(bin: string, records: string): void {
  Deno.mkdirSync(bin, { recursive: true });
  const exec = pluginCmd().map(shQuote).join(" ");
  for (const name of CNI_PLUGIN_NAMES) {
    Deno.writeTextFileSync(
      `${bin}/${name}`,
      `#!/bin/sh\ncase "\${0##*/}" in\n  ${CNI_PLUGIN_NAMES.join("|")})\n${earlyDelSh(records)}\n;;\nesac\n` +
        `exec ${exec}\n`,
      { mode: 0o755 },
    );
  }
}

needsRoot.test("cni deleted records: a repeated DEL answered by the launcher is what the full DEL answers", () =>
  withNetns(async (fx) => {
    const node = await fx.add("cdn");
    const pod = await fx.add("cdp");
    const d = tempDir();
    try {
      const records = `${d.path}/deleted`, bin = `${d.path}/bin`;
      launchers(bin, records);
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
      );
      const flannel = {
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: `${d.path}/subnet.env`,
        dataDir: `${d.path}/flannel`,
        ipam: { dataDir: `${d.path}/networks` },
      };
      const loopback = { cniVersion: "1.0.0", name: "cni-loopback", type: "loopback" };
      const portmap = (prevResult?: unknown) => ({
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "portmap",
        backend: "iptables",
        runtimeConfig: { portMappings: [{ hostPort: 18081, containerPort: 80, protocol: "tcp" }] },
        ...(prevResult ? { prevResult } : {}),
      });
      const id = "cd0123456789abcdef";
      const env = { [DELETED_DIR_ENV]: records, FLANCTL_CNI_TRACE: "1" };
      const call = (plugin: string, command: string, conf: unknown, o: Partial<CniCall> = {}) =>
        cni({
          plugin,
          command,
          node,
          netns: pod,
          containerId: id,
          ifname: plugin === "loopback" ? "lo" : "eth0",
          conf,
          exe: `${bin}/${plugin}`,
          ...o,
          // No netns at all (cniEnv would make "" a path under /var/run/netns).
          env: o.netns === "" ? { ...env, CNI_NETNS: "" } : env,
        });
      // What a DEL could change in the node, without what the kernel changes by itself (carrier, timers).
      const state = async () => ({
        links: (await nsRun(node, ["ip", "-o", "link"])).stdout.split("\n").map((l) => l.split(" ")[1]),
        addrs: (await nsRun(node, ["ip", "-o", "addr"])).stdout.split("\n").map((l) =>
          l.split(/\s+/).slice(1, 4)
        ),
        routes: (await nsRun(node, ["ip", "route"])).stdout.replaceAll(" linkdown", ""),
        nat: (await nsRun(node, ["iptables-save", "-t", "nat"])).stdout.split("\n")
          .filter((l) => !l.startsWith("#")).map((l) => l.replace(/\[\d+:\d+\]/, "")).join("\n"),
        files: listFiles(d.path).filter((f) => !f.startsWith("bin/")),
      });
      const traced = (r: { stderr: string }) => r.stderr.includes("trace ");
      const record = (plugin: string) => {
        try {
          return Deno.readTextFileSync(`${records}/${plugin}:${plugin === "loopback" ? "lo" : "eth0"}:${id}`);
        } catch {
          return null;
        }
      };

      // ADD the chain (loopback, flannel, portmap with a hostPort), then DEL it as containerd does at stop.
      assertEquals((await call("loopback", "ADD", loopback)).code, 0);
      const res = await call("flannel", "ADD", flannel);
      assertEquals(res.code, 0, res.stdout);
      assertEquals((await call("portmap", "ADD", portmap(res.json))).code, 0);
      assert((await state()).nat.includes("18081"), "the hostPort's rules are there");
      for (const p of ["loopback", "flannel", "portmap"]) assertEquals(record(p), "", `${p}: emptied by ADD`);
      for (const [p, c] of [["portmap", portmap()], ["flannel", flannel], ["loopback", loopback]] as const) {
        const r = await call(p, "DEL", c);
        assertEquals([r.code, r.stdout], [0, ""], `${p} DEL: ${r.stderr}`);
        assert(traced(r), `${p}: the first DEL runs in full`);
        assertEquals(record(p), "deleted\n", `${p}: record filled after its DEL`);
      }
      const after = await state();
      assert(!after.nat.includes("18081") && !after.links.includes("veth"), "the first DEL removed all");

      // The repeated DEL without a netns (containerd's at remove): answered by the launcher, and the full
      // path on the same inputs answers the same; neither changes anything.
      for (const [p, c] of [["portmap", portmap()], ["flannel", flannel], ["loopback", loopback]] as const) {
        const early = await call(p, "DEL", c, { netns: "" });
        assertEquals([early.code, early.stdout, early.stderr], [0, "", ""], `${p}: answered early`);
        assertEquals(await state(), after, `${p}: the early DEL changed nothing`);
        const full = await call(p, "DEL", c, { netns: "", exe: undefined });
        assert(traced(full), `${p}: the full path ran`);
        assertEquals([full.code, full.stdout], [early.code, early.stdout], `${p}: full DEL answers the same`);
        assertEquals(await state(), after, `${p}: the full DEL changed nothing either`);
        // A netns that is gone (a path naming nothing) is the same; one that exists goes to Deno, but for
        // portmap, whose DEL never looks at the netns.
        const gone = await call(p, "DEL", c, { netns: `/var/run/netns/${pod}-gone` });
        assertEquals([gone.code, gone.stdout, traced(gone)], [0, "", false], `${p}: netns gone`);
        const withNs = await call(p, "DEL", c);
        assertEquals([withNs.code, withNs.stdout, traced(withNs)], [0, "", p !== "portmap"], `${p}: netns`);
        // What the full path refuses is refused by it: no CNI_PATH, a container ID it rejects.
        const noPath = await call(p, "DEL", c, { netns: "", path: "" });
        assertEquals([noPath.code, traced(noPath)], [1, true], `${p}: no CNI_PATH`);
        assertEquals(noPath.json?.code, 4);
      }
      const badId = await call("flannel", "DEL", flannel, { netns: "", containerId: "-bad" });
      assertEquals([badId.code, badId.json?.code, traced(badId)], [1, 4, true]);

      // An ADD empties the record before anything else, even one that fails (here: its netns is missing).
      const failed = await call("flannel", "ADD", flannel, { netns: `/var/run/netns/${pod}-gone` });
      assertEquals(failed.code, 1, failed.stdout);
      assertEquals(record("flannel"), "", "a failed ADD emptied the record");
      const afterFail = await call("flannel", "DEL", flannel, { netns: "" });
      assertEquals([afterFail.code, afterFail.stdout, traced(afterFail)], [0, "", true], "full DEL after it");
      assertEquals(record("flannel"), "deleted\n");

      // portmap without port mappings makes nothing: its ADD fills the record, and its DEL is answered by the
      // launcher even with the netns there (portmap's DEL never looks at it), as the full DEL answers.
      const id3 = "cd00000000000000ff";
      const noPorts = { ...portmap(res.json), runtimeConfig: { portMappings: [] } };
      const pmAdd = await call("portmap", "ADD", noPorts, { containerId: id3 });
      assertEquals([pmAdd.code, pmAdd.json?.cniVersion], [0, "1.0.0"], pmAdd.stdout);
      assertEquals(Deno.readTextFileSync(`${records}/portmap:eth0:${id3}`), "deleted\n", "ADD made nothing");
      const noPortsDel = { ...noPorts, prevResult: undefined };
      const before = await state();
      const pmEarly = await call("portmap", "DEL", noPortsDel, { containerId: id3 });
      assertEquals([pmEarly.code, pmEarly.stdout, pmEarly.stderr], [0, "", ""], "portmap DEL answered early");
      const pmFull = await call("portmap", "DEL", noPortsDel, { containerId: id3, exe: undefined });
      assertEquals(
        [pmFull.code, pmFull.stdout, traced(pmFull)],
        [0, "", true],
        "the full DEL answers the same",
      );
      assertEquals(await state(), before, "neither changed anything");

      // No record (an attachment added by a version that kept none): the DEL runs in full and removes it.
      const id2 = "cdfedcba9876543210";
      const added = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod,
        containerId: id2,
        conf: flannel,
      });
      assert(added, "ADD without records");
      assertEquals(listFiles(`${d.path}/flannel`).includes(id2), true);
      const upgraded = await call("flannel", "DEL", flannel, { netns: "", containerId: id2 });
      assertEquals([upgraded.code, traced(upgraded)], [0, true], "no record: full DEL");
      assertEquals(listFiles(`${d.path}/flannel`).includes(id2), false, "its saved config is gone");
      assertEquals(
        listFiles(`${d.path}/networks`).filter((f) => !f.startsWith(".") && f.includes("10.")),
        [],
      );
    } finally {
      d.cleanup();
    }
  }));
