/**
 * The wireguard backend in a dual-stack lab (2 nodes x 1 pod, Mode separate): each node has flannel-wg
 * (IPv4, port 51820) and flannel-wg-v6 (IPv6, port 51821) with one key pair; the IPv6 device's peer has
 * AllowedIPs = the other node's IPv6 subnet and Endpoint = [PublicIPv6]:51821; every pod reaches the other
 * node's pod over IPv4 and IPv6 (lab up's own check: 4 pairs); doctor's checks pass for both devices and
 * trace's IPv6 walk shows the WireGuard hops. A hostile lease written into the store
 * with a PublicKey that is not a key (and would inject a UAPI line) is refused: counted as `public_key`,
 * warned, and no WireGuard peer is made for it.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertMatch } from "./assert.ts";
import { flanctl, flanctlCmd, sh } from "./netns.ts";
import { labExec, withLab } from "./lab_fixture.ts";
import { uapiGet } from "../lib/backend/wireguard/uapi.ts";
import { waitUntil } from "./lab_verify.ts";
import { httpGet } from "../lib/observe/http_get.ts";
import { metric } from "./daemon_fixture.ts";
import type { LabState } from "../lib/lab/types.ts";

/** Writes lease file `key` into the lab's file store as its writers do (under .lock, renamed, seq bumped). */
async function putLease(s: LabState, key: string, value: unknown): Promise<void> {
  const dir = `${s.dir}/store`;
  const lock = await Deno.open(`${dir}/.lock`, { read: true, write: true, create: true });
  try {
    await lock.lock(true);
    const seq = Number(await Deno.readTextFile(`${dir}/seq`).catch(() => "0")) + 1;
    await Deno.mkdir(`${dir}/tmp`, { recursive: true });
    const tmp = `${dir}/tmp/test-${key}`;
    await Deno.writeTextFile(tmp, `${JSON.stringify({ lease: value, expiration: null, seq })}\n`);
    await Deno.rename(tmp, `${dir}/subnets/${key}`);
    await Deno.writeTextFile(`${tmp}.seq`, `${seq}\n`);
    await Deno.rename(`${tmp}.seq`, `${dir}/seq`);
  } finally {
    lock.close();
  }
}

