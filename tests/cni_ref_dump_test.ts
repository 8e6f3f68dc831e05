/**
 * Everything a bridge + host-local ADD and DEL leave, ours against the reference (REF_DIR: v1.10.0 from
 * install.sh --dev), in IPv4-only, IPv6-only and dual stack: every `ip -d -j` link, address and route (all
 * tables) of node and pod, every sysctl under net/ipv{4,6}/conf/<if> of cni0, the host veth, the pod's eth0
 * and lo, iptables-save and ip6tables-save, and host-local's files with their modes and contents. Only what
 * is random per run is blanked (names of veths and namespaces, MACs, link-local addresses, ifindexes, bridge
 * timers and ids, counters); routes are compared as a set (the order of equal prefixes follows which device
 * came up first), and the bridge's carrier after the last DEL once the kernel's linkwatch has settled. Needs
 * the reference v1.5+ (spec 1.1): Debian's 1.1.1 predates what v1.10 changed (docs/cni.md).
 */
import { needsRoot } from "./root.ts";
import { assertEquals } from "./assert.ts";
import { cniOk, refSpeaks11, requireRefPlugins, tempDir } from "./cni_helpers.ts";
import { ipJson, nsRun, withNetns } from "./netns.ts";

type J = Record<string, unknown>;
const HAVE_REF = requireRefPlugins(["bridge", "host-local"]);
const REF_NEW = HAVE_REF && await refSpeaks11();

const MODES: Record<string, unknown[][]> = {
  "IPv4-only": [[{ subnet: "10.95.1.0/24" }]],
  "IPv6-only": [[{ subnet: "fd95:1::/64" }]],
  "dual stack": [[{ subnet: "10.95.1.0/24" }], [{ subnet: "fd95:1::/64" }]],
};

/** Keys whose values are random per run or count traffic and time. */
const VOLATILE = new Set([
  "ifindex",
  "address",
  "broadcast",
  "link_index",
  "link_netnsid",
  "bridge_id",
  "root_id",
  "designated_root",
  "designated_bridge",
  "designated_port",
  "designated_cost",
  "port_id",
  "port_no",
  "id",
  "no",
  "hello_timer",
  "tcn_timer",
  "topology_change_timer",
  "gc_timer",
  "forward_delay_timer",
  "hold_timer",
  "message_age_timer",
  "stats",
  "stats64",
  "preferred_life_time",
  "valid_life_time",
]);

function clean(x: unknown, names: [string, string][]): unknown {
  if (Array.isArray(x)) return x.map((y) => clean(y, names));
  if (x && typeof x === "object") {
    const o: J = {};
    for (const [k, v] of Object.entries(x as J)) if (!VOLATILE.has(k)) o[k] = clean(v, names);
    return o;
  }
  if (typeof x !== "string") return x;
  let s = x;
  for (const [a, b] of names) s = s.replaceAll(a, b);
  return s.replace(/fe80::[0-9a-f:]+/g, "fe80::LL").replace(/([0-9a-f]{2}:){5}[0-9a-f]{2}/g, "MAC");
}

async function sysctls(ns: string, ifname: string): Promise<J> {
  const out: J = {};
  for (const fam of ["ipv4", "ipv6"]) {
    const dir = `/proc/sys/net/${fam}/conf/${ifname}`;
    const r = await nsRun(ns, [
      "sh",
      "-c",
      `cd ${dir} && for f in *; do printf '%s=%s\\n' "$f" "$(tr '\\n\\t' '  ' <"$f" 2>/dev/null)"; done`,
    ]);
    for (const l of r.stdout.split("\n").filter(Boolean)) {
      const i = l.indexOf("=");
      out[`${fam}.${l.slice(0, i)}`] = l.slice(i + 1);
    }
  }
  for (const k of ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"]) {
    out[k] = (await nsRun(ns, ["cat", `/proc/sys/${k}`])).stdout.trim();
  }
  return out;
}

async function routes(ns: string): Promise<string[]> {
  const out: string[] = [];
  for (const fam of ["-4", "-6"]) {
    for (const r of await ipJson<J[]>(ns, fam, "route", "show", "table", "all")) out.push(JSON.stringify(r));
  }
  return out;
}

