/**
 * The CNI benches' network config: bridge + host-local as the reference plugins take it, one bridge, subnet
 * and data directory per install or variant so they never share state (bench/cni_bench.ts,
 * bench/cni_pair.ts).
 * @module
 */

/**
 * The config of install or variant `k`: network `name`, bridge `${bridgePrefix}${k}`, subnet
 * `10.${net}.${k}.0/24`, a route to `10.${net}.0.0/16`, IPAM data under `${dataRoot}/v${k}`.
 */
export function bridgeBenchConf(
  name: string,
  bridgePrefix: string,
  net: number,
  k: number,
  dataRoot: string,
): string {
  return JSON.stringify({
    cniVersion: "0.3.1",
    name,
    type: "bridge",
    bridge: `${bridgePrefix}${k}`,
    isGateway: true,
    ipMasq: false,
    hairpinMode: true,
    mtu: 1450,
    ipam: {
      type: "host-local",
      dataDir: `${dataRoot}/v${k}`,
      ranges: [[{ subnet: `10.${net}.${k}.0/24` }]],
      routes: [{ dst: `10.${net}.0.0/16` }],
    },
  });
}
