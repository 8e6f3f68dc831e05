/**
 * Bad input: environment, JSON, versions, configs, subnet.env, exhausted ranges, duplicates, CNI_ARGS,
 * kernel conflicts. Each case must give the spec error JSON with the right code on stdout, exit 1, and
 * leave no partial state (links, IP files, index entries, saved configs, nat rules) behind.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, type CniCall, cniOk, listFiles, pool, tempDir } from "./cni_helpers.ts";
import { ipJson, linkNames, nsSh, withNetns } from "./netns.ts";

type J = Record<string, unknown>;

interface Case {
  name: string;
  plugin?: string;
  command?: string;
  env?: Record<string, string | null>;
  args?: string;
  ifname?: string;
  containerId?: string;
  /** Config object, or raw stdin text. */
  conf: J | string;
  /** Pod netns override (a path). */
  netns?: string;
  code: number;
  /** Substring expected in msg or details. */
  says?: string;
  /** How the wire msg starts: upstream's wording, which users paste into search engines and kubelet events show. */
  msg?: string;
}

needsRoot.test("cni bad-input matrix: right error code, no partial state", () =>
  withNetns(async (fx) => {
    const node = await fx.add("bin"), pod = await fx.add("bip"), pod0 = await fx.add("bip");
    const d = tempDir();
    try {
      const dir = d.path;
      const env = (masq = true) =>
        `FLANNEL_NETWORK=10.250.0.0/16\nFLANNEL_SUBNET=10.250.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=${!masq}\n`;
      Deno.writeTextFileSync(`${dir}/subnet.env`, env());
      Deno.writeTextFileSync(
        `${dir}/nomtu.env`,
        "FLANNEL_NETWORK=10.250.0.0/16\nFLANNEL_SUBNET=10.250.1.1/24\nFLANNEL_IPMASQ=true\n",
      );
      Deno.writeTextFileSync(`${dir}/badsub.env`, env().replace("10.250.1.1/24", "10.250.1.1/99"));
      const ipam = (x: J = {}) => ({
        type: "host-local",
        dataDir: `${dir}/net`,
        ranges: [[{ subnet: "10.251.0.0/24" }]],
        ...x,
      });
      const hl = (x: J = {}, top: J = {}): J => ({
        cniVersion: "1.0.0",
        name: "bad",
        type: "host-local",
        ipam: ipam(x),
        ...top,
      });
      const br = (x: J = {}): J => ({
        cniVersion: "1.0.0",
        name: "bad",
        type: "bridge",
        bridge: "cni0",
        isGateway: true,
        ipMasq: true,
        ipam: ipam(),
        ...x,
      });
      const fl = (x: J = {}): J => ({
        cniVersion: "0.3.1",
        name: "bad",
        type: "flannel",
        subnetFile: `${dir}/subnet.env`,
        dataDir: `${dir}/flannel`,
        ipam: { dataDir: `${dir}/net` },
        ...x,
      });
      // Kernel fixtures for conflicts: a non-bridge link (a veth) named like a bridge, a bridge with another
      // address, an interface in the pod that ADD would create.
      await nsSh(node, "ip", "link", "add", "notabr", "type", "veth", "peer", "name", "notabrp");
      await nsSh(node, "ip", "link", "add", "otherbr", "type", "bridge");
      await nsSh(node, "ip", "addr", "add", "10.77.0.1/24", "dev", "otherbr");
      await nsSh(pod, "ip", "link", "add", "eth9", "type", "veth", "peer", "name", "eth9p");
      // One real pod so duplicates and an exhausted range can be tried.
      await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod0,
        containerId: "dup1",
        conf: fl(),
      });
      await cniOk({
        plugin: "host-local",
        command: "ADD",
        containerId: "full1",
        netns: "/x",
        conf: hl({ ranges: [[{ subnet: "10.252.0.0/30" }]] }, { name: "tiny" }),
      });

      const cases: Case[] = [
        // environment
        { name: "no CNI_COMMAND", env: { CNI_COMMAND: null }, conf: hl(), code: 4, says: "CNI_COMMAND" },
        { name: "unknown CNI_COMMAND", command: "FROB", conf: hl(), code: 4, says: "unknown CNI_COMMAND" },
        { name: "ADD without CNI_CONTAINERID", env: { CNI_CONTAINERID: null }, conf: hl(), code: 4 },
        { name: "ADD without CNI_NETNS", env: { CNI_NETNS: "" }, conf: hl(), code: 4, says: "CNI_NETNS" },
        { name: "ADD without CNI_IFNAME", env: { CNI_IFNAME: "" }, conf: hl(), code: 4, says: "CNI_IFNAME" },
        { name: "ADD without CNI_PATH", env: { CNI_PATH: null }, conf: hl(), code: 4, says: "CNI_PATH" },
        {
          name: "DEL without CNI_CONTAINERID",
          command: "DEL",
          env: { CNI_CONTAINERID: "" },
          conf: hl(),
          code: 4,
        },
        { name: "DEL without CNI_IFNAME", command: "DEL", env: { CNI_IFNAME: "" }, conf: hl(), code: 4 },
        { name: "CHECK without CNI_NETNS", command: "CHECK", env: { CNI_NETNS: "" }, conf: hl(), code: 4 },
        {
          name: "GC without CNI_PATH",
          command: "GC",
          env: { CNI_PATH: null },
          conf: hl({}, { cniVersion: "1.1.0" }),
          code: 4,
        },
        { name: "STATUS without CNI_PATH", command: "STATUS", env: { CNI_PATH: null }, conf: hl(), code: 4 },
        { name: "container ID with /", containerId: "a/b", conf: hl(), code: 4, says: "containerID" },
        { name: "container ID starting with -", containerId: "-abc", conf: hl(), code: 4 },
        { name: "ifname too long", ifname: "eth0123456789012", conf: hl(), code: 4, says: "too long" },
        { name: "ifname .", ifname: ".", conf: hl(), code: 4 },
        { name: "ifname ..", ifname: "..", conf: hl(), code: 4 },
        { name: "ifname with :", ifname: "eth:0", conf: hl(), code: 4 },
        { name: "ifname with space", ifname: "eth 0", conf: hl(), code: 4 },
        { name: "ifname with /", ifname: "eth/0", conf: hl(), code: 4 },
        { name: "CNI_ARGS unknown key (host-local)", args: "FOO=bar", conf: hl(), code: 4, says: "FOO" },
        {
          name: "CNI_ARGS unknown key (bridge)",
          plugin: "bridge",
          args: "K8S_POD_NAME=x",
          conf: br(),
          code: 4,
        },
        { name: "CNI_ARGS unknown key (flannel)", plugin: "flannel", args: "BAR=1", conf: fl(), code: 4 },
        { name: "CNI_ARGS pair without =", args: "IP", conf: hl(), code: 4, says: "invalid pair" },
        { name: "CNI_ARGS bad IgnoreUnknown", args: "IgnoreUnknown=maybe;X=1", conf: hl(), code: 4 },
        { name: "CNI_ARGS IP not an IP", args: "IP=10.251.0.999", conf: hl(), code: 4 },
        // JSON and versions
        { name: "empty stdin", conf: "", code: 6 },
        { name: "not JSON", conf: "{name: bad", code: 6 },
        { name: "JSON array", conf: "[1,2]", code: 6 },
        { name: "JSON null", conf: "null", code: 6 },
        { name: "name missing", conf: { cniVersion: "1.0.0", type: "host-local", ipam: ipam() }, code: 7 },
        { name: "name empty", conf: hl({}, { name: "" }), code: 7 },
        { name: "name with space", conf: hl({}, { name: "a b" }), code: 7, says: "network name" },
        { name: "name a number", conf: hl({}, { name: 5 }), code: 6 },
        { name: "cniVersion 0.5.0", conf: hl({}, { cniVersion: "0.5.0" }), code: 1, says: "incompatible" },
        { name: "cniVersion 2.0.0", conf: hl({}, { cniVersion: "2.0.0" }), code: 1 },
        { name: "cniVersion a number", conf: hl({}, { cniVersion: 1 }), code: 6 },
        { name: "CHECK with 0.3.1", command: "CHECK", conf: hl({}, { cniVersion: "0.3.1" }), code: 1 },
        { name: "STATUS with 1.0.0", command: "STATUS", conf: hl(), code: 1 },
        { name: "GC with 0.4.0", command: "GC", conf: hl({}, { cniVersion: "0.4.0" }), code: 1 },
        {
          name: "GC with valid-attachments not a list (host-local)",
          command: "GC",
          conf: hl({}, { cniVersion: "1.1.0", "cni.dev/valid-attachments": "x" }),
          code: 7,
          says: "valid-attachments",
        },
        // GC without valid-attachments exits 0 and collects nothing (tests/cni_runtime_input_test.ts).
        // flannel's GC without valid-attachments is a no-op success, as flannel's (tests/cni_flannel_test.ts).
        // host-local config
        {
          name: "ipam missing",
          conf: { cniVersion: "1.0.0", name: "bad", type: "host-local" },
          code: 7,
          says: "ipam",
        },
        { name: "no ranges", conf: hl({ ranges: undefined }), code: 7, says: "no IP ranges" },
        { name: "subnet not a CIDR", conf: hl({ ranges: [[{ subnet: "10.0.0.0" }]] }), code: 7 },
        {
          name: "subnet /31",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/31" }]] }),
          code: 7,
          says: "too small",
        },
        {
          name: "subnet host bits",
          conf: hl({ ranges: [[{ subnet: "10.0.0.1/24" }]] }),
          code: 7,
          says: "host bits",
        },
        {
          name: "rangeStart outside",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24", rangeStart: "10.0.1.5" }]] }),
          code: 7,
          says: "RangeStart",
        },
        {
          name: "rangeEnd outside",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24", rangeEnd: "10.1.0.5" }]] }),
          code: 7,
        },
        {
          name: "rangeStart after rangeEnd",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24", rangeStart: "10.0.0.9", rangeEnd: "10.0.0.5" }]] }),
          code: 7,
        },
        {
          name: "overlapping range sets",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24" }], [{ subnet: "10.0.0.0/25" }]] }),
          code: 7,
          says: "overlaps",
        },
        {
          name: "mixed families in a set",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24" }, { subnet: "fd00::/64" }]] }),
          code: 7,
          says: "mixed",
        },
        { name: "route dst not a CIDR", conf: hl({ routes: [{ dst: "nowhere" }] }), code: 7 },
        {
          name: "two v4 sets with 0.2.0",
          conf: hl({ ranges: [[{ subnet: "10.0.0.0/24" }], [{ subnet: "10.0.1.0/24" }]] }, {
            cniVersion: "0.2.0",
          }),
          code: 7,
        },
        {
          name: "requested IP outside every range",
          conf: hl({}, { args: { cni: { ips: ["10.9.9.9"] } } }),
          code: 100,
          says: "10.9.9.9",
        },
        {
          name: "requested IP is the gateway",
          args: "IP=10.251.0.1",
          conf: hl(),
          code: 100,
          says: "gateway",
          msg: "failed to allocate for range 0: requested ip 10.251.0.1 is subnet's gateway",
        },
        {
          name: "exhausted range",
          conf: hl({ ranges: [[{ subnet: "10.252.0.0/30" }]] }, { name: "tiny" }),
          code: 100,
          msg:
            "failed to allocate for range 0: no IP addresses available in range set: 10.252.0.1-10.252.0.2",
        },
        // bridge
        {
          name: "bridge name too long",
          plugin: "bridge",
          conf: br({ bridge: "averyveryverylongname" }),
          code: 7,
        },
        { name: "bridge mtu a string", plugin: "bridge", conf: br({ mtu: "abc" }), code: 7 },
        { name: "bridge mtu 20", plugin: "bridge", conf: br({ mtu: 20 }), code: 7 },
        {
          name: "hairpin and promisc",
          plugin: "bridge",
          conf: br({ hairpinMode: true, promiscMode: true }),
          code: 7,
        },
        { name: "vlan", plugin: "bridge", conf: br({ vlan: 100 }), code: 2 },
        { name: "isGateway a string", plugin: "bridge", conf: br({ isGateway: "yes" }), code: 7 },
        { name: "MAC not a MAC", plugin: "bridge", args: "MAC=zz", conf: br(), code: 7 },
        {
          name: "bridge is a dummy",
          plugin: "bridge",
          conf: br({ bridge: "notabr" }),
          code: 7,
          says: "not a bridge",
        },
        {
          name: "bridge has another address",
          plugin: "bridge",
          conf: br({ bridge: "otherbr" }),
          code: 7,
          msg: 'failed to set bridge addr: "otherbr" already has an IP address different from 10.251.0.1/24',
        },
        {
          name: "pod netns missing",
          plugin: "bridge",
          netns: "/var/run/netns/does-not-exist",
          conf: br(),
          code: 3,
        },
        { name: "ifname exists in the pod", plugin: "bridge", ifname: "eth9", conf: br(), code: 101 },
        {
          name: "ipam type not in CNI_PATH",
          plugin: "bridge",
          conf: br({ ipam: { type: "no-such-ipam" } }),
          code: 102,
        },
        // flannel
        {
          name: "duplicate ADD",
          plugin: "flannel",
          containerId: "dup1",
          ifname: "eth0",
          netns: `/var/run/netns/${pod0}`,
          conf: fl(),
          code: 101,
          says: "already exists",
          msg: "failed to delegate add: ",
        },
        {
          name: "duplicate host-local ADD: IPAM refuses",
          plugin: "host-local",
          containerId: "full1",
          ifname: "eth0",
          conf: hl({ ranges: [[{ subnet: "10.252.0.0/30" }]] }, { name: "tiny" }),
          code: 101,
          says: "duplicate allocation",
        },
        {
          name: "subnet.env missing",
          plugin: "flannel",
          conf: fl({ subnetFile: `${dir}/none.env` }),
          code: 7,
          msg: `loadFlannelSubnetEnv failed: open ${dir}/none.env: no such file or directory`,
        },
        {
          name: "subnet.env lacks FLANNEL_MTU",
          plugin: "flannel",
          conf: fl({ subnetFile: `${dir}/nomtu.env` }),
          code: 7,
          msg: `loadFlannelSubnetEnv failed: ${dir}/nomtu.env is missing FLANNEL_MTU`,
        },
        {
          name: "subnet.env bad FLANNEL_SUBNET",
          plugin: "flannel",
          conf: fl({ subnetFile: `${dir}/badsub.env` }),
          code: 7,
          says: "FLANNEL_SUBNET",
        },
        { name: "delegate with name", plugin: "flannel", conf: fl({ delegate: { name: "x" } }), code: 7 },
        { name: "delegate with ipam", plugin: "flannel", conf: fl({ delegate: { ipam: {} } }), code: 7 },
        { name: "delegate type a number", plugin: "flannel", conf: fl({ delegate: { type: 3 } }), code: 7 },
        {
          name: "delegate type unknown",
          plugin: "flannel",
          conf: fl({ delegate: { type: "nope" } }),
          code: 102,
        },
        { name: "subnetFile a number", plugin: "flannel", conf: fl({ subnetFile: 1 }), code: 7 },
        {
          name: "STATUS without subnet.env",
          plugin: "flannel",
          command: "STATUS",
          conf: fl({ cniVersion: "1.1.0", subnetFile: `${dir}/none.env` }),
          code: 50,
        },
        // loopback
        {
          name: "loopback netns missing",
          plugin: "loopback",
          netns: "/var/run/netns/does-not-exist",
          conf: hl(),
          code: 3,
        },
      ];
      assert(cases.length >= 50, `${cases.length} cases`);

      const snapshot = async () => ({
        node: (await linkNames(node)).sort(),
        pod: (await linkNames(pod)).sort(),
        addrs: (await ipJson<J[]>(node, "-4", "addr")).map((l) => JSON.stringify(l.addr_info)).sort(),
        files: listFiles(dir),
        nat: (await nsSh(node, "iptables-save", "-t", "nat")).split("\n").filter((l) => l.startsWith("-A")),
      });
      const before = await snapshot();
      const failures: string[] = [];
      // Cases run 4 at a time (each with its own container ID and ifname so they cannot collide); the state is compared
      // once all have run: any case that left something behind shows up there.
      await pool(cases, 4, async (c, i) => {
        const call: CniCall = {
          plugin: c.plugin ?? "host-local",
          command: c.command ?? "ADD",
          node,
          netns: c.netns ?? pod,
          containerId: c.containerId ?? `bad${i}`,
          // Its own interface name too: cases run concurrently in one pod netns, and a bridge case that gets as
          // far as making its veth (then undoing it) must not make another see "already exists".
          ifname: c.ifname ?? `eth${i}`,
          args: c.args,
          conf: c.conf,
          env: c.env,
        };
        const r = await cni(call);
        const j = r.json ?? {};
        const text = `${j.msg} ${j.details}`;
        if (
          r.code !== 1 || j.code !== c.code || typeof j.cniVersion !== "string" || typeof j.msg !== "string"
        ) {
          failures.push(`${c.name}: exit ${r.code}, got ${r.stdout.trim()} (want code ${c.code})`);
        } else if (c.says && !text.includes(c.says)) {
          failures.push(`${c.name}: message ${JSON.stringify(text)} lacks ${JSON.stringify(c.says)}`);
        } else if (c.msg && !String(j.msg).startsWith(c.msg)) {
          failures.push(`${c.name}: msg ${JSON.stringify(j.msg)} does not start ${JSON.stringify(c.msg)}`);
        }
      });
      assertEquals(await snapshot(), before, "no state left behind");
      assertEquals(failures, []);
    } finally {
      d.cleanup();
    }
  }));