needsRoot.test({
  name: "lab e2e: wireguard dual stack (2 nodes x 1 pod): flannel-wg and flannel-wg-v6, pings v4 and v6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "twd",
      [
        "--nodes",
        "2",
        "--pods-per-node",
        "1",
        "--backend",
        "wireguard",
        "--wireguard-way",
        "userspace",
        "--ip-family",
        "dual",
      ],
      4,
      async (s, name) => {
        for (const [n, other] of [[s.nodes[0], s.nodes[1]], [s.nodes[1], s.nodes[0]]]) {
          // --wireguard-way reaches the daemon as FLANCTL_WIREGUARD_WAY.
          const environ = Deno.readTextFileSync(`/proc/${n.daemonPid}/environ`).split("\0");
          assert(
            environ.includes("FLANCTL_WIREGUARD_WAY=userspace"),
            environ.filter((e) => e.includes("WAY")).join(),
          );
          const v4 = await uapiGet(`${n.dir}/run/wireguard/flannel-wg.sock`);
          const v6 = await uapiGet(`${n.dir}/run/wireguard/flannel-wg-v6.sock`);
          assertEquals([v4.listenPort, v6.listenPort], [51820, 51821]);
          assertEquals(v4.publicKey, v6.publicKey, "one key pair for both devices (flanneld's key file)");
          const env = Deno.readTextFileSync(`${other.dir}/run/flannel/subnet.env`);
          const sub6 = /^FLANNEL_IPV6_SUBNET=([0-9a-f:]+)::1\/(\d+)$/m.exec(env)!;
          assertEquals(v6.peers.map((p) => [p.allowedIPs, p.endpoint]), [[
            [`${sub6[1]}::/${sub6[2]}`],
            `[${other.publicIPv6}]:51821`,
          ]]);
          assertEquals(
            v4.peers.map((p) => p.endpoint),
            [`${other.publicIP}:51820`],
          );
          await waitUntil(
            `${n.name}: an IPv6 handshake`,
            async () =>
              (await uapiGet(`${n.dir}/run/wireguard/flannel-wg-v6.sock`)).peers[0].lastHandshake > 0,
          );
          assert(v4.peers[0].lastHandshake > 0, "an IPv4 handshake");
        }

        // doctor and trace over IPv6: both devices' checks pass, the IPv6 walk shows the WireGuard hops.
        const dr = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json"));
        const checks =
          (JSON.parse(dr.stdout) as { checks: { id: string; severity: string; detail: string }[] })
            .checks;
        for (const id of ["wg-device", "wg-key", "wg-peers", "wg-handshake", "peers-v6"]) {
          const f = checks.filter((c) => c.id === id);
          assert(f.length && f.every((c) => c.severity === "ok"), `${id}: ${JSON.stringify(f)}`);
        }
        assert(checks.some((c) => c.id === "wg-peers" && c.detail.startsWith("flannel-wg-v6:")));
        const ip6 = s.pods.find((p) => p.node === "node2")!.ipv6!;
        const tr = await flanctl(["lab", "trace", "--name", name, "node1-pod1", ip6]);
        assertEquals(tr.code, 0, tr.stdout + tr.stderr);
        assertMatch(
          tr.stdout,
          /ok +node1 +wg-peer +peer \S+ allowed-ips [0-9a-f:]+\/64 endpoint \[[0-9a-f:]+\]:51821/,
        );
        assertMatch(tr.stdout, /ok +node2 +remote-wg-device +flannel-wg-v6/);

        // `lab check` waits out a WireGuard data plane silent for its first ~12 s (as after a handshake race)
        // instead of failing the pairs after its usual ~8 s: node2 drops WireGuard's UDP meanwhile.
        const n2 = s.nodes[1].netns;
        const drop = ["-p", "udp", "-m", "multiport", "--dports", "51820,51821", "-j", "DROP"];
        await sh("ip", "netns", "exec", n2, "iptables", "-I", "INPUT", "1", ...drop);
        await sh("ip", "netns", "exec", n2, "ip6tables", "-I", "INPUT", "1", ...drop);
        const check = flanctl(["lab", "check", "--name", name]);
        await new Promise((r) => setTimeout(r, 12_000));
        await sh("ip", "netns", "exec", n2, "iptables", "-D", "INPUT", "1");
        await sh("ip", "netns", "exec", n2, "ip6tables", "-D", "INPUT", "1");
        const checked = await check;
        assertEquals(checked.code, 0, checked.stdout + checked.stderr);

        // A hostile wireguard lease: its PublicKey is no key (it carries a UAPI line). Refused and counted.
        const n1 = s.nodes[0];
        const bad = "A".repeat(43) + "=\nremove=true";
        await putLease(s, "10.244.200.0-24", {
          PublicIP: n1.publicIP.replace(/\d+$/, "99"),
          PublicIPv6: null,
          BackendType: "wireguard",
          BackendData: { PublicKey: bad, Port: 51820 },
        });
        await waitUntil("the hostile lease is refused and counted", async () => {
          const r = await httpGet(n1.netns, `http://127.0.0.1:${s.healthzPort}/metrics`);
          const n = metric(r.body ?? "", 'flanctl_rejected_peers_total{reason="public_key"}');
          return n >= 1 || `public_key rejections: ${n}`;
        });
        const st = await uapiGet(`${n1.dir}/run/wireguard/flannel-wg.sock`);
        assertEquals(st.peers.map((p) => p.endpoint), [`${s.nodes[1].publicIP}:51820`], "no peer for it");
        const log = Deno.readTextFileSync(`${n1.dir}/daemon.log`);
        assert(/skipping peer.*reason=public_key/.test(log), "the warning");
      },
    );
  },
});
