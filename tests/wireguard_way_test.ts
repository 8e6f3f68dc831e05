/**
 * The WireGuard backend's choice of way on a real kernel, in a 1-node lab (its own namespaces): the daemon
 * tries the kernel first (a link of kind wireguard) and, where the kernel refuses it — this machine's
 * kernel has no wireguard module: EOPNOTSUPP — falls back to wireguard-go, saying why in one log line;
 * `status` says "userspace", doctor's wg-device names wireguard-go's pid, `inspect wireguard` the way.
 * On a kernel with the module, the same start must pick the kernel's device, and every view say "kernel".
 * (The kernel path end to end cannot run here: docs/daemon.md, the wireguard section.)
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { flanctlCmd, ipJson, nsRun } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import type { StatusJson } from "../lib/status/status.ts";

needsRoot.test({
  name: "wireguard way: the kernel first, else wireguard-go (this kernel); status, doctor, inspect say which",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "ww",
      ["--nodes", "1", "--pods-per-node", "0", "--backend", "wireguard"],
      undefined,
      async (s, name) => {
        const n = s.nodes[0];
        // What this kernel says to the link kind, asked in the node's namespace (and undone if made).
        const probe = await nsRun(n.netns, ["ip", "link", "add", "wkprobe0", "type", "wireguard"]);
        if (probe.code === 0) await nsRun(n.netns, ["ip", "link", "del", "wkprobe0"]);
        else assertStringIncludes(probe.stderr, "Unknown device type");
        const kernel = probe.code === 0;
        const way = kernel ? "kernel" : "userspace";

        const l =
          (await ipJson<{ linkinfo?: { info_kind: string } }[]>(n.netns, "-d", "link", "show", "flannel-wg"))[
            0
          ];
        assertEquals(l.linkinfo?.info_kind, kernel ? "wireguard" : "tun");

        const log = Deno.readTextFileSync(`${n.dir}/daemon.log`).split("\n");
        const fell = log.filter((x) => x.includes("WireGuard falls back to userspace"));
        if (kernel) assertEquals(fell, []);
        else {
          assertEquals(fell.length, 1, log.join("\n"));
          assertStringIncludes(
            fell[0],
            "the kernel refused the link kind wireguard (EOPNOTSUPP: Unknown device type",
          );
        }

        const st = await labExec(name, "node1", flanctlCmd("status", "-o", "json"));
        assertEquals(st.code, 0, st.stderr);
        const view = JSON.parse(st.stdout) as StatusJson;
        assertEquals([view.backend.type, view.backend.way], ["wireguard", way]);

        const doc = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json"));
        const dev = (JSON.parse(doc.stdout) as { checks: { id: string; severity: string; detail: string }[] })
          .checks.find((c) => c.id === "wg-device")!;
        assertEquals(dev.severity, "ok", dev.detail);
        assertStringIncludes(dev.detail, kernel ? ", kernel" : "userspace (wireguard-go pid");

        const insp = await labExec(name, "node1", flanctlCmd("inspect", "wireguard", "-o", "json"));
        assertEquals(insp.code, 0, insp.stderr);
        assertEquals((JSON.parse(insp.stdout) as { way: string }[]).map((v) => v.way), [way]);
      },
    );
  },
});
