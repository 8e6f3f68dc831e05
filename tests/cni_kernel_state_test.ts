/**
 * The kernel state and files a bridge + host-local ADD leaves, in IPv4-only, IPv6-only and dual stack,
 * equal to the reference chain's (plugins v1.10.0; real-peers.md lists the measured values): cni0's
 * bridge_id is its MAC (pinned after the first port joined) and its operstate UP, accept_ra 0 on cni0 and
 * every host veth; the pod's eth0 txqueuelen 1000, arp_notify 1, accept_dad 0, keep_addr_on_down 1 with
 * IPv6; host-local's last_reserved_ip.N 0600 and lock 0750. Side by side with the reference (REF_DIR: v1.10.0
 * from install.sh --dev, compared in full); with Debian's 1.1.1 fallback the values it predates are
 * asserted against the measured v1.10 ones. Then a pod
 * sends a router advertisement and the node's routes and addresses do not change.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cniOk, refSpeaks11, requireRefPlugins, tempDir } from "./cni_helpers.ts";
import { ipJson, nsRun, withNetns } from "./netns.ts";

const HAVE_REF = requireRefPlugins(["bridge", "host-local"]);
type J = Record<string, unknown>;

/** Whether the installed reference is v1.5+ (speaks 1.1.0): then every item is compared with it. */
const REF_NEW = HAVE_REF && await refSpeaks11();

const MODES: Record<string, unknown[][]> = {
  "IPv4-only": [[{ subnet: "10.95.1.0/24" }]],
  "IPv6-only": [[{ subnet: "fd95:1::/64" }]],
  "dual stack": [[{ subnet: "10.95.1.0/24" }], [{ subnet: "fd95:1::/64" }]],
};

function conf(dataDir: string, ranges: unknown[][]): J {
  return {
    cniVersion: "1.0.0",
    name: "ksnet",
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ipMasq: true,
    hairpinMode: true,
    ipam: { type: "host-local", dataDir, ranges },
  };
}

async function sysctl(ns: string, key: string): Promise<string> {
  const r = await nsRun(ns, ["cat", `/proc/sys/${key}`]);
  return r.code === 0 ? r.stdout.trim() : "absent";
}

async function bridge(
  ns: string,
): Promise<{ mac: string; bridgeId: string; operstate: string; flags: string[] }> {
  const b = (await ipJson<J[]>(ns, "-d", "link", "show", "cni0"))[0];
  const data = ((b.linkinfo as J).info_data ?? {}) as J;
  // iproute2 prints bridge_id's octets without leading zeros (8000.22:60:83:5c:9:6c).
  const [prio, addr = ""] = String(data.bridge_id).split(".");
  return {
    mac: String(b.address),
    bridgeId: `${prio}.${addr.split(":").map((x) => x.padStart(2, "0")).join(":")}`,
    operstate: String(b.operstate),
    flags: (b.flags as string[]).filter((f) => f !== "LOWER_UP" && f !== "NO-CARRIER"),
  };
}

function mode(path: string): string {
  return "0" + (Deno.statSync(path).mode! & 0o777).toString(8);
}

