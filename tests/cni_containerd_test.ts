/**
 * Our plugins under a real runtime: containerd 1.6 (Debian) in a node namespace, driven through CRI by
 * crictl, on the flannel conflist (flannel → bridge → host-local, then portmap) in dual stack. containerd
 * sends go-cni's untagged `HostPort` port mappings: a pod with a hostPort must come up and be reachable from
 * another namespace through the hostPort; pods ping each other in both families; a sandbox whose ADD fails
 * (portmap refuses its hostIP) leaves nothing (veth, IP, saved config, rules); stopp + rmp leave nothing;
 * 20 sandboxes in parallel; `flanctl doctor` asks the runtime over CRI, is clean with live pods and names a
 * leaked IP and saved config of a sandbox the runtime does not have.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { listFiles, pool, tempDir, waitFor } from "./cni_helpers.ts";
import { flanctl, ipJson, nsRun, sh, withNetns } from "./netns.ts";
import { peerPath, requirePeers } from "./peers.ts";
import { PLUGINS } from "../lib/cni/plugins.ts";
import { flanctlCommand } from "../lib/lab/proc.ts";
import { earlyDelSh, shQuote } from "../lib/cni/launch.ts";
import { DELETED_DIR_ENV } from "../lib/cni/deleted.ts";
import { earlyAddSh } from "../lib/cni/early_add.ts";
import {
  buildSandboxImage,
  containerdPaths,
  crictl,
  listSandboxes,
  missingRuntime,
  podSandboxConfig,
  removePodSandbox,
  runPodSandbox,
  startContainerd,
  stopContainerd,
} from "../lib/lab/containerd.ts";

// install.sh --dev's peers (under CI a missing one fails the suite); crictl of the pinned version.
const HAVE = requirePeers(["containerd", "ctr", "runc", "crictl", "busybox"]);
if (HAVE) Deno.env.set("FLANCTL_PEER_CRICTL", peerPath("crictl"));
const MISSING = HAVE ? missingRuntime() : ["peers"];

type J = Record<string, unknown>;

/** The node's files: plugins (launchers running this checkout), conflist, subnet.env, data dirs. */
function nodeFiles(d: string): { bin: string; conf: string } {
  const bin = `${d}/cni-bin`, conf = `${d}/net.d`;
  Deno.mkdirSync(bin, { recursive: true });
  Deno.mkdirSync(conf, { recursive: true });
  const cmd = flanctlCommand().map(shQuote).join(" ");
  // As the installed launchers: a repeated DEL and portmap's ADD without port mappings answered before Deno
  // starts (lib/cni/deleted.ts, lib/cni/early_add.ts); each start is logged in <d>/starts.
  for (const name of Object.keys(PLUGINS)) {
    const start = `echo "\${CNI_COMMAND:-} ${name}" >>${shQuote(`${d}/starts`)}; ` +
      `${DELETED_DIR_ENV}=${shQuote(`${d}/deleted`)} FLANCTL_ARGV0=${name} exec ${cmd} "$@"`;
    Deno.writeTextFileSync(
      `${bin}/${name}`,
      `#!/bin/sh\n${earlyDelSh(`${d}/deleted`)}\n${earlyAddSh(`${d}/deleted`, start)}\n${start}\n`,
      { mode: 0o755 },
    );
  }
  Deno.writeTextFileSync(
    `${d}/subnet.env`,
    "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.9.1/24\nFLANNEL_IPV6_NETWORK=fd44::/56\n" +
      "FLANNEL_IPV6_SUBNET=fd44:0:0:9::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
  );
  Deno.writeTextFileSync(
    `${conf}/10-flannel.conflist`,
    JSON.stringify({
      name: "cbr0",
      cniVersion: "1.0.0",
      plugins: [
        {
          type: "flannel",
          subnetFile: `${d}/subnet.env`,
          dataDir: `${d}/flannel`,
          ipam: { dataDir: `${d}/networks` },
          delegate: { hairpinMode: true, isDefaultGateway: true },
        },
        { type: "portmap", capabilities: { portMappings: true }, backend: "iptables" },
      ],
    }),
  );
  return { bin, conf };
}

