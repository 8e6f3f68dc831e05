/**
 * The daemon's start-up steps, in order (run by lib/daemon/bootstrap.ts), and the node operations they
 * share with the run loop (device, subnet.env, rules). Each step fills in part of a {@link Draft}; when one
 * fails, the steps done are undone in reverse — but only what flanneld would not leave behind either. A
 * restart never interrupts pod traffic, so what a running node keeps across a restart is kept on purpose
 * after a failed start too: the lease (the next start gets the same subnet back), an overlay device that
 * existed before this start, subnet.env, the firewall rules and the peers' routes. What is taken back: a
 * device created by this start (nothing ran over it yet) and the backend's userspace parts (udp: its socket
 * and workers). Each step's doc says which of the two it is. A step that fails halfway cleans up its own
 * part before it throws (lib/base/steps.ts never undoes the failed step).
 * @module
 */
import { RT_TABLE_MAIN } from "../netlink/mod.ts";
import { ConfigError } from "../config/netconf.ts";
import type { NetConfig } from "../config/types.ts";
import type { IPNet } from "../base/cidr.ts";
import type { Lease, LeaseAttrsWire } from "../store/types.ts";
import { readSubnetEnv, writeSubnetEnv } from "../node/subnet_env.ts";
import { createBackend } from "../backend/mod.ts";
import type { Backend, ExternalIface } from "../backend/types.ts";
import { Reconciler } from "../reconcile/reconciler.ts";
import { FlannelRules, type FlannelRuleSpec } from "../firewall/flannel.ts";
import { supportsRandomFully } from "../firewall/iptables.ts";
import type { Step } from "../base/steps.ts";
import { type NodeBase, type NodeContext, type NodeState, retryStore } from "./context.ts";
import { selectExternal } from "./iface6.ts";
import { FamilyPlane, subnetOf } from "./family.ts";
import { RejectionReporter } from "../reconcile/peer_guard.ts";
import { ownIPs, Peers } from "./peers.ts";
import { checkBrNetfilter } from "./preflight.ts";
import { errText } from "../base/errors.ts";

/** What start-up has built so far: each step sets the fields it makes (read back with {@link Draft.need}). */
export class Draft {
  readonly base: NodeBase;
  cfg?: NetConfig;
  ext?: ExternalIface;
  family: 4 | 6 = 4;
  network?: IPNet;
  backend?: Backend;
  v6: FamilyPlane | null = null;
  rules?: FlannelRules;
  randomFully = true;
  attrs?: LeaseAttrsWire;
  state?: NodeState;
  /** The previous subnet (from subnet.env), logged with the lease. */
  previous: IPNet | null = null;
  reconciler?: Reconciler;
  peers?: Peers;
  watchCursor?: string;
  /** Overlay devices this start created (the device step's undo removes them). */
  created: string[] = [];
  /** Counts and reports refused peer leases (both families). */
  readonly reporter: RejectionReporter;

  constructor(base: NodeBase) {
    this.base = base;
    this.reporter = new RejectionReporter({ log: base.log, count: (r) => base.metrics.rejectPeer(r) });
  }

  /** A field a previous step set; throws when the steps ran out of order (a bug). */
  need<K extends keyof this>(k: K): NonNullable<this[K]> {
    const v = this[k];
    if (v === undefined || v === null) {
      throw new Error(`start-up: ${String(k)} is not set by an earlier step`);
    }
    return v as NonNullable<this[K]>;
  }

  /** The node as the kernel-facing steps need it (after the lease step). */
  node(): Omit<NodeContext, "reconciler" | "peers" | "watchCursor"> {
    return {
      ...this.base,
      cfg: this.need("cfg"),
      family: this.family,
      network: this.need("network"),
      ext: this.need("ext"),
      backend: this.need("backend"),
      v6: this.v6,
      rules: this.need("rules"),
      randomFully: this.randomFully,
      attrs: this.need("attrs"),
      state: this.need("state"),
    };
  }

  /** The finished context (after the last step). */
  freeze(): NodeContext {
    return Object.freeze({
      ...this.node(),
      reconciler: this.need("reconciler"),
      peers: this.need("peers"),
      watchCursor: this.need("watchCursor"),
    });
  }
}

