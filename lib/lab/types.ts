/**
 * Shapes of the lab: options of `lab up`, the state file that lets `lab down` undo everything, and the
 * `lab status -o json` document.
 * @module
 */

/** Backends the lab can build (alloc and extension: leases only, no cross-node data plane). */
export type LabBackend = "vxlan" | "host-gw" | "udp" | "wireguard" | "alloc" | "extension";

/** True for a backend that carries pod traffic between nodes (not alloc, extension). */
export function hasDataPlane(b: LabBackend): boolean {
  return b !== "alloc" && b !== "extension";
}
/** Stores the lab can use. */
export type LabStore = "file" | "etcd";

/** Options of `flanctl lab up`. */
export interface LabUpOptions {
  /** Lab name: prefixes every namespace, selects the state directory. */
  name: string;
  nodes: number;
  podsPerNode: number;
  backend: LabBackend;
  store: LabStore;
  /**
   * `--runtime`: "none" (default: the lab runs the conflist itself) or "containerd" (one per node, pods
   * through CRI with crictl; lib/lab/runtime.ts).
   */
  runtime?: "none" | "containerd";
  /** The pod network (net-conf `Network`). */
  network: string;
  /** Lease TTL in seconds for every node (default: the store's, flannel's 24 h). */
  leaseTtl?: number;
  /** Extra flags for every daemon (e.g. "--resync-interval=2"). */
  daemonArgs?: string[];
  /** A net-conf.json file to use instead of one built from network/backend (e.g. with EnableNFTables). */
  netConf?: string;
  /** `--ip-family`: "ipv4" (default), "dual" or "ipv6" (see lib/lab/family.ts). */
  ipFamily?: "ipv4" | "dual" | "ipv6";
  /** `--tune-host`: raise the host's neighbour gc thresholds when the lab does not fit (lab down restores). */
  tuneHost?: boolean;
  /**
   * `--wireguard-way`: the wireguard backend's way for every daemon (FLANCTL_WIREGUARD_WAY: kernel,
   * userspace, or auto, the default: the kernel where it has the module, else wireguard-go).
   */
  wireguardWay?: "kernel" | "userspace" | "auto";
}

/** A host sysctl `lab up --tune-host` changed (recorded before the change; `lab down` restores it). */
export interface HostTuning {
  /** e.g. "net.ipv4.neigh.default.gc_thresh3". */
  key: string;
  /** Its /proc/sys path. */
  path: string;
  before: number;
  after: number;
}

/** A node of the lab as recorded in the state file. */
export interface NodeState {
  /** "node1", "node2", … */
  name: string;
  /** Its network namespace. */
  netns: string;
  /** Underlay address (the node's public IP). */
  publicIP: string;
  /** Underlay IPv6 address (the node's public IPv6), in dual and ipv6 labs. */
  publicIPv6?: string;
  /** Name of the underlay-side veth end (inside the underlay namespace). */
  underlayVeth: string;
  /** Directory holding this node's files (run/flannel, etc/cni/net.d, var/lib/cni, var/lib/flanctl). */
  dir: string;
  /** pid of its daemon, once started. */
  daemonPid?: number;
}

/** A hostPort mapping of a pod (`lab add-pod --publish`), as CNI portMappings. */
export interface PodPort {
  hostPort: number;
  containerPort: number;
  protocol: "tcp" | "udp";
}

/** A pod of the lab. */
export interface PodState {
  /** "node1-pod1", … */
  name: string;
  /** The node it runs on. */
  node: string;
  netns: string;
  /** CNI_CONTAINERID used for ADD/DEL. */
  containerId: string;
  /** Its IPv4 address (without prefix), once attached. */
  ip?: string;
  /** Published ports (portmap plugin). */
  ports?: PodPort[];
  /** Its IPv6 address (without prefix), once attached, in dual and ipv6 labs. */
  ipv6?: string;
}

/** A background process the lab started (daemon, etcd). */
export interface ProcState {
  pid: number;
  /** "daemon node1", "etcd". */
  what: string;
  /** The command line, to restart it (tests) and to tell it from a recycled pid. */
  cmd: string[];
  /** Namespace it runs in. */
  netns: string;
  /** Log file. */
  log: string;
}

/** Everything `lab down` needs, written before each thing is created. */
export interface LabState {
  version: 1;
  name: string;
  /** "containerd" when pods go through a containerd per node (absent: the lab runs the conflist). */
  runtime?: "containerd";
  /** The lab directory (holds this state file). */
  dir: string;
  backend: LabBackend;
  store: LabStore;
  network: string;
  /** The lab's address families (absent in labs made before --ip-family: ipv4). */
  ipFamily?: "ipv4" | "dual" | "ipv6";
  createdAt: string;
  underlay: {
    netns: string;
    bridge: string;
    /** e.g. "192.168.137.0/24". */
    cidr: string;
    /** Address on the bridge; every node's default gateway and etcd's listen address. */
    gateway: string;
  };
  /** Store flags every flanctl command of this lab needs (`--store-dir …` or `--etcd-endpoints …`). */
  storeFlags: string[];
  /** The net-conf.json text given with `lab up --net-conf`. */
  netConf?: string;
  /** Extra flags every daemon gets (`lab up --daemon-arg`). */
  daemonArgs?: string[];
  /** `lab up --wireguard-way` when not auto: every daemon's FLANCTL_WIREGUARD_WAY. */
  wireguardWay?: "kernel" | "userspace";
  /** `/healthz` / `/readyz` port of every daemon (each in its own namespace). */
  healthzPort: number;
  /** Every namespace created (recorded before `ip netns add`). */
  netns: string[];
  nodes: NodeState[];
  pods: PodState[];
  procs: ProcState[];
  /** Host sysctls `--tune-host` raised (restored by `lab down`). */
  hostTuning?: HostTuning[];
}

/** A node's daemon in `lab status`: its recorded pid and whether it still runs (`none`: never started). */
export interface LabDaemonJson {
  pid: number | null;
  state: "running" | "stopped" | "none";
}

/** `flanctl lab status -o json` (the contract; camelCase). */
export interface LabStatusJson {
  nodes: {
    name: string;
    netns: string;
    publicIP: string;
    subnet: string | null;
    daemon: LabDaemonJson;
    /** In dual and ipv6 labs. */
    publicIPv6?: string | null;
    /** In dual and ipv6 labs. */
    subnetIPv6?: string | null;
  }[];
  pods: {
    name: string;
    node: string;
    netns: string;
    ip: string | null;
    /** In dual and ipv6 labs. */
    ipv6?: string | null;
  }[];
}
