/**
 * The VXLAN device and the MTU chain: module, device state/address, VTEP MAC vs lease, checksum offload,
 * UDP port, and MTUs of flannel.1, cni0, host veths and pod interfaces.
 * @module
 */
import type { Check, CheckId, Finding } from "../types.ts";
import { ok, unknown } from "../types.ts";
import type { NodeSnapshot } from "../../observe/snapshot.ts";
import { getTxChecksum } from "../../os/mod.ts";
import { readCappedText } from "../../base/capped_read.ts";
import { overlayIn, overlayIn6, ruleset4, ruleset6 } from "../../observe/packet_path/mod.ts";
import { dev6, network6 } from "../../observe/probes.ts";
import { type AcceptSpec, pathFinding } from "./firewall_path.ts";
import { vtepMacOf } from "../../lease/backend_data.ts";
import { sh } from "../../base/shell.ts";

function notVxlan(ctx: NodeSnapshot, id: CheckId): Finding | null {
  if (ctx.ipv4Disabled) return ok(id, `IPv4 disabled: no ${ctx.vxlanName} (IPv6: see flannel-v6-device)`);
  const b = ctx.backendType;
  if (b === "vxlan") return null;
  if (b === null) {
    return unknown(
      id,
      `backend unknown: no flannel.* VXLAN device and no network config (${
        ctx.store.hint ?? ctx.store.error
      })`,
    );
  }
  return ok(id, `backend ${b}: no VXLAN device expected`);
}

/** vxlan-module: the vxlan kernel module is available. */
export const vxlanModule: Check = {
  id: "vxlan-module",
  title: "vxlan kernel module available",
  run(ctx) {
    const nv = notVxlan(ctx, "vxlan-module");
    if (nv && nv.severity === "ok") return [nv];
    if (ctx.kernel?.links.some((l) => l.kind === "vxlan")) {
      return [ok("vxlan-module", "vxlan module in use (a VXLAN device exists)")];
    }
    const exists = (p: string) => {
      try {
        Deno.statSync(p);
        return true;
      } catch {
        return false;
      }
    };
    if (exists("/sys/module/vxlan")) return [ok("vxlan-module", "vxlan module loaded (/sys/module/vxlan)")];
    const rel = Deno.osRelease();
    const dep = (() => {
      try {
        return readCappedText(`/lib/modules/${rel}/modules.dep`, 32 * 1024 * 1024);
      } catch {
        return "";
      }
    })();
    if (/\/vxlan\.ko/.test(dep)) {
      return [ok("vxlan-module", `vxlan module available for ${rel} (not loaded yet)`)];
    }
    return [{
      id: "vxlan-module",
      severity: "critical",
      detail: `vxlan module not loaded and not found in /lib/modules/${rel}`,
      why: 'the daemon cannot create flannel.1 ("operation not supported", flannel #1953)',
      fix: ["modprobe vxlan", `apt-get install linux-modules-extra-${rel}  # or your distro's extra modules`],
      persist: ["echo vxlan > /etc/modules-load.d/vxlan.conf"],
    }];
  },
};

/** flannel-device: flannel.<VNI> exists, is a VXLAN device, up, addressed with the subnet address /32. */
export const flannelDevice: Check = {
  id: "flannel-device",
  title: "flannel.<VNI> present, up and addressed",
  run(ctx) {
    const nv = notVxlan(ctx, "flannel-device");
    if (nv) {
      if (nv.severity !== "unknown" || !ctx.subnetEnv) return [nv];
      // subnet.env says flannel ran here, flannel's documented default backend is vxlan.
    }
    const name = ctx.vxlanName;
    const dev = ctx.vxlanDevice();
    const sub = ctx.nodeSubnet;
    const restart = "restart the daemon (it re-creates the device), e.g. systemctl restart flanctl";
    if (!dev) {
      return [{
        id: "flannel-device",
        severity: "critical",
        detail: `${name} does not exist` +
          (ctx.store.config ? "" : " (backend assumed vxlan: no network config)"),
        why: "no overlay: pods on this node cannot reach pods on other nodes",
        fix: [restart],
        persist: ["make sure the daemon is enabled at boot: systemctl enable flanctl"],
      }];
    }
    const problems: string[] = [];
    const fix: string[] = [];
    if (dev.kind !== "vxlan") problems.push(`${name} is a ${dev.kind ?? "physical"} device, not vxlan`);
    if (!dev.up) {
      problems.push(`${name} is down (operstate ${dev.operstate})`);
      fix.push(ctx.cmd(sh`ip link set ${name} up`));
    }
    if (dev.vxlan && dev.vxlan.vni !== ctx.vni) {
      problems.push(`${name} has VNI ${dev.vxlan.vni}, expected ${ctx.vni}`);
    }
    if (dev.vxlan?.learning) problems.push(`${name} has learning on (flannel turns it off)`);
    const addrs = (ctx.kernel?.addrs ?? []).filter((a) => a.index === dev.index && a.family === 4);
    if (sub) {
      const want = `${sub.ip}/32`;
      if (!addrs.some((a) => `${a.local}/${a.prefix}` === want)) {
        const have = addrs.map((a) => `${a.local}/${a.prefix}`).join(", ") || "no IPv4 address";
        problems.push(`${name} has ${have}, expected ${want}`);
        fix.push(ctx.cmd(sh`ip addr add ${want} dev ${name}`));
      }
    }
    if (problems.length === 0) {
      return [
        ok(
          "flannel-device",
          `${name} up, vxlan VNI ${dev.vxlan?.vni}, address ${sub ? `${sub.ip}/32` : "?"}`,
        ),
      ];
    }
    return [{
      id: "flannel-device",
      severity: "critical",
      detail: problems.join("; "),
      why: "the overlay device must be up and carry the subnet's network address for the onlink routes and " +
        "ARP entries to work",
      fix: fix.length ? fix : [ctx.cmd(sh`ip link del ${name}`), restart],
      persist: [restart + " (the daemon re-checks the device on start)"],
    }];
  },
};

