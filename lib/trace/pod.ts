/**
 * The pod ends of a traced path, the same for the IPv4 and the IPv6 walk: the source pod's hops (its
 * route, its eth0 paired with a host veth, that veth's cni0 port) and the delivery to the destination
 * pod behind a node's cni0 (its cni0 port, its interface holding the address).
 * @module
 */
import { openNetlink, routeGet } from "../netlink/mod.ts";
import type { LinkInfo, NetnsRef } from "../netlink/mod.ts";
import { lookupText, type Path, type Why } from "./path.ts";
import { isPod, type PodRef, type TraceInput, type TraceNode } from "./types.ts";
import { unseenPods, unseenReason } from "../doctor/mod.ts";

/** A pod namespace label as the doctor gathers it ("pid:N" for an unnamed one) → a netns reference. */
function nsRef(label: string): NetnsRef {
  return /^pid:\d+$/.test(label) ? { pid: Number(label.slice(4)) } : { name: label };
}

/** The source pod's hops (its route, its eth0 ↔ host veth, the cni0 port); returns the pod's MTU. */
export async function podHops(inp: TraceInput, p: Path): Promise<number | null> {
  if (!isPod(inp.src)) return null;
  const pod = inp.src;
  const eth = podRouteHop(pod, inp.dst, p);
  if (!eth) return null;
  const host = vethHop(pod, eth, p);
  if (host) {
    p.dev(pod.node.netns, host.name, "rx");
    await cniPort(pod.node, host, pod.name, p);
  }
  return eth.mtu ?? null;
}

/** The pod's own route to `dst`; returns the interface it leaves the pod on, or null. */
function podRouteHop(pod: PodRef, dst: string, p: Path): LinkInfo | null {
  const ph = openNetlink(nsRef(pod.netns));
  try {
    const r = routeGet(ph, { dst });
    const eth = r.dev !== null ? ph.link(r.dev) : null;
    p.dev(pod.netns, eth?.name ?? null, "tx");
    p.add({
      node: pod.name,
      step: "pod-route",
      ok: r.errno === null && eth !== null,
      entry: lookupText(r),
      detail: r.errno === null
        ? `leaves the pod on ${r.devName}${r.gateway ? ` to ${r.gateway}` : ""}`
        : `the pod has no route to ${dst}`,
    }, {
      why: "the pod's routes come from the CNI result (flannel delegates isDefaultGateway to the bridge " +
        "plugin); without a route the packet never leaves the pod",
      fix: [`ip -n ${pod.netns} route`, "delete and re-create the pod (the CNI ADD installs its routes)"],
    });
    return eth;
  } finally {
    ph.close();
  }
}

/** The pod's `eth` paired with a host veth; returns that host veth when the pair is whole, else null. */
function vethHop(pod: PodRef, eth: LinkInfo, p: Path): LinkInfo | null {
  const n = pod.node, ctx = n.ctx;
  const host = eth.parent !== null ? ctx.link(eth.parent) : null;
  const peer = host ? ctx.vethPeers.get(host.name) : undefined;
  const paired = !!host && host.kind === "veth" && !!peer && peer.netns === pod.netns &&
    peer.ifindex === eth.index;
  p.add({
    node: n.name,
    step: "veth",
    ok: paired && eth.up,
    entry: host
      ? `${eth.name}@if${eth.parent} (pod) ↔ ${host.name} ifindex ${host.index}${
        eth.linkNetnsId !== null ? ` (link-netnsid ${eth.linkNetnsId})` : ""
      }`
      : `${eth.name}@if${eth.parent ?? "?"}: no such ifindex on ${n.name}`,
    detail: !host
      ? `the pod's ${eth.name} is not paired with a veth on ${n.name}`
      : !paired
      ? `${host.name} (ifindex ${host.index}) is not the peer of the pod's ${eth.name}`
      : !eth.up
      ? `the pod's ${eth.name} is down`
      : `pod ${eth.name} (mtu ${eth.mtu}) pairs with host ${host.name}`,
  }, {
    why: "the pod's interface must be one end of a veth whose other end is a port of cni0",
    fix: [`ip -n ${pod.netns} link set ${eth.name} up`, `ip -n ${pod.netns} -d link show ${eth.name}`],
  });
  return host && paired ? host : null;
}

/** Bridge port states (linux/if_bridge.h BR_STATE_*). */
const PORT_STATES: Record<number, string> = {
  0: "disabled",
  1: "listening",
  2: "learning",
  3: "forwarding",
  4: "blocking",
};