async function rules(ns: string): Promise<string[]> {
  const out: string[] = [];
  for (const cmd of ["iptables-save", "ip6tables-save"]) {
    out.push(
      ...(await nsRun(ns, [cmd])).stdout.split("\n").filter((l) => l && !l.startsWith("#"))
        .map((l) => l.replace(/\[\d+:\d+\]/, "")),
    );
  }
  return out;
}

/** The bridge's flags and operstate once they stop changing (linkwatch runs up to a second later). */
async function settledBridge(ns: string): Promise<J> {
  let last = "";
  for (let i = 0; i < 30; i++) {
    const b = (await ipJson<J[]>(ns, "link", "show", "cni0"))[0];
    const now = JSON.stringify([b.flags, b.operstate]);
    if (now === last) return { flags: b.flags, operstate: b.operstate };
    last = now;
    await new Promise((r) => setTimeout(r, 200));
  }
  return { unsettled: last };
}

async function dump(isRef: boolean, ranges: unknown[][], fx: { add(t: string): Promise<string> }) {
  const node = await fx.add(isRef ? "rdr" : "rdo"), pod = await fx.add("rdp");
  const d = tempDir();
  try {
    const conf = {
      cniVersion: "1.0.0",
      name: "dumpnet",
      type: "bridge",
      bridge: "cni0",
      isGateway: true,
      isDefaultGateway: true,
      ipMasq: true,
      hairpinMode: true,
      mtu: 1450,
      ipam: { type: "host-local", dataDir: d.path, ranges, routes: [{ dst: "10.244.0.0/16" }] },
    };
    const call = (command: string) =>
      cniOk({ plugin: "bridge", command, node, netns: pod, containerId: "d1", conf, ref: isRef });
    const r = await call("ADD");
    const hostVeth = String((r!.interfaces as J[])[1].name);
    // DAD, the link-local addresses and their routes settle in the first seconds.
    await new Promise((res) => setTimeout(res, 2500));
    const names: [string, string][] = [[hostVeth, "HOSTVETH"], [node, "NODE"], [pod, "POD"], [
      d.path,
      "DATA",
    ]];
    const files: J = {};
    for (const e of Deno.readDirSync(`${d.path}/dumpnet`)) {
      const p = `${d.path}/dumpnet/${e.name}`;
      const st = Deno.statSync(p);
      files[e.name] = `${(st.mode! & 0o777).toString(8)} ${st.isFile ? Deno.readTextFileSync(p) : "dir"}`;
    }
    const added = {
      result: r,
      nodeLinks: await ipJson(node, "-d", "link"),
      podLinks: await ipJson(pod, "-d", "link"),
      nodeAddrs: await ipJson(node, "addr"),
      podAddrs: await ipJson(pod, "addr"),
      nodeRoutes: await routes(node),
      podRoutes: await routes(pod),
      cni0: await sysctls(node, "cni0"),
      hostVeth: await sysctls(node, hostVeth),
      podEth0: await sysctls(pod, "eth0"),
      podLo: await sysctls(pod, "lo"),
      rules: await rules(node),
      files,
    };
    await call("DEL");
    const deleted = {
      nodeLinks: (await ipJson<J[]>(node, "-d", "link")).map((l) => ({ ...l, flags: 0, operstate: 0 })),
      bridge: await settledBridge(node),
      nodeRoutes: await routes(node),
      rules: await rules(node),
      files: [...Deno.readDirSync(`${d.path}/dumpnet`)].map((e) => e.name).sort(),
      podLinks: await ipJson(pod, "-d", "link"),
    };
    // Routes as a set: sorted once the random parts are blanked.
    const c = clean({ added, deleted }, names) as Record<string, Record<string, string[]>>;
    for (const part of [c.added.nodeRoutes, c.added.podRoutes, c.deleted.nodeRoutes]) part.sort();
    return c;
  } finally {
    d.cleanup();
  }
}

for (const [label, ranges] of Object.entries(MODES)) {
  needsRoot.test({
    name:
      `cni bridge+host-local (${label}): every link, address, route, sysctl, rule and file as the reference`,
    ignore: !REF_NEW,
    fn: () =>
      withNetns(async (fx) => {
        const ours = await dump(false, ranges, fx);
        const ref = await dump(true, ranges, fx);
        assertEquals(ours, ref);
      }),
  });
}