/** vtep-mac: the device MAC equals the VtepMAC our lease publishes. */
export const vtepMac: Check = {
  id: "vtep-mac",
  title: "flannel.<VNI> MAC matches the lease's VtepMAC",
  run(ctx) {
    const nv = notVxlan(ctx, "vtep-mac");
    if (nv) return [nv];
    const dev = ctx.vxlanDevice();
    if (!dev) return [unknown("vtep-mac", `${ctx.vxlanName} does not exist`)];
    if (ctx.store.state !== "ok") {
      return [
        unknown(
          "vtep-mac",
          `${ctx.vxlanName} MAC ${dev.mac}; lease not readable: ${ctx.store.hint ?? ctx.store.error}`,
        ),
      ];
    }
    const own = ctx.ownLease();
    if (!own) {
      return [unknown("vtep-mac", `${ctx.vxlanName} MAC ${dev.mac}; no lease for this node (see lease-own)`)];
    }
    const want = vtepMacOf(own.attrs.BackendData);
    if (want === (dev.mac ?? "").toLowerCase()) {
      return [ok("vtep-mac", `${ctx.vxlanName} MAC ${dev.mac} = lease ${own.subnet} VtepMAC`)];
    }
    return [{
      id: "vtep-mac",
      severity: "critical",
      detail: `${ctx.vxlanName} MAC ${dev.mac} != VtepMAC ${want} in lease ${own.subnet}`,
      why:
        "peers send this node's traffic to the MAC in the lease; the device drops frames for another MAC " +
        "(systemd MACAddressPolicy=persistent, NetworkManager; flannel #1155, #1330)",
      fix: [ctx.cmd(sh`ip link set ${ctx.vxlanName} address ${want}`)],
      persist: [
        "keep udev/systemd from assigning MACs to flannel devices: printf '[Match]\\nOriginalName=flannel*\\n" +
        "[Link]\\nMACAddressPolicy=none\\n' > /etc/systemd/network/50-flannel.link",
        "restart the daemon so it republishes its lease",
      ],
    }];
  },
};

