import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../base/errors.ts";
import { parsePublish } from "./add_pod.ts";
import {
  type Conflist,
  conflistAdd,
  conflistDel,
  labConflist,
  pluginConf,
  type PluginRunner,
} from "./conflist.ts";

const RT = {
  containerId: "c1",
  netns: "/var/run/netns/p",
  ifname: "eth0",
  capabilityArgs: {
    portMappings: [{ hostPort: 18080, containerPort: 8080, protocol: "tcp" }],
    bandwidth: {},
  },
};

function recorder(results: Record<string, unknown>) {
  const calls: [string, string, Record<string, unknown>][] = [];
  const run: PluginRunner = (type, command, conf) => {
    calls.push([type, command, conf]);
    return Promise.resolve(command === "ADD" ? { ...results, from: type } : null);
  };
  return { calls, run };
}

Deno.test("conflist runtime: prevResult chaining, runtimeConfig from declared capabilities, DEL in reverse", async () => {
  const list = labConflist();
  const { calls, run } = recorder({ cniVersion: "0.3.1", ips: [{ address: "10.244.1.5/24" }] });
  const res = await conflistAdd(list, RT, run);
  assertEquals(res.from, "portmap");
  assertEquals(calls.map(([t, c]) => `${c} ${t}`), ["ADD flannel", "ADD portmap"]);
  assertEquals(calls[0][2].prevResult, undefined);
  assertEquals(calls[0][2].runtimeConfig, undefined, "flannel declares no capability");
  assertEquals(calls[1][2].prevResult, {
    cniVersion: "0.3.1",
    ips: [{ address: "10.244.1.5/24" }],
    from: "flannel",
  });
  assertEquals(
    calls[1][2].runtimeConfig,
    { portMappings: RT.capabilityArgs.portMappings },
    "only declared ones",
  );
  assertEquals([calls[1][2].name, calls[1][2].cniVersion], ["cbr0", "0.3.1"]);
  calls.length = 0;
  await conflistDel(list, RT, res, run);
  assertEquals(calls.map(([t, c]) => `${c} ${t}`), ["DEL portmap", "DEL flannel"]);
  assertEquals(calls[0][2].prevResult, undefined, "0.3.1: libcni passes no prevResult on DEL");
  calls.length = 0;
  const v1: Conflist = { ...list, cniVersion: "1.0.0" };
  await conflistDel(v1, RT, res, run);
  assertEquals(calls[0][2].prevResult, res, "from 0.4.0 the cached result");
  assertEquals(pluginConf(labConflist(true), labConflist(true).plugins[1], RT, null).backend, "nftables");
});

Deno.test("parsePublish: HOSTPORT:PODPORT[/tcp|udp]; bad values are usage errors naming --publish", () => {
  assertEquals(parsePublish("18080:8080"), { hostPort: 18080, containerPort: 8080, protocol: "tcp" });
  assertEquals(parsePublish("53:5353/udp"), { hostPort: 53, containerPort: 5353, protocol: "udp" });
  for (const bad of ["0:80", "80:65536", "80", "80:80/icmp", "a:b"]) {
    assertThrows(() => parsePublish(bad), UsageError, "--publish");
  }
});
