/**
 * The exact bytes real runtimes send, fed to every plugin, ours beside the reference (REF_DIR): keys
 * are matched case-insensitively as Go's encoding/json matches them (containerd 1.6 and 2.x send go-cni's
 * untagged `HostPort`/`ContainerPort`, CRI-O sends `hostPort`), unknown keys are ignored. DEL never fails on
 * input its ADD refused and still removes what an earlier ADD made; GC without an attachment list exits 0.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, cniOk, listFiles, refSpeaks11, requireRefPlugins, tempDir } from "./cni_helpers.ts";
import { ipJson, nsRun, withNetns } from "./netns.ts";

const HAVE_REF = requireRefPlugins(["bridge", "host-local", "portmap"]);
type J = Record<string, unknown>;

/** CNI_ARGS as containerd's CRI plugin (1.6 and 2.x) and CRI-O (ocicni) set them. */
const K8S_ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;" +
  "K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=0f4e6a1c-1a2b-4c3d-8e9f-001122334455";

const PREV = '{"cniVersion":"1.0.0","interfaces":[{"name":"cni0","mac":"aa:bb:cc:dd:ee:01"},' +
  '{"name":"eth0","mac":"aa:bb:cc:dd:ee:02","sandbox":"/var/run/netns/pod"}],' +
  '"ips":[{"interface":1,"address":"10.244.1.5/24","gateway":"10.244.1.1"}]}';

/** The portmap entries each runtime writes into runtimeConfig (libcni copies them verbatim). */
const PORTMAP_BYTES: [string, string][] = [
  // go-cni's PortMapping has no JSON tags: Go field names, HostIP always present.
  ["containerd 1.6", '[{"HostPort":18080,"ContainerPort":80,"Protocol":"tcp","HostIP":""}]'],
  [
    "containerd 2.x",
    '[{"HostPort":18080,"ContainerPort":80,"Protocol":"tcp","HostIP":""},' +
    '{"HostPort":18443,"ContainerPort":443,"Protocol":"udp","HostIP":"10.9.9.9"}]',
  ],
  // ocicni's PortMapping has tags.
  ["CRI-O", '[{"hostPort":18080,"containerPort":80,"protocol":"tcp","hostIP":""}]'],
  ["lower case", '[{"hostport":18080,"containerport":80,"protocol":"tcp"}]'],
];

function portmapConf(maps: string, prev = PREV): string {
  return `{"type":"portmap","capabilities":{"portMappings":true},"backend":"iptables","cniVersion":"1.0.0",` +
    `"name":"cbr0","runtimeConfig":{"portMappings":${maps}},"prevResult":${prev}}`;
}

async function cniRules(ns: string): Promise<string[]> {
  const out = (await nsRun(ns, ["iptables-save", "-t", "nat"])).stdout;
  return out.split("\n").filter((l) => l.includes("CNI-") && !l.startsWith("#"))
    .map((l) => l.replace(/\[\d+:\d+\]/, "")).sort();
}

needsRoot.test({
  name: "cni runtime bytes: portmap takes containerd's and CRI-O's portMappings as the reference does",
  ignore: !HAVE_REF,
  fn: () =>
    withNetns(async (fx) => {
      for (const [label, maps] of PORTMAP_BYTES) {
        const ours = await fx.add("rio"), ref = await fx.add("rir");
        const call = (node: string, command: string, isRef: boolean) =>
          cni({
            plugin: "portmap",
            command,
            node,
            containerId: "c1",
            netns: "/var/run/netns/pod",
            args: K8S_ARGS,
            conf: portmapConf(maps),
            ref: isRef,
          });
        const [a, b] = [await call(ours, "ADD", false), await call(ref, "ADD", true)];
        assertEquals(b.code, 0, `${label}: the reference accepts it: ${b.stdout}`);
        assertEquals(a.code, 0, `${label}: ours accepts it: ${a.stdout}`);
        assertEquals(a.json, b.json, `${label}: result`);
        const rules = await cniRules(ref);
        assert(rules.some((l) => l.includes("--dport 18080")), `${label}: the reference mapped 18080`);
        assertEquals(await cniRules(ours), rules, `${label}: iptables-save`);
        for (const [node, isRef] of [[ours, false], [ref, true]] as const) {
          assertEquals((await call(node, "DEL", isRef)).code, 0, `${label}: DEL`);
          const left = (await cniRules(node)).filter((l) => /CNI-DN-|--dport 18/.test(l));
          assertEquals(left, [], `${label}: DEL leaves no DNAT chain or rule`);
        }
      }
    }),
});

needsRoot.test({
  name: "cni runtime bytes: loopback takes go-cni's cni-loopback config and CNI_ARGS as the reference",
  ignore: !HAVE_REF,
  fn: () =>
    withNetns(async (fx) => {
      // What containerd's go-cni (WithLoNetwork) passes for every sandbox.
      const conf = '{"cniVersion":"1.0.0","name":"cni-loopback","type":"loopback"}';
      const out: unknown[] = [];
      for (const isRef of [false, true]) {
        const node = await fx.add("rln"), pod = await fx.add("rlp");
        const call = {
          plugin: "loopback",
          node,
          netns: pod,
          ifname: "lo", // as containerd runs it
          containerId: "c1",
          args: K8S_ARGS,
          conf,
          ref: isRef,
        };
        out.push(normResult(await cniOk({ ...call, command: "ADD" })));
        await cniOk({ ...call, command: "DEL" });
      }
      assertEquals(out[0], out[1]);
    }),
});

