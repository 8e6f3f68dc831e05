/**
 * Pod plumbing on this node: host veths on cni0 paired with live pod namespaces, host-local IP files
 * pointing at live containers, leaked pod namespaces, stale CNI caches, and hairpin mode.
 *
 * Pairing: a host veth's IFLA_LINK_NETNSID names the peer's namespace as seen from the checked one;
 * lib/observe/veths.ts resolves it against every namespace on the host (named ones under /var/run/netns,
 * where containerd/CRI-O and the lab keep pod namespaces, then /proc/PID/ns/net), with
 * `ip netns list-id` as the fallback. Liveness of a host-local IP: the IP is configured inside a namespace that is the peer
 * of a veth on cni0. So a leaked IP is one no running pod carries, whatever runtime made it, and the
 * container ID comes from the IP file's first line.
 * @module
 */
import type { Check } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { cniConf, unseenFromPod } from "./cni.ts";
import { IPAddr } from "../../base/cidr.ts";
import { readCappedText } from "../../base/capped_read.ts";
import { sh } from "../../base/shell.ts";

/** One host-local IP file. */
export interface IpFile {
  network: string;
  ip: string;
  path: string;
  containerId: string;
  ifname: string;
}

/** Joins at most `max` items, then "and N more" (the fix list keeps every item). */
export function capList(items: string[], max = 10): string {
  if (items.length <= max) return items.join(", ");
  return `${items.slice(0, max).join(", ")}, and ${items.length - max} more`;
}

/** Reads every `<hostLocalDir>/<network>/<ip>` file, in address order. */
export function readIpFiles(dir: string): { files: IpFile[]; error: string | null } {
  const files: IpFile[] = [];
  let nets: string[];
  try {
    nets = [...Deno.readDirSync(dir)].filter((e) => e.isDirectory).map((e) => e.name).sort();
  } catch (e) {
    return { files, error: e instanceof Deno.errors.NotFound ? null : (e as Error).message };
  }
  for (const n of nets) {
    const entries = [...Deno.readDirSync(`${dir}/${n}`)]
      .filter((e) => e.isFile && IPAddr.tryParse(e.name) !== null)
      .sort((a, b) => IPAddr.parse(a.name).compare(IPAddr.parse(b.name)));
    for (const e of entries) {
      const path = `${dir}/${n}/${e.name}`;
      let text = "";
      try {
        text = readCappedText(path, 1024 * 1024);
      } catch { /* unreadable: treated as empty */ }
      const [cid = "", ifname = ""] = text.split(/\r?\n/).map((s) => s.trim());
      files.push({ network: n, ip: e.name, path, containerId: cid, ifname });
    }
  }
  return { files, error: null };
}

function liveIPs(ctx: NodeSnapshot): Set<string> {
  return new Set([...ctx.pods.values()].flatMap((p) => p.ips));
}