/** Everything the issue lists, for one implementation in one mode. */
async function observe(isRef: boolean, ranges: unknown[][], fx: { add(t: string): Promise<string> }) {
  const node = await fx.add(isRef ? "ksr" : "kso"), pod1 = await fx.add("ksp"), pod2 = await fx.add("ksp");
  const d = tempDir();
  try {
    const c = conf(d.path, ranges);
    const call = (command: string, netns: string, containerId: string) =>
      cniOk({ plugin: "bridge", command, node, netns, containerId, conf: c, ref: isRef });
    const r1 = await call("ADD", pod1, "c1");
    // operstate follows the port's carrier through the kernel's linkwatch (up to a second later).
    let first = await bridge(node);
    for (let i = 0; i < 30 && first.operstate !== "UP"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      first = await bridge(node);
    }
    const hostVeth = String((r1!.interfaces as J[])[1].name);
    const v6 = (r1!.ips as J[]).some((i) => String(i.address).includes(":"));
    const s = {
      bridgeIdIsMac: first.bridgeId === `8000.${first.mac}`,
      bridgeOperstate: first.operstate,
      resultBridgeMac: (r1!.interfaces as J[])[0].mac === first.mac,
      bridgeAcceptRa: await sysctl(node, "net/ipv6/conf/cni0/accept_ra"),
      hostVethAcceptRa: await sysctl(node, `net/ipv6/conf/${hostVeth}/accept_ra`),
      hostVethTxqlen: (await ipJson<J[]>(node, "link", "show", hostVeth))[0].txqlen ?? 0,
      podTxqlen: (await ipJson<J[]>(pod1, "link", "show", "eth0"))[0].txqlen,
      podArpNotify: await sysctl(pod1, "net/ipv4/conf/eth0/arp_notify"),
      podAcceptDad: await sysctl(pod1, "net/ipv6/conf/eth0/accept_dad"),
      podKeepAddrOnDown: await sysctl(pod1, "net/ipv6/conf/eth0/keep_addr_on_down"),
      lastReservedMode: mode(`${d.path}/ksnet/last_reserved_ip.0`),
      lockMode: mode(`${d.path}/ksnet/lock`),
      macPinned: false,
      afterLastDel: {} as J,
    };
    await call("ADD", pod2, "c2");
    await call("DEL", pod1, "c1");
    s.macPinned = (await bridge(node)).mac === first.mac;
    await call("DEL", pod2, "c2");
    const last = await bridge(node);
    s.afterLastDel = {
      macKept: last.mac === first.mac,
      flags: last.flags,
      bridgeIdIsMac: last.bridgeId === `8000.${last.mac}`,
    };
    return { s, v6 };
  } finally {
    d.cleanup();
  }
}

for (const [label, ranges] of Object.entries(MODES)) {
  needsRoot.test({
    name: `cni kernel state (${label}): bridge, veths, pod sysctls and host-local files as the reference`,
    ignore: !HAVE_REF,
    fn: () =>
      withNetns(async (fx) => {
        const ours = await observe(false, ranges, fx);
        const ref = await observe(true, ranges, fx);
        // The measured v1.10 values.
        assertEquals(ours.s, {
          ...ours.s,
          bridgeIdIsMac: true,
          bridgeOperstate: "UP",
          resultBridgeMac: true,
          bridgeAcceptRa: "0",
          hostVethAcceptRa: "0",
          hostVethTxqlen: 0,
          podTxqlen: 1000,
          podArpNotify: "1",
          podAcceptDad: "0",
          podKeepAddrOnDown: ours.v6 ? "1" : "0",
          lastReservedMode: "0600",
          lockMode: "0750",
          macPinned: true,
        }, "ours");
        if (REF_NEW) assertEquals(ours.s, ref.s, "ours vs the reference");
        else {
          // Debian's 1.1.1 predates txqueuelen, arp_notify, keep_addr_on_down and the file modes: compare
          // what it already had (the bridge, accept_ra, DAD, the state after the last DEL).
          for (
            const k of [
              "bridgeIdIsMac",
              "bridgeOperstate",
              "resultBridgeMac",
              "bridgeAcceptRa",
              "hostVethAcceptRa",
              "hostVethTxqlen",
              "macPinned",
              "afterLastDel",
            ] as const
          ) {
            assertEquals(
              ours.s[k],
              ref.s[k],
              `${k}: ours vs the reference: ${JSON.stringify({ ours, ref })}`,
            );
          }
        }
      }),
  });
}

