/**
 * Node files written by the daemon: subnet.env against the lease and the network config, and cni0's
 * address against FLANNEL_SUBNET.
 * @module
 */
import type { Check } from "../types.ts";
import { ok, unknown } from "../types.ts";
import { sh, shellQuote } from "../../base/shell.ts";

/** subnet-env: present, well-formed, consistent with our lease and the network config. */
export const subnetEnv: Check = {
  id: "subnet-env",
  title: "subnet.env present and consistent",
  run(ctx) {
    const path = ctx.opts.subnetFile;
    const restart = "restart the daemon: it rewrites subnet.env from its lease";
    if (ctx.subnetEnvSymlink) {
      return [{
        id: "subnet-env",
        severity: "critical",
        detail: `${ctx.subnetEnvUnreadable}`,
        why:
          "the flannel CNI plugin (and every flanctl reader) refuses a subnet.env that is a symlink out of " +
          "its directory: pods cannot start; someone may be trying to read another file through it",
        fix: [ctx.cmd(`rm -f ${shellQuote(path)}`), restart],
        persist: ["find what made the symlink (the daemon writes subnet.env as a regular file)"],
      }];
    }
    if (ctx.subnetEnvUnreadable) {
      return [unknown("subnet-env", `cannot read it: ${ctx.subnetEnvUnreadable}`, [
        `check --subnet-file: it must name the regular file the daemon writes`,
      ])];
    }
    if (!ctx.subnetEnv) {
      return [{
        id: "subnet-env",
        severity: "critical",
        detail: ctx.subnetEnvMissing
          ? `${path} does not exist`
          : `${path} is malformed: ${ctx.subnetEnvError}`,
        why: 'the flannel CNI plugin reads it on every pod start: pods fail with "failed to load flannel ' +
          "'subnet.env' file\" (flannel #2253)",
        fix: [restart],
        persist: ["/run is a tmpfs: the daemon must start at boot before kubelet (systemctl enable flanctl)"],
      }];
    }
    const e = ctx.subnetEnv;
    const problems: string[] = [];
    const own = ctx.store.state === "ok" ? ctx.ownLease() : null;
    if (ctx.store.state === "ok" && e.subnet && own?.subnet && !own.subnet.equals(e.subnet.net)) {
      problems.push(`FLANNEL_SUBNET ${e.subnet.ip}/${e.subnet.net.prefix} is not our lease ${own.subnet}`);
    }
    if (ctx.store.state === "ok" && e.subnet && !own) {
      problems.push(`no lease in the store for FLANNEL_SUBNET ${e.subnet.net}`);
    }
    const cfgNet = ctx.store.config?.network;
    if (cfgNet && e.network && !cfgNet.equals(e.network)) {
      problems.push(`FLANNEL_NETWORK ${e.network} != network config ${cfgNet}`);
    }
    if (e.network && e.subnet && !e.network.contains(e.subnet.net)) {
      problems.push(`FLANNEL_SUBNET ${e.subnet.net} is outside FLANNEL_NETWORK ${e.network}`);
    }
    if (e.subnet && !e.subnet.ip.equals(e.subnet.net.ip.add(1))) {
      problems.push(
        `FLANNEL_SUBNET address ${e.subnet.ip} is not the subnet's first host ${e.subnet.net.ip.add(1)}`,
      );
    }
    if (problems.length) {
      return [{
        id: "subnet-env",
        severity: "critical",
        detail: `${path}: ${problems.join("; ")}`,
        why:
          "new pods get addresses from a subnet this node does not own: their traffic is routed to another " +
          "node or dropped",
        fix: [restart, "then recreate the pods started with the wrong subnet"],
        persist: [
          "keep the daemon's --subnet-file and the CNI config's subnetFile pointing at the same file",
        ],
      }];
    }
    const extra = ctx.store.state === "ok"
      ? ", matches the lease"
      : ` (lease not checked: ${ctx.store.hint ?? ctx.store.error})`;
    return [
      ok(
        "subnet-env",
        `${path}: FLANNEL_SUBNET=${e.subnet ? `${e.subnet.ip}/${e.subnet.net.prefix}` : "-"} ` +
          `FLANNEL_NETWORK=${e.network ?? "-"} FLANNEL_MTU=${e.mtu} FLANNEL_IPMASQ=${e.ipMasq}${extra}`,
      ),
    ];
  },
};

/** cni0-address: cni0 carries FLANNEL_SUBNET's address and nothing else (flannel #1850). */
export const cni0Address: Check = {
  id: "cni0-address",
  title: "cni0 address = FLANNEL_SUBNET",
  run(ctx) {
    const br = ctx.link("cni0");
    if (!br) {
      return [
        ok("cni0-address", "cni0 does not exist yet (the bridge plugin creates it with the first pod)"),
      ];
    }
    const s = ctx.subnetEnv?.subnet;
    const s6 = ctx.subnetEnv?.ipv6Subnet;
    if (!s && s6) {
      // IPv6-only: cni0 carries the IPv6 subnet's gateway (FLANNEL_IPV6_SUBNET's address).
      const want = `${s6.ip}/${s6.net.prefix}`;
      const has = (ctx.kernel?.addrs ?? []).some((a) =>
        a.index === br.index && `${a.local}/${a.prefix}` === want
      );
      return has ? [ok("cni0-address", `cni0 has ${want}`)] : [{
        id: "cni0-address",
        severity: "critical",
        detail: `cni0 lacks ${want} (FLANNEL_IPV6_SUBNET)`,
        why: "pods use cni0's address as their IPv6 gateway",
        fix: [ctx.cmd(sh`ip -6 addr add ${want} dev cni0`)],
      }];
    }
    if (!s) return [unknown("cni0-address", `subnet.env unavailable: ${ctx.subnetEnvError}`)];
    const want = `${s.ip}/${s.net.prefix}`;
    const have = (ctx.kernel?.addrs ?? []).filter((a) => a.index === br.index && a.family === 4)
      .map((a) => `${a.local}/${a.prefix}`);
    if (have.length === 1 && have[0] === want) return [ok("cni0-address", `cni0 ${want} = FLANNEL_SUBNET`)];
    if (have.length === 0) {
      return [ok("cni0-address", `cni0 has no IPv4 address yet (the bridge plugin adds ${want})`)];
    }
    return [{
      id: "cni0-address",
      severity: "critical",
      detail: `cni0 has ${have.join(", ")}, FLANNEL_SUBNET is ${want}`,
      why: 'the bridge plugin refuses every new pod ("cni0" already has an IP address different from ' +
        `${want}); existing pods route via the wrong gateway (flannel #1850)`,
      fix: [
        ctx.cmd("ip link set cni0 down"),
        ctx.cmd("ip link delete cni0"),
        "recreate the pods on this node (CNI re-creates cni0)",
      ],
      persist: [
        "happens after a subnet change: keep the node's lease (do not delete subnet.env/leases by hand)",
      ],
    }];
  },
};

/** The checks of this family. */
export const CONFIG_CHECKS: Check[] = [subnetEnv, cni0Address];
