/**
 * Side by side with the reference Go plugins (tests/cni_helpers.ts REF_DIR: v1.10.0 built by install.sh
 * --dev, else Debian's containernetworking-plugins in /usr/lib/cni): the same
 * bridge+host-local config in two fresh node/pod namespace pairs gives the same result JSON (modulo random
 * names and MACs) and the same interfaces, addresses, routes, bridge state and nat rules; DEL leaves the
 * same (empty) state. Also: host-local allocations made by one are released by the other.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import {
  cni,
  cniOk,
  listFiles,
  refSpeaks11,
  requireRefPlugins,
  sideBySide,
  tempDir,
  vethTxqlen,
} from "./cni_helpers.ts";
import { ipJson, nsSh, withNetns } from "./netns.ts";

const HAVE_REF = requireRefPlugins(["bridge", "host-local"]);
const REF_NEW = HAVE_REF && await refSpeaks11();

type J = Record<string, unknown>;

function bridgeConf(version: string, dataDir: string): J {
  return {
    cniVersion: version,
    name: "sbs-net",
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    isDefaultGateway: true,
    ipMasq: true,
    hairpinMode: true,
    mtu: 1400,
    ipam: {
      type: "host-local",
      dataDir,
      ranges: [[{ subnet: "10.99.1.0/24" }]],
      routes: [{ dst: "10.99.0.0/16" }],
    },
  };
}

/** Blanks what is random per run: veth names, MACs, the sandbox path. */
function normResult(r: J | null): unknown {
  const x = structuredClone(r) as J;
  for (const i of (x.interfaces as J[] | undefined) ?? []) {
    if (typeof i.mac === "string") i.mac = "MAC";
    if (typeof i.name === "string" && /^veth[0-9a-f]{8}$/.test(i.name)) i.name = "vethXXXXXXXX";
    if (typeof i.sandbox === "string") i.sandbox = "SANDBOX";
  }
  return x;
}

/** The kernel state that matters, from `ip -j`, without per-run values (ifindex, MAC, IPv6 link-local). */
async function podState(ns: string) {
  const links = (await ipJson<J[]>(ns, "-d", "link")).map((l) => ({
    ifname: l.ifname,
    flags: l.flags,
    mtu: l.mtu,
    // ip -j omits txqlen when it is 0 (Debian's reference's veths).
    txqlen: l.ifname === "lo" ? l.txqlen ?? 0 : vethTxqlen(l, REF_NEW),
    operstate: l.operstate,
    link_type: l.link_type,
    kind: (l.linkinfo as J | undefined)?.info_kind ?? null,
  }));
  const addrs = (await ipJson<J[]>(ns, "addr")).map((l) => ({
    ifname: l.ifname,
    addrs: ((l.addr_info as J[]) ?? []).filter((a) => a.scope !== "link").map((a) => ({
      family: a.family,
      local: a.local,
      prefixlen: a.prefixlen,
      broadcast: a.broadcast ?? null,
      scope: a.scope,
    })),
  }));
  const routes = await ipJson<J[]>(ns, "route");
  return { links, addrs, routes };
}

async function nodeState(ns: string) {
  const br = (await ipJson<J[]>(ns, "-d", "link", "show", "cni0"))[0] ?? null;
  const ports = await ipJson<J[]>(ns, "-d", "link", "show", "master", "cni0");
  const brAddrs = ((await ipJson<J[]>(ns, "addr", "show", "cni0"))[0]?.addr_info as J[] ?? [])
    .filter((a) => a.family === "inet").map((a) =>
      `${a.local}/${a.prefixlen} brd ${a.broadcast ?? "-"} ${a.scope}`
    );
  const nat = (await nsSh(ns, "iptables-save", "-t", "nat"))
    .split("\n").filter((l) => l.startsWith("-A") || (l.startsWith(":") && l.includes("CNI-")));
  const fwd = (await nsSh(ns, "cat", "/proc/sys/net/ipv4/ip_forward")).trim();
  return {
    bridge: br && {
      mtu: br.mtu,
      txqlen: br.txqlen ?? 0,
      flags: br.flags,
      kind: (br.linkinfo as J).info_kind,
    },
    brAddrs,
    ports: ports.map((p) => ({
      mtu: p.mtu,
      txqlen: p.txqlen ?? 0, // the host end: 0 with every reference (ip -j omits 0)
      flags: p.flags,
      kind: (p.linkinfo as J).info_kind,
      hairpin: ((p.linkinfo as J).info_slave_data as J)?.hairpin,
      vethName: /^veth[0-9a-f]{8}$/.test(String(p.ifname)),
    })),
    nat,
    fwd,
  };
}