/** The parts of the node the device, subnet.env and rule operations read. */
export type NodeParts = Omit<NodeContext, "reconciler" | "peers" | "watchCursor">;

/** Creates or repairs the overlay device(s) for our subnet(s); logs what changed. */
export function ensureDevice(n: Pick<NodeParts, "backend" | "v6" | "log" | "state">): void {
  const changes = n.backend.ensure(n.state.own);
  if (changes.length) {
    n.log.info("backend device configured", { device: n.backend.overlayDev, changes: changes.join(", ") });
  }
  const c6 = n.v6?.ensureDevice() ?? [];
  if (c6.length) {
    n.log.info("backend device configured", { device: n.v6!.backend.overlayDev, changes: c6.join(", ") });
  }
}

/** Writes subnet.env (FLANNEL_MTU: the smallest of the devices' MTUs; the IPv6 VXLAN device's is 20 less). */
export function writeNodeSubnetEnv(n: NodeParts): void {
  const own = n.state.own;
  const own6 = n.v6 ? n.v6.own : n.family === 6 ? own : null;
  const v4 = n.family === 4;
  writeSubnetEnv({
    network: v4 ? n.network : undefined,
    subnet: v4 ? { ip: own.ip.add(1), net: own } : undefined,
    ipv6Network: own6 ? n.cfg.ipv6Network! : undefined,
    ipv6Subnet: own6 ? { ip: own6.ip.add(1), net: own6 } : undefined,
    mtu: Math.min(n.backend.mtu, n.v6?.backend.mtu ?? Infinity),
    ipMasq: n.o.ipMasq,
  }, n.o.subnetFile);
  n.readiness.subnetEnvWritten();
  n.log.info("wrote subnet.env", {
    path: n.o.subnetFile,
    subnet: v4 ? `${own.ip.add(1)}/${own.prefix}` : undefined,
    ipv6_subnet: own6 ? `${own6.ip.add(1)}/${own6.prefix}` : undefined,
  });
}

/** flannel's rules for both families: IPv4 from Network/our subnet, IPv6 from IPv6Network/our IPv6 subnet. */
export function ruleSpec(
  n: Pick<NodeParts, "o" | "cfg" | "family" | "network" | "v6" | "randomFully">,
  own: IPNet | null,
): FlannelRuleSpec {
  const v4 = n.family === 4;
  const own6 = own === null ? null : n.v6 ? n.v6.own : v4 ? null : own;
  return {
    ipMasq: n.o.ipMasq,
    forward: n.o.iptablesForwardRules,
    network: v4 ? n.network : null,
    subnet: v4 ? own : null,
    ipv6Network: n.cfg.enableIPv6 ? n.cfg.ipv6Network ?? null : null,
    ipv6Subnet: own6,
    randomFully: n.randomFully,
  };
}

/** `--ip-blackhole-route`: a blackhole route for our own subnet (as flanneld, re-checked with the rules). */
function ensureBlackhole(n: NodeParts): void {
  if (!n.o.ipBlackholeRoute) return;
  const dst = n.state.own.toString();
  if (n.nl.routes({ family: 4, table: RT_TABLE_MAIN }).some((r) => r.type === "blackhole" && r.dst === dst)) {
    return;
  }
  n.nl.replaceRoute({ dst, type: "blackhole" });
  n.log.info("blackhole route added", { subnet: dst });
}

/** Puts the blackhole route and flannel's rules in place (the rule set is the last {@link ruleSpec} set). */
export async function ensureRules(n: NodeParts): Promise<void> {
  ensureBlackhole(n);
  if (n.rules.empty) {
    n.readiness.rulesInPlace();
    return;
  }
  n.metrics.ruleChecks++;
  const fixed = await n.rules.ensure();
  if (fixed.length) {
    n.metrics.ruleResyncs++;
    n.log.info(`${n.rules.mode} rules applied`, { tables: fixed.join(",") });
  }
  n.readiness.rulesInPlace();
}