/** veths: host veths on cni0 whose peer is in no known pod namespace; stray veths off the bridge. */
export const vethOrphan: Check = {
  id: "veths",
  title: "Host veths paired with live pod namespaces",
  run(ctx) {
    if (!ctx.kernel) return [unknown("veths", `no kernel snapshot: ${ctx.kernelError}`)];
    const unseen = unseenPods(ctx);
    if (unseen.length) return [unknown("veths", `cannot pair the veths with pods: ${unseenReason(unseen)}`)];
    const bad: string[] = [];
    const fix: string[] = [];
    const veths = ctx.cni0Veths();
    for (const v of veths) {
      const peer = ctx.vethPeers.get(v.name);
      const ns = peer?.netns ?? null;
      if (ns === null || ns === ctx.opts.netns) {
        bad.push(`${v.name} on cni0: its peer is in this namespace, not in a pod`);
        fix.push(ctx.cmd(sh`ip link del ${v.name}`));
      } else if (ns.startsWith("nsid:")) {
        bad.push(
          `${v.name} on cni0: peer in netns id ${ns.slice(5)}, which no named namespace or process ` +
            "holds (sandbox gone but its namespace kept alive)",
        );
        fix.push(ctx.cmd(sh`ip link del ${v.name}`) + "  # check the runtime (crictl pods) first");
      } else if (ns.startsWith("pid:")) {
        bad.push(
          `${v.name} on cni0: peer namespace has no name under /var/run/netns, only process ` +
            `${ns.slice(4)} holds it (a sandbox whose netns was unmounted but whose process survived)`,
        );
        fix.push(
          `ps -o pid,cmd -p ${ns.slice(4)}  # then stop that process; the veth goes with its namespace`,
        );
      } else if (!ctx.pods.has(ns)) {
        bad.push(`${v.name} on cni0: peer namespace ${ns} could not be read`);
      }
    }
    for (const l of ctx.kernel.links) {
      if (l.kind === "veth" && l.name.startsWith("veth") && l.master === null) {
        bad.push(`${l.name} is a veth not attached to any bridge`);
        fix.push(ctx.cmd(sh`ip link del ${l.name}`));
      }
    }
    if (!bad.length) {
      return [
        ok(
          "veths",
          `${veths.length} veth(s) on cni0, each paired with a pod netns (${ctx.pods.size} pod(s))`,
        ),
      ];
    }
    return [{
      id: "veths",
      severity: "warning",
      detail: bad.join("; "),
      why: "leftovers of pods the runtime failed to tear down: they hold addresses/MACs on cni0 and hide " +
        "which sandboxes are really alive",
      fix,
      persist: ["find the cause of failed CNI DELs in the kubelet/containerd log"],
    }];
  },
};

/**
 * cni0 veths whose pod namespace this process cannot read, as `veth (label)`: one it cannot find (no name
 * under /var/run/netns it can see, no process it can see holding it — a DaemonSet container without
 * /run/netns or hostPID) or cannot enter (no CAP_SYS_ADMIN). Their pods' IPs are unknown, so nothing can
 * be called leaked or orphaned.
 */
export function unseenPods(ctx: NodeSnapshot): string[] {
  return ctx.cni0Veths().flatMap((v) => {
    const ns = ctx.vethPeers.get(v.name)?.netns ?? null;
    if (ns === null || ns === ctx.opts.netns || ctx.pods.has(ns)) return [];
    // With names visible under /var/run/netns, an unfound peer is a leftover (the veths check names it).
    if (ns.startsWith("nsid:") && ctx.namedNetns.length) return [];
    return [`${v.name} (${ns})`];
  });
}

/** Why pod namespaces cannot be seen, and where they can. */
export function unseenReason(unseen: string[]): string {
  return `${unseen.length} pod veth(s) on cni0 lead to namespaces this process cannot see or enter (${
    capList(unseen, 3)
  }): run it on the node as root (a DaemonSet container has neither /run/netns nor CAP_SYS_ADMIN)`;
}

/**
 * The one command that releases the leaked reservations of `dir`: every IP file older than this run
 * (`atMs`, epoch milliseconds, taken after the files were read: a reservation made after it is a pod's that
 * doctor did not see) whose container is none of the `live` ones. The time keeps its milliseconds: a whole
 * second would spare files written in the second doctor ran. Lock and last_reserved_ip files do not look like IPs and stay.
 */
export function releaseLeakedCommand(dir: string, live: string[], atMs: number): string {
  const at = (Math.ceil(atMs) / 1000).toFixed(3);
  const keep = ["", ...new Set(live)].map((id) => `-e ${sh`${id}`}`).join(" ");
  return sh`find ${dir}` + ` -maxdepth 1 -type f ! -newermt @${at} \\( -name '*.*.*.*' -o -name '*:*' \\)` +
    ` | while read -r f; do head -n1 "$f" | tr -d '\\r' | grep -qxF ${keep} || rm -- "$f"; done`;
}

