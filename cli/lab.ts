/**
 * `flanctl lab up|down|status|list|logs|exec|add-node`: a multi-node flannel cluster in network namespaces on one
 * machine (see lib/lab). The library is imported inside the actions so `--help` stays fast.
 * @module
 */
import { type Command, Option } from "commander";
import { errText, FlanctlError, UsageError } from "../lib/base/errors.ts";
import { registerLabTrace } from "./trace.ts";
import { exitWith } from "./exit.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
import { pathExists } from "../lib/base/exists.ts";

function intArg(flag: string) {
  return (v: string) => {
    if (!/^\d+$/.test(v)) throw new UsageError(`${flag}: '${v}' is not a whole number; e.g. ${flag} 3`);
    return Number(v);
  };
}

const say = (l: string) => console.log(l);

/**
 * Runs `fn` with an AbortSignal that fires on Ctrl-C/SIGTERM; on a failure, tears the lab down when
 * `undo.value` is true by then (so a lab owned by someone else is never touched).
 */
async function guarded<T>(
  name: string,
  fn: (signal: AbortSignal) => Promise<T>,
  undo: { value: boolean },
): Promise<T> {
  const { labDown } = await import("../lib/lab/mod.ts");
  const ac = new AbortController();
  const onSig = () => ac.abort(new FlanctlError("interrupted", 130));
  Deno.addSignalListener("SIGINT", onSig);
  Deno.addSignalListener("SIGTERM", onSig);
  try {
    return await fn(ac.signal);
  } catch (e) {
    if (undo.value) {
      console.error(`flanctl: lab ${name}: ${errText(e)}`);
      console.error(`flanctl: removing what lab ${name} made so far`);
      await labDown(name, (l) => console.error(l));
    }
    if (ac.signal.aborted) {
      throw new FlanctlError(`lab ${name}: interrupted${undo.value ? "; cleaned up" : ""}`, 130);
    }
    if (undo.value) throw new FlanctlError(`lab ${name} was not built (everything it made is removed)`, 1);
    throw e;
  } finally {
    Deno.removeSignalListener("SIGINT", onSig);
    Deno.removeSignalListener("SIGTERM", onSig);
  }
}

/** `--name`: which lab (every command but `list` takes it). */
const nameOpt = () => new Option("--name <name>", "lab name (prefixes every namespace)").default("lab");

/** Registers `flanctl lab`: one function per subcommand. */
export function register(program: Command): void {
  const lab = program.command("lab").description("run a multi-node flannel cluster in network namespaces");
  upCommand(lab);
  addNodeCommand(lab);
  addPodCommand(lab);
  delPodCommand(lab);
  statusCommand(lab);
  checkCommand(lab);
  registerList(lab);
  registerLogs(lab);
  execCommand(lab);
  registerLabTrace(lab, nameOpt);
  kubectlCommand(lab);
  downCommand(lab);
}