/**
 * `preflight`: the node-public-ip annotation (kube), the network config, the interface, br_netfilter.
 * Undo: none (reads only).
 */
const preflight: Step<Draft> = {
  name: "preflight",
  async run(d) {
    const b = d.base;
    let o = b.o;
    // kube: our node's name first, so a missing pod or node is reported as that step.
    if (b.store.nodeName) await retryStore(b, "finding our node's name", () => b.store.nodeName!());
    // kube: the node's node-public-ip annotation acts as --public-ip (flanneld's GetStoredPublicIP).
    const stored = b.store.storedPublicIP
      ? await retryStore(b, "reading our node's annotations", () => b.store.storedPublicIP!())
      : null;
    if (stored?.publicIP) {
      b.log.info("public IP from our node's node-public-ip annotation", { public_ip: stored.publicIP });
      o = { ...o, publicIP: stored.publicIP };
    }
    // The network config decides the families, and so how the interface is chosen (IPv6: iface6.ts).
    const cfg = d.cfg = await retryStore(b, "reading the network config", () => b.store.getNetworkConfig());
    const ext = d.ext = selectExternal(b.nl, o, { v4: cfg.enableIPv4, v6: cfg.enableIPv6 }, b.log);
    b.log.info("using interface", {
      iface: ext.name,
      iface_ip: ext.ifaceIP || undefined,
      public_ip: cfg.enableIPv4 ? ext.publicIP : undefined,
      iface_ipv6: ext.ifaceIPv6 ?? undefined,
      public_ipv6: ext.publicIPv6 ?? undefined,
      mtu: ext.mtu,
    });
    d.family = cfg.enableIPv4 ? 4 : 6;
    const network = d.family === 4 ? cfg.network : cfg.ipv6Network;
    if (!network) {
      throw new ConfigError("Network", "the network config has no Network for the enabled family");
    }
    checkBrNetfilter(cfg);
    d.network = network;
  },
};

/**
 * `backend`: the backend (both families in dual stack) from the config; `prepare` reads the persisted VTEP
 * MAC and an existing device (udp: binds its port, so a port in use fails before any kernel change). Undo:
 * the backend is closed (udp: the socket), nothing in the kernel yet.
 */
const backend: Step<Draft> = backendStep(createBackend);

/** The `backend` step (see `backend`) making its backends with `make` (tests pass their own). */
export function backendStep(make: typeof createBackend): Step<Draft> {
  return {
    name: "backend",
    async run(d) {
      try {
        await makeBackends(d, make);
      } catch (e) {
        await closeBackends(d).catch((e2) =>
          d.base.log.warn("undo failed", { step: "backend", error: errText(e2) })
        );
        throw e;
      }
    },
    undo: closeBackends,
  };
}

