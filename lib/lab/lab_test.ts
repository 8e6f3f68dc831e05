import { assert, assertEquals, assertNotEquals, assertThrows } from "../../tests/assert.ts";
import {
  labNetnsPattern,
  nodeMounts,
  suggestLabName,
  underlayAddrs,
  underlayOctet,
  validateLabName,
} from "./paths.ts";
import { fileStoreDir, resolveTarget, storeEnv, withNodeFiles } from "./exec.ts";
import { flanctlCommand, shq } from "./proc.ts";
import { UsageError } from "../base/errors.ts";
import { labWireguardGo } from "./services.ts";
import type { LabState } from "./types.ts";

function state(store: "file" | "etcd"): LabState {
  return {
    version: 1,
    name: "lab",
    dir: "/var/lib/flanctl-lab/lab",
    backend: "vxlan",
    store,
    network: "10.244.0.0/16",
    createdAt: "",
    underlay: { netns: "lab-underlay", bridge: "br0", cidr: "192.168.1.0/24", gateway: "192.168.1.1" },
    storeFlags: store === "file"
      ? ["--store-dir", "/var/lib/flanctl-lab/lab/store"]
      : ["--etcd-endpoints", "http://192.168.1.1:2379"],
    healthzPort: 10251,
    netns: [],
    nodes: [{
      name: "node1",
      netns: "lab-node1",
      publicIP: "192.168.1.11",
      underlayVeth: "u-node1",
      dir: "/var/lib/flanctl-lab/lab/node1",
    }],
    pods: [{ name: "node1-pod1", node: "node1", netns: "lab-node1-pod1", containerId: "lab-node1-pod1" }],
    procs: [],
  };
}

Deno.test("lab names: valid ones pass, bad ones are usage errors naming --name", () => {
  for (const n of ["lab", "a", "tv1a2b3c", "abcdefghijkl"]) validateLabName(n);
  for (const n of ["", "Lab", "1lab", "la-b", "abcdefghijklm", "a b"]) {
    const e = assertThrows(() => validateLabName(n), UsageError);
    assert(e.message.startsWith(`--name: '${n}' is not a lab name`), e.message);
    // The hint is itself a valid name.
    const hint = /; try --name (\S+)$/.exec(e.message)?.[1] ?? "";
    validateLabName(hint);
  }
  assertEquals(
    ["My_Lab", "1lab", "la-b", "abcdefghijklm", "", "a b"].map(suggestLabName),
    ["mylab", "lab1lab", "lab", "abcdefghijkl", "lab", "ab"],
  );
});

Deno.test("underlay addresses differ per lab name and stay in 192.168.100-249", () => {
  const seen = new Set<number>();
  for (const n of ["lab", "lab2", "tv1", "th1", "te1", "bench"]) {
    const x = underlayOctet(n);
    assert(x >= 100 && x <= 249, `${n}: ${x}`);
    seen.add(x);
  }
  assert(seen.size >= 5, "names spread over subnets");
  const a = underlayAddrs("lab");
  assertEquals(a.cidr, `192.168.${underlayOctet("lab")}.0/24`);
  assertEquals(a.nodeIP(3), `192.168.${underlayOctet("lab")}.13`);
  assertNotEquals(underlayAddrs("lab").cidr, underlayAddrs("lab2").cidr);
});

Deno.test("namespace pattern matches only that lab's namespaces", () => {
  const re = labNetnsPattern("tv1");
  for (const ok of ["tv1-underlay", "tv1-node1", "tv1-node12-pod3"]) assert(re.test(ok), ok);
  for (const no of ["tv12-node1", "tv1-nodeX", "xtv1-node1", "tv1-node1-pod", "tv1"]) {
    assert(!re.test(no), no);
  }
});

Deno.test("node mounts: file store is /var/lib/flanctl with the node's own state inside; etcd: node's own", () => {
  const f = nodeMounts("/L/lab/node1", "/L/lab/store");
  assertEquals(f.map(([, d]) => d), [
    "/run/flannel",
    "/run/wireguard",
    "/etc/cni/net.d",
    "/var/lib/cni",
    "/opt/cni/bin",
    "/var/lib/flanctl",
    "/var/lib/flanctl/state",
  ]);
  assertEquals(f[1][0], "/L/lab/node1/run/wireguard", "wireguard-go's fixed socket directory, per node");
  assertEquals(f[4][0], "/L/lab/cni-bin");
  assertEquals(f[5][0], "/L/lab/store");
  assertEquals(f[6][0], "/L/lab/node1/var/lib/flanctl/state");
  const e = nodeMounts("/L/lab/node1", null);
  assertEquals(e[5], ["/L/lab/node1/var/lib/flanctl", "/var/lib/flanctl"]);
  assertEquals(e.length, 6);
});

