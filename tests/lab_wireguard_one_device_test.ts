/**
 * The wireguard backend's one-device modes in a dual-stack lab (2 nodes x 1 pod, userspace): with `Mode`
 * auto and then `Mode` ipv6, each node has one device, flannel-wg, listening on ListenPort with both its
 * subnet addresses (no flannel-wg-v6), and one peer per other node whose AllowedIPs are that node's IPv4 and
 * IPv6 subnets; the endpoint is the IPv4 one under auto (the lab's underlay is RFC 1918 and fc00::/7, so
 * flanneld's selectMode picks IPv4) and [PublicIPv6]:ListenPort under ipv6. Every pod reaches the other
 * node's pod over IPv4 and IPv6; doctor's wireguard checks pass on the one
 * device, `inspect wireguard` lists that one device, and trace's IPv6 walk goes through flannel-wg to the endpoint the mode picks. Under auto, a daemon
 * restart loses no IPv6 ping at 100 pps and keeps the peer's both subnets; a revoked lease removes its peer.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertMatch } from "./assert.ts";
import { flanctl, flanctlCmd, ipJson } from "./netns.ts";
import { labExec, withLab, withNetConf } from "./lab_fixture.ts";
import { uapiGet } from "../lib/backend/wireguard/uapi.ts";
import { startPing, waitUntil } from "./lab_verify.ts";
import { ping } from "../lib/lab/check.ts";
import { startDaemon, stopDaemon, waitDaemonReady } from "../lib/lab/services.ts";
import { LAB_IPV6_NETWORK } from "../lib/lab/family.ts";

/** A node's subnets from its subnet.env (FLANNEL_SUBNET, FLANNEL_IPV6_SUBNET), as network addresses. */
function subnetsOf(dir: string): [string, string] {
  const env = Deno.readTextFileSync(`${dir}/run/flannel/subnet.env`);
  const v4 = /^FLANNEL_SUBNET=(\d+\.\d+\.\d+)\.1\/(\d+)$/m.exec(env)!;
  const v6 = /^FLANNEL_IPV6_SUBNET=([0-9a-f:]+)::1\/(\d+)$/m.exec(env)!;
  return [`${v4[1]}.0/${v4[2]}`, `${v6[1]}::/${v6[2]}`];
}