/** The backend step's work (see `backend`). */
async function makeBackends(d: Draft, make: typeof createBackend): Promise<void> {
  const b = d.base, cfg = d.need("cfg"), ext = d.need("ext");
  // kube: our own published backend-data (IPv6: backend-v6-data) keeps the VTEP MAC when the state file
  // is gone (as flanneld).
  const storedOf = (family: 4 | 6) =>
    b.store.storedBackendData
      ? retryStore(
        b,
        `reading our node's backend data (IPv${family})`,
        () => b.store.storedBackendData!(family),
      )
      : Promise.resolve(null);
  const storedData = await storedOf(d.family);
  const be = d.backend = make(b.nl, cfg, ext, b.o.stateDir, {
    vxlanTxChecksumOffload: b.o.vxlanTxChecksumOffload,
    family: d.family,
    storedBackendData: storedData,
    log: b.log,
  });
  const lines = be.metricLines?.bind(be);
  if (lines) b.metrics.sources.push(lines);
  if (b.jitless && be.type === "udp") {
    // Jitless, the data path is several times slower (docs/performance.md, "udp data plane without the JIT").
    // So the daemon runs itself again with the JIT, before the backend binds anything (returns on failure).
    b.runWithJit?.();
    b.log.warn(
      "the udp backend's data path runs in JavaScript and V8 runs with --jitless (the launcher's default, " +
        "for memory): far less throughput and more latency; set FLANCTL_DAEMON_V8_FLAGS=" +
        "--max-semi-space-size=1,--expose-gc to run it with the JIT",
    );
  }
  await be.prepare();
  if (cfg.enableIPv4 && cfg.enableIPv6) {
    const b6 = make(b.nl, cfg, ext, b.o.stateDir, {
      vxlanTxChecksumOffload: b.o.vxlanTxChecksumOffload,
      family: 6,
      storedBackendData: await storedOf(6),
      log: b.log,
      pair: be,
    });
    try {
      await b6.prepare();
    } catch (e) {
      // Not in the draft yet (the step's undo closes d.backend and d.v6's): closed here, as the IPv4 one.
      await b6.close?.().catch((e2) =>
        b.log.warn("undo failed", { step: "backend", family: 6, error: errText(e2) })
      );
      throw e;
    }
    d.v6 = new FamilyPlane({
      nl: b.nl,
      family: 6,
      network: cfg.ipv6Network!,
      subnetLen: b.store.kind === "kube" ? null : cfg.ipv6SubnetLen,
      backend: b6,
      ownIPs: ownIPs(ext, 6),
      log: b.log,
      stats: b.metrics,
      reporter: d.reporter,
      onOwnSubnetClaimed: (p, id) => d.peers?.ownSubnetClaimed(p, id),
    });
  }
  b.log.info("network config", {
    network: cfg.network?.toString(),
    ipv6_network: cfg.ipv6Network?.toString(),
    subnet_len: cfg.enableIPv4 ? cfg.subnetLen : cfg.ipv6SubnetLen,
    backend: be.type,
    device: be.overlayDev,
    mtu: be.mtu,
  });
}

/**
 * `firewall`: the rule driver for the config's mode, probed with network-only rules (no subnet is ours
 * yet); as flanneld, the other mode's flannel rules are removed; `--random-fully` support. Undo: none (the
 * probe changes nothing; removing the other mode's rules is what any start of flanneld does).
 */
const firewall: Step<Draft> = {
  name: "firewall",
  async run(d) {
    const b = d.base, cfg = d.need("cfg"), o = b.o;
    const rules = d.rules = new FlannelRules(cfg.enableNFTables ? "nftables" : "iptables", {
      run: b.runIptables,
      log: b.log,
    });
    b.readiness.rulesMode = rules.mode;
    const probe = { o, cfg, family: d.family, network: d.need("network"), v6: d.v6, randomFully: true };
    rules.set(ruleSpec(probe, null));
    await rules.probe();
    try {
      const removed = await rules.cleanupOtherMode();
      if (removed.length) {
        b.log.info("removed the other mode's flannel rules", {
          mode: rules.mode,
          removed: removed.join(","),
        });
      }
    } catch (e) {
      b.log.warn("could not remove the other mode's flannel rules", { error: errText(e) });
    }
    if (o.ipMasq && !cfg.enableNFTables) {
      // As flanneld: MASQUERADE --random-fully unless disabled or iptables lacks it (older than 1.6.2).
      d.randomFully = !o.ipMasqFullyRandomDisable && await supportsRandomFully(b.runIptables);
      if (!o.ipMasqFullyRandomDisable && !d.randomFully) {
        b.log.warn("iptables has no MASQUERADE --random-fully (older than 1.6.2): masquerading without it");
      }
    } else d.randomFully = !o.ipMasqFullyRandomDisable;
  },
};

/**
 * The lease attributes, as flanneld's vxlan newSubnetAttrs: BackendData with IPv4, BackendV6Data with IPv6
 * (each omitted when its family is off), PublicIP 0.0.0.0 in an IPv6-only network.
 */
