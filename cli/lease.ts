/**
 * `flanctl lease`: list, show, watch, reserve and revoke subnet leases and get/set the network config,
 * against any store (`--store-dir`, `--etcd-endpoints`, `--kube-subnet-mgr`; etcd at flanneld's default
 * endpoints when none is given).
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/base/errors.ts";
import { IPAddr, IPNet } from "../lib/base/cidr.ts";
import { openStore, storeChoice, StoreOpenError, type StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions, storeFlagsHelp } from "./store_flags.ts";
import type { Lease, LeaseEvent, LeaseEventJson, LeaseJson, SubnetStore } from "../lib/store/types.ts";
import { leaseToJson } from "../lib/lease/wire.ts";
import { checkReservationInNetwork, reservationRequest } from "../lib/lease/reservation.ts";
import { LeaseNotFoundError, StoreUnavailableError } from "../lib/store/errors.ts";
import { readCappedStream, readCappedTextAsync } from "../lib/base/capped_read.ts";
import { parseOutput as output } from "../lib/base/ui/output.ts";
import { escapeControl, renderTable } from "../lib/base/ui/table.ts";
import { writeOut } from "./stdout.ts";

/** Flags of `lease reserve`. */
interface ReserveFlags {
  publicIp?: string;
  publicIpv6?: string;
}

/** Parses a SUBNET argument (`10.5.52.0/24` or flannel's key form `10.5.52.0-24`). */
export function parseSubnetArg(s: string, name = "SUBNET"): IPNet {
  const n = IPNet.tryParse(s) ?? (s.includes("/") ? null : IPNet.fromKey(s));
  if (!n) throw new UsageError(`${name}: '${s}' is not a subnet like 10.5.52.0/24`);
  if (!n.ip.equals(IPAddr.parse(s.split(/[/-](?=\d+$)/)[0], name))) {
    throw new UsageError(`${name}: '${s}' has host bits set; did you mean ${n}?`);
  }
  return n;
}

/**
 * The table of `lease list`/`show`: a NODE column when the leases are kube nodes (whose leases never
 * expire: they live as long as the Node), both public IPs and both backends' data in dual stack.
 */
export function formatTable(rows: LeaseJson[]): string {
  const kube = rows.some((r) => r.node !== null);
  const pub = (r: LeaseJson) =>
    r.publicIPv6 && r.publicIPv6 !== r.publicIP ? `${r.publicIP},${r.publicIPv6}` : r.publicIP;
  const data = (r: LeaseJson) => {
    const v4 = r.backendData === null ? null : JSON.stringify(r.backendData);
    const v6 = r.backendV6Data === null || r.subnet.indexOf(",") < 0 ? null : JSON.stringify(r.backendV6Data);
    return v4 && v6 ? `${v4} v6:${v6}` : v4 ?? (v6 ? `v6:${v6}` : "-");
  };
  return renderTable(
    [...(kube ? ["NODE"] : []), "SUBNET", "PUBLIC-IP", "BACKEND", "EXPIRES", "BACKEND-DATA"],
    rows.map((r) => [
      // deno-lint-ignore no-control-regex
      ...(kube ? [(r.node ?? "-").replace(/[\x00-\x1f\x7f]/g, "?")] : []),
      r.subnet,
      pub(r),
      r.backendType || "-",
      r.expiration ?? (r.node !== null ? "never (kube node)" : "never (reserved)"),
      data(r),
    ]),
  );
}

/** The `-o json` line of a watch event: `{type, lease}`. */
export function leaseEventToJson(e: LeaseEvent): LeaseEventJson {
  return { type: e.type, lease: leaseToJson(e.lease) };
}

function sortLeases(ls: Lease[]): Lease[] {
  const k = (l: Lease) => l.subnet ?? l.ipv6Subnet!;
  return [...ls].sort((a, b) => k(a).ip.compare(k(b).ip));
}

async function withStore<T>(opts: StoreOptions, fn: (s: SubnetStore) => Promise<T>): Promise<T> {
  const s = await openStore(opts);
  try {
    return await fn(s);
  } catch (e) {
    // Say which store was used and why (the default etcd surprises users of the old file default).
    throw e instanceof StoreUnavailableError ? new StoreOpenError(storeChoice(opts), e) : e;
  } finally {
    await s.close();
  }
}

/** Prints one line; false when the reader closed the pipe (`| head`: then quietly nothing more). */
function print(s: string): boolean {
  return writeOut(s + "\n");
}

/** Adds `flanctl lease` to the program. */
export function register(program: Command): void {
  const lease = program.command("lease").description("list, watch, reserve and revoke subnet leases")
    .addHelpText("after", storeFlagsHelp());

  listCommand(lease);
  showCommand(lease);
  watchCommand(lease);
  reserveCommand(lease);
  revokeCommand(lease);
  const config = lease.command("config").description("get or set the network config (net-conf.json)");
  configGetCommand(config);
  configSetCommand(config);
}

/** `flanctl lease list`. */
function listCommand(lease: Command): void {
  addSharedStoreOptions(
    lease.command("list").description("list all leases").option(
      "-o, --output <format>",
      "table or json",
      "table",
    ),
  ).action(async (o: StoreOptions & { output: string }) => {
    const fmt = output(o.output);
    await withStore(o, async (s) => {
      const rows = sortLeases((await s.listLeases()).leases).map(leaseToJson);
      print(fmt === "json" ? JSON.stringify(rows, null, 2) : formatTable(rows));
    });
  });
}