/** vxlan-csum-offload: tx-checksum-ip-generic on the VXLAN device (kernel bug, flannel #1279). */
export const vxlanCsumOffload: Check = {
  id: "vxlan-csum-offload",
  title: "No bad UDP checksums arriving while TX checksum offload is on",
  async run(ctx) {
    const nv = notVxlan(ctx, "vxlan-csum-offload");
    if (nv) return [nv];
    const dev = ctx.vxlanDevice();
    if (!dev) return [unknown("vxlan-csum-offload", `${ctx.vxlanName} does not exist`)];
    // The kernel layer's SIOCETHTOOL read (ETHTOOL_GTXCSUM: on a VXLAN device only tx-checksum-ip-generic
    // can be on); the ethtool binary only when that fails (no FFI permission, unusual kernel).
    let state: "on" | "off" | null = null;
    try {
      state = getTxChecksum(ctx.opts.netns ? { name: ctx.opts.netns } : null, dev.name) ? "on" : "off";
    } catch { /* fall back to ethtool */ }
    if (state === null) {
      const r = await ctx.exec.run(["ethtool", "-k", dev.name]);
      if (r.code === null) {
        return [unknown("vxlan-csum-offload", "ethtool is not installed", ["apt-get install ethtool"])];
      }
      if (r.code !== 0) {
        return [unknown("vxlan-csum-offload", `ethtool -k ${dev.name} failed: ${r.stderr.trim()}`)];
      }
      const e = /tx-checksum-ip-generic:\s+(on|off)/.exec(r.stdout);
      if (!e) {
        return [unknown("vxlan-csum-offload", `ethtool -k ${dev.name} shows no tx-checksum-ip-generic`)];
      }
      state = e[1] as "on" | "off";
    }
    if (state === "off") return [ok("vxlan-csum-offload", `${dev.name} tx-checksum-ip-generic: off`)];
    // Judged by its symptom, not by configuration: on is the kernel's and flanneld's default (off costs TSO,
    // about half of VXLAN throughput); the bug shows as UDP packets arriving with bad checksums — the
    // `Udp: InCsumErrors` counter growing while we watch.
    const first = await udpInCsumErrors(ctx);
    if (first === null) {
      return [
        unknown("vxlan-csum-offload", `${dev.name} tx-checksum-ip-generic: on; /proc/net/snmp unreadable`),
      ];
    }
    await new Promise((r) => setTimeout(r, CSUM_WATCH_MS));
    const second = await udpInCsumErrors(ctx);
    const grew = second === null ? 0 : second - first;
    if (grew <= 0) {
      return [
        ok(
          "vxlan-csum-offload",
          `${dev.name} tx-checksum-ip-generic: on; Udp: InCsumErrors steady over ${CSUM_WATCH_MS} ms ` +
            "(no packets arriving with bad checksums)",
        ),
      ];
    }
    return [{
      id: "vxlan-csum-offload",
      severity: "warning",
      detail:
        `Udp: InCsumErrors grew by ${grew} in ${CSUM_WATCH_MS} ms: UDP packets (VXLAN from peers among ` +
        `them) arrive with bad checksums; ${dev.name} tx-checksum-ip-generic: on`,
      why:
        "on affected kernels/NICs the VXLAN-encapsulated packets leave with bad checksums and the receiver " +
        "drops them: pod-to-service/NodePort traffic across nodes hangs (flannel #1279, #2152, kubernetes " +
        "#88986); the senders are the peers, so the fix goes on every node",
      fix: [ctx.cmd(sh`ethtool -K ${dev.name} tx-checksum-ip-generic off`) + "  # on every node"],
      persist: [
        `echo 'ACTION=="add", SUBSYSTEM=="net", KERNEL=="flannel.*", RUN+="/usr/sbin/ethtool -K %k ` +
        `tx-checksum-ip-generic off"' > /etc/udev/rules.d/90-flannel-offload.rules`,
      ],
    }];
  },
};

/** What accepts VXLAN datagrams to `port` in each tool's words. */
export function vxlanAccept(port: number): AcceptSpec {
  return {
    ipt: [`-p udp --dport ${port}`],
    nft: [`udp dport ${port}`],
    ufw: [`ufw allow ${port}/udp`],
    firewalld: [`firewall-cmd --add-port=${port}/udp`],
    comment: "flannel vxlan",
  };
}

/** How long vxlan-csum-offload watches `Udp: InCsumErrors`. */
const CSUM_WATCH_MS = 500;

/** `Udp: InCsumErrors` of the checked namespace (/proc/net/snmp), or null when unreadable. */
async function udpInCsumErrors(ctx: NodeSnapshot): Promise<number | null> {
  const r = await ctx.exec.run(["cat", "/proc/net/snmp"]);
  if (r.code !== 0) return null;
  const lines = r.stdout.split("\n").filter((l) => l.startsWith("Udp:"));
  if (lines.length < 2) return null;
  const keys = lines[0].split(/\s+/), vals = lines[1].split(/\s+/);
  const i = keys.indexOf("InCsumErrors");
  const v = i > 0 ? Number(vals[i]) : NaN;
  return Number.isFinite(v) ? v : null;
}

const VXLAN_PORT_WHY =
  "peers encapsulate to the configured port; a different/blocked port silently drops all overlay traffic " +
  "(flannel #2055)";

/**
 * The IPv6 VXLAN device's datagrams (from each peer's PublicIPv6 to its port) walked through INPUT of the
 * IPv6 rulesets; null when there is no such device.
 */