needsRoot.test({
  name: "cni bridge+host-local: same results and kernel state as the reference (0.3.1, 0.4.0, 1.0.0)",
  ignore: !HAVE_REF,
  fn: () =>
    sideBySide("cn", async ({ node: nodeA, pod: podA, dir: dirA }, { node: nodeB, pod: podB, dir: dirB }) => {
      for (const version of ["0.3.1", "0.4.0", "1.0.0"]) {
        const cid = `sbs-${version.replaceAll(".", "")}`;
        const call = { plugin: "bridge", containerId: cid, ifname: "eth0" };
        const ours = await cniOk({
          ...call,
          command: "ADD",
          node: nodeA,
          netns: podA,
          conf: bridgeConf(version, dirA),
        });
        const theirs = await cniOk({
          ...call,
          command: "ADD",
          node: nodeB,
          netns: podB,
          conf: bridgeConf(version, dirB),
          ref: true,
        });
        assertEquals(normResult(ours), normResult(theirs), `result JSON for ${version}`);
        assertEquals(await podState(podA), await podState(podB), `pod state for ${version}`);
        assertEquals(await nodeState(nodeA), await nodeState(nodeB), `node state for ${version}`);
        assertEquals(listFiles(`${dirA}/sbs-net`), listFiles(`${dirB}/sbs-net`), "host-local files");
        if (version !== "0.3.1") {
          // Only ours is asserted: the reference v1.1.1 CHECK fails on any IPAM route without a gateway
          // ("Expected Route {... GW:<nil>} not found"), because the route it installed has one.
          const a = await cni({
            ...call,
            command: "CHECK",
            node: nodeA,
            netns: podA,
            conf: { ...bridgeConf(version, dirA), prevResult: ours },
          });
          assertEquals(a.code, 0, `CHECK: ${a.stdout}`);
        }
        await cniOk({
          ...call,
          command: "DEL",
          node: nodeA,
          netns: podA,
          conf: bridgeConf(version, dirA),
        });
        await cniOk({
          ...call,
          command: "DEL",
          node: nodeB,
          netns: podB,
          conf: bridgeConf(version, dirB),
          ref: true,
        });
        assertEquals(await podState(podA), await podState(podB), `pod state after DEL (${version})`);
        assertEquals(await nodeState(nodeA), await nodeState(nodeB), `node state after DEL (${version})`);
        const left = listFiles(`${dirA}/sbs-net`).filter((f) => /^\d/.test(f));
        assertEquals(left, [], "no IP files left");
      }
    }),
});

Deno.test({
  name: "cni host-local: allocate with ours, release with the reference, and the other way round",
  ignore: !HAVE_REF,
  fn: async () => {
    const d = tempDir();
    try {
      const conf = {
        cniVersion: "0.4.0",
        name: "xnet",
        type: "host-local",
        ipam: { type: "host-local", dataDir: d.path, ranges: [[{ subnet: "10.98.0.0/28" }]] },
      };
      const call = { plugin: "host-local", netns: "/nonexistent-ok", ifname: "eth0", conf };
      // Ours allocates, theirs sees the allocation (round robin continues) and releases it.
      const a = await cniOk({ ...call, command: "ADD", containerId: "x1" });
      assertEquals((a!.ips as J[])[0].address, "10.98.0.2/28");
      const b = await cniOk({ ...call, command: "ADD", containerId: "x2", ref: true });
      assertEquals((b!.ips as J[])[0].address, "10.98.0.3/28");
      const dup = await cni({ ...call, command: "ADD", containerId: "x1", ref: true });
      assert(dup.code !== 0, "the reference sees our allocation as a duplicate");
      await cniOk({ ...call, command: "DEL", containerId: "x1", ref: true });
      assertEquals(listFiles(`${d.path}/xnet`).includes("10.98.0.2"), false, "theirs released ours");
      // Theirs allocated x2: ours finds it (no index of ours) and releases it.
      await cniOk({ ...call, command: "DEL", containerId: "x2" });
      assertEquals(listFiles(`${d.path}/xnet`).filter((f) => /^\d/.test(f)), []);
      // Round robin resumes after the reference's last_reserved_ip.
      const c = await cniOk({ ...call, command: "ADD", containerId: "x3" });
      assertEquals((c!.ips as J[])[0].address, "10.98.0.4/28");
      assertEquals(Deno.readTextFileSync(`${d.path}/xnet/10.98.0.4`), "x3\r\neth0");
      await cniOk({ ...call, command: "DEL", containerId: "x3", ref: true });
      assertEquals(listFiles(`${d.path}/xnet`).filter((f) => /^\d/.test(f)), []);
    } finally {
      d.cleanup();
    }
  },
});

