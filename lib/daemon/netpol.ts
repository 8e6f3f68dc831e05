/**
 * `--network-policy`: starts NetworkPolicy enforcement (lib/netpol) beside the run loop once start-up is
 * done, on the kube store's API client, for this node's pods (its Node's podCIDRs bound the pending
 * default deny). Stopping leaves the table in place: the next daemon replaces it whole after its lists.
 * @module
 */
import { IPNet } from "../base/cidr.ts";
import { errText, UsageError } from "../base/errors.ts";
import { isObj } from "../base/json.ts";
import type { Log } from "../base/log.ts";
import { nftDriver } from "../firewall/nft.ts";
import { NetpolController } from "../netpol/controller.ts";
import type { KubeClient } from "../store/kube/kube_client.ts";
import type { SubnetStore } from "../store/types.ts";

/** A running enforcement. */
export interface RunningNetpol {
  controller: NetpolController;
  stop(): Promise<void>;
}

/** Throws {@link UsageError} when `--network-policy` is given without the kube store. */
export function checkNetpolStore(on: boolean | undefined, storeKind: string): void {
  if (on && storeKind !== "kube") {
    throw new UsageError("--network-policy: needs the Kubernetes store (--kube-subnet-mgr)");
  }
}

/** The pod CIDRs of Node `name` (spec.podCIDRs, else spec.podCIDR). */
export async function nodePodCidrs(client: KubeClient, name: string): Promise<IPNet[]> {
  const n = await client.request<unknown>("GET", `/api/v1/nodes/${encodeURIComponent(name)}`);
  const spec = isObj(n) && isObj(n.spec) ? n.spec : {};
  const list = Array.isArray(spec.podCIDRs)
    ? spec.podCIDRs
    : typeof spec.podCIDR === "string"
    ? [spec.podCIDR]
    : [];
  return list.slice(0, 4).map((c) => typeof c === "string" ? IPNet.tryParse(c) : null).filter((
    c,
  ): c is IPNet => c !== null);
}

/** Starts enforcement for `node`; `ensureEveryMs`: the drift check's period (--iptables-resync). */
export async function startNetpol(
  store: SubnetStore,
  node: string,
  log: Log,
  ensureEveryMs: number,
): Promise<RunningNetpol> {
  const client = (store as SubnetStore & { client?: KubeClient }).client;
  if (store.kind !== "kube" || !client) throw new UsageError("--network-policy: needs --kube-subnet-mgr");
  try {
    const v = Deno.readTextFileSync("/proc/sys/net/bridge/bridge-nf-call-iptables").trim();
    if (v !== "1") {
      log.warn("netpol: bridge-nf-call-iptables is not 1: traffic between pods of this node is not enforced");
    }
  } catch {
    log.warn("netpol: br_netfilter is not loaded: traffic between pods of this node is not enforced");
  }
  let podCidrs: IPNet[] = [];
  try {
    podCidrs = await nodePodCidrs(client, node);
  } catch (e) {
    log.warn("netpol: cannot read this node's podCIDRs: no pending default deny", { error: errText(e) });
  }
  const controller = new NetpolController({ client, nft: nftDriver({ log }), node, podCidrs, log });
  const ac = new AbortController();
  const done = controller.run(ac.signal, ensureEveryMs).catch((e) => {
    log.error("netpol: enforcement stopped", { error: errText(e) });
  });
  log.info("netpol: watching pods, namespaces and networkpolicies", { node });
  return {
    controller,
    async stop() {
      ac.abort();
      await done;
    },
  };
}
