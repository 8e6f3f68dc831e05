/**
 * `/run/flannel/subnet.env`: the file the daemon writes and the flannel CNI plugin reads.
 * @module
 */
import { FlanctlError } from "../base/errors.ts";
import { IPAddr, IPNet } from "../base/cidr.ts";
import { CappedReadError, excerpt, readCappedText } from "../base/capped_read.ts";

/** Default path, as flannel. */
export const DEFAULT_SUBNET_FILE = "/run/flannel/subnet.env";

/** The contents of subnet.env. */
export interface SubnetEnv {
  /** FLANNEL_NETWORK: the cluster network. */
  network?: IPNet;
  /** FLANNEL_SUBNET: the node's first host IP with the subnet's prefix (10.244.1.1/24). */
  subnet?: { ip: IPAddr; net: IPNet };
  /** FLANNEL_IPV6_NETWORK. */
  ipv6Network?: IPNet;
  /** FLANNEL_IPV6_SUBNET. */
  ipv6Subnet?: { ip: IPAddr; net: IPNet };
  /** FLANNEL_MTU. */
  mtu: number;
  /** FLANNEL_IPMASQ: true when the daemon masquerades (then the CNI bridge must not). */
  ipMasq: boolean;
}

/** subnet.env is missing or malformed. Names the file and the variable. */
export class SubnetEnvError extends FlanctlError {
  /**
   * Makes the error.
   *
   * @param message what is wrong, naming the variable
   * @param options the standard `cause`
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, 1, options);
  }
}

/** Renders the file as flannel does (one KEY=value line each). */
export function formatSubnetEnv(e: SubnetEnv): string {
  const lines: string[] = [];
  if (e.network) lines.push(`FLANNEL_NETWORK=${e.network}`);
  if (e.subnet) lines.push(`FLANNEL_SUBNET=${e.subnet.ip}/${e.subnet.net.prefix}`);
  if (e.ipv6Network) lines.push(`FLANNEL_IPV6_NETWORK=${e.ipv6Network}`);
  if (e.ipv6Subnet) lines.push(`FLANNEL_IPV6_SUBNET=${e.ipv6Subnet.ip}/${e.ipv6Subnet.net.prefix}`);
  lines.push(`FLANNEL_MTU=${e.mtu}`);
  lines.push(`FLANNEL_IPMASQ=${e.ipMasq}`);
  return lines.join("\n") + "\n";
}

/**
 * Parses subnet.env text. Requires FLANNEL_MTU, FLANNEL_IPMASQ and at least one of FLANNEL_NETWORK+
 * FLANNEL_SUBNET or the IPv6 pair; errors name the file and the variable.
 */
export function parseSubnetEnv(text: string, path = DEFAULT_SUBNET_FILE): SubnetEnv {
  const vars = new Map<string, string>();
  // Errors quote at most a short escaped excerpt of the file (excerpt()): whatever it holds, a message
  // never carries more of it than that.
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 0) {
      throw new SubnetEnvError(`${path}: malformed line ${i + 1} ${excerpt(line)} (expected KEY=value)`);
    }
    vars.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const need = (k: string) => {
    const v = vars.get(k);
    if (v === undefined || v === "") throw new SubnetEnvError(`${path} is missing ${k}`);
    return v;
  };
  const cidr = (k: string) => {
    const v = need(k);
    const n = IPNet.tryParse(v);
    if (!n) throw new SubnetEnvError(`${path}: ${k}=${excerpt(v)} is not a valid CIDR`);
    return { ip: IPAddr.parse(v.split("/")[0], k), net: n };
  };
  const hasV4 = vars.has("FLANNEL_NETWORK") || vars.has("FLANNEL_SUBNET");
  const hasV6 = vars.has("FLANNEL_IPV6_NETWORK") || vars.has("FLANNEL_IPV6_SUBNET");
  const out: SubnetEnv = { mtu: 0, ipMasq: false };
  if (hasV4 || !hasV6) {
    out.network = cidr("FLANNEL_NETWORK").net;
    out.subnet = cidr("FLANNEL_SUBNET");
  }
  if (hasV6) {
    out.ipv6Network = cidr("FLANNEL_IPV6_NETWORK").net;
    out.ipv6Subnet = cidr("FLANNEL_IPV6_SUBNET");
  }
  const mtu = need("FLANNEL_MTU");
  if (!/^\d+$/.test(mtu) || Number(mtu) < 68 || Number(mtu) > 65535) {
    throw new SubnetEnvError(`${path}: FLANNEL_MTU=${excerpt(mtu)} is not a valid MTU (68..65535)`);
  }
  out.mtu = Number(mtu);
  const masq = need("FLANNEL_IPMASQ");
  if (masq !== "true" && masq !== "false") {
    throw new SubnetEnvError(`${path}: FLANNEL_IPMASQ=${excerpt(masq)} must be true or false`);
  }
  out.ipMasq = masq === "true";
  return out;
}

/** Reads and parses the file; a missing file is a {@link SubnetEnvError} naming it. */
export function readSubnetEnv(path = DEFAULT_SUBNET_FILE): SubnetEnv {
  let text: string;
  try {
    text = readCappedText(path, 64 * 1024);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new SubnetEnvError(`${path} not found: is the flanctl/flannel daemon running on this node?`, {
        cause: e,
      });
    }
    if (e instanceof CappedReadError) throw new SubnetEnvError(e.message, { cause: e });
    throw new SubnetEnvError(`${path}: ${(e as Error).message}`);
  }
  return parseSubnetEnv(text, path);
}

/** Writes the file atomically (temp file + rename), creating its directory. */
export function writeSubnetEnv(e: SubnetEnv, path = DEFAULT_SUBNET_FILE): void {
  const dir = path.slice(0, path.lastIndexOf("/")) || "/";
  Deno.mkdirSync(dir, { recursive: true });
  const tmp = `${path}.tmp.${Deno.pid}`;
  try {
    Deno.writeTextFileSync(tmp, formatSubnetEnv(e), { mode: 0o644 });
    Deno.renameSync(tmp, path);
  } catch (err) {
    // No half-written file left next to subnet.env (e.g. the path is a directory, or the disk is full).
    try {
      Deno.removeSync(tmp);
    } catch { /* never made */ }
    throw err;
  }
}
