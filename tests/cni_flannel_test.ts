/**
 * The flannel plugin end to end, in a node netns with pod netns: subnet.env → pod with the right IP, MTU
 * and routes, the delegate config saved as flannel saves it, pods reach each other over cni0, CHECK,
 * STATUS (50 without subnet.env), GC, and DEL that cleans everything, also with the netns gone.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { cni, cniOk, listFiles, refSpeaks11, requireRefPlugins, tempDir, waitFor } from "./cni_helpers.ts";
import { ipJson, linkNames, nsRun, nsSh, withNetns } from "./netns.ts";

type J = Record<string, unknown>;

function flannelConf(dir: string, version = "0.3.1", extra: J = {}): J {
  return {
    cniVersion: version,
    name: "cbr0",
    type: "flannel",
    subnetFile: `${dir}/subnet.env`,
    dataDir: `${dir}/flannel`,
    ipam: { dataDir: `${dir}/networks` },
    delegate: { hairpinMode: true, isDefaultGateway: true },
    ...extra,
  };
}

function writeEnv(dir: string, masq = true) {
  Deno.writeTextFileSync(
    `${dir}/subnet.env`,
    `FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1410\nFLANNEL_IPMASQ=${masq}\n`,
  );
}

needsRoot.test("cni flannel: subnet.env to a working pod and back to nothing", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fln"), pod1 = await fx.add("flp"), pod2 = await fx.add("flp");
    const d = tempDir();
    try {
      writeEnv(d.path);
      const conf = flannelConf(d.path);
      const r1 = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod1,
        containerId: "p1",
        conf,
      });
      const r2 = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod2,
        containerId: "p2",
        conf,
      });
      assertEquals(r1!.cniVersion, "0.3.1");
      assertEquals(r1!.ips, [{
        version: "4",
        interface: 2,
        address: "10.244.7.2/24",
        gateway: "10.244.7.1",
      }]);
      assertEquals(r1!.routes, [{ dst: "10.244.0.0/16" }, { dst: "0.0.0.0/0", gw: "10.244.7.1" }]);
      assertEquals((r2!.ips as J[])[0].address, "10.244.7.3/24");
      // The saved delegate config is byte-for-byte what flannel's plugin writes (Go sorts map keys).
      assertEquals(
        Deno.readTextFileSync(`${d.path}/flannel/p1`),
        `{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"dataDir":"${d.path}/networks",` +
          `"ranges":[[{"subnet":"10.244.7.0/24"}]],"routes":[{"dst":"10.244.0.0/16"}],"type":"host-local"},` +
          `"isDefaultGateway":true,"isGateway":true,"mtu":1410,"name":"cbr0","type":"bridge"}`,
      );
      const eth0 = (await ipJson<J[]>(pod1, "addr", "show", "eth0"))[0];
      assertEquals(eth0.mtu, 1410);
      assertEquals(
        (eth0.addr_info as J[]).filter((a) => a.family === "inet").map((a) => `${a.local}/${a.prefixlen}`),
        ["10.244.7.2/24"],
      );
      const routes = (await ipJson<J[]>(pod1, "route")).map((r) => `${r.dst} ${r.gateway ?? "-"}`);
      assertEquals(routes.sort(), ["10.244.0.0/16 10.244.7.1", "10.244.7.0/24 -", "default 10.244.7.1"]);
      const br = (await ipJson<J[]>(node, "addr", "show", "cni0"))[0];
      assertEquals(br.mtu, 1410);
      assert((br.addr_info as J[]).some((a) => a.local === "10.244.7.1" && a.prefixlen === 24));
      assertEquals((await nsSh(node, "cat", "/proc/sys/net/ipv4/ip_forward")).trim(), "1");
      // Pod to pod over the bridge, and pod to gateway.
      const ping = await nsRun(pod1, ["ping", "-c", "1", "-W", "5", "10.244.7.3"]);
      assertEquals(ping.code, 0, ping.stdout + ping.stderr);
      const gw = await nsRun(pod2, ["ping", "-c", "1", "-W", "5", "10.244.7.1"]);
      assertEquals(gw.code, 0, gw.stdout + gw.stderr);

      for (const [pod, cid] of [[pod1, "p1"], [pod2, "p2"]]) {
        await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: cid, conf });
        await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: cid, conf }); // idempotent
        await cniOk({ plugin: "flannel", command: "DEL", node, containerId: cid, conf }); // CNI_NETNS empty
      }
      assertEquals(listFiles(`${d.path}/flannel`), []);
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), []);
      assertEquals(await linkNames(pod1), ["lo"]);
      assertEquals((await linkNames(node)).sort(), ["cni0", "lo"]);
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test("cni flannel 1.1.0: CHECK, STATUS, GC, and DEL with the netns gone releases IP and masquerade", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fln"), pod1 = await fx.add("flp"), pod2 = await fx.add("flp");
    const d = tempDir();
    try {
      writeEnv(d.path, false); // the daemon does not masquerade: the bridge must (ipMasq true)
      const conf = flannelConf(d.path, "1.1.0");
      const r1 = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod1,
        containerId: "q1",
        conf,
      });
      await cniOk({ plugin: "flannel", command: "ADD", node, netns: pod2, containerId: "q2", conf });
      assertEquals((r1!.interfaces as J[]).map((i) => i.mtu), [1410, 1410, 1410]);
      const chk = await cni({
        plugin: "flannel",
        command: "CHECK",
        node,
        netns: pod1,
        containerId: "q1",
        conf: { ...conf, prevResult: r1 },
      });
      assertEquals(chk.code, 0, chk.stdout);
      // As flannel's plugin, CHECK succeeds (flannel's CHECK is a no-op), even for a container it never saw.
      await nsSh(pod1, "ip", "route", "del", "10.244.0.0/16");
      for (const containerId of ["q1", "never-added"]) {
        const again = await cni({
          plugin: "flannel",
          command: "CHECK",
          node,
          netns: pod1,
          containerId,
          conf: { ...conf, prevResult: r1 },
        });
        assertEquals(again.code, 0, again.stdout);
      }
      await nsSh(pod1, "ip", "route", "add", "10.244.0.0/16", "via", "10.244.7.1");
      assertEquals((await cni({ plugin: "flannel", command: "STATUS", node, conf })).code, 0);
      // GC without an attachment list does nothing and succeeds (it must not fail on a healthy node).
      await cniOk({ plugin: "flannel", command: "GC", node, conf });
      assertEquals(listFiles(`${d.path}/flannel`).filter((f) => !f.startsWith(".locks/")).sort(), [
        "q1",
        "q2",
      ]);
      const nat = await nsSh(node, "iptables-save", "-t", "nat");
      assertEquals(nat.split("\n").filter((l) => l.startsWith("-A POSTROUTING")).length, 2);

      // The pod netns disappears before DEL (the reference leaks the masquerade rules here).
      const path = `/var/run/netns/${pod1}`;
      await new Deno.Command("ip", { args: ["netns", "del", pod1] }).output();
      await cniOk({ plugin: "flannel", command: "DEL", node, netns: path, containerId: "q1", conf });
      const nat2 = await nsSh(node, "iptables-save", "-t", "nat");
      assertEquals(nat2.split("\n").filter((l) => l.startsWith("-A POSTROUTING")).length, 1);
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), ["10.244.7.3"]);

      // GC with no valid attachment removes q2's IP, saved config and masquerade chain.
      await cniOk({
        plugin: "flannel",
        command: "GC",
        node,
        conf: { ...conf, "cni.dev/valid-attachments": [] },
      });
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), []);
      assertEquals(listFiles(`${d.path}/flannel`), []);
      const nat3 = await nsSh(node, "iptables-save", "-t", "nat");
      assertEquals(nat3.split("\n").filter((l) => l.includes("CNI-")), []);
      // q2's sandbox is gone too (GC runs after the runtime forgot it): nothing of it is left on the node.
      await new Deno.Command("ip", { args: ["netns", "del", pod2] }).output();
      const nodeLinks = async () => (await linkNames(node)).sort().join(",");
      assert(
        await waitFor(async () => (await nodeLinks()) === "cni0,lo"),
        `node links: ${await nodeLinks()}`,
      );
      const pod3 = await fx.add("flp");

      // subnet.env gone: STATUS says 50, ADD says which file.
      Deno.removeSync(`${d.path}/subnet.env`);
      const st = await cni({ plugin: "flannel", command: "STATUS", node, conf });
      assertEquals([st.code, st.json?.code], [1, 50]);
      const add = await cni({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod2,
        containerId: "q3",
        conf,
      });
      assertEquals(add.json?.code, 7);
      assertEquals(
        add.json?.msg,
        `loadFlannelSubnetEnv failed: open ${d.path}/subnet.env: no such file or directory`,
      );
      assertEquals(await linkNames(pod3), ["lo"]);
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test({
  name: "cni flannel: a delegate type that is not ours is exec'd from CNI_PATH (reference ptp)",
  ignore: !requireRefPlugins(["ptp", "host-local"]),
}, async () => {
  await withNetns(async (fx) => {
    const node = await fx.add("fln"), pod = await fx.add("flp");
    const d = tempDir();
    try {
      writeEnv(d.path);
      const conf = flannelConf(d.path, "1.0.0", { delegate: { type: "ptp" } });
      const r = await cniOk({ plugin: "flannel", command: "ADD", node, netns: pod, containerId: "x1", conf });
      assertEquals((r!.ips as J[])[0].address, "10.244.7.2/24");
      assertEquals(JSON.parse(Deno.readTextFileSync(`${d.path}/flannel/x1`)).type, "ptp");
      const eth0 = (await ipJson<J[]>(pod, "addr", "show", "eth0"))[0];
      assertEquals(eth0.mtu, 1410);
      await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: "x1", conf });
      assertEquals(await linkNames(pod), ["lo"]);
      assertEquals(listFiles(`${d.path}/flannel`), []);
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), []);
    } finally {
      d.cleanup();
    }
  });
});

needsRoot.test("cni loopback: same result as the reference; DEL sets lo down; netns gone is fine", () =>
  withNetns(async (fx) => {
    const a = await fx.add("lpa"), b = await fx.add("lpb");
    await nsSh(a, "ip", "link", "set", "lo", "down");
    await nsSh(b, "ip", "link", "set", "lo", "down");
    const conf = { cniVersion: "1.0.0", name: "lo", type: "loopback" };
    const ours = await cniOk({
      plugin: "loopback",
      command: "ADD",
      netns: a,
      containerId: "l1",
      ifname: "lo",
      conf,
    });
    const ref = await cniOk({
      plugin: "loopback",
      command: "ADD",
      netns: b,
      containerId: "l1",
      ifname: "lo",
      conf,
      ref: true,
    });
    const norm = (x: J | null) => JSON.stringify(x).replaceAll(a, "NS").replaceAll(b, "NS");
    // v1.10 prints a 1.x result's keys sorted, as ours; Debian's 1.1.1 in Go struct order.
    if (await refSpeaks11("loopback")) assertEquals(norm(ours), norm(ref));
    else assertEquals(JSON.parse(norm(ours)), JSON.parse(norm(ref)));
    assertEquals((await ipJson<J[]>(a, "link", "show", "lo"))[0].operstate, "UNKNOWN");
    assert(((await ipJson<J[]>(a, "link", "show", "lo"))[0].flags as string[]).includes("UP"));
    await cniOk({ plugin: "loopback", command: "DEL", netns: a, containerId: "l1", ifname: "lo", conf });
    assert(!((await ipJson<J[]>(a, "link", "show", "lo"))[0].flags as string[]).includes("UP"));
    const gone = await cni({
      plugin: "loopback",
      command: "DEL",
      netns: "/var/run/netns/no-such-ns",
      containerId: "l1",
      ifname: "lo",
      conf,
    });
    assertEquals([gone.code, gone.stdout], [0, ""]);
  }));

needsRoot.test("cni flannel dual stack: IPv4 and IPv6 from subnet.env, no DAD wait in the pod", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fln"), pod = await fx.add("flp");
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.9.1/24\nFLANNEL_IPV6_NETWORK=fd00:10:244::/56\n" +
          "FLANNEL_IPV6_SUBNET=fd00:10:244:9::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n",
      );
      const conf = flannelConf(d.path, "1.0.0");
      const r = await cniOk({ plugin: "flannel", command: "ADD", node, netns: pod, containerId: "d1", conf });
      assertEquals((r!.ips as J[]).map((i) => i.address), ["10.244.9.2/24", "fd00:10:244:9::2/64"]);
      const v6 = ((await ipJson<J[]>(pod, "-6", "addr", "show", "eth0"))[0].addr_info as J[])
        .filter((a) => a.scope === "global");
      assertEquals(v6.map((a) => [a.local, a.tentative ?? false]), [["fd00:10:244:9::2", false]]);
      const routes6 = (await ipJson<J[]>(pod, "-6", "route")).map((x) => `${x.dst} ${x.gateway ?? "-"}`);
      assert(routes6.includes("fd00:10:244::/56 fd00:10:244:9::1"), routes6.join(", "));
      assert(routes6.includes("default fd00:10:244:9::1"), routes6.join(", "));
      const nat6 = await nsSh(node, "ip6tables-save", "-t", "nat");
      assert(nat6.includes("! -d ff00::/8"), "IPv6 masquerade chain");
      await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: "d1", conf });
      assertEquals((await nsSh(node, "ip6tables-save", "-t", "nat")).includes("CNI-"), false);
      assertEquals(
        listFiles(`${d.path}/networks/cbr0`).filter((f) => /^[\d:f]/.test(f) && !f.startsWith("last")),
        [],
      );
    } finally {
      d.cleanup();
    }
  }));

needsRoot.test("cni flannel IPv6-only: the pod gets only an IPv6 address, routes and masquerade", () =>
  withNetns(async (fx) => {
    const node = await fx.add("f6n"), pod = await fx.add("f6p");
    const d = tempDir();
    try {
      Deno.writeTextFileSync(
        `${d.path}/subnet.env`,
        "FLANNEL_IPV6_NETWORK=fc00:244::/48\nFLANNEL_IPV6_SUBNET=fc00:244:0:9::1/64\nFLANNEL_MTU=1430\n" +
          "FLANNEL_IPMASQ=false\n",
      );
      const conf = flannelConf(d.path, "1.0.0");
      const r = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod,
        containerId: "v6o",
        conf,
      });
      assertEquals((r!.ips as J[]).map((i) => i.address), ["fc00:244:0:9::2/64"]);
      assertEquals(
        ((await ipJson<J[]>(pod, "-4", "addr", "show", "eth0"))[0]?.addr_info as J[] ?? []).length,
        0,
      );
      const routes6 = (await ipJson<J[]>(pod, "-6", "route")).map((x) => `${x.dst} ${x.gateway ?? "-"}`);
      assert(routes6.includes("fc00:244::/48 fc00:244:0:9::1"), routes6.join(", "));
      assertEquals((await ipJson<J[]>(pod, "-6", "link", "show", "eth0"))[0].mtu, 1430);
      assertEquals((await nsSh(node, "cat", "/proc/sys/net/ipv6/conf/all/forwarding")).trim(), "1");
      assert((await nsSh(node, "ip6tables-save", "-t", "nat")).includes("! -d ff00::/8"), "IPv6 masquerade");
      await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: "v6o", conf });
      assertEquals((await nsSh(node, "ip6tables-save", "-t", "nat")).includes("CNI-"), false);
    } finally {
      d.cleanup();
    }
  }));
needsRoot.test("cni flannel: runtimeConfig goes to the delegate as flannel's plugin does (static IP and MAC)", () =>
  withNetns(async (fx) => {
    const node = await fx.add("fln"), pod = await fx.add("flp");
    const d = tempDir();
    try {
      writeEnv(d.path);
      const runtimeConfig = {
        ips: ["10.244.7.77/24"],
        mac: "0e:11:22:33:44:55",
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
      };
      const conf = flannelConf(d.path, "1.0.0", { runtimeConfig });
      const r = await cniOk({
        plugin: "flannel",
        command: "ADD",
        node,
        netns: pod,
        containerId: "rc1",
        conf,
      });
      assertEquals((r!.ips as J[]).map((i) => i.address), ["10.244.7.77/24"]);
      const eth0 = (await ipJson<J[]>(pod, "link", "show", "eth0"))[0];
      assertEquals(eth0.address, "0e:11:22:33:44:55");
      // Saved for DEL with the runtimeConfig in it (keys sorted as Go marshals the map).
      const saved = JSON.parse(Deno.readTextFileSync(`${d.path}/flannel/rc1`));
      assertEquals(saved.runtimeConfig, runtimeConfig);
      assertEquals(Object.keys(saved), [...Object.keys(saved)].sort());
      await cniOk({ plugin: "flannel", command: "DEL", node, netns: pod, containerId: "rc1", conf });
      assertEquals(listFiles(`${d.path}/networks/cbr0`).filter((f) => /^\d/.test(f)), []);
    } finally {
      d.cleanup();
    }
  }));