/** A bridge + host-local config spelled with Go's field names throughout (the reference decodes it). */
function goSpelledBridge(dataDir: string): string {
  return JSON.stringify({
    CNIVersion: "1.0.0",
    Name: "rtnet",
    Type: "bridge",
    Bridge: "cni0",
    IsGateway: true,
    IsDefaultGateway: true,
    HairpinMode: true,
    MTU: 1400,
    SomethingUnknown: { x: 1 },
    IPAM: {
      Type: "host-local",
      DataDir: dataDir,
      Ranges: [[{ Subnet: "10.98.1.0/24", RangeStart: "10.98.1.20" }]],
      Routes: [{ Dst: "10.98.0.0/16" }],
    },
  });
}

function normResult(r: J | null): unknown {
  const x = structuredClone(r) as J;
  for (const i of (x.interfaces as J[] | undefined) ?? []) {
    if (typeof i.mac === "string") i.mac = "MAC";
    if (typeof i.name === "string" && /^veth[0-9a-f]{8}$/.test(i.name)) i.name = "vethXXXXXXXX";
    if (typeof i.sandbox === "string") i.sandbox = "SANDBOX";
    delete i.mtu; // ours carries mtu in 1.1.0-shaped interfaces (the spec allows it)
  }
  return x;
}

needsRoot.test({
  name: "cni runtime bytes: bridge and host-local read Go-spelled keys as the reference; unknown ignored",
  ignore: !HAVE_REF,
  fn: () =>
    withNetns(async (fx) => {
      const d = tempDir();
      try {
        const out: Record<string, unknown> = {};
        for (const isRef of [false, true]) {
          const node = await fx.add("rbn"), pod = await fx.add("rbp");
          const dir = `${d.path}/${isRef ? "ref" : "ours"}`;
          const r = await cniOk({
            plugin: "bridge",
            command: "ADD",
            node,
            netns: pod,
            containerId: "c1",
            args: K8S_ARGS,
            conf: goSpelledBridge(dir),
            ref: isRef,
          });
          out[isRef ? "ref" : "ours"] = normResult(r);
          const link = (await ipJson<J[]>(pod, "link", "show", "eth0"))[0];
          assertEquals(link.mtu, 1400, `${isRef ? "reference" : "ours"}: MTU read from "MTU"`);
          assertEquals(listFiles(`${dir}/rtnet`).includes("10.98.1.20"), true, "RangeStart honoured");
          await cniOk({
            plugin: "bridge",
            command: "DEL",
            node,
            netns: pod,
            containerId: "c1",
            args: K8S_ARGS,
            conf: goSpelledBridge(dir),
            ref: isRef,
          });
          assertEquals(listFiles(`${dir}/rtnet`).filter((f) => f.startsWith("10.")), [], "IP released");
        }
        assertEquals(out.ours, out.ref, "result");
      } finally {
        d.cleanup();
      }
    }),
});