function vxlan6Input(ctx: NodeSnapshot): Finding | null {
  const d6 = dev6(ctx);
  if (!d6?.vxlan) return null;
  const port = d6.vxlan.port || 8472;
  const rs = ruleset6(ctx);
  const f = pathFinding(
    ctx,
    "vxlan-port",
    rs,
    overlayIn6(ctx, rs, port, "IPv6 VXLAN"),
    vxlanAccept(port),
    "",
  );
  return f.severity === "ok" && ctx.ipv4Disabled
    ? { ...f, detail: `${d6.name} on UDP ${port}; ${f.detail}` }
    : f;
}

/** vxlan-port: device port = configured port, no other VXLAN device on it, INPUT does not drop it. */
export const vxlanPort: Check = {
  id: "vxlan-port",
  title: "VXLAN UDP port as configured and open",
  run(ctx) {
    // IPv6-only: the IPv6 VXLAN device's datagrams through INPUT are this check's whole business.
    const only6 = ctx.ipv4Disabled && ctx.backendType === "vxlan" ? vxlan6Input(ctx) : null;
    if (only6) return [only6.severity === "critical" ? { ...only6, why: VXLAN_PORT_WHY } : only6];
    const nv = notVxlan(ctx, "vxlan-port");
    if (nv) return [nv];
    const dev = ctx.vxlanDevice();
    if (!dev?.vxlan) return [unknown("vxlan-port", `${ctx.vxlanName} does not exist`)];
    const port = dev.vxlan.port || 8472;
    const want = ctx.vxlanPort;
    const problems: { sev: "warning" | "critical"; text: string; fix: string[] }[] = [];
    if (ctx.store.config && port !== want) {
      problems.push({
        sev: "critical",
        text: `${dev.name} uses UDP port ${port}, the network config says ${want}`,
        fix: [
          ctx.cmd(sh`ip link del ${dev.name}`),
          "restart the daemon (it re-creates the device with the configured port)",
        ],
      });
    }
    // flannel's own IPv6 device (dual stack) shares the port by design: it binds the IPv6 underlay.
    const own6 = `flannel-v6.${ctx.vni}`;
    const others = (ctx.kernel?.links ?? []).filter((l) =>
      l.kind === "vxlan" && l.index !== dev.index && l.name !== own6 && (l.vxlan?.port || 8472) === port
    );
    if (others.length) {
      problems.push({
        sev: "warning",
        text: `other VXLAN device(s) on UDP ${port}: ${
          others.map((o) => `${o.name} (VNI ${o.vxlan?.vni})`).join(", ")
        }`,
        fix: others.map((o) => ctx.cmd(sh`ip link del ${o.name}`) + "  # if it is not needed"),
      });
    }
    // The overlay datagrams each peer sends, walked through every base chain of INPUT (all back-ends).
    const rs = ruleset4(ctx);
    const fw = pathFinding(
      ctx,
      "vxlan-port",
      rs,
      overlayIn(ctx, rs, port, "VXLAN", null),
      vxlanAccept(port),
      "",
    );
    const persist: string[] = [];
    // Dual stack: the IPv6 device's datagrams from the peers' PublicIPv6, through the IPv6 rulesets.
    const fw6 = network6(ctx) ? vxlan6Input(ctx) : null;
    for (const f of [fw, fw6]) {
      if (f?.severity !== "critical") continue;
      problems.push({ sev: "critical", text: f.detail, fix: f.fix ?? [] });
      persist.push(...f.persist ?? []);
    }
    const six = fw6 ? `; ${fw6.detail}` : "";
    if (problems.length === 0) {
      const unk = [fw, fw6].find((f) => f?.severity === "unknown");
      if (unk) return [{ ...unk, detail: `${dev.name} on UDP ${port}; ${fw.detail}${six}` }];
      return [ok("vxlan-port", `${dev.name} on UDP ${port}; ${fw.detail}${six}`)];
    }
    return [{
      id: "vxlan-port",
      severity: problems.some((p) => p.sev === "critical") ? "critical" : "warning",
      detail: problems.map((p) => p.text).join("; "),
      why: VXLAN_PORT_WHY,
      fix: problems.flatMap((p) => p.fix),
      persist: [...persist, "set Backend.Port consistently on all nodes"],
    }];
  },
};