function leaseAttrs(
  cfg: NetConfig,
  ext: ExternalIface,
  be: Backend,
  v6: FamilyPlane | null,
  family: 4 | 6,
): LeaseAttrsWire {
  const data4 = cfg.enableIPv4 ? be.backendData() : undefined;
  const data6 = v6 ? v6.backend.backendData() : family === 6 ? be.backendData() : undefined;
  const a: LeaseAttrsWire = {
    PublicIP: cfg.enableIPv4 ? ext.publicIP : "0.0.0.0",
    PublicIPv6: cfg.enableIPv6 ? ext.publicIPv6 ?? null : null,
    BackendType: be.leaseBackendType ?? be.type,
    ...(data4 !== undefined && data4 !== null ? { BackendData: data4 } : {}),
    ...(data6 !== undefined && data6 !== null ? { BackendV6Data: data6 } : {}),
  };
  return be.leaseAttrs?.(a) ?? a;
}

/**
 * `lease`: our lease — the one our public IP holds, else the previous subnet from subnet.env, else a free
 * one. Undo: none, kept on purpose (as flanneld: the next start gets the same subnet back, and a lease
 * left unrenewed expires by itself).
 */
const lease: Step<Draft> = {
  name: "lease",
  async run(d) {
    const b = d.base, cfg = d.need("cfg"), ext = d.need("ext"), be = d.need("backend"), o = b.o;
    let previous6: IPNet | null = null;
    try {
      const env = readSubnetEnv(o.subnetFile);
      if (env.subnet && cfg.network?.contains(env.subnet.net)) d.previous = env.subnet.net;
      if (env.ipv6Subnet && cfg.ipv6Network?.contains(env.ipv6Subnet.net)) previous6 = env.ipv6Subnet.net;
    } catch { /* no previous subnet.env: fine */ }
    const attrs = d.attrs = leaseAttrs(cfg, ext, be, d.v6, d.family);
    // Start-up's transient memory (compiling the bundle, the backend's set-up) given back before the
    // acquire lists every lease (bench/daemon_bench.ts "5000 restart": the peak was this list on top of it).
    b.memory.now();
    const l: Lease = await retryStore(
      b,
      "acquiring a lease",
      () => b.store.acquireLease(attrs, { previousSubnet: d.previous, previousIPv6Subnet: previous6 }),
    );
    const own = subnetOf(l, d.family);
    if (!own || (cfg.enableIPv6 && !l.ipv6Subnet)) {
      throw new ConfigError(
        cfg.enableIPv6 ? "IPv6Network" : "Network",
        `the store returned a lease without an ${own ? "IPv6" : `IPv${d.family}`} subnet`,
      );
    }
    d.state = { lease: l, own };
    d.v6?.setOwn(l.ipv6Subnet!);
    b.log.info("lease acquired", {
      subnet: own.toString(),
      ipv6_subnet: d.v6 ? d.v6.own.toString() : undefined,
      expires: l.expiration?.toISOString() ?? "never",
      previous: d.previous?.toString(),
    });
    await be.leased?.(l); // extension: PostStartupCommand (a failure stops the start, as flanneld)
  },
};

/** The overlay devices of the node's backends (none for host-gw). */
function overlayDevs(d: Draft): string[] {
  return [d.backend?.overlayDev, d.v6?.backend.overlayDev].filter((x): x is string => !!x);
}

/** Stops the backends' userspace parts (udp: the bound socket, the data-path workers); idempotent. */
async function closeBackends(d: Draft): Promise<void> {
  const errors: string[] = [];
  for (const be of [d.backend, d.v6?.backend]) {
    try {
      await be?.close?.();
    } catch (e) {
      errors.push(`${be?.type}: ${errText(e)}`);
    }
  }
  if (errors.length) throw new Error(`closing the backend: ${errors.join("; ")}`);
}

/** Stops the backends' workers, then removes the devices this start created; errors collected, then thrown. */
async function removeCreated(d: Draft): Promise<void> {
  const nl = d.base.nl, errors: string[] = [];
  await closeBackends(d).catch((e) => errors.push(errText(e)));
  for (const dev of d.created.splice(0)) {
    try {
      if (nl.link(dev)) nl.deleteLink(dev);
      d.base.log.info("removed the device this start created", { device: dev });
    } catch (e) {
      errors.push(`${dev}: ${errText(e)}`);
    }
  }
  if (errors.length) throw new Error(`cleaning up the backend: ${errors.join("; ")}`);
}

