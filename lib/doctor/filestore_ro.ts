/**
 * A read-only view of the file store's directory for the doctor. The store's own class creates its
 * directories on open and deletes expired leases while listing; the doctor must change nothing and must
 * see expired leases (an expired own lease is exactly what it should report), so it reads the files here.
 * Layout: `<dir>/config` (net-conf JSON), `<dir>/subnets/<key>` =
 * `{"lease":<flannel lease JSON>,"expiration":"<ISO>"|null,"seq":n}` (see lib/store/file.ts).
 * @module
 */
import { FlanctlError } from "../errors.ts";
import { parseNetConfig } from "../config/netconf.ts";
import { parseLeaseKey, validateLeaseAttrs } from "../lease/wire.ts";
import type { NetConfig } from "../config/types.ts";
import type { Lease, LeaseEvent, SubnetStore } from "../store/types.ts";

/** Raised by every write method: the doctor never changes the store. */
export class ReadOnlyStoreError extends FlanctlError {
  constructor(op: string) {
    super(`the doctor's store view is read-only (${op} refused)`, 1);
  }
}

/** {@link SubnetStore} reading a file-store directory without writing anything. */
export class ReadOnlyFileStore implements SubnetStore {
  /** Always "file". */
  readonly kind = "file";
  /** Lease files that could not be parsed ("<file>: <reason>"). */
  readonly malformed: string[] = [];

  constructor(readonly dir: string) {}

  /** Parses `<dir>/config`. */
  getNetworkConfig(): Promise<NetConfig> {
    let text: string;
    try {
      text = Deno.readTextFileSync(`${this.dir}/config`);
    } catch (e) {
      return Promise.reject(
        new FlanctlError(
          e instanceof Deno.errors.NotFound
            ? `no network config in ${this.dir}/config`
            : `cannot read ${this.dir}/config: ${(e as Error).message}`,
        ),
      );
    }
    try {
      return Promise.resolve(parseNetConfig(text, { warn: () => {} }));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Every lease file, expired ones included. */
  listLeases(): Promise<{ leases: Lease[]; cursor: string }> {
    const dir = `${this.dir}/subnets`;
    const leases: Lease[] = [];
    let names: string[];
    try {
      names = [...Deno.readDirSync(dir)].filter((e) => e.isFile && !e.name.startsWith(".")).map((e) =>
        e.name
      );
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return Promise.resolve({ leases, cursor: "0" });
      return Promise.reject(new FlanctlError(`cannot read ${dir}: ${(e as Error).message}`));
    }
    for (const name of names.sort()) {
      try {
        const k = parseLeaseKey(name);
        if (!k) throw new Error("file name is not a subnet key (e.g. 10.5.52.0-24)");
        const doc = JSON.parse(Deno.readTextFileSync(`${dir}/${name}`));
        const attrs = validateLeaseAttrs(name, doc.lease);
        const exp = typeof doc.expiration === "string" ? new Date(doc.expiration) : null;
        if (exp && isNaN(exp.getTime())) throw new Error(`bad expiration ${JSON.stringify(doc.expiration)}`);
        leases.push({ ...k, attrs, expiration: exp, revision: String(doc.seq ?? 0) });
      } catch (e) {
        this.malformed.push(`${dir}/${name}: ${(e as Error).message}`);
      }
    }
    return Promise.resolve({ leases, cursor: "0" });
  }

  /** Refused. */
  setNetworkConfig(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("setNetworkConfig"));
  }
  /** Refused. */
  acquireLease(): Promise<Lease> {
    return Promise.reject(new ReadOnlyStoreError("acquireLease"));
  }
  /** Refused. */
  renewLease(): Promise<Lease> {
    return Promise.reject(new ReadOnlyStoreError("renewLease"));
  }
  /** Refused. */
  revokeLease(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("revokeLease"));
  }
  /** Refused. */
  reserve(): Promise<void> {
    return Promise.reject(new ReadOnlyStoreError("reserve"));
  }
  /** Not used by the doctor: ends at once. */
  async *watchLeases(): AsyncIterable<LeaseEvent[]> {}
  /** Nothing to release. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
