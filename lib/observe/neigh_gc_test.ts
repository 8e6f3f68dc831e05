import { assertEquals } from "../../tests/assert.ts";
import {
  labNeighNeed,
  neighFit,
  nodeNeighNeed,
  permanentCounts,
  recommendThresholds,
  sysctlPairs,
} from "./neigh_gc.ts";

const DEFAULTS = { gcThresh1: 128, gcThresh2: 512, gcThresh3: 1024 };

Deno.test("neigh sizing: a lab's entries per family (underlay N(N-1), flannel.1 N(N-1), pods 2NP, margin)", () => {
  // Issue 31's 50-node lab: 2450 underlay entries alone pass gc_thresh3 1024.
  assertEquals(labNeighNeed({ nodes: 50, podsPerNode: 1, backend: "vxlan", etcd: false }, 4, "6.18.0"), {
    family: 4,
    underlay: 2450,
    overlay: 2450,
    pods: 100,
    store: 0,
    margin: 271,
    counted: 2821,
    total: 5271,
  });
  // Before Linux 4.20 the permanent flannel.1 entries count too.
  assertEquals(
    labNeighNeed({ nodes: 50, podsPerNode: 1, backend: "vxlan", etcd: false }, 4, "4.19.0").counted,
    5271,
  );
  // host-gw: no VXLAN entries; etcd on the gateway: 2 per node.
  const hg = labNeighNeed({ nodes: 10, podsPerNode: 2, backend: "host-gw", etcd: true }, 6, "6.1.0");
  assertEquals([hg.underlay, hg.overlay, hg.pods, hg.store, hg.margin, hg.counted, hg.total], [
    90,
    0,
    40,
    20,
    31,
    181,
    181,
  ]);
  assertEquals([permanentCounts("4.20.0"), permanentCounts("3.10.0-1160.el7"), permanentCounts("junk")], [
    false,
    true,
    true,
  ]);
});

Deno.test("neigh sizing: 20 nodes fit default thresholds, 30 and 100 do not; the recommendation holds them", () => {
  const fit = (n: number, current = 50) =>
    neighFit(
      labNeighNeed({ nodes: n, podsPerNode: 2, backend: "vxlan", etcd: false }, 4, "6.18.0"),
      current,
      DEFAULTS,
    );
  const f20 = fit(20);
  assertEquals([f20.fits, f20.pastThresh2, f20.counted], [true, true, 50 + 380 + 80 + 46 + 16]);
  assertEquals(fit(30).fits, false);
  const f100 = fit(100);
  assertEquals([f100.fits, f100.counted], [false, 50 + 9900 + 400 + 1030 + 16]);
  // Everything the table will show (permanent included) stays below gc_thresh2 of the recommendation.
  assertEquals(f100.recommended, { gcThresh1: 16384, gcThresh2: 32768, gcThresh3: 65536 });
  assertEquals(sysctlPairs(4, f100.recommended, DEFAULTS), [
    "net.ipv4.neigh.default.gc_thresh1=16384",
    "net.ipv4.neigh.default.gc_thresh2=32768",
    "net.ipv4.neigh.default.gc_thresh3=65536",
  ]);
  // Other labs' entries count: a 20-node lab on a table already holding 600 does not fit.
  assertEquals(fit(20, 600).fits, false);
});

Deno.test("neigh sizing: recommendations never lower a threshold; a real node's need", () => {
  assertEquals(recommendThresholds(100, { gcThresh1: 4096, gcThresh2: 8192, gcThresh3: 16384 }), {
    gcThresh1: 4096,
    gcThresh2: 8192,
    gcThresh3: 16384,
  });
  assertEquals(recommendThresholds(3000, DEFAULTS), { gcThresh1: 2048, gcThresh2: 4096, gcThresh3: 8192 });
  const n = nodeNeighNeed(1000, true, 4, "6.18.0");
  assertEquals([n.underlay, n.overlay, n.pods, n.margin, n.counted, n.total], [
    999,
    999,
    220,
    138,
    1357,
    2356,
  ]);
});