/** `flanctl lab up`. */
function upCommand(lab: Command): void {
  lab.command("up")
    .description(
      "build a lab: underlay bridge, node namespaces with daemons, pods attached by the flannel CNI",
    )
    .option(
      "--nodes <n>",
      "number of nodes (1-200; checked against the host's neighbour tables)",
      intArg("--nodes"),
      3,
    )
    .option("--pods-per-node <n>", "pods per node", intArg("--pods-per-node"), 2)
    .addOption(
      new Option("--backend <type>", "flannel backend")
        .choices(["vxlan", "host-gw", "udp", "wireguard", "alloc", "extension"]).default("vxlan"),
    )
    .addOption(new Option("--store <kind>", "subnet store").choices(["file", "etcd"]).default("file"))
    .option("--network <cidr>", "pod network (net-conf Network)", "10.244.0.0/16")
    .option(
      "--net-conf <file>",
      "net-conf.json to use (Network, Backend and the IP families from it; e.g. EnableNFTables)",
    )
    .addOption(
      new Option(
        "--ip-family <family>",
        "pod and underlay address families (IPv6 network fc00:244::/48; --kube: ipv4 or dual)",
      )
        .choices(["ipv4", "dual", "ipv6"]).default("ipv4"),
    )
    .option(
      "--lease-ttl <seconds>",
      "lease TTL of every node (default 24 h, as flannel)",
      intArg("--lease-ttl"),
    )
    .addOption(
      new Option(
        "--runtime <runtime>",
        "none: the lab runs the CNI conflist itself; containerd: one containerd per node, pods through CRI " +
          "(crictl runp/stopp/rmp; needs containerd, runc, busybox-static, crictl: ./install.sh --dev)",
      ).choices(["none", "containerd"]).default("none"),
    )
    .option(
      "--daemon-arg <flag>",
      "extra flag for every daemon, repeatable (e.g. --daemon-arg=--log-level=debug)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option("--no-check", "skip the connectivity check at the end (lab check runs it)")
    .option(
      "--tune-host",
      "when the lab does not fit the host's neighbour tables (gc_thresh1/2/3, host-wide), raise them; " +
        "lab down restores them",
    )
    .option(
      "--kube",
      "a real Kubernetes cluster instead: control plane, containerd + kubelet per node, deploy/kube-flanctl.yml",
    )
    .option(
      "--image <tar>",
      "with --kube: the image archive (deploy/build-image.sh's)",
      "dist/flanctl-image.tar",
    )
    .option("--manifest <file>", "with --kube: the manifest kubectl applies", "deploy/kube-flanctl.yml")
    .option(
      "--kube-proxy-image <tar>",
      "with --kube: kube-proxy's image archive (deploy/build-image.sh --peer kube-proxy)",
      "dist/kube-proxy-image.tar",
    )
    .option(
      "--coredns-image <tar>",
      "with --kube: CoreDNS's image archive (deploy/build-image.sh --peer coredns)",
      "dist/coredns-image.tar",
    )
    .option(
      "--network-policy",
      "with --kube: flanctl's DaemonSet enforces NetworkPolicy (the manifest's FLANNELD_NETWORK_POLICY switch)",
    )
    .addOption(
      new Option(
        "--wireguard-way <way>",
        "the wireguard backend's way: the kernel's module, wireguard-go, or auto (the kernel where it has one)",
      ).choices(["kernel", "userspace", "auto"]),
    )
    .addOption(
      new Option("--proxy-mode <mode>", "with --kube: kube-proxy's mode").choices(["iptables", "nftables"])
        .default("iptables"),
    )
    .option(
      "--import-image <tar>",
      "with --kube: one more image archive imported into every node, repeatable (e.g. agnhost)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .addOption(nameOpt())
    .action(async (o: {
      check: boolean;
      tuneHost?: boolean;
      kube?: boolean;
      image: string;
      manifest: string;
      kubeProxyImage: string;
      corednsImage: string;
      proxyMode: "iptables" | "nftables";
      importImage?: string[];
      networkPolicy?: boolean;
      nodes: number;
      podsPerNode: number;
      backend: "vxlan" | "host-gw" | "udp" | "wireguard" | "alloc" | "extension";
      store: "file" | "etcd";
      network: string;
      ipFamily: "ipv4" | "dual" | "ipv6";
      runtime: "none" | "containerd";
      leaseTtl?: number;
      daemonArg?: string[];
      netConf?: string;
      wireguardWay?: "kernel" | "userspace" | "auto";
      name: string;
    }) => {
      const m = await import("../lib/lab/mod.ts");
      if (o.kube) {
        if (o.wireguardWay) {
          throw new UsageError("--wireguard-way: not with --kube (the DaemonSet's env chooses)");
        }
        m.validateLabName(o.name);
        if (m.readState(o.name) || pathExists(m.labDir(o.name))) throw new m.LabExistsError(o.name);
        const ipFamily = m.kubeFamily(o.ipFamily);
        const made = { value: true };
        await guarded(o.name, () =>
          m.kubeUp({
            name: o.name,
            nodes: o.nodes,
            image: Deno.realPathSync(o.image),
            manifest: Deno.realPathSync(o.manifest),
            clusterCidr: o.network,
            proxyImage: Deno.realPathSync(o.kubeProxyImage),
            dnsImage: Deno.realPathSync(o.corednsImage),
            proxyMode: o.proxyMode,
            extraImages: (o.importImage ?? []).map((f) => Deno.realPathSync(f)),
            ipFamily,
            networkPolicy: o.networkPolicy === true,
          }, say), made);
        say(`kubectl: flanctl lab kubectl --name ${o.name} -- get nodes`);
        return;
      }
      const {
        kube: _k,
        image: _i,
        manifest: _m,
        kubeProxyImage: _p,
        corednsImage: _c,
        proxyMode: _pm,
        importImage: _ii,
        networkPolicy,
        daemonArg,
        check,
        ...rest
      } = o;
      if (networkPolicy) {
        throw new UsageError("--network-policy: needs --kube (NetworkPolicy is enforced in kube mode only)");
      }
      const opts = { ...rest, daemonArgs: daemonArg };
      m.validateUpOptions(opts);
      if (m.readState(o.name)) throw new m.LabExistsError(o.name);
      const made = { value: false };
      const s = await guarded(o.name, (signal) => m.labUp(opts, say, signal, made), made);
      say("");
      say(m.formatStatus(s, await m.labStatus(s)));
      if (check) await pingReport(s);
    });
}

/** `flanctl lab add-node`. */
function addNodeCommand(lab: Command): void {
  lab.command("add-node")
    .description("add one node (and its pods) to a running lab")
    .option("--pods <n>", "pods on the new node", intArg("--pods"), 0)
    .addOption(nameOpt())
    .action(async (o: { pods: number; name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      const s = m.loadState(o.name);
      const n = await guarded(o.name, (signal) => m.labAddNode(s, o.pods, say, signal), { value: false });
      say(`${n.name} added to lab ${o.name}`);
    });
}

/** `flanctl lab add-pod NODE`. */
function addPodCommand(lab: Command): void {
  lab.command("add-pod")
    .description("add a pod to a node through its CNI conflist (flannel, then portmap for --publish)")
    .argument("<node>", "node name (node1)")
    .option(
      "--publish <HOSTPORT:PODPORT[/tcp|udp]>",
      "publish a pod port on the node's addresses (hostPort), repeatable",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .addOption(nameOpt())
    .action(async (node: string, o: { publish?: string[]; name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      const ports = (o.publish ?? []).map(m.parsePublish);
      // A --kube lab: the pod goes through the API (kubelet and containerd run the CNI).
      if (pathExists(m.kubePaths(o.name).admin)) await m.kubeAddPod(o.name, node, ports, say);
      else await m.labAddPod(m.loadState(o.name), node, ports, say);
    });
}

/** `flanctl lab del-pod POD`. */
function delPodCommand(lab: Command): void {
  lab.command("del-pod")
    .description("delete a pod: CNI conflist DEL in reverse order, then its namespace")
    .argument("<pod>", "pod name (node1-pod3)")
    .addOption(nameOpt())
    .action(async (pod: string, o: { name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      await m.labDelPod(m.loadState(o.name), pod, say);
    });
}

/** `flanctl lab status`. */
function statusCommand(lab: Command): void {
  lab.command("status")
    .description("show the lab's nodes and pods")
    .option("-o, --output <format>", "table or json", "table")
    .addOption(nameOpt())
    .action(async (o: { output: string; name: string }) => {
      const fmt = parseOutput(o.output);
      const m = await import("../lib/lab/mod.ts");
      const k = m.readState(o.name) ? null : m.readKubeRecord(o.name);
      if (k) {
        const st = await m.kubeLabStatus(k, m.findProgram("kubectl") ?? "kubectl");
        return say(fmt === "json" ? JSON.stringify(st, null, 2) : m.formatKubeStatus(k, st));
      }
      const s = m.loadState(o.name);
      const st = await m.labStatus(s);
      say(fmt === "json" ? JSON.stringify(st, null, 2) : m.formatStatus(s, st));
    });
}

/** `flanctl lab check`. */
function checkCommand(lab: Command): void {
  lab.command("check")
    .description(
      "wait until every daemon reports all peers, ping every pod pair (bounded, silent pairs retried) and " +
        "explain failures",
    )
    .option("--parallel <n>", "pings in flight at most", intArg("--parallel"), 16)
    .addOption(nameOpt())
    .action(async (o: { parallel: number; name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      if (o.parallel < 1) throw new UsageError("--parallel: give at least 1");
      const k = m.readState(o.name) ? null : m.readKubeRecord(o.name);
      if (k) {
        // A --kube lab: pods, Service VIPs and DNS from a pod on every node (lib/lab/kube_check.ts).
        const probes = await m.kubeServiceCheck(
          k.nodes,
          (args, stdin) => m.runKubectl(o.name, args, stdin),
          k.ipFamily === "dual",
        );
        for (const l of m.formatKubeCheck(probes)) say(l);
        return exitWith(probes.every((p) => p.ok) ? 0 : 1);
      }
      await pingReport(m.loadState(o.name), o.parallel);
    });
}

/** `flanctl lab exec TARGET -- COMMAND`. */
function execCommand(lab: Command): void {
  lab.command("exec")
    .description("run a command on a node or pod: its namespace, and the node's files at the default paths")
    .argument("<target>", "node (node1) or pod (node1-pod1) name")
    .argument("<command...>", "command to run, after --")
    .addOption(nameOpt())
    // `lab exec node1 ip -br addr` works without `--` too: options exec does not know belong to the command.
    .allowUnknownOption()
    .action(async (target: string, command: string[], o: { name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      const k = m.readState(o.name) ? null : m.readKubeRecord(o.name);
      if (k) {
        // A --kube lab's node: its namespace, its files, the API as its DaemonSet's store.
        const { argv, env } = m.kubeExecArgv(k, target, command);
        const st = await new Deno.Command(argv[0], {
          args: argv.slice(1),
          env,
          stdin: "inherit",
          stdout: "inherit",
          stderr: "inherit",
        }).output();
        return exitWith(st.code);
      }
      exitWith(await m.labExec(m.loadState(o.name), target, command));
    });
}

/** `flanctl lab kubectl`: kubectl against a --kube lab's API server. */
function kubectlCommand(lab: Command): void {
  lab.command("kubectl")
    .description("run kubectl against a --kube lab's API server (admin credentials)")
    .argument("[args...]", "kubectl arguments (after --)")
    .addOption(nameOpt())
    .action(async (args: string[], o: { name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      if (!pathExists(m.kubePaths(o.name).admin)) {
        throw new m.KubeLabError(`lab ${o.name} is not a --kube lab (no ${m.kubePaths(o.name).admin})`);
      }
      const [cmd, ...rest] = m.kubectlCmd(o.name, args);
      const st = await new Deno.Command(cmd, {
        args: rest,
        stdin: "inherit",
        stdout: "inherit",
        stderr: "inherit",
      })
        .output();
      exitWith(st.code);
    });
}

/** `flanctl lab down`. */
function downCommand(lab: Command): void {
  lab.command("down")
    .description("remove every namespace, process and file of the lab (idempotent)")
    .addOption(nameOpt())
    .action(async (o: { name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      await m.labDown(o.name, say);
    });
}

async function pingReport(s: import("../lib/lab/types.ts").LabState, parallel?: number): Promise<void> {
  const { connectivityCheck, formatCheck } = await import("../lib/lab/mod.ts");
  const r = await connectivityCheck(s, { parallel });
  say("");
  for (const l of formatCheck(r)) say(l);
  exitWith(r.results.some((x) => !x.ok && !x.missing) || !r.convergence.ok ? 1 : 0);
}

/** `flanctl lab list`. */
function registerList(lab: Command): void {
  lab.command("list")
    .description("list the labs on this machine")
    .option("-o, --output <format>", "table or json", "table")
    .action(async (o: { output: string }) => {
      const fmt = parseOutput(o.output);
      const m = await import("../lib/lab/mod.ts");
      const { renderTable } = await import("../lib/base/ui/table.ts");
      const { labs, errors } = m.listLabs();
      for (const e of errors) console.error(`flanctl: warning: ${e}`);
      if (fmt === "json") return say(JSON.stringify(labs, null, 2));
      if (!labs.length) return say("no labs (start one with 'flanctl lab up')");
      say(renderTable(
        ["NAME", "BACKEND", "STORE", "NETWORK", "FAMILY", "NODES", "PODS", "DAEMONS", "CREATED"],
        labs.map((l) => [
          l.name,
          l.backend,
          l.store,
          l.network,
          l.ipFamily,
          String(l.nodes),
          String(l.pods),
          `${l.daemonsRunning}/${l.nodes} running`,
          l.createdAt,
        ]),
      ));
    });
}

/** `flanctl lab logs NODE [-f]`. */
function registerLogs(lab: Command): void {
  lab.command("logs")
    .description("print a node's daemon log; -f follows it until Ctrl-C")
    .argument("<node>", "node name (node1, node2, …)")
    .option("-f, --follow", "keep printing what the daemon logs")
    .addOption(nameOpt())
    .action(async (node: string, o: { follow?: boolean; name: string }) => {
      const m = await import("../lib/lab/mod.ts");
      const path = m.daemonLogPath(m.loadState(o.name), node);
      const ac = new AbortController();
      const stop = () => ac.abort();
      Deno.addSignalListener("SIGINT", stop);
      Deno.addSignalListener("SIGTERM", stop);
      try {
        await m.copyLog(path, (b) => Deno.stdout.write(b), { follow: !!o.follow, signal: ac.signal });
      } finally {
        Deno.removeSignalListener("SIGINT", stop);
        Deno.removeSignalListener("SIGTERM", stop);
      }
    });
}