Deno.test("withNodeFiles: ip netns exec + bind mounts + exec of the unchanged argv", () => {
  const s = state("file");
  const argv = withNodeFiles(s, "lab-node1", "/var/lib/flanctl-lab/lab/node1", ["cat", "a b", "$HOME"]);
  assertEquals(argv.slice(0, 5), ["ip", "netns", "exec", "lab-node1", "sh"]);
  assertEquals(argv.slice(-4), ["sh", "cat", "a b", "$HOME"]);
  const script = argv[6];
  assert(script.includes("mount --bind /var/lib/flanctl-lab/lab/node1/run/flannel /run/flannel"));
  assert(script.endsWith(`exec "$@"`));
  assertEquals(fileStoreDir(s), "/var/lib/flanctl-lab/lab/store");
  assertEquals(fileStoreDir(state("etcd")), null);
});

Deno.test("storeEnv: etcd endpoints as FLANNELD_ETCD_ENDPOINTS; the file store at its mount point", () => {
  assertEquals(storeEnv(state("etcd")), { FLANNELD_ETCD_ENDPOINTS: "http://192.168.1.1:2379" });
  assertEquals(storeEnv(state("file")), { FLANNELD_STORE_DIR: "/var/lib/flanctl" });
  // Each flag's variable comes from the store flags' table: --lease-ttl is read from FLANCTL_LEASE_TTL.
  const ttl = {
    ...state("etcd"),
    storeFlags: ["--etcd-endpoints", "http://192.168.1.1:2379", "--lease-ttl", "30"],
  };
  assertEquals(storeEnv(ttl), {
    FLANNELD_ETCD_ENDPOINTS: "http://192.168.1.1:2379",
    FLANCTL_LEASE_TTL: "30",
  });
});

Deno.test("resolveTarget: nodes and pods map to their netns and their node's dir", () => {
  const s = state("file");
  assertEquals(resolveTarget(s, "node1"), { netns: "lab-node1", nodeDir: "/var/lib/flanctl-lab/lab/node1" });
  assertEquals(resolveTarget(s, "node1-pod1"), {
    netns: "lab-node1-pod1",
    nodeDir: "/var/lib/flanctl-lab/lab/node1",
  });
  const e = assertThrows(() => resolveTarget(s, "node9"));
  assert(e.message.includes("node1, node1-pod1"));
});

Deno.test("shq quotes for sh; flanctlCommand runs this checkout's main.ts with the same Deno", () => {
  assertEquals(shq("/a/b-c_d.e"), "/a/b-c_d.e");
  assertEquals(shq("a b"), "'a b'");
  assertEquals(shq("it's"), `'it'\\''s'`);
  const cmd = flanctlCommand();
  assertEquals(cmd[0], Deno.execPath());
  assert(cmd.at(-1)!.endsWith("/main.ts"));
  assert(cmd.includes("--no-check"));
});

Deno.test("labWireguardGo: FLANCTL_WIREGUARD_GO, else the dev cache's newest build, else PATH, else the fix", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const cache = `${dir}/cache`;
    for (const v of ["v0.0.0-20250101000000-aaaaaaaaaaaa", "v0.0.0-20260522210424-ecfc5a8d5446"]) {
      Deno.mkdirSync(`${cache}/wireguard-go-${v}/bin`, { recursive: true });
      Deno.writeTextFileSync(`${cache}/wireguard-go-${v}/bin/wireguard-go`, "");
    }
    assertEquals(
      labWireguardGo({ FLANCTL_DEV_CACHE: cache, PATH: "" }),
      `${cache}/wireguard-go-v0.0.0-20260522210424-ecfc5a8d5446/bin/wireguard-go`,
    );
    assertEquals(labWireguardGo({ FLANCTL_WIREGUARD_GO: "/opt/wg", FLANCTL_DEV_CACHE: cache }), "/opt/wg");
    Deno.mkdirSync(`${dir}/bin`);
    Deno.writeTextFileSync(`${dir}/bin/wireguard-go`, "");
    assertEquals(
      labWireguardGo({ FLANCTL_DEV_CACHE: `${dir}/none`, PATH: `${dir}/bin` }),
      `${dir}/bin/wireguard-go`,
    );
    const e = assertThrows(() => labWireguardGo({ FLANCTL_DEV_CACHE: `${dir}/none`, PATH: "" }));
    assert(e.message.includes("tools/peers/build.sh wireguard-go"), e.message);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
