/**
 * End to end in the lab, wireguard backend (userspace: wireguard-go over its UAPI socket), file store,
 * 3 nodes x 1 pod, with a PSK and keepalives from net-conf: every node's flannel-wg is wireguard-go's TUN
 * with MTU underlay − 80, its key is the lease's PublicKey, and it has one peer per other node (AllowedIPs
 * = the node's subnet, Endpoint = its PublicIP:51820, the PSK set) with a handshake after traffic; every
 * pod reaches every other node's pod (ping, TCP); the underlay carries no pod payload in clear (an
 * iptables string match counts the ping's pattern on flannel-wg, never on eth0); a daemon restart under a
 * 100 pps ping loses nothing (the device outlives the daemon); a revoked lease removes its peer; a key
 * file others may read stops the daemon's start. doctor's wireguard checks pass, and name a missing
 * device critical; trace shows the WireGuard hops and names a missing peer.
 */
import { needsRoot } from "./root.ts";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "./assert.ts";
import { flanctl, flanctlCmd, ipJson, nsRun, nsSh } from "./netns.ts";
import { pathExists } from "../lib/base/exists.ts";
import { labExec, withLab, withNetConf } from "./lab_fixture.ts";
import { loadState } from "../lib/lab/state.ts";
import { pingAllPods, startPing, tcpAcross, waitUntil } from "./lab_verify.ts";
import { ping } from "../lib/lab/check.ts";
import { startDaemon, stopDaemon, waitDaemonReady } from "../lib/lab/services.ts";
import { type DeviceState, uapiGet, uapiSet } from "../lib/backend/wireguard/uapi.ts";
import type { LabState, NodeState } from "../lib/lab/types.ts";
import type { FindingId } from "../lib/doctor/mod.ts";

const PSK = btoa("flanctl-test-psk-of-32-bytes!!!!");

/** The node's WireGuard device as its UAPI socket (the node's own /run/wireguard) says. */
function wgState(n: NodeState): Promise<DeviceState> {
  return uapiGet(`${n.dir}/run/wireguard/flannel-wg.sock`);
}

/** The leases as `lease list -o json` prints them, by PublicIP. */
async function leases(name: string): Promise<Map<string, { subnet: string; backendData: unknown }>> {
  const r = await labExec(name, "node1", flanctlCmd("lease", "list", "-o", "json"));
  assertEquals(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout) as { subnet: string; publicIP: string; backendData: unknown }[];
  return new Map(list.map((l) => [l.publicIP, l]));
}

/** Node `n`'s subnet, from its subnet.env's FLANNEL_SUBNET (the network address). */
function subnetOf(n: NodeState): string {
  const env = Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`);
  const m = /^FLANNEL_SUBNET=(\d+\.\d+\.\d+)\.\d+\/(\d+)$/m.exec(env)!;
  return `${m[1]}.0/${m[2]}`;
}

async function checkPeers(s: LabState, name: string): Promise<void> {
  const ls = await leases(name);
  for (const n of s.nodes) {
    const st = await wgState(n);
    const own = ls.get(n.publicIP)!;
    assertEquals(own.subnet, subnetOf(n));
    assertEquals(own.backendData, { PublicKey: st.publicKey, Port: 51820 }, `${n.name}'s lease`);
    assertEquals(st.listenPort, 51820);
    const want = s.nodes.filter((x) => x !== n).map((x) => ({
      key: (ls.get(x.publicIP)!.backendData as { PublicKey: string }).PublicKey,
      allowed: [subnetOf(x)],
      endpoint: `${x.publicIP}:51820`,
    })).sort((a, b) => a.key.localeCompare(b.key));
    const got = st.peers.map((p) => ({ key: p.publicKey, allowed: p.allowedIPs, endpoint: p.endpoint }))
      .sort((a, b) => a.key.localeCompare(b.key));
    assertEquals(got, want, `${n.name}'s peers`);
    assert(st.peers.every((p) => p.presharedKey && p.keepalive === 25), `${n.name}: PSK and keepalive`);
  }
}