needsRoot.test({
  name: "cni bridge forceAddress: another address on the bridge is replaced, as the reference does",
  ignore: !HAVE_REF,
  fn: () =>
    sideBySide("cf", async ({ node: nodeA, pod: podA, dir: dirA }, { node: nodeB, pod: podB, dir: dirB }) => {
      // A primary address in the same subnet (deleting it also takes the secondaries) and one elsewhere.
      for (const node of [nodeA, nodeB]) {
        await nsSh(node, "ip", "link", "add", "cni0", "type", "bridge");
        await nsSh(node, "ip", "addr", "add", "10.99.1.9/24", "dev", "cni0");
        await nsSh(node, "ip", "addr", "add", "10.55.0.1/16", "dev", "cni0");
      }
      const conf = (dataDir: string) => ({ ...bridgeConf("1.0.0", dataDir), forceAddress: true });
      const call = { plugin: "bridge", command: "ADD", containerId: "force1", ifname: "eth0" };
      await cniOk({ ...call, node: nodeA, netns: podA, conf: conf(dirA) });
      await cniOk({ ...call, node: nodeB, netns: podB, conf: conf(dirB), ref: true });
      const ours = await nodeState(nodeA);
      assertEquals(ours.brAddrs, ["10.99.1.1/24 brd 10.99.1.255 global"], "only the gateway is left");
      assertEquals(ours, await nodeState(nodeB), "node state");
      assertEquals(await podState(podA), await podState(podB), "pod state");
    }),
});

function dualConf(version: string, dataDir: string): J {
  const c = bridgeConf(version, dataDir);
  (c.ipam as J).ranges = [[{ subnet: "10.99.1.0/24" }], [{ subnet: "fc00:99:0:1::/64" }]];
  (c.ipam as J).routes = [{ dst: "10.99.0.0/16" }, { dst: "fc00:99::/48" }];
  return c;
}

/**
 * The IPv6 side of a namespace: global addresses, routes (no link-local, no kernel fe80::/64). Whether an
 * address is still tentative (DAD, about a second) depends on timing, not on the plugin, so it is left out.
 */
async function v6State(ns: string) {
  const addrs = (await ipJson<J[]>(ns, "-6", "addr")).map((l) => ({
    ifname: l.ifname,
    addrs: ((l.addr_info as J[]) ?? []).filter((a) => a.scope === "global").map((a) =>
      `${a.local}/${a.prefixlen}`
    ),
  })).filter((l) => l.addrs.length);
  const routes = (await ipJson<J[]>(ns, "-6", "route")).filter((r) => !String(r.dst).startsWith("fe80"))
    .map((r) => `${r.dst} via ${r.gateway ?? "-"} dev ${r.dev} ${r.protocol ?? ""}`);
  return { addrs, routes };
}

async function nodeV6State(ns: string) {
  const nat6 = (await nsSh(ns, "ip6tables-save", "-t", "nat"))
    .split("\n").filter((l) => l.startsWith("-A") || (l.startsWith(":") && l.includes("CNI-"))); // (chain names are a hash of network name and container id: identical for the same inputs)
  const fwd6 = (await nsSh(ns, "cat", "/proc/sys/net/ipv6/conf/all/forwarding")).trim();
  return { ...(await v6State(ns)), nat6, fwd6 };
}