for (const mode of ["auto", "ipv6"] as const) {
  needsRoot.test({
    name: `lab e2e: wireguard Mode ${mode}, dual stack (2 nodes x 1 pod): one flannel-wg, pings v4 and v6`,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const conf = {
        Network: "10.244.0.0/16",
        EnableIPv6: true,
        IPv6Network: LAB_IPV6_NETWORK,
        Backend: { Type: "wireguard", Mode: mode },
      };
      await withNetConf(conf, (file) =>
        withLab(
          mode === "auto" ? "two" : "two6",
          [
            "--nodes",
            "2",
            "--pods-per-node",
            "1",
            "--ip-family",
            "dual",
            "--wireguard-way",
            "userspace",
            "--net-conf",
            file,
            "--no-check",
          ],
          undefined,
          async (s, name) => {
            // Every pod reaches the other node's pod over IPv4 and IPv6. Not lab up's own check (about 10 s):
            // both nodes' first pings start handshakes at once, and WireGuard (wireguard-go as the kernel's)
            // may lose the first session to that race and only rekey after 15 s without replies; the same
            // happens in Mode separate (docs/daemon.md). 30 s each here.
            for (const a of s.pods) {
              for (const b of s.pods.filter((x) => x.node !== a.node)) {
                for (const ip of [b.ip!, b.ipv6!]) {
                  await waitUntil(`${a.name} -> ${b.name} (${ip})`, () => ping(a.netns, ip, 1));
                }
              }
            }
            for (const [n, other] of [[s.nodes[0], s.nodes[1]], [s.nodes[1], s.nodes[0]]]) {
              const links = await ipJson<{ ifname: string }[]>(n.netns, "link", "show");
              assert(links.some((l) => l.ifname === "flannel-wg"), n.name);
              assert(!links.some((l) => l.ifname === "flannel-wg-v6"), `${n.name}: no flannel-wg-v6`);
              const addrs = await ipJson<
                { addr_info: { local: string; prefixlen: number; scope: string }[] }[]
              >(
                n.netns,
                "addr",
                "show",
                "dev",
                "flannel-wg",
              );
              const [own4, own6] = subnetsOf(n.dir);
              const have = addrs[0].addr_info.filter((a) => a.scope !== "link").map((a) =>
                `${a.local}/${a.prefixlen}`
              );
              assertEquals(have.sort(), [`${own4.split("/")[0]}/32`, `${own6.split("/")[0]}/128`].sort());
              const st = await uapiGet(`${n.dir}/run/wireguard/flannel-wg.sock`);
              assertEquals(st.listenPort, 51820);
              const endpoint = mode === "auto" ? `${other.publicIP}:51820` : `[${other.publicIPv6}]:51820`;
              assertEquals(st.peers.map((p) => [p.allowedIPs, p.endpoint]), [[
                subnetsOf(other.dir),
                endpoint,
              ]]);
              await waitUntil(
                `${n.name}: a handshake`,
                async () =>
                  (await uapiGet(`${n.dir}/run/wireguard/flannel-wg.sock`)).peers[0].lastHandshake > 0,
              );
            }
            // doctor: the wireguard checks pass on the one device.
            const dr = await labExec(name, "node1", flanctlCmd("doctor", "-o", "json"));
            const checks =
              (JSON.parse(dr.stdout) as { checks: { id: string; severity: string; detail: string }[] })
                .checks;
            for (const id of ["wg-device", "wg-key", "wg-peers", "wg-handshake", "peers-v6"]) {
              const f = checks.filter((c) => c.id === id);
              assert(f.length && f.every((c) => c.severity === "ok"), `${id}: ${JSON.stringify(f)}`);
            }
            assert(!checks.some((c) => c.detail.includes("flannel-wg-v6")), JSON.stringify(checks));
            // inspect wireguard: the one device, its peer with both subnets.
            const insp = await labExec(name, "node1", flanctlCmd("inspect", "wireguard", "-o", "json"));
            assertEquals(insp.code, 0, insp.stderr);
            const views = JSON.parse(insp.stdout) as { dev: string; peers: { allowedIPs: string[] }[] }[];
            assertEquals(views.map((v) => [v.dev, v.peers.map((p) => p.allowedIPs)]), [
              ["flannel-wg", [subnetsOf(s.nodes[1].dir)]],
            ]);
            // trace over IPv6: flannel-wg, the peer with both subnets, the underlay of the mode's endpoint.
            const ip6 = s.pods.find((p) => p.node === "node2")!.ipv6!;
            const tr = await flanctl(["lab", "trace", "--name", name, "node1-pod1", ip6]);
            assertEquals(tr.code, 0, tr.stdout + tr.stderr);
            const ep = mode === "auto" ? `${s.nodes[1].publicIP}:51820` : `[${s.nodes[1].publicIPv6}]:51820`;
            assert(
              tr.stdout.includes(`endpoint ${ep}`) &&
                /ok +node1 +wg-peer +peer \S+ allowed-ips \S+,\S+/.test(tr.stdout),
              tr.stdout,
            );
            assertMatch(tr.stdout, /ok +node2 +remote-wg-device +flannel-wg /);
            if (mode !== "auto") return;
            // A restart of node2's daemon under a 100 pps IPv6 ping: the device and both families of its
            // peer are kept (no peer is written until both planes said which peers they accept).
            const [n1, n2] = s.nodes;
            const src = s.pods.find((p) => p.node === "node1")!.netns;
            const run = startPing(src, ip6, 0.01);
            let res;
            try {
              await waitUntil("ping running", async () => await ping(src, ip6, 1));
              await stopDaemon(s, n2);
              await startDaemon(s, n2);
              await waitDaemonReady(s, n2);
              await new Promise((r) => setTimeout(r, 1000));
            } finally {
              res = await run.stop();
            }
            assert(res.transmitted >= 50, `too few packets: ${res.output}`);
            console.log(
              `wireguard one device, restart at 100 pps (IPv6): ${res.lost} of ${res.transmitted} lost`,
            );
            assertEquals(res.lost, 0, res.output);
            const after = await uapiGet(`${n2.dir}/run/wireguard/flannel-wg.sock`);
            assertEquals(after.peers.map((p) => p.allowedIPs), [subnetsOf(n1.dir)]);
            // node2's lease revoked: node1 removes its one peer (both families).
            await stopDaemon(s, n2, true);
            const rv = await labExec(name, "node1", flanctlCmd("lease", "revoke", subnetsOf(n2.dir)[0]));
            assertEquals(rv.code, 0, rv.stderr);
            await waitUntil("node1 drops node2's peer", async () => {
              const st = await uapiGet(`${n1.dir}/run/wireguard/flannel-wg.sock`);
              return st.peers.length === 0 || JSON.stringify(st.peers.map((p) => p.allowedIPs));
            });
          },
        ));
    },
  });
}
