/**
 * portmap GC in nftables mode (the reference has none; see lib/firewall/portmap.ts "nftables GC"): ADD
 * records each container in the table's chain of its network, and GC of a network deletes the rules of
 * exactly its recorded containers that are not in `cni.dev/valid-attachments`, in both families; another
 * network's containers, a container recorded by two networks, and rules nobody recorded (the reference
 * plugin's) are left alone. CHECK of a kept container still passes; DEL removes the record too.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, cniOk } from "./cni_helpers.ts";
import { nsRun, nsSh, withNetns } from "./netns.ts";

const MAPS = [
  { hostPort: 18080, containerPort: 8080, protocol: "tcp" },
  { hostPort: 18081, containerPort: 81, protocol: "udp" },
];

function prev(last: number, v6 = false) {
  return {
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0", mac: "aa:bb:cc:dd:ee:02", sandbox: "/var/run/netns/pod" }],
    ips: [
      { interface: 0, address: `10.244.1.${last}/24`, gateway: "10.244.1.1" },
      ...(v6 ? [{ interface: 0, address: `fd00:10:0:1::${last}/64`, gateway: "fd00:10:0:1::1" }] : []),
    ],
  };
}

function conf(network: string, p: unknown, extra: Record<string, unknown> = {}) {
  return {
    cniVersion: "1.1.0",
    name: network,
    type: "portmap",
    backend: "nftables",
    capabilities: { portMappings: true },
    runtimeConfig: { portMappings: MAPS },
    prevResult: p,
    ...extra,
  };
}

function gcConf(network: string, valid: string[]) {
  return {
    cniVersion: "1.1.0",
    name: network,
    type: "portmap",
    backend: "nftables",
    "cni.dev/valid-attachments": valid.map((id) => ({ containerID: id, ifname: "eth0" })),
  };
}

needsRoot.test("cni portmap (nftables): GC removes only this network's stale containers, both families", () =>
  withNetns(async (fx) => {
    const node = await fx.add("pg");
    const add = (id: string, c: unknown) =>
      cniOk({ plugin: "portmap", command: "ADD", node, containerId: id, netns: "pod", conf: c });
    const c1 = conf("cbr0", prev(5, true)), c2 = conf("cbr0", prev(6)), c3 = conf("other", prev(7));
    await add("c1", c1);
    await add("c2", c2);
    await add("c3", c3);
    // c5 is attached to both networks (same container ID in both: the rules cannot be told apart).
    await add("c5", conf("cbr0", prev(8)));
    await add("c5", conf("other", prev(8)));
    // A rule nobody recorded (as the reference plugin or an older flanctl writes them).
    await nsSh(
      node,
      "nft",
      'add rule ip cni_hostport hostports tcp dport 30000 dnat to 10.244.1.9:80 comment "legacy"',
    );
    const list = async (fam: string) =>
      (await nsRun(node, ["nft", "list", "table", fam, "cni_hostport"])).stdout.split("\n").map((l) =>
        l.trim()
      );
    const count = (lines: string[], id: string) => lines.filter((l) => l.endsWith(`comment "${id}"`)).length;
    const before = await list("ip");
    assertEquals(count(before, "c1"), 5, before.join("\n")); // 2 dnat + 2 masquerade + 1 record
    assertEquals(count(await list("ip6"), "c1"), 4); // 2 dnat + 1 masquerade + 1 record
    assert(before.includes("chain network_cbr0 {"), before.join("\n"));

    // GC without the attachment list exits 0, as the reference, and deletes nothing.
    const bad = await cni({
      plugin: "portmap",
      command: "GC",
      node,
      conf: { ...gcConf("cbr0", []), "cni.dev/valid-attachments": undefined },
    });
    assertEquals(bad.code, 0, bad.stdout);
    assertEquals(count(await list("ip"), "c1"), 5);

    await cniOk({ plugin: "portmap", command: "GC", node, conf: gcConf("cbr0", ["c2"]) });
    const v4 = await list("ip"), v6 = await list("ip6");
    assertEquals(count(v4, "c1"), 0, `stale c1 removed (IPv4):\n${v4.join("\n")}`);
    assertEquals(count(v6, "c1"), 0, `stale c1 removed (IPv6):\n${v6.join("\n")}`);
    assertEquals(count(v4, "c2"), 5, "valid c2 kept");
    assertEquals(count(v4, "c3"), 5, "the other network's c3 kept");
    assertEquals(count(v4, "c5"), 9, "c5, recorded by the other network too: rules kept, cbr0's record gone");
    assertEquals(count(v4, "legacy"), 1, "unrecorded rules kept");
    await cniOk({ plugin: "portmap", command: "CHECK", node, containerId: "c2", netns: "pod", conf: c2 });

    // GC of the other network: c5 is now stale there and recorded nowhere else.
    await cniOk({ plugin: "portmap", command: "GC", node, conf: gcConf("other", ["c3"]) });
    const v4b = await list("ip");
    assertEquals(count(v4b, "c5"), 0, v4b.join("\n"));
    assertEquals(count(v4b, "c3"), 5);
    assertEquals(count(v4b, "c2"), 5);

    // DEL removes the record with the rules; a GC after it finds nothing of c2.
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c2", conf: c2 });
    await cniOk({ plugin: "portmap", command: "DEL", node, containerId: "c3", conf: c3 });
    const end = await list("ip");
    assertEquals(end.filter((l) => /comment "c\d"/.test(l)), [], end.join("\n"));
    assertEquals(count(end, "legacy"), 1);
  }));