/** hostlocal-ips: host-local IP files for containers that no longer run; empty files; pool full. */
export const hostlocalLeak: Check = {
  id: "hostlocal-ips",
  title: "host-local IP reservations belong to live pods",
  run(ctx) {
    const dir = ctx.opts.hostLocalDir;
    const hidden = unseenFromPod(dir);
    if (hidden) return [unknown("hostlocal-ips", hidden)];
    const { files, error } = readIpFiles(dir);
    if (error) return [unknown("hostlocal-ips", `cannot read ${dir}: ${error}`)];
    const live = liveIPs(ctx);
    const unseen = unseenPods(ctx);
    const leaked = unseen.length ? [] : files.filter((f) => f.containerId && !live.has(f.ip));
    const empty = files.filter((f) => !f.containerId);
    const problems: string[] = [];
    if (leaked.length) {
      const items = leaked.map((f) =>
        `${f.ip} → container ${f.containerId}${f.ifname ? `/${f.ifname}` : ""}`
      );
      problems.push(`${leaked.length} leaked IP(s): ${capList(items)}`);
    }
    if (empty.length) problems.push(`${empty.length} empty IP file(s): ${capList(empty.map((f) => f.path))}`);
    let full = false;
    const sub = ctx.subnetEnv?.subnet?.net;
    if (sub && sub.family === 4) {
      const cap = Number(sub.size) - 3; // network, gateway, broadcast
      const used = files.filter((f) => {
        const ip = IPAddr.tryParse(f.ip);
        return ip !== null && sub.contains(ip);
      }).length;
      full = cap > 0 && used >= cap;
      if (cap > 0 && used >= cap * 0.9) {
        problems.push(`pool ${sub} ${used}/${cap} used (${Math.round((used / cap) * 100)}%)`);
      }
    }
    if (!problems.length) {
      if (unseen.length) {
        return [unknown("hostlocal-ips", `cannot judge ${files.length} IP file(s): ${unseenReason(unseen)}`)];
      }
      return [ok("hostlocal-ips", `${files.length} IP file(s) in ${dir}, all held by live pods`)];
    }
    if (unseen.length) problems.push(`leaks not judged: ${unseenReason(unseen)}`);
    const liveIds = files.filter((f) => live.has(f.ip)).map((f) => f.containerId);
    const at = Date.now() + 1; // the files were read before this
    const nets = [...new Set([...leaked, ...empty].map((f) => f.network))];
    return [{
      id: "hostlocal-ips",
      severity: full ? "critical" : "warning",
      detail: problems.join("; "),
      why: (full
        ? 'every new pod on this node fails: "failed to allocate for range 0: no IP addresses available in ' +
          'range set" (kubelet event FailedCreatePodSandBox). '
        : "") +
        "leaked reservations are never freed (host-local has no GC): the pool runs out " +
        "(plugins #498, kubernetes #86944)",
      fix: nets.length
        ? nets.map((n) =>
          releaseLeakedCommand(`${dir}/${n}`, liveIds, at) + "  # releases only IPs whose container is gone"
        )
        : ["flanctl doctor --problems  # on the host, where every pod namespace is visible"],
      persist: [
        "find why CNI DEL was skipped (node crash/reboot); drain and reboot cleans /var/lib/cni on tmpfs setups",
      ],
    }];
  },
};

/** Container IDs that are alive: IP files whose IP a live pod carries. */
function liveContainers(ctx: NodeSnapshot): Set<string> {
  const live = liveIPs(ctx);
  return new Set(
    readIpFiles(ctx.opts.hostLocalDir).files.filter((f) => live.has(f.ip)).map((f) => f.containerId),
  );
}

/** pod-netns: runtime pod namespaces (`cni-*`) with no veth on cni0. */
export const netnsLeak: Check = {
  id: "pod-netns",
  title: "No leaked pod network namespaces",
  run(ctx) {
    const prefix = ctx.opts.podNetnsPrefix;
    const unseen = unseenPods(ctx);
    if (unseen.length) return [unknown("pod-netns", unseenReason(unseen))];
    const cands = ctx.namedNetns.filter((n) => n.startsWith(prefix));
    const leaked = cands.filter((n) => !ctx.pods.has(n));
    if (!leaked.length) {
      return [
        ok(
          "pod-netns",
          `${cands.length} ${prefix}* namespace(s) under /var/run/netns, all attached to cni0`,
        ),
      ];
    }
    return [{
      id: "pod-netns",
      severity: "warning",
      detail: `${leaked.length} pod namespace(s) with no veth on cni0: ${capList(leaked)}`,
      why: "leaked netns mounts keep memory and sockets alive and confuse sandbox GC (kubernetes #86944)",
      fix: leaked.map((n) => `ip netns del ${n}  # after checking no sandbox uses it (crictl pods)`),
      persist: [
        "upgrade/fix the runtime's sandbox teardown; these come from failed RunPodSandbox/StopPodSandbox",
      ],
    }];
  },
};

