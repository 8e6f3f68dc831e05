/**
 * The wireguard backend in a dual-stack lab (2 nodes x 1 pod, Mode separate): each node has flannel-wg
 * (IPv4, port 51820) and flannel-wg-v6 (IPv6, port 51821) with one key pair; the IPv6 device's peer has
 * AllowedIPs = the other node's IPv6 subnet and Endpoint = [PublicIPv6]:51821; every pod reaches the other
 * node's pod over IPv4 and IPv6 (lab up's own check: 4 pairs).
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals } from "./assert.ts";
import { withLab } from "./lab_fixture.ts";
import { uapiGet } from "../lib/backend/wireguard/uapi.ts";
import { waitUntil } from "./lab_verify.ts";

needsRoot.test({
  name: "lab e2e: wireguard dual stack (2 nodes x 1 pod): flannel-wg and flannel-wg-v6, pings v4 and v6",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withLab(
      "twd",
      ["--nodes", "2", "--pods-per-node", "1", "--backend", "wireguard", "--ip-family", "dual"],
      4,
      async (s) => {
        for (const [n, other] of [[s.nodes[0], s.nodes[1]], [s.nodes[1], s.nodes[0]]]) {
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
      },
    );
  },
});
