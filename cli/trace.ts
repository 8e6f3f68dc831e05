/**
 * `flanctl trace DST [--from SRC] [--netns NODE]` and `flanctl lab trace SRC DST`: a packet's path hop by
 * hop from live kernel state, each hop checked against its lease; exit 0 when the path is whole, 1 when a
 * hop is broken. The heavy modules load inside the actions.
 * @module
 */
import { type Command, Option } from "commander";
import { UsageError } from "../lib/base/errors.ts";
import type { StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions } from "./store_flags.ts";
import { exitWith } from "./exit.ts";
import { DEFAULT_PATHS } from "../lib/observe/paths.ts";
import { parseOutput } from "../lib/base/ui/output.ts";
import { writeOut } from "./stdout.ts";

interface TraceFlags extends StoreOptions {
  from?: string;
  netns?: string;
  subnetFile: string;
  output: string;
  probe?: boolean;
}

const IPV4 = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

async function print(report: import("../lib/trace/types.ts").TraceReport, output: string): Promise<void> {
  const { renderTrace, traceJson } = await import("../lib/trace/render.ts");
  const text = output === "json" ? JSON.stringify(traceJson(report), null, 2) + "\n" : renderTrace(report);
  writeOut(text); // a closed pipe (`| head`) ends the output, not the exit code
  exitWith(report.ok ? 0 : 1);
}

function outputOpt(): Option {
  // Validated in the action by parseOutput, as every command's -o (one message for a bad value).
  return new Option("-o, --output <format>", "table or json").default("table");
}

/** `flanctl trace NS/POD NS/POD|IP [PORT/PROTO]`: the NetworkPolicy verdict from the API's objects. */
async function policyTrace(
  from: string,
  to: string | undefined,
  port: string | undefined,
  flags: TraceFlags,
  output: string,
): Promise<void> {
  if (to === undefined) throw new UsageError("trace NS/POD: give the destination pod NS/POD or an address");
  const { explain, listCluster, parsePortProto, renderPolicyTrace } = await import(
    "../lib/netpol/explain.ts"
  );
  const pp = parsePortProto(port);
  const { openStore } = await import("../lib/store/open.ts");
  const store = await openStore(flags, { warn: () => {} });
  try {
    const client = (store as { client?: import("../lib/store/kube/kube_client.ts").KubeClient }).client;
    if (store.kind !== "kube" || !client) {
      throw new UsageError("trace NS/POD: NetworkPolicy needs the Kubernetes store (--kube-subnet-mgr)");
    }
    const q = { from, to, ...pp };
    const ts = explain(await listCluster(client), q);
    writeOut(
      output === "json"
        ? JSON.stringify({ query: q, verdicts: ts }, null, 2) + "\n"
        : renderPolicyTrace(q, ts),
    );
    exitWith(ts.every((t) => t.verdict.allowed) ? 0 : 1);
  } finally {
    await store.close();
  }
}

/** Registers `flanctl trace`. */
export function register(program: Command): void {
  const cmd = program.command("trace")
    .description(
      "follow a packet to DST hop by hop through this node's live state; exit 1 at a broken hop. " +
        "trace NS/POD NS/POD|IP [PORT/PROTO]: the NetworkPolicy verdict, with the policy and rule that decide it " +
        "(kube store; exit 1 when denied)",
    )
    .argument("<dst>", "destination IPv4 address (pod or node); or the source pod NS/POD (NetworkPolicy)")
    .argument("[to]", "with a source pod: the destination pod NS/POD or an address")
    .argument("[port]", "with a source pod: PORT[/tcp|udp|sctp] (default 80/tcp)")
    .option("--from <src>", "source: a pod IP on this node (default: this node itself)")
    .option("--netns <name>", "trace on the node living in this network namespace")
    .option("--subnet-file <path>", "subnet.env written by the daemon", DEFAULT_PATHS.subnetFile)
    .option("--probe", "also send one ping from SRC to DST and report where it was last seen")
    .addOption(outputOpt());
  addSharedStoreOptions(cmd);
  cmd.action(async (dst: string, to: string | undefined, port: string | undefined, flags: TraceFlags) => {
    const output = parseOutput(flags.output);
    if (dst.includes("/")) return await policyTrace(dst, to, port, flags, output);
    if (to !== undefined) {
      throw new UsageError(`trace DST takes one address; a NetworkPolicy trace starts at NS/POD`);
    }
    if (!IPV4.test(dst)) throw new UsageError(`DST: '${dst}' is not an IPv4 address; give a pod or node IP`);
    if (flags.from !== undefined && !IPV4.test(flags.from)) {
      throw new UsageError(`--from: '${flags.from}' is not an IPv4 address; give a pod IP on this node`);
    }
    const { localTrace } = await import("../lib/trace/run.ts");
    await print(await localTrace({ ...flags, dst }), output);
  });
}

/** Registers `flanctl lab trace SRC DST` under the lab command. */
export function registerLabTrace(lab: Command, nameOpt: () => Option): void {
  lab.command("trace")
    .description("follow a packet from SRC to DST (pod or node names, or IPs) through every lab node")
    .argument("<src>", "source pod (node1-pod1) or node (node1)")
    .argument("<dst>", "destination pod, node or IPv4 address")
    .option("--probe", "also send one ping along the path and report where it was last seen")
    .addOption(outputOpt())
    .addOption(nameOpt())
    .action(async (src: string, dst: string, o: { output: string; name: string; probe?: boolean }) => {
      const output = parseOutput(o.output);
      const { labTrace, IN_UNDERLAY } = await import("../lib/trace/run.ts");
      const report = await labTrace(o.name, src, dst, !!o.probe);
      if (Deno.env.get(IN_UNDERLAY)) {
        // The re-executed child of an etcd lab's trace: the whole report for the parent.
        await Deno.stdout.write(new TextEncoder().encode(JSON.stringify(report) + "\n"));
        exitWith(report.ok ? 0 : 1);
        return;
      }
      await print(report, output);
    });
}