/** The cni0 port of a host veth: up, enslaved to cni0, cni0 up (hairpin shown). */
async function cniPort(n: TraceNode, host: LinkInfo, podName: string, p: Path): Promise<void> {
  const br = n.ctx.link("cni0");
  const enslaved = !!br && host.master === br.index;
  // The bridge's own port state (STP: disabled while the port's device is down), as sysfs shows it in
  // the node's namespace; null when unreadable.
  const raw = enslaved
    ? await n.ctx.exec.run(["cat", `/sys/class/net/${host.name}/brport/state`], 3000)
    : null;
  const state = raw?.code === 0 ? (PORT_STATES[Number(raw.stdout.trim())] ?? raw.stdout.trim()) : null;
  const portUp = host.up && host.operstate !== "DOWN" && host.operstate !== "LOWERLAYERDOWN" &&
    (state === null || state === "forwarding");
  const ok = enslaved && portUp && !!br?.up;
  const hairpin = host.bridgePort ? (host.bridgePort.hairpin ? "on" : "off") : "?";
  p.add({
    node: n.name,
    step: "cni0-port",
    ok,
    entry: `${host.name} ${host.up ? "up" : "DOWN"} (operstate ${host.operstate}) master ${
      host.master !== null ? (n.ctx.link(host.master)?.name ?? host.master) : "none"
    }${state ? ` port state ${state}` : ""} hairpin ${hairpin}; cni0 ${
      br ? (br.up ? "up" : "DOWN") : "missing"
    }`,
    detail: !br
      ? "cni0 does not exist"
      : !enslaved
      ? `${host.name} is not a port of cni0`
      : !portUp
      ? `${host.name} ${host.up ? `port state ${state}` : "is down"}: the cni0 port of ${podName} does not ` +
        "forward, its frames are dropped"
      : !br.up
      ? "cni0 is down"
      : `${host.name} forwards on cni0`,
  }, {
    why: "a pod's host veth must be an up port of cni0 for the bridge to forward its frames",
    fix: [n.ctx.cmd(`ip link set ${host.name} up`), n.ctx.cmd(`ip link set ${host.name} master cni0`)].concat(
      br && !br.up ? [n.ctx.cmd("ip link set cni0 up")] : [],
    ),
  });
}

/** cni0 on `n` hands the packet to the destination pod: its veth port, its eth0 holding the address. */
export async function deliver(inp: TraceInput, n: TraceNode, p: Path): Promise<void> {
  const broken = (step: string, entry: string, detail: string, why?: Why) =>
    p.add({ node: n.name, step, ok: false, entry, detail }, why);
  const pod = destinationPod(inp, n);
  const unseen = pod ? [] : unseenPods(n.ctx);
  if (!pod && unseen.length) {
    // From a container without the pod namespaces (a DaemonSet pod) the pod cannot be looked into: say so,
    // with what the node does show (cni0's neighbour entry for it), instead of calling it missing.
    const br = n.ctx.link("cni0");
    const nb = br ? n.ctx.kernel?.neigh.find((x) => x.index === br.index && x.dst === inp.dst) : undefined;
    p.add({
      node: n.name,
      step: "pod",
      ok: true,
      entry: `${inp.dst} behind cni0` + (nb?.lladdr ? ` (neighbour ${nb.lladdr} ${nb.state.join(",")})` : ""),
      detail: `handed to cni0; the pod itself is not verified: ${unseenReason(unseen)}`,
    });
    return;
  }
  if (!pod) {
    broken(
      "pod",
      `no pod behind cni0 holds ${inp.dst}`,
      `${inp.dst} is in ${n.name}'s subnet but no pod namespace reached through cni0 has it`,
      {
        why: "the address is not (or no longer) assigned to a pod",
        fix: [n.ctx.cmd(`ip neigh show dev cni0 ${inp.dst}`)],
      },
    );
    return;
  }
  const host = [...n.ctx.vethPeers.entries()].find(([, p]) => p.netns === pod.netns);
  const link = host ? n.ctx.link(host[0]) : null;
  const mark = p.hops.length;
  if (!link) {
    broken(
      "cni0-port",
      `no cni0 port pairs with ${pod.netns}`,
      `pod ${pod.name}'s veth is not a port of cni0`,
    );
    return;
  }
  p.dev(n.netns, link.name, "tx");
  await cniPort(n, link, pod.name, p);
  if (!p.hops.slice(mark).every((h) => h.ok)) return;
  podAddressHop(pod, inp.dst, p);
}

/** The pod on `n` that holds the destination: one the lab knows by name, else one found behind cni0. */
function destinationPod(inp: TraceInput, n: TraceNode): PodRef | undefined {
  return inp.pods.find((p) => (p.ip === inp.dst || p.ipv6 === inp.dst) && p.node === n) ??
    [...n.ctx.pods.values()].filter((p) => p.ips.includes(inp.dst)).map((p) => ({
      name: p.name,
      netns: p.name,
      ip: inp.dst,
      node: n,
    }))[0];
}

/** The destination pod's interface holding `dst`, up: the packet is delivered. */
function podAddressHop(pod: PodRef, dst: string, p: Path): void {
  const ph = openNetlink(nsRef(pod.netns));
  try {
    const a = ph.addrs(dst.includes(":") ? 6 : 4).find((a) => a.local === dst);
    const l = a ? ph.link(a.index) : null;
    p.dev(pod.netns, l?.name ?? null, "rx");
    p.add({
      node: pod.name,
      step: "pod",
      ok: !!l && l.up,
      entry: a
        ? `${a.local}/${a.prefix} dev ${a.ifname} ${l?.up ? "up" : "DOWN"} mtu ${l?.mtu ?? "?"}`
        : `no ${dst} in ${pod.netns}`,
      detail: !a
        ? `the pod does not hold ${dst}`
        : l?.up
        ? `delivered to ${pod.name}`
        : `the pod's ${a.ifname} is down`,
    });
  } finally {
    ph.close();
  }
}