/** An ICMPv6 router advertisement (RFC 4861 4.2) with a SLAAC prefix 2001:db8:ra::/64; checksum by the kernel. */
function routerAdvert(): Uint8Array {
  const b = new Uint8Array(16 + 32);
  const v = new DataView(b.buffer);
  b[0] = 134; // type: router advertisement
  b[4] = 64; // cur hop limit
  v.setUint16(6, 1800); // router lifetime: a default router
  // Prefix information: type 3, length 4 (32 bytes), /64, on-link + autonomous.
  b[16] = 3, b[17] = 4, b[18] = 64, b[19] = 0xc0;
  v.setUint32(20, 86400), v.setUint32(24, 14400);
  b.set([0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x0a, 0x0a], 32);
  return b;
}

/** Sends `bytes` as ICMPv6 from the pod's eth0 to all nodes (hop limit 255), through a raw socket. */
async function sendFromPod(pod: string, bytes: Uint8Array): Promise<void> {
  const hex = [...bytes].map((x) => x.toString(16).padStart(2, "0")).join("");
  const py = "import socket,sys\n" +
    "s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_ICMPV6)\n" +
    "s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_MULTICAST_HOPS,255)\n" +
    "s.setsockopt(socket.SOL_SOCKET,socket.SO_BINDTODEVICE,b'eth0')\n" +
    "i=socket.if_nametoindex('eth0')\n" +
    "for _ in range(3): s.sendto(bytes.fromhex(sys.argv[1]),('ff02::1',0,0,i))\n";
  const r = await nsRun(pod, ["python3", "-c", py, hex]);
  assertEquals(r.code, 0, r.stderr);
}

/** The node's routes and non-link-local addresses, both families. */
async function nodeNet(node: string): Promise<string[]> {
  const out: string[] = [];
  for (const fam of ["-4", "-6"]) {
    for (const r of await ipJson<J[]>(node, fam, "route", "show", "table", "all")) {
      const dst = String(r.dst);
      if (dst.startsWith("fe80") || dst.startsWith("ff00") || r.type === "multicast") continue;
      out.push(`route ${dst} ${r.gateway ?? ""} ${r.dev ?? ""} ${r.protocol ?? ""} ${r.table ?? ""}`);
    }
  }
  for (const l of await ipJson<J[]>(node, "addr")) {
    for (const a of (l.addr_info as J[]) ?? []) {
      if (a.scope !== "link") out.push(`addr ${l.ifname} ${a.local}/${a.prefixlen}`);
    }
  }
  return out.sort();
}

for (const [label, ranges] of Object.entries(MODES)) {
  needsRoot.test(`cni bridge (${label}): a pod's router advertisement changes no route or address of the node`, () =>
    withNetns(async (fx) => {
      const node = await fx.add("ran"), pod = await fx.add("rap");
      const d = tempDir();
      try {
        await cniOk({
          plugin: "bridge",
          command: "ADD",
          node,
          netns: pod,
          containerId: "c1",
          conf: conf(d.path, ranges),
        });
        // The pod's link-local source must be usable (not tentative) for the advertisement to count.
        for (let i = 0; i < 60; i++) {
          const a = (await ipJson<J[]>(pod, "-6", "addr", "show", "dev", "eth0", "scope", "link"))[0];
          const ll = ((a?.addr_info as J[]) ?? []).filter((x) => x.scope === "link");
          if (ll.length && !ll.some((x) => x.tentative)) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        // ... and the node's own addresses past DAD (their local routes appear then).
        for (let i = 0; i < 60; i++) {
          const addrs = (await ipJson<J[]>(node, "-6", "addr")).flatMap((l) => (l.addr_info as J[]) ?? []);
          if (!addrs.some((x) => x.tentative)) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        const before = await nodeNet(node);
        await sendFromPod(pod, routerAdvert());
        await new Promise((r) => setTimeout(r, 1500));
        const after = await nodeNet(node);
        assert(!after.some((l) => l.includes(" ra ") || l.includes("2001:db8:0:a0a")), after.join("\n"));
        assertEquals(after, before, "the node's routes and addresses");
      } finally {
        d.cleanup();
      }
    }));
}