needsRoot.test({
  name:
    "cni bridge+host-local dual stack: same results, addresses, routes, ip6tables and files as the reference",
  ignore: !HAVE_REF,
  fn: () =>
    sideBySide("cd", async ({ node: nodeA, pod: podA, dir: dirA }, { node: nodeB, pod: podB, dir: dirB }) => {
      for (const version of ["0.4.0", "1.0.0"]) {
        const cid = `dual-${version.replaceAll(".", "")}`;
        const call = { plugin: "bridge", containerId: cid, ifname: "eth0" };
        const ours = await cniOk({
          ...call,
          command: "ADD",
          node: nodeA,
          netns: podA,
          conf: dualConf(version, dirA),
        });
        const theirs = await cniOk({
          ...call,
          command: "ADD",
          node: nodeB,
          netns: podB,
          conf: dualConf(version, dirB),
          ref: true,
        });
        assertEquals(normResult(ours), normResult(theirs), `result JSON for ${version}`);
        // One address per range set, v4 first (host-local's round robin moves on in the second round).
        const n = version === "0.4.0" ? 2 : 3;
        assertEquals(((ours!.ips as J[]) ?? []).map((i) => i.address), [
          `10.99.1.${n}/24`,
          `fc00:99:0:1::${n}/64`,
        ]);
        assertEquals(await podState(podA), await podState(podB), `pod v4 state for ${version}`);
        assertEquals(await v6State(podA), await v6State(podB), `pod v6 state for ${version}`);
        assertEquals(await nodeState(nodeA), await nodeState(nodeB), `node v4 state for ${version}`);
        const n6 = await nodeV6State(nodeA);
        assertEquals(n6, await nodeV6State(nodeB), `node v6 state for ${version}`);
        assert(
          // Both leave DAD to run on the bridge's gateway address (tentative for about a second).
          n6.addrs.some((a) => a.ifname === "cni0" && a.addrs.some((x) => x.startsWith("fc00:99:0:1::1/64"))),
          JSON.stringify(n6),
        );
        assertEquals(n6.fwd6, "1");
        assertEquals(listFiles(`${dirA}/sbs-net`), listFiles(`${dirB}/sbs-net`), "host-local files");
        for (
          const [node, pod, dir, ref] of [[nodeA, podA, dirA, false], [nodeB, podB, dirB, true]] as const
        ) {
          await cniOk({ ...call, command: "DEL", node, netns: pod, conf: dualConf(version, dir), ref });
        }
        assertEquals(await v6State(podA), await v6State(podB), `pod v6 state after DEL (${version})`);
        assertEquals(
          await nodeV6State(nodeA),
          await nodeV6State(nodeB),
          `node v6 state after DEL (${version})`,
        );
        assertEquals(
          listFiles(`${dirA}/sbs-net`).filter((f) => /^[\d]|^fc/.test(f)),
          [],
          "no IP files left",
        );
      }
    }),
});

needsRoot.test({
  name: "cni bridge: IPAM routes without a gateway, with priority or table, installed as the reference does",
  ignore: !HAVE_REF,
  fn: () =>
    withNetns(async (fx) => {
      const routes = async (isRef: boolean) => {
        const node = await fx.add(isRef ? "rtr" : "rto"), pod = await fx.add("rtp");
        const d = tempDir();
        try {
          const conf = {
            cniVersion: REF_NEW ? "1.1.0" : "1.0.0",
            name: "rtnet",
            type: "bridge",
            bridge: "cni0",
            isGateway: true,
            ipam: {
              type: "host-local",
              dataDir: d.path,
              // IPv6 only: the IPv4 route has no gateway of its family to take.
              ranges: [[{ subnet: "fd97:1::/64" }]],
              // Debian's 1.1.1 predates the routes' priority and table (spec 1.1): only v1.10 gets them.
              routes: [
                { dst: "10.244.0.0/16" },
                { dst: "fd00:1::/64", ...(REF_NEW ? { priority: 50 } : {}) },
                { dst: "fd00:2::/64", ...(REF_NEW ? { table: 100 } : {}) },
              ],
            },
          };
          await cniOk({
            plugin: "bridge",
            command: "ADD",
            node,
            netns: pod,
            containerId: "r1",
            conf,
            ref: isRef,
          });
          const out: unknown[] = [];
          for (const fam of ["-4", "-6"]) {
            for (const r of await ipJson<J[]>(pod, fam, "route", "show", "table", "all")) {
              const dst = String(r.dst);
              if (dst.startsWith("fe80") || dst.startsWith("ff00") || r.type === "multicast") continue;
              if (r.table === "local") continue;
              out.push({ ...r, prefsrc: undefined, gateway: r.gateway ? "GW" : undefined });
            }
          }
          return out;
        } finally {
          d.cleanup();
        }
      };
      const ours = await routes(false), ref = await routes(true);
      assert(ours.length >= 4, JSON.stringify(ours));
      assertEquals(ours, ref);
    }),
});
