/**
 * Names and addresses of a lab, all derived from its name so two labs coexist: namespaces are prefixed
 * with the lab name, and each lab gets its own underlay /24 (192.168.X.0/24 with X from a hash of the
 * name). The lab directory lives under /var/lib/flanctl-lab, not /var/lib/flanctl: `lab exec` bind-mounts
 * a node's own files over /var/lib/flanctl, and the lab's paths must stay visible under that mount.
 * @module
 */
import { UsageError } from "../base/errors.ts";

/** Root of every lab's directory (override with FLANCTL_LAB_ROOT). */
export function labRoot(): string {
  return Deno.env.get("FLANCTL_LAB_ROOT") ?? "/var/lib/flanctl-lab";
}

/** The directory of lab `name`. */
export function labDir(name: string): string {
  return `${labRoot()}/${name}`;
}

/** The state file of lab `name`. */
export function statePath(name: string): string {
  return `${labDir(name)}/state.json`;
}

const NAME_RE = /^[a-z][a-z0-9]{0,11}$/;

/** Checks a lab name (it prefixes namespace names and CNI container ids); the error suggests a valid one. */
export function validateLabName(name: string): void {
  if (!NAME_RE.test(name)) {
    throw new UsageError(
      `--name: '${name}' is not a lab name (1-12 lower-case letters or digits, starting with a letter); ` +
        `try --name ${suggestLabName(name)}`,
    );
  }
}

/** A valid lab name close to `name`: lower-cased, other characters dropped, a letter first, 12 at most. */
export function suggestLabName(name: string): string {
  let s = name.toLowerCase().replace(/[^a-z0-9]/g, "");
  if (!/^[a-z]/.test(s)) s = `lab${s}`;
  return s.slice(0, 12);
}

/** FNV-1a, to spread lab names over underlay subnets. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** Third octet of the lab's underlay 192.168.X.0/24 (100..249: away from the usual 192.168.0/1.x). */
export function underlayOctet(name: string): number {
  return 100 + (fnv1a(name) % 150);
}

/** Underlay CIDR, gateway (the bridge in the underlay namespace) and the public IP of node `i` (1-based). */
export function underlayAddrs(
  name: string,
): { cidr: string; gateway: string; nodeIP: (i: number) => string } {
  const x = underlayOctet(name);
  return {
    cidr: `192.168.${x}.0/24`,
    gateway: `192.168.${x}.1`,
    nodeIP: (i) => `192.168.${x}.${10 + i}`,
  };
}

/** Namespace of the underlay. */
export function underlayNetns(name: string): string {
  return `${name}-underlay`;
}

/** Namespace of node `node`. */
export function nodeNetns(name: string, node: string): string {
  return `${name}-${node}`;
}

/** Matches every namespace a lab named `name` can have (for cleanup without a state file). */
export function labNetnsPattern(name: string): RegExp {
  return new RegExp(`^${name}-(underlay|node\\d+(-pod\\d+)?)$`);
}

/** The host paths `lab exec` shows a node's own files at (mount points; created empty when missing). */
export const NODE_PATHS = [
  "/run/flannel",
  "/run/wireguard",
  "/etc/cni/net.d",
  "/var/lib/cni",
  "/opt/cni/bin",
  "/var/lib/flanctl",
];

/**
 * What a node sees at the default paths, as [source in the lab dir, default path] in mount order: its
 * subnet.env, CNI config, CNI data, the lab's CNI plugins (the same ones `lab up` used), and flanctl's
 * directory. With
 * the file store, /var/lib/flanctl is the lab's shared store directory (as on one host running several
 * daemons) and /var/lib/flanctl/state, the daemon's default state dir, is the node's own; with etcd,
 * /var/lib/flanctl is the node's own directory.
 */
export function nodeMounts(nodeDir: string, fileStoreDir: string | null): [string, string][] {
  const labDir = nodeDir.slice(0, nodeDir.lastIndexOf("/"));
  const m: [string, string][] = [
    [`${nodeDir}/run/flannel`, "/run/flannel"],
    // wireguard-go serves its UAPI socket in the fixed /var/run/wireguard (/run/wireguard): each node's own.
    [`${nodeDir}/run/wireguard`, "/run/wireguard"],
    [`${nodeDir}/etc/cni/net.d`, "/etc/cni/net.d"],
    [`${nodeDir}/var/lib/cni`, "/var/lib/cni"],
    [`${labDir}/cni-bin`, "/opt/cni/bin"],
  ];
  if (fileStoreDir) {
    m.push([fileStoreDir, "/var/lib/flanctl"], [
      `${nodeDir}/var/lib/flanctl/state`,
      "/var/lib/flanctl/state",
    ]);
  } else m.push([`${nodeDir}/var/lib/flanctl`, "/var/lib/flanctl"]);
  return m;
}