needsRoot.test({
  name: "lab e2e: wireguard (userspace) + file store (3 nodes x 1 pod): peers, encryption, restart, revoke",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const conf = {
      Network: "10.244.0.0/16",
      Backend: { Type: "wireguard", PSK, PersistentKeepaliveInterval: 25 },
    };
    await withNetConf(
      conf,
      (file) =>
        withLab(
          "tw",
          ["--nodes", "3", "--pods-per-node", "1", "--net-conf", file, "--wireguard-way", "userspace"],
          6,
          async (s0, name) => {
            let s = s0;
            for (const n of s.nodes) {
              const l = (await ipJson<{ linkinfo?: { info_kind: string }; mtu: number; operstate: string }[]>(
                n.netns,
                "-d",
                "link",
                "show",
                "flannel-wg",
              ))[0];
              assertEquals([l.linkinfo?.info_kind, l.mtu], ["tun", 1420], n.name);
              const env = Deno.readTextFileSync(`${n.dir}/run/flannel/subnet.env`);
              assertStringIncludes(env, "FLANNEL_MTU=1420");
              const key = Deno.statSync(`${n.dir}/run/flannel/wgkey`);
              assertEquals(key.mode! & 0o777, 0o600, `${n.name}'s key file`);
            }
            await checkPeers(s, name);
            assertEquals(await pingAllPods(s), 6);
            await tcpAcross(s, "node1-pod1", "node2-pod1");
            for (const n of s.nodes) {
              assert(
                (await wgState(n)).peers.every((p) => p.lastHandshake > 0),
                `${n.name}: a handshake per peer`,
              );
            }
            // doctor: the wireguard checks pass, and the backend's routes are no overlap or missing route.
            type Rep = { checks: { id: FindingId; severity: string; detail: string }[] };
            const doctor = async (n: string) =>
              (JSON.parse((await labExec(name, n, flanctlCmd("doctor", "-o", "json"))).stdout) as Rep).checks;
            const checks = await doctor("node1");
            for (
              const id of [
                "wg-device",
                "wg-key",
                "wg-peers",
                "wg-handshake",
                "peer-routes",
                "pod-network-routes",
              ]
            ) {
              assertEquals(
                checks.find((c) => c.id === id)?.severity,
                "ok",
                `${id}: ${JSON.stringify(checks)}`,
              );
            }
            assertStringIncludes(
              checks.find((c) => c.id === "wg-device")!.detail,
              "userspace (wireguard-go pid",
            );
            // inspect wireguard lists the peers, never the private key.
            const insp = await labExec(name, "node1", flanctlCmd("inspect", "wireguard", "-o", "json"));
            assertEquals(insp.code, 0, insp.stderr);
            assertEquals((JSON.parse(insp.stdout) as { peers: unknown[] }[])[0].peers.length, 2);
            assert(!insp.stdout.includes(Deno.readTextFileSync(`${s.nodes[0].dir}/run/flannel/wgkey`)));
            // The daemons' logs never hold the private key.
            for (const n of s.nodes) {
              const priv = Deno.readTextFileSync(`${n.dir}/run/flannel/wgkey`);
              assert(!Deno.readTextFileSync(`${n.dir}/daemon.log`).includes(priv), `${n.name}'s log`);
            }

            // Encrypted on the underlay: the ping's pattern is seen on node2's flannel-wg, never on its eth0.
            const node = (x: string) => s.nodes.find((n) => n.name === x)!;
            const n2 = node("node2").netns;
            const src = s.pods.find((p) => p.name === "node1-pod1")!.netns;
            const dst = s.pods.find((p) => p.name === "node2-pod1")!.ip!;
            const raw = (...args: string[]) => nsSh(n2, "iptables", "-t", "raw", ...args);
            const pattern = ["-m", "string", "--string", "flanctlwflanctlw", "--algo", "bm", "-j", "ACCEPT"];
            await raw("-I", "PREROUTING", "-i", "eth0", ...pattern);
            await raw("-I", "PREROUTING", "-i", "flannel-wg", ...pattern);
            await raw("-I", "PREROUTING", "-i", "eth0", "-p", "udp", "--dport", "51820", "-j", "ACCEPT");
            await nsSh(src, "ping", "-n", "-q", "-c", "5", "-i", "0.2", "-p", "666c616e63746c77", dst);
            const counts = await raw("-L", "PREROUTING", "-v", "-n", "-x");
            const count = (re: RegExp) =>
              Number(counts.split("\n").find((l) => re.test(l))?.trim().split(/\s+/)[0]);
            assert(count(/flannel-wg .*STRING/) >= 5, `the match works on the decrypted side:\n${counts}`);
            assertEquals(count(/eth0 .*STRING/), 0, `pod payload in clear on the underlay:\n${counts}`);
            assert(count(/eth0 .*udp dpt:51820/) >= 5, `WireGuard's UDP on the underlay:\n${counts}`);
            await raw("-F", "PREROUTING");

            // trace shows the WireGuard hops; a peer removed behind the daemon's back is the broken hop.
            const trace = () => flanctl(["lab", "trace", "--name", name, "node1-pod1", "node2-pod1"]);
            const tr = await trace();
            assertEquals(tr.code, 0, tr.stdout + tr.stderr);
            assertMatch(
              tr.stdout,
              /ok +node1 +wg-peer +peer \S+ allowed-ips 10\.244\.\d+\.0\/24 endpoint 192\.168\.\d+\.12:51820/,
            );
            assertMatch(tr.stdout, /ok +node2 +remote-wg-device/);
            // (node1's daemon stopped first: running, it puts the peer back at the next lease event.)
            await stopDaemon(s, node("node1"), true);
            const key2 = (await wgState(node("node2"))).publicKey!;
            await uapiSet(`${node("node1").dir}/run/wireguard/flannel-wg.sock`, {
              peers: [{ publicKey: key2, remove: true }],
            });
            const broken = await trace();
            assert(broken.code !== 0, broken.stdout);
            assertMatch(
              broken.stdout,
              /FAIL +node1 +wg-peer .*\n.*no WireGuard peer with the lease's PublicKey/,
            );
            await startDaemon(s, node("node1"));
            await waitDaemonReady(s, node("node1"));
            await waitUntil("node1 has node2's peer again", async () => await ping(src, dst, 1));

            // A daemon restart under a 100 pps ping: wireguard-go keeps the device, nothing is lost.
            const p = startPing(src, dst, 0.01);
            let res;
            try {
              await waitUntil("ping running", async () => await ping(src, dst, 1));
              await stopDaemon(s, node("node2"));
              await startDaemon(s, node("node2"));
              await waitDaemonReady(s, node("node2"));
              s = loadState(s.name);
              await new Promise((r) => setTimeout(r, 1000));
            } finally {
              res = await p.stop();
            }
            assert(res.transmitted >= 50, `too few packets: ${res.output}`);
            console.log(`wireguard restart at 100 pps: ${res.lost} of ${res.transmitted} packets lost`);
            assertEquals(res.lost, 0, res.output);
            await checkPeers(s, name);

            // node3's lease revoked: the other nodes drop its peer.
            await stopDaemon(s, node("node3"), true);
            const rv = await labExec(name, "node1", flanctlCmd("lease", "revoke", subnetOf(node("node3"))));
            assertEquals(rv.code, 0, rv.stderr);
            for (const x of ["node1", "node2"]) {
              await waitUntil(`${x} drops node3's peer`, async () => {
                const st = await wgState(node(x));
                return st.peers.length === 1 || JSON.stringify(st.peers.map((p) => p.allowedIPs));
              });
            }
            assertEquals(await ping(src, dst, 3), true);

            // A key file group/world may read: the daemon refuses to start, naming the file and the fix.
            const keyFile = `${node("node2").dir}/run/flannel/wgkey`;
            Deno.chmodSync(keyFile, 0o644);
            await stopDaemon(s, node("node2"));
            const logBefore = Deno.readTextFileSync(`${node("node2").dir}/daemon.log`).length;
            await startDaemon(s, node("node2"));
            const err = await waitDaemonReady(s, node("node2"), { timeoutMs: 30_000 }).then(
              () => null,
              (e) => e,
            );
            assert(err instanceof Error, "the daemon started with a world-readable key file");
            const log = Deno.readTextFileSync(`${node("node2").dir}/daemon.log`).slice(logBefore);
            assertStringIncludes(log, "0644");
            // While it is down, its device is gone: doctor names it critical.
            await nsSh(node("node2").netns, "ip", "link", "del", "flannel-wg");
            const gone = (await doctor("node2")).find((c) => c.id === "wg-device")!;
            assertEquals(gone.severity, "critical");
            assertStringIncludes(gone.detail, "flannel-wg does not exist");
            Deno.chmodSync(keyFile, 0o600);
            await startDaemon(s, node("node2"));
            await waitDaemonReady(s, node("node2"));
            assertEquals(await ping(src, dst, 5), true);

            // flanctl reset (daemon stopped) removes flannel-wg, and wireguard-go ends with it; the key stays.
            await stopDaemon(s, node("node3"), true).catch(() => {});
            await stopDaemon(s, node("node2"));
            const rs = await labExec(name, "node2", flanctlCmd("reset"));
            // (Its exit code is 1 here: the lab's state directory is a mount point reset cannot remove.)
            assertStringIncludes(rs.stdout + rs.stderr, "removed device flannel-wg");
            assertEquals((await nsRun(node("node2").netns, ["ip", "link", "show", "flannel-wg"])).code, 1);
            await waitUntil("wireguard-go of node2 ends", async () => {
              const ps = await nsRun(node("node2").netns, ["ip", "netns", "pids", node("node2").netns]);
              const left = ps.stdout.trim().split(/\s+/).filter(Boolean).map((pid) => {
                try {
                  return Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ").slice(0, 200);
                } catch {
                  return "";
                }
              }).filter((c) => c.includes("wireguard-go"));
              return !left.length || `still running: ${left.join("; ")}`;
            });
            assert(pathExists(keyFile), "reset keeps the key (flanneld reads the same file)");
          },
        ),
    );
  },
});
