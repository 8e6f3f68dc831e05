/**
 * `flanctl lease`: list, show, watch, reserve and revoke subnet leases and get/set the network config,
 * against any store (file by default, `--etcd-endpoints`, `--kube-subnet-mgr`).
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../lib/errors.ts";
import { IPAddr, IPNet } from "../lib/ip/cidr.ts";
import { openStore, type StoreOptions } from "../lib/store/open.ts";
import { addSharedStoreOptions, storeFlagsHelp } from "./store_flags.ts";
import type { Lease, LeaseEvent, LeaseEventJson, LeaseJson, SubnetStore } from "../lib/store/types.ts";
import { leaseToJson } from "../lib/lease/wire.ts";
import { LeaseNotFoundError } from "../lib/store/errors.ts";
import { readCappedTextAsync } from "../lib/capped_read.ts";
import { parseOutput as output } from "../lib/ui/output.ts";
import { renderTable } from "../lib/ui/table.ts";

/** Parses a SUBNET argument (`10.5.52.0/24` or flannel's key form `10.5.52.0-24`). */
export function parseSubnetArg(s: string, name = "SUBNET"): IPNet {
  const n = IPNet.tryParse(s) ?? (s.includes("/") ? null : IPNet.fromKey(s));
  if (!n) throw new UsageError(`${name}: '${s}' is not a subnet like 10.5.52.0/24`);
  if (!n.ip.equals(IPAddr.parse(s.split(/[/-](?=\d+$)/)[0], name))) {
    throw new UsageError(`${name}: '${s}' has host bits set; did you mean ${n}?`);
  }
  return n;
}

function formatTable(rows: LeaseJson[]): string {
  return renderTable(
    ["SUBNET", "PUBLIC-IP", "BACKEND", "EXPIRES", "BACKEND-DATA"],
    rows.map((r) => [
      r.subnet,
      r.publicIP,
      r.backendType || "-",
      r.expiration ?? "never (reserved)",
      r.backendData === null ? "-" : JSON.stringify(r.backendData),
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
  } finally {
    await s.close();
  }
}

function print(s: string): void {
  console.log(s);
}

/** Adds `flanctl lease` to the program. */
export function register(program: Command): void {
  const lease = program.command("lease").description("list, watch, reserve and revoke subnet leases")
    .addHelpText("after", storeFlagsHelp());

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
            print(
              fmt === "json"
                ? JSON.stringify(ev)
                : `${e.type.padEnd(7)}  ${j.subnet}  ${j.publicIP}  ${j.backendType || "-"}  ${
                  j.expiration ?? "never"
                }`,
            );
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

  addSharedStoreOptions(
    lease.command("reserve").argument("<SUBNET>", "subnet to reserve, e.g. 10.5.52.0/24")
      .description("reserve a subnet (no expiry) for the node with --public-ip")
      .option("--public-ip <ip>", "the node's public IP that owns the reservation"),
  ).action(async (subnetArg: string, o: StoreOptions & { publicIp?: string }) => {
    const subnet = parseSubnetArg(subnetArg);
    if (!o.publicIp) throw new UsageError("--public-ip: required (the IP of the node that owns the subnet)");
    const ip = IPAddr.tryParse(o.publicIp);
    if (!ip) throw new UsageError(`--public-ip: '${o.publicIp}' is not an IP address`);
    if (ip.family !== subnet.family) {
      throw new UsageError(
        `--public-ip: ${ip} is IPv${ip.family} but SUBNET ${subnet} is IPv${subnet.family}`,
      );
    }
    await withStore(o, async (s) => {
      const cfg = await s.getNetworkConfig();
      const len = subnet.family === 4 ? cfg.subnetLen : cfg.ipv6SubnetLen;
      const net = subnet.family === 4 ? cfg.network : cfg.ipv6Network;
      if (!net || !net.contains(subnet) || subnet.prefix !== len) {
        throw new UsageError(
          `SUBNET: ${subnet} is not a /${len} subnet of the network ${
            net ?? "(IPv" + subnet.family + " disabled)"
          }`,
        );
      }
      await s.reserve(subnet, ip.toString());
      print(`reserved ${subnet} for ${ip}`);
    });
  });

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

  const config = lease.command("config").description("get or set the network config (net-conf.json)");
  addSharedStoreOptions(config.command("get").description("print the network config")).action(
    async (o: StoreOptions) => {
      await withStore(o, async (s) => {
        const cfg = await s.getNetworkConfig();
        print(cfg.source.trimEnd());
      });
    },
  );
  addSharedStoreOptions(
    config.command("set").argument("<FILE>", "net-conf.json to store ('-' = stdin)")
      .description("validate and store the network config"),
  ).action(async (file: string, o: StoreOptions) => {
    let text: string;
    try {
      text = file === "-" ? await new Response(Deno.stdin.readable).text() : await readCappedTextAsync(file);
    } catch (e) {
      throw new UsageError(`FILE: cannot read '${file}': ${(e as Error).message}`);
    }
    await withStore(o, async (s) => {
      await s.setNetworkConfig(text);
      print(`network config stored (${s.kind} store)`);
    });
  });
}