needsRoot.test("cni runtime bytes: flannel reads SubnetFile/DataDir/Delegate spelled as Go fields", () =>
  withNetns(async (fx) => {
    const node = await fx.add("rfn"), pod = await fx.add("rfp");
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1410\nFLANNEL_IPMASQ=true\n",
      );
      const conf = JSON.stringify({
        CniVersion: "1.0.0",
        NAME: "cbr0",
        type: "flannel",
        SubnetFile: `${d.path}/subnet.env`,
        DataDir: `${d.path}/flannel`,
        IPAM: { DataDir: `${d.path}/networks` },
        Delegate: { HairpinMode: true, IsDefaultGateway: true },
      });
      const call = { plugin: "flannel", node, netns: pod, containerId: "c1", args: K8S_ARGS, conf };
      const r = await cniOk({ ...call, command: "ADD" });
      assertEquals((r!.ips as J[])[0].address, "10.244.7.2/24");
      assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".")), ["c1"], "saved config");
      const routes = await ipJson<J[]>(pod, "route");
      assert(routes.some((x) => x.dst === "default"), "IsDefaultGateway reached the bridge");
      await cniOk({ ...call, command: "DEL" });
      assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".")), []);
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => f.startsWith("10.")), []);
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test("cni DEL: never fails on input its ADD refused, and still removes what an earlier ADD made", () =>
  withNetns(async (fx) => {
    const node = await fx.add("rdn"), pod = await fx.add("rdp");
    const d = tempDir();
    try {
      const good = {
        cniVersion: "1.0.0",
        name: "deln",
        type: "bridge",
        isGateway: true,
        ipam: { type: "host-local", dataDir: d.path, ranges: [[{ subnet: "10.97.1.0/24" }]] },
      };
      const refused: [string, string, unknown, string?][] = [
        ["bridge", "mtu out of range", { ...good, mtu: 5 }],
        ["bridge", "CNI_ARGS key without IgnoreUnknown", good, "FOO=1"],
        ["host-local", "CNI_ARGS key without IgnoreUnknown", { ...good, type: "host-local" }, "FOO=1"],
        ["portmap", "protocol icmp", portmapConf('[{"hostPort":1,"containerPort":1,"protocol":"icmp"}]')],
        ["flannel", "delegate not an object", {
          cniVersion: "1.0.0",
          name: "deln",
          type: "flannel",
          delegate: 5,
        }],
        ["loopback", "not JSON", "{not json"],
        ["bridge", "not JSON", "{not json"],
        ["portmap", "no name", '{"cniVersion":"1.0.0","type":"portmap"}'],
        ["host-local", "unsupported version", { ...good, cniVersion: "9.9.9" }],
      ];
      for (const [plugin, label, conf, args] of refused) {
        const base = { plugin, node, netns: pod, containerId: "c9", conf, args, path: "/nonexistent" };
        const add = await cni({ ...base, command: "ADD" });
        assert(add.code !== 0, `${plugin} ${label}: ADD refuses it`);
        const del = await cni({ ...base, command: "DEL" });
        assertEquals(del.code, 0, `${plugin} ${label}: DEL succeeds: ${del.stdout} ${del.stderr}`);
      }
      // An attachment made with a good config is removed by a DEL whose config ADD would refuse.
      const call = { plugin: "bridge", node, netns: pod, containerId: "c1" };
      await cniOk({ ...call, command: "ADD", conf: good });
      assertEquals(listFiles(`${d.path}/deln`).filter((f) => f.startsWith("10.")), ["10.97.1.2"]);
      const del = await cni({ ...call, command: "DEL", conf: { ...good, mtu: 5 }, args: "FOO=1" });
      assertEquals(del.code, 0, del.stdout);
      assertEquals(listFiles(`${d.path}/deln`).filter((f) => f.startsWith("10.")), [], "IP released");
      const links = await ipJson<J[]>(node, "link");
      assertEquals(links.filter((l) => String(l.ifname).startsWith("veth")), [], "host veth removed");
      // portmap (nftables): rules of a good ADD go with a DEL whose mappings ADD would refuse, and the
      // network's record chain with its last container.
      const nftConf = (maps: string) =>
        portmapConf(maps).replace('"backend":"iptables"', '"backend":"nftables"');
      const pm = { plugin: "portmap", node, netns: "/var/run/netns/pod", containerId: "c7" };
      await cniOk({ ...pm, command: "ADD", conf: nftConf(PORTMAP_BYTES[0][1]) });
      const nft = async () => (await nsRun(node, ["nft", "list", "table", "ip", "cni_hostport"])).stdout;
      assert((await nft()).includes("dnat to 10.244.1.5:80"), await nft());
      assert((await nft()).includes("chain network_cbr0"), await nft());
      const pdel = await cni({
        ...pm,
        command: "DEL",
        conf: nftConf('[{"hostPort":1,"containerPort":1,"protocol":"icmp"}]'),
      });
      assertEquals(pdel.code, 0, pdel.stdout);
      assert(!(await nft()).includes("dnat to"), await nft());
      assert(!(await nft()).includes("network_"), `no record chain left: ${await nft()}`);
    } finally {
      d.cleanup();
    }
  }));

/** Whether the installed reference speaks 1.1.0 (GC); Debian's 1.1.1 plugins stop at 1.0.0. */
const REF_GC = HAVE_REF && await refSpeaks11("portmap");

needsRoot.test({
  name: "cni GC: cni.dev/valid-attachments absent or null exits 0 (as the reference), nothing collected",
  fn: () =>
    withNetns(async (fx) => {
      const node = await fx.add("rgn");
      const d = tempDir();
      try {
        Deno.mkdirSync(`${d.path}/gcn`);
        Deno.writeTextFileSync(`${d.path}/gcn/10.96.1.2`, "keep\r\neth0");
        const base = {
          cniVersion: "1.1.0",
          name: "gcn",
          ipam: { type: "host-local", dataDir: d.path, ranges: [[{ subnet: "10.96.1.0/24" }]] },
        };
        for (const list of [undefined, null]) {
          for (const type of ["portmap", "host-local", "bridge"]) {
            const conf: J = { ...base, type, "cni.dev/valid-attachments": list };
            for (const isRef of REF_GC ? [true, false] : [false]) {
              const r = await cni({ plugin: type, command: "GC", node, conf, ref: isRef });
              assertEquals(r.code, 0, `${isRef ? "reference" : "ours"} ${type} GC with ${list}: ${r.stdout}`);
              if (isRef) Deno.writeTextFileSync(`${d.path}/gcn/10.96.1.2`, "keep\r\neth0");
            }
            assertEquals(
              listFiles(`${d.path}/gcn`).includes("10.96.1.2"),
              true,
              `ours ${type}: nothing released`,
            );
          }
        }
      } finally {
        d.cleanup();
      }
    }),
});