/** mtu: flannel.1 <= underlay - overhead; FLANNEL_MTU = flannel.1; cni0, host veths, pod ends = FLANNEL_MTU. */
export const mtu: Check = {
  id: "mtu",
  title: "MTU chain underlay → flannel.<VNI> → cni0 → pods",
  run(ctx) {
    if (!ctx.kernel) return [unknown("mtu", `no kernel snapshot: ${ctx.kernelError}`)];
    const under = ctx.underlay();
    const dev = ctx.backendType === "vxlan" ? ctx.vxlanDevice() : null;
    const envMtu = ctx.subnetEnv?.mtu ?? null;
    const crit: string[] = [];
    const warn: string[] = [];
    const fix: string[] = [];
    let expected = envMtu;
    if (dev && under) {
      const v6 = ctx.ownLease()?.attrs.PublicIP?.includes(":") ?? false;
      const overhead = v6 ? 70 : 50;
      const max = under.link.mtu - overhead;
      if (dev.mtu > max) {
        crit.push(`${dev.name} MTU ${dev.mtu} > ${under.link.name} ${under.link.mtu} - ${overhead}`);
        fix.push(ctx.cmd(sh`ip link set ${dev.name} mtu ${max}`));
      }
      // Dual stack: FLANNEL_MTU is the smaller of flannel.N and flannel-v6.N (checks/ipv6.ts checks the latter).
      const dev6 = ctx.link(`flannel-v6.${ctx.vni}`);
      const podMax = dev6 ? Math.min(dev.mtu, dev6.mtu) : dev.mtu;
      if (envMtu !== null && envMtu !== podMax) {
        warn.push(
          `FLANNEL_MTU ${envMtu} != ${
            dev6 ? `min(${dev.name}, ${dev6.name}) MTU` : `${dev.name} MTU`
          } ${podMax}`,
        );
      }
      expected = Math.min(envMtu ?? dev.mtu, max);
    }
    if (!dev && under && envMtu !== null && envMtu > under.link.mtu) {
      crit.push(`FLANNEL_MTU ${envMtu} > ${under.link.name} MTU ${under.link.mtu}`);
      expected = under.link.mtu;
    }
    // Only an MTU above what the overlay carries drops packets. One below it is safe (a pod made before the
    // MTU grew — a jumbo underlay — or pinned lower on purpose): it is noted, never "raised".
    const below: string[] = [];
    if (expected !== null) {
      const br = ctx.link("cni0");
      const veths = ctx.cni0Veths();
      if (br && veths.length && br.mtu > expected) {
        warn.push(`cni0 MTU ${br.mtu} > ${expected}`);
        fix.push(ctx.cmd(sh`ip link set cni0 mtu ${expected}`));
      }
      for (const v of veths) {
        if (v.mtu > expected) {
          warn.push(`host veth ${v.name} MTU ${v.mtu} > ${expected}`);
          fix.push(ctx.cmd(sh`ip link set ${v.name} mtu ${expected}`));
        }
      }
      for (const p of ctx.pods.values()) {
        if (p.mtu !== null && p.mtu < expected) below.push(`${p.name} ${p.mtu}`);
        if (p.mtu !== null && p.mtu > expected) {
          warn.push(`pod netns ${p.name} ${p.ifname} MTU ${p.mtu} > ${expected}`);
          const set = `link set ${p.ifname} mtu ${expected}`;
          fix.push(
            p.name.startsWith("pid:")
              ? `nsenter -t ${p.name.slice(4)} -n ip ${set}`
              : `ip -n ${p.name} ${set}`,
          );
        }
      }
    }
    if (!crit.length && !warn.length) {
      const parts = [
        under ? `${under.link.name} ${under.link.mtu}` : null,
        dev ? `${dev.name} ${dev.mtu}` : null,
        envMtu !== null ? `FLANNEL_MTU ${envMtu}` : null,
        ctx.link("cni0") ? `cni0 ${ctx.link("cni0")!.mtu}` : null,
        `${ctx.cni0Veths().length} veth(s)`,
      ].filter(Boolean);
      const note = below.length
        ? `; ${below.length} pod(s) below ${expected} (${below.slice(0, 3).join(", ")}${
          below.length > 3 ? ", …" : ""
        }): safe, they get ${expected} when recreated`
        : "";
      return [ok("mtu", `MTU chain consistent: ${parts.join(", ")}${note}`)];
    }
    return [{
      id: "mtu",
      severity: crit.length ? "critical" : "warning",
      detail: [...crit, ...warn].join("; "),
      why: crit.length
        ? "encapsulated packets exceed the underlay MTU and are dropped: small requests work, large transfers " +
          "hang (flannel #1614, #1999)"
        : "pods send packets larger than the overlay carries: large transfers stall or fragment",
      fix: fix.length ? fix : ["restart the daemon so it rewrites subnet.env with the device MTU"],
      persist: [
        "let the daemon derive the MTU from the underlay (do not pin Backend MTU), then recreate pods so CNI " +
        "applies FLANNEL_MTU",
      ],
    }];
  },
};

/** The checks of this family. */
export const VXLAN_CHECKS: Check[] = [vxlanModule, flannelDevice, vtepMac, vxlanCsumOffload, vxlanPort, mtu];