/** `flanctl lease show SUBNET`. */
function showCommand(lease: Command): void {
  addSharedStoreOptions(
    lease.command("show").argument("<SUBNET>", "the lease's subnet, e.g. 10.5.52.0/24")
      .description("show one lease").option("-o, --output <format>", "table or json", "table"),
  ).action(async (subnetArg: string, o: StoreOptions & { output: string }) => {
    const fmt = output(o.output);
    const subnet = parseSubnetArg(subnetArg);
    await withStore(o, async (s) => {
      const l = (await s.listLeases()).leases.find((x) =>
        (subnet.family === 4 ? x.subnet : x.ipv6Subnet)?.equals(subnet)
      );
      if (!l) throw new LeaseNotFoundError(`no lease for ${subnet} (see 'flanctl lease list')`);
      print(fmt === "json" ? JSON.stringify(leaseToJson(l), null, 2) : formatTable([leaseToJson(l)]));
    });
  });
}

/** `flanctl lease watch`. */
function watchCommand(lease: Command): void {
  addSharedStoreOptions(
    lease.command("watch").description("print lease changes as they happen (until interrupted)")
      .option("-o, --output <format>", "table (one line per event) or json (one object per line)", "table"),
  ).action(async (o: StoreOptions & { output: string }) => {
    const fmt = output(o.output);
    await withStore(o, async (s) => {
      const ac = new AbortController();
      const stop = () => ac.abort();
      Deno.addSignalListener("SIGINT", stop);
      Deno.addSignalListener("SIGTERM", stop);
      try {
        const { leases, cursor } = await s.listLeases();
        const show = (evs: LeaseEvent[]) => {
          for (const e of evs) {
            const ev = leaseEventToJson(e);
            const j = ev.lease;
            const more = print(
              fmt === "json" ? JSON.stringify(ev) : escapeControl(
                `${e.type.padEnd(7)}  ${j.subnet}  ${j.publicIP}  ${j.backendType || "-"}  ${
                  j.expiration ?? "never"
                }`,
              ),
            );
            if (!more) return stop(); // the reader went away (`| head`): the watch ends quietly
          }
        };
        show(sortLeases(leases).map((lease) => ({ type: "added", lease })));
        for await (const evs of s.watchLeases(cursor, ac.signal)) show(evs);
      } finally {
        Deno.removeSignalListener("SIGINT", stop);
        Deno.removeSignalListener("SIGTERM", stop);
      }
    });
  });
}

/** `flanctl lease reserve SUBNET [SUBNET6]`. */
function reserveCommand(lease: Command): void {
  addSharedStoreOptions(
    lease.command("reserve").argument("<SUBNET>", "subnet to reserve, e.g. 10.5.52.0/24")
      .argument("[SUBNET6]", "dual-stack network: the IPv6 subnet reserved with it (one key v4&v6)")
      .description("reserve a subnet (no expiry) for the node with --public-ip (dual stack: both subnets)")
      .option("--public-ip <ip>", "the node's public IP that owns the reservation")
      .option("--public-ipv6 <ip>", "dual stack: the node's public IPv6"),
  ).action(async (subnetArg: string, subnet6Arg: string | undefined, o: StoreOptions & ReserveFlags) => {
    const subnet = parseSubnetArg(subnetArg);
    const subnet6 = subnet6Arg === undefined ? null : parseSubnetArg(subnet6Arg, "SUBNET6");
    const req = reservationRequest(subnet, subnet6, o.publicIp, o.publicIpv6);
    await withStore(o, async (s) => {
      checkReservationInNetwork(await s.getNetworkConfig(), req);
      await s.reserve(req.subnet, req.publicIP.toString(), req.v6);
      const { publicIP: ip, publicIPv6: ip6 } = req;
      print(`reserved ${subnet6 ? `${subnet} and ${subnet6}` : subnet} for ${ip6 ? `${ip} and ${ip6}` : ip}`);
    });
  });
}

/** `flanctl lease revoke SUBNET`. */
function revokeCommand(lease: Command): void {
  addSharedStoreOptions(
    lease.command("revoke").argument("<SUBNET>", "the lease's subnet").description(
      "remove a lease or reservation",
    ),
  ).action(async (subnetArg: string, o: StoreOptions) => {
    const subnet = parseSubnetArg(subnetArg);
    await withStore(o, async (s) => {
      await s.revokeLease(subnet);
      print(`revoked ${subnet}`);
    });
  });
}

/** `flanctl lease config get`. */
function configGetCommand(config: Command): void {
  addSharedStoreOptions(config.command("get").description("print the network config")).action(
    async (o: StoreOptions) => {
      await withStore(o, async (s) => {
        const cfg = await s.getNetworkConfig();
        print(cfg.source.trimEnd());
      });
    },
  );
}

/** `flanctl lease config set FILE`. */
function configSetCommand(config: Command): void {
  addSharedStoreOptions(
    config.command("set").argument("<FILE>", "net-conf.json to store ('-' = stdin)")
      .description("validate and store the network config"),
  ).action(async (file: string, o: StoreOptions) => {
    let text: string;
    try {
      text = file === "-"
        ? new TextDecoder().decode(readCappedStream((b) => Deno.stdin.readSync(b), "stdin"))
        : await readCappedTextAsync(file);
    } catch (e) {
      throw new UsageError(`FILE: cannot read '${file}': ${(e as Error).message}`);
    }
    await withStore(o, async (s) => {
      await s.setNetworkConfig(text);
      print(`network config stored (${s.kind} store)`);
    });
  });
}