async function inspect(socket: string, id: string): Promise<{ pid: number; ips: string[] }> {
  const r = await crictl(socket, ["inspectp", "-o", "json", id]);
  assertEquals(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as {
    status: { network: { ip: string; additionalIps?: { ip: string }[] } };
    info: { pid: number };
  };
  return {
    pid: j.info.pid,
    ips: [j.status.network.ip, ...(j.status.network.additionalIps ?? []).map((x) => x.ip)],
  };
}

/** What a pod leaves on the node: host veths on cni0, IP files, saved configs, DNAT chains. */
async function leftovers(node: string, d: string) {
  const veths = (await ipJson<J[]>(node, "link", "show", "master", "cni0").catch(() => [])).map((l) =>
    l.ifname
  );
  const nat = (await nsRun(node, ["iptables-save", "-t", "nat"])).stdout.split("\n")
    .filter((l) => l.startsWith(":CNI-DN-") || l.includes("--dport 18"));
  return {
    veths: veths.length,
    ips: listFiles(`${d}/networks`).filter((f) => /\/[0-9a-f.:]+$/.test(f) && !f.includes("last_reserved"))
      .length,
    saved: listFiles(`${d}/flannel`).filter((f) => !f.startsWith(".") && !f.includes("/")).length,
    nat: nat.length,
  };
}

async function doctorSandboxes(node: string, socket: string, d: string): Promise<J> {
  const r = await flanctl(
    [
      "doctor",
      "--netns",
      node,
      "--cri-socket",
      socket,
      "--cni-data-dir",
      `${d}/networks`,
      "--flannel-data-dir",
      `${d}/flannel`,
      "--subnet-file",
      `${d}/subnet.env`,
      "-o",
      "json",
    ],
  );
  const rep = JSON.parse(r.stdout) as { checks: J[] };
  return rep.checks.find((c) => c.id === "cri-sandboxes")!;
}

needsRoot.test({
  name:
    "cni under containerd: hostPort pods, dual-stack ping, failed ADD and stopp/rmp leave nothing, doctor",
  ignore: MISSING.length > 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withNetns(async (fx) => {
      const node = await fx.add("ctn"), client = await fx.add("ctc");
      const d = tempDir();
      const p = containerdPaths(`${d.path}/containerd`);
      let pid = 0;
      let httpd: Deno.ChildProcess | undefined;
      try {
        // A second namespace reaches the node's hostPorts over a veth (as another node would).
        const [a, b] = [`cnh${crypto.randomUUID().slice(0, 8)}`, `cnc${crypto.randomUUID().slice(0, 8)}`];
        await sh("ip", "link", "add", a, "netns", node, "type", "veth", "peer", "name", b, "netns", client);
        await sh("ip", "-n", node, "addr", "add", "192.168.77.1/24", "dev", a);
        await sh("ip", "-n", client, "addr", "add", "192.168.77.2/24", "dev", b);
        await sh("ip", "-n", node, "link", "set", a, "up");
        await sh("ip", "-n", client, "link", "set", b, "up");
        await sh("ip", "-n", client, "route", "add", "10.244.0.0/16", "via", "192.168.77.1");

        const { bin, conf } = nodeFiles(d.path);
        await buildSandboxImage(`${d.path}/pause.tar`);
        pid = await startContainerd(node, p, {
          cniBinDir: bin,
          cniConfDir: conf,
          imageTar: `${d.path}/pause.tar`,
        });

        // containerd sends {"HostPort":18080,"ContainerPort":80,"Protocol":"tcp","HostIP":""}.
        const web = await runPodSandbox(
          p.socket,
          podSandboxConfig("web", { ports: [{ hostPort: 18080, containerPort: 80 }] }),
          d.path,
        );
        const portmapAdds = () =>
          Deno.readTextFileSync(`${d.path}/starts`).split("\n").filter((l) => l === "ADD portmap").length;
        const addsBefore = portmapAdds();
        assertEquals(addsBefore, 1, "runp of the pod with a hostPort: portmap ran in Deno");
        const plain = await runPodSandbox(p.socket, podSandboxConfig("plain"), d.path);
        // containerd's own bytes for a pod without a hostPort: portmap's ADD answered by the launcher.
        assertEquals(portmapAdds() - addsBefore, 0, "runp of a pod without a hostPort: no portmap start");
        const w = await inspect(p.socket, web), q = await inspect(p.socket, plain);
        assertEquals(w.ips.length, 2, `web has an IPv4 and an IPv6 address: ${w.ips}`);
        // libcni caches each sandbox's result in containerd's own /var/lib/cni, never in the host's.
        const cached = listFiles(`${p.cniDir}/results`);
        for (const id of [web, plain]) {
          for (const f of [`cbr0-${id}-eth0`, `cni-loopback-${id}-lo`]) {
            assert(cached.includes(f), `${f}: ${cached}`);
          }
        }
        assertEquals(
          listFiles("/var/lib/cni/results").filter((f) => f.includes(web) || f.includes(plain)),
          [],
        );
        // Both families between the pods.
        for (const ip of q.ips) {
          const r = await sh("nsenter", `--net=/proc/${w.pid}/ns/net`, "ping", "-c", "1", "-W", "2", ip)
            .catch((e) => String(e));
          assert(/1 received|1 packets received/.test(r), `web pings plain at ${ip}: ${r}`);
        }
        // The hostPort from the other namespace reaches web's port 80.
        Deno.mkdirSync(`${d.path}/www`);
        Deno.writeTextFileSync(`${d.path}/www/index.html`, "hello from web\n");
        // In the foreground, as our child: a daemonized httpd outlived the test and kept the pod's
        // namespace alive.
        httpd = new Deno.Command("nsenter", {
          args: [`--net=/proc/${w.pid}/ns/net`, "busybox", "httpd", "-f", "-p", "80", "-h", `${d.path}/www`],
          stdout: "null",
          stderr: "null",
        }).spawn();
        await waitFor(async () =>
          (await sh("nsenter", `--net=/proc/${w.pid}/ns/net`, "ss", "-Htln", "sport", "=", ":80")).includes(
            ":80",
          )
        );
        const got = await nsRun(client, ["curl", "-sS", "-m", "5", "http://192.168.77.1:18080/"]);
        assertEquals(
          got.stdout,
          "hello from web\n",
          `hostPort 18080 from another namespace: ${got.code} ${got.stderr} ${
            (await nsRun(node, ["iptables-save", "-t", "nat"])).stdout
          } ${
            (await nsRun(node, ["ss", "-tlnp"])).stdout
          } ${(await sh("nsenter", `--net=/proc/${w.pid}/ns/net`, "ss", "-tlnp"))}`,
        );
        assertEquals(await leftovers(node, d.path), { veths: 2, ips: 4, saved: 2, nat: 4 }, "two pods");

        // doctor asks the runtime: clean with the two READY sandboxes.
        const clean = await doctorSandboxes(node, p.socket, d.path);
        assertEquals(clean.severity, "ok", JSON.stringify(clean));

        // A sandbox whose ADD fails late (portmap refuses the hostIP after flannel made veth, IPs, config).
        const bad = podSandboxConfig("bad", { ports: [{ hostPort: 18081, containerPort: 80 }] })
          .replace('"host_port":18081', '"host_port":18081,"host_ip":"256.1.1.1"');
        const err = await runPodSandbox(p.socket, bad, d.path).then(() => "", (e) => String(e));
        assert(err.includes("256.1.1.1"), `runp fails with portmap's error: ${err}`);
        assertEquals(
          await leftovers(node, d.path),
          { veths: 2, ips: 4, saved: 2, nat: 4 },
          "failed ADD left nothing",
        );
        assertEquals((await listSandboxes(p.socket)).map((s) => s.name).sort(), ["plain", "web"]);

        // 20 sandboxes in parallel, then all removed.
        const many = await pool(
          Array.from({ length: 20 }, (_, i) => i),
          20,
          (i) =>
            runPodSandbox(
              p.socket,
              podSandboxConfig(`par${i}`, { ports: [{ hostPort: 19000 + i, containerPort: 80 }] }),
              d.path,
            ),
        );
        assertEquals(new Set(many).size, 20);
        assertEquals((await leftovers(node, d.path)).veths, 22);
        await pool(many, 20, (id) => removePodSandbox(p.socket, id));

        // stopp + rmp leave nothing, and only stopp's DELs start a plugin process (rmp's repeat them), but
        // for portmap's of the pod without a hostPort (its ADD made no rule).
        const delStarts = () =>
          Deno.readTextFileSync(`${d.path}/starts`).split("\n").filter((l) => l.startsWith("DEL ")).length;
        const before = delStarts();
        await removePodSandbox(p.socket, web);
        await removePodSandbox(p.socket, plain);
        assertEquals(delStarts() - before, 5, "stopp: portmap (web only), flannel, loopback; rmp: none");
        assertEquals(
          await leftovers(node, d.path),
          { veths: 0, ips: 0, saved: 0, nat: 0 },
          "after stopp/rmp",
        );

        // What a sandbox the runtime does not have holds is named.
        const ghost = "0123456789abcdef".repeat(4);
        Deno.writeTextFileSync(`${d.path}/networks/cbr0/10.244.9.200`, `${ghost}\r\neth0`);
        Deno.writeTextFileSync(`${d.path}/flannel/${ghost}`, "{}");
        const leak = await doctorSandboxes(node, p.socket, d.path);
        assertEquals(leak.severity, "warning", JSON.stringify(leak));
        assert(
          String(leak.detail).includes("10.244.9.200") &&
            String(leak.detail).includes("saved flannel config"),
        );
        const none = await flanctl(["doctor", "--netns", node, "--cri-socket", "none", "-o", "json"]);
        const f = (JSON.parse(none.stdout).checks as J[]).find((c) => c.id === "cri-sandboxes")!;
        assert(String(f.detail).startsWith("not checked (--cri-socket none)"), String(f.detail));
      } finally {
        if (httpd) {
          try {
            httpd.kill("SIGKILL");
          } catch { /* already gone */ }
          await httpd.status;
        }
        if (pid) await stopContainerd(pid, p);
        d.cleanup();
      }
    }),
});