/** cni-cache: libcni result cache and flannel data entries for containers that are gone. */
export const cniCacheStale: Check = {
  id: "cni-cache",
  title: "No stale CNI cache entries",
  run(ctx) {
    const hidden = unseenFromPod(ctx.opts.hostLocalDir);
    if (hidden) return [unknown("cni-cache", hidden)];
    // Which containers are alive is read from the pods' IPs: with pods out of sight, none is known to be gone.
    const unseen = unseenPods(ctx);
    if (unseen.length) {
      return [unknown("cni-cache", `cannot judge the cache entries: ${unseenReason(unseen)}`)];
    }
    const live = liveContainers(ctx);
    const stale: string[] = [];
    const paths: string[] = [];
    const scan = (dir: string, idOf: (name: string) => string | null) => {
      try {
        for (const e of Deno.readDirSync(dir)) {
          if (!e.isFile) continue;
          const id = idOf(e.name);
          if (id && !live.has(id)) {
            stale.push(`${dir}/${e.name}`);
            paths.push(`${dir}/${e.name}`);
          }
        }
      } catch { /* missing dir: nothing cached */ }
    };
    // /var/lib/cni/results/<network>-<containerID>-<ifname>; container IDs are hex or our lab's ids.
    scan(ctx.opts.cniResultsDir, (n) => {
      for (const id of live) if (n.includes(`-${id}-`)) return null;
      const m = /-([0-9a-zA-Z_.]+)-[^-]+$/.exec(n);
      return m ? m[1] : n;
    });
    scan(ctx.opts.flannelDataDir, (n) => n);
    if (!stale.length) {
      return [
        ok("cni-cache", `no stale entries in ${ctx.opts.cniResultsDir} or ${ctx.opts.flannelDataDir}`),
      ];
    }
    return [{
      id: "cni-cache",
      severity: "warning",
      detail: `${stale.length} entr(ies) for containers with no live pod IP: ${capList(stale)}`,
      why:
        "a later ADD/DEL with a recycled container ID reads the stale entry (wrong delegate config or result)",
      fix: paths.map((p) => `rm ${p}`),
      persist: ["same cause as leaked IPs: CNI DEL skipped after a crash"],
    }];
  },
};

/** hairpin: ports of cni0 have hairpin on when the CNI config asks for hairpinMode. */
export const hairpin: Check = {
  id: "hairpin",
  title: "hairpin_mode on cni0 ports as configured",
  run(ctx) {
    const v = cniConf(ctx);
    const conf = v.flannel
      ? ((v.flannel.delegate ?? {}) as Record<string, unknown>)
      : v.plugins.find((p) => p.type === "bridge");
    // flannel's plugin defaults hairpinMode to true in its delegate (kube-flannel sets it explicitly).
    const want = conf ? conf.hairpinMode !== false && (v.flannel ? true : conf.hairpinMode === true) : false;
    if (!want) return [ok("hairpin", "hairpinMode is off in the CNI config")];
    const off = ctx.cni0Veths().filter((l) => l.bridgePort && !l.bridgePort.hairpin);
    if (!off.length) return [ok("hairpin", `hairpin on for all ${ctx.cni0Veths().length} cni0 port(s)`)];
    return [{
      id: "hairpin",
      severity: "warning",
      detail: `hairpinMode=true in the CNI config but hairpin off on ${capList(off.map((l) => l.name))}`,
      why:
        "a pod cannot reach itself through its own Service IP (the reply must leave by the port it came in)",
      fix: off.map((l) => ctx.cmd(sh`bridge link set dev ${l.name} hairpin on`)),
      persist: ["recreate the pods (the bridge plugin sets hairpin on ADD)"],
    }];
  },
};

/** The checks of this family. */
export const POD_CHECKS: Check[] = [vethOrphan, hostlocalLeak, netnsLeak, cniCacheStale, hairpin];
