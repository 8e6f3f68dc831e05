/**
 * Input limits: a config nested 5,000 levels deep is error 2 (not 999 from a stack overflow); container
 * IDs of 240 and 255 characters work end to end as in the reference (a longer one is error 4 before any
 * change); host-local refuses an IPv4-mapped IPv6 range (`::ffff:10.251.0.0/120`) as the reference does
 * (Go canonicalizes it to an IPv4 address with an IPv6 mask); wrong-typed optional keys name the key.
 */
import { needsRoot } from "./root.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { cni, listFiles, tempDir } from "./cni_helpers.ts";
import { nsRun, withNetns } from "./netns.ts";

needsRoot.test("cni limits: deep nesting, long container IDs, mapped ranges, wrong-typed keys", () =>
  withNetns(async (fx) => {
    const node = await fx.add("lmn"), pod = await fx.add("lmp");
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.4.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
      );
      const flannel = {
        cniVersion: "1.0.0",
        name: "cbr0",
        type: "flannel",
        subnetFile: `${d.path}/subnet.env`,
        dataDir: `${d.path}/flannel`,
        ipam: { dataDir: `${d.path}/networks` },
      };
      // 5,000 levels of nesting.
      const deep = JSON.stringify(flannel).replace(/}$/, `,"x":${"[".repeat(5000)}${"]".repeat(5000)}}`);
      for (const plugin of ["flannel", "bridge", "host-local"]) {
        const r = await cni({ plugin, command: "ADD", node, netns: pod, containerId: "deep1", conf: deep });
        assertEquals(r.json?.code, 2, `${plugin}: ${r.stdout}`);
      }
      // Long container IDs: ADD then DEL, nothing left.
      for (const len of [240, 255]) {
        const id = "c".repeat(len);
        const add = await cni({
          plugin: "flannel",
          command: "ADD",
          node,
          netns: pod,
          containerId: id,
          conf: flannel,
        });
        assertEquals(add.code, 0, `ADD with a ${len}-character ID: ${add.stdout}`);
        const del = await cni({
          plugin: "flannel",
          command: "DEL",
          node,
          netns: pod,
          containerId: id,
          conf: flannel,
        });
        assertEquals(del.code, 0, del.stdout);
        assertEquals((await nsRun(pod, ["ip", "link", "show", "eth0"])).code, 1, "eth0 removed");
        assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), []);
        assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".")), []);
      }
      const long = await cni({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod,
        containerId: "c".repeat(256),
        conf: flannel,
      });
      assertEquals(long.json?.code, 4, long.stdout);
      assertEquals((await nsRun(pod, ["ip", "link", "show", "eth0"])).code, 1, "nothing made");

      const hl = (ipam: Record<string, unknown>) => ({
        cniVersion: "1.0.0",
        name: "hl",
        type: "host-local",
        ipam: { type: "host-local", dataDir: `${d.path}/hl`, ...ipam },
      });
      const mapped = await cni({
        plugin: "host-local",
        command: "ADD",
        netns: "/proc/self/ns/net",
        containerId: "m1",
        conf: hl({ ranges: [[{ subnet: "10.251.0.0/24" }], [{ subnet: "::ffff:10.251.0.0/120" }]] }),
      });
      assertEquals(mapped.json?.code, 7, mapped.stdout);
      assertStringIncludes(String(mapped.json?.details), "IPNet IP and Mask version mismatch");
      const rc = await cni({
        plugin: "host-local",
        command: "ADD",
        netns: "/proc/self/ns/net",
        containerId: "m2",
        conf: hl({ ranges: [[{ subnet: "10.252.0.0/24" }]], resolvConf: 5 }),
      });
      assertEquals(rc.json?.code, 7, rc.stdout);
      assertStringIncludes(String(rc.json?.details), "ipam.resolvConf");
      assertEquals(listFiles(`${d.path}/hl`).filter((f) => /\/\d/.test(f)), [], "nothing allocated");
      const dns = await cni({
        plugin: "bridge",
        command: "ADD",
        node,
        netns: pod,
        containerId: "m3",
        conf: { cniVersion: "1.0.0", name: "b", type: "bridge", bridge: "cnil0", dns: 5 },
      });
      assertEquals(dns.json?.code, 7, dns.stdout);
      assertStringIncludes(String(dns.json?.details), "'dns'");
    } finally {
      d.cleanup();
    }
  }));