/**
 * `device`: creates or repairs the overlay device(s) for our subnet(s). Undo: a device this start created
 * is removed (nothing ran over it yet), one that existed before is kept (pods may be using it, as across
 * any restart); the backend's userspace workers (udp) are stopped. A failure halfway cleans up the same.
 */
const device: Step<Draft> = {
  name: "device",
  async run(d) {
    const nl = d.base.nl;
    d.created = overlayDevs(d).filter((dev) => !nl.link(dev));
    try {
      ensureDevice(d.node());
      await d.backend?.settle?.();
      await d.v6?.backend.settle?.();
    } catch (e) {
      await removeCreated(d).catch((e2) =>
        d.base.log.warn("undo failed", { step: "device", error: errText(e2) })
      );
      throw e;
    }
  },
  undo: removeCreated,
};

/** `subnet.env`: written for CNI. Undo: none, kept on purpose (as flanneld; the next start reads it back). */
const subnetEnv: Step<Draft> = {
  name: "subnet.env",
  run(d) {
    writeNodeSubnetEnv(d.node());
  },
};

/**
 * `rules`: the blackhole route (--ip-blackhole-route) and flannel's masquerade/forward rules for our subnet.
 * Undo: none, kept on purpose (flanneld leaves its rules in place across a restart; the next start finds
 * them as they should be).
 */
const rules: Step<Draft> = {
  name: "rules",
  async run(d) {
    const n = d.node();
    n.rules.set(ruleSpec(n, n.state.own));
    await ensureRules(n);
  },
};

/**
 * `node-condition`: kube: NetworkUnavailable=False once device, subnet.env and rules are in place (not at
 * acquire). Undo: none (flanneld never sets it back).
 */
const nodeCondition: Step<Draft> = {
  name: "node-condition",
  async run(d) {
    const b = d.base;
    if (!b.store.completeLease || !b.o.setNodeNetworkUnavailable) return;
    await retryStore(b, "setting NetworkUnavailable=False", () => b.store.completeLease!());
    b.log.info("node condition NetworkUnavailable=False (FlannelIsUp)");
  },
};

/**
 * `peers`: the reconciler, the peer set from a full listing, one full pass. Undo: none, kept on purpose (the
 * peers' routes, ARP and FDB entries stay as across any restart; the next start reconciles them; on a device
 * made by this start they go with it).
 */
const peers: Step<Draft> = {
  name: "peers",
  async run(d) {
    const n = d.node(), b = d.base;
    const reconciler = d.reconciler = new Reconciler({
      nl: b.nl,
      network: n.network,
      overlayDev: n.backend.overlayDev,
      log: b.log,
      stats: b.metrics,
    });
    reconciler.setOwnSubnet(n.state.own);
    // In kube mode the node subnets are the podCIDRs kube-controller-manager gives with one mask
    // (--node-cidr-mask-size), which need not be SubnetLen (net-conf.json rarely sets it): ours says it.
    const subnetLen = b.store.kind === "kube" ? null : n.family === 4 ? n.cfg.subnetLen : n.cfg.ipv6SubnetLen;
    const p = d.peers = new Peers({ ...n, reconciler, subnetLen, reporter: d.reporter });
    // Each of the acquire's list, this list and the first full pass grows from a settled heap, not on top
    // of the one before (the first two each list every lease).
    b.memory.now();
    const { leases, cursor } = await retryStore(b, "listing leases", () => b.store.listLeases());
    p.reset(leases);
    b.memory.now();
    p.fullPass();
    d.watchCursor = cursor;
  },
};

/** `ready`: logs and tells systemd (READY=1). Undo: none. */
const ready: Step<Draft> = {
  name: "ready",
  run(d) {
    const b = d.base, own = d.need("state").own, size = d.need("reconciler").size;
    b.log.info("ready", { subnet: own.toString(), peers: size });
    b.notify(`READY=1\nSTATUS=serving ${own} with ${size} peers`);
  },
};

/** The start-up steps, in order. */
export const NODE_STEPS: readonly Step<Draft>[] = [
  preflight,
  backend,
  firewall,
  lease,
  device,
  subnetEnv,
  rules,
  nodeCondition,
  peers,
  ready,
];
