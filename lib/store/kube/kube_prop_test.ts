/**
 * Properties of the Node → lease projection (projectNode, then leaseFromNode), what a hostile or broken API
 * server can reach: any decoded Node gives no lease, a lease in flannel's form, or a MalformedLeaseError;
 * the annotations our node publishes (as acquireLease writes them) read back as the lease it published.
 * Seeds: tests/prop.ts.
 */
import fc from "fast-check";
import { assert, assertEquals } from "../../../tests/assert.ts";
import {
  anyText,
  assertQuotable,
  check,
  ipv4Addr,
  ipv4Net,
  ipv6Addr,
  ipv6Net,
  longText,
  mutated,
  outcome,
} from "../../../tests/prop.ts";
import { IPNet } from "../../base/cidr.ts";
import { encodeLeaseAttrs, MalformedLeaseError, validateLeaseAttrs } from "../../lease/wire.ts";
import type { LeaseAttrsWire } from "../../lease/types.ts";
import { ANNOTATION_PREFIX, annotationPrefix, leaseFromNode } from "./kube.ts";
import { projectNode } from "./kube_node.ts";

const isMalformed = (e: unknown) => e instanceof MalformedLeaseError;

const prefixes = fc.constantFrom(
  ANNOTATION_PREFIX,
  annotationPrefix("example.com/net"),
  annotationPrefix("a.b"),
);

const attrsArb: fc.Arbitrary<LeaseAttrsWire> = fc.record({
  PublicIP: ipv4Addr.map(String),
  PublicIPv6: ipv6Addr.map(String),
  BackendType: fc.constantFrom("vxlan", "host-gw", "udp", "wireguard"),
  BackendData: fc.option(fc.jsonValue({ maxDepth: 3 })),
  BackendV6Data: fc.option(fc.jsonValue({ maxDepth: 2 })),
});

/** The annotations acquireLease publishes for `attrs` (kube.ts: which ones depends on the families). */
function published(p: string, a: LeaseAttrsWire, v4: boolean, v6: boolean): Record<string, string> {
  const want: Record<string, string> = {
    [`${p}backend-type`]: a.BackendType,
    [`${p}kube-subnet-manager`]: "true",
  };
  if (v4 || a.BackendType !== "vxlan") {
    want[`${p}backend-data`] = JSON.stringify(a.BackendData ?? null);
    want[`${p}public-ip`] = v4 ? a.PublicIP : "0.0.0.0";
  }
  if (v6) {
    want[`${p}backend-v6-data`] = JSON.stringify(a.BackendV6Data ?? null);
    want[`${p}public-ipv6`] = a.PublicIPv6 ?? "";
  }
  return want;
}

const anyCidr = fc.oneof(
  { weight: 4, arbitrary: ipv4Net.map(String) },
  { weight: 4, arbitrary: ipv6Net.map(String) },
  { weight: 1, arbitrary: anyText },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) as fc.Arbitrary<unknown> },
);

/** An annotation value a hostile or broken writer might leave. */
const anyAnnotation = fc.oneof(
  fc.constant("true"),
  ipv4Addr.map(String),
  ipv6Addr.map(String),
  fc.json({ maxDepth: 2 }),
  mutated(fc.json({ maxDepth: 2 })),
  anyText,
  longText,
  fc.jsonValue({ maxDepth: 1 }) as fc.Arbitrary<unknown>,
);

/**
 * A Node as the API server might send it: mostly what a node publishes (so leases come out), with a few
 * annotations replaced by junk, podCIDRs valid or not, unrelated fields around, or not a Node at all.
 */
const hostileNode = fc.record({
  p: prefixes,
  base: fc.option(fc.tuple(attrsArb, fc.boolean(), fc.boolean()), { freq: 4 }),
  name: fc.oneof(
    fc.stringMatching(/^[a-z0-9][a-z0-9.-]{0,20}$/),
    anyText,
    longText,
    fc.jsonValue({ maxDepth: 1 }),
  ),
  rv: fc.oneof(fc.nat().map(String), fc.jsonValue({ maxDepth: 1 })),
  created: fc.oneof(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), anyText, fc.nat()),
  ann: fc.array(
    fc.tuple(
      fc.constantFrom(
        "kube-subnet-manager",
        "public-ip",
        "public-ipv6",
        "backend-type",
        "backend-data",
        "backend-v6-data",
        "public-ip-overwrite",
        "other",
      ),
      anyAnnotation,
    ),
    { maxLength: 3 },
  ),
  foreign: fc.dictionary(anyText, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
  podCIDR: fc.option(anyCidr),
  podCIDRs: fc.option(fc.array(anyCidr, { maxLength: 3 })),
  shape: fc.constantFrom("node", "node", "node", "node", "no-spec", "not-object", "array-metadata"),
}).map((n) => {
  const annotations: Record<string, unknown> = { ...n.foreign };
  if (n.base) Object.assign(annotations, published(n.p, n.base[0], n.base[1], n.base[2]));
  for (const [k, v] of n.ann) annotations[n.p + k] = v;
  const metadata = { name: n.name, resourceVersion: n.rv, creationTimestamp: n.created, annotations };
  const spec: Record<string, unknown> = {};
  if (n.podCIDR !== null) spec.podCIDR = n.podCIDR;
  if (n.podCIDRs !== null) spec.podCIDRs = n.podCIDRs;
  const raw = n.shape === "node"
    ? { metadata, spec, status: { addresses: [] } }
    : n.shape === "no-spec"
    ? { metadata }
    : n.shape === "array-metadata"
    ? { metadata: [metadata], spec }
    : n.name;
  return { raw, p: n.p };
});

Deno.test("kube Node → lease (property): any Node gives nothing, a valid lease or MalformedLeaseError", () => {
  check(
    fc.property(hostileNode, ({ raw, p }) => {
      const node = projectNode(raw, p);
      assertEquals(typeof node.metadata.name, "string");
      for (const [k, v] of Object.entries(node.metadata.annotations ?? {})) {
        assert(k.startsWith(p) && typeof v === "string", "only string annotations under the prefix are kept");
      }
      const r = outcome(() => leaseFromNode(node, p), isMalformed);
      if (!r.ok) return assertQuotable(r.error.message);
      if (r.value === null) return;
      const l = r.value;
      assert(l.subnet !== null || l.ipv6Subnet !== null, "a lease has a subnet");
      assert(l.subnet === null || l.subnet.family === 4, "subnet is IPv4");
      assert(l.ipv6Subnet === null || l.ipv6Subnet.family === 6, "ipv6Subnet is IPv6");
      // The subnets are the Node's own podCIDRs (the API server's assignment), nothing else.
      const cidrs = [...(node.spec?.podCIDRs ?? []), node.spec?.podCIDR].flatMap((c) => {
        const n = c === undefined ? null : IPNet.tryParse(c);
        return n ? [String(n)] : [];
      });
      for (const s of [l.subnet, l.ipv6Subnet]) assert(s === null || cidrs.includes(String(s)), String(s));
      assertEquals(encodeLeaseAttrs(validateLeaseAttrs("again", l.attrs)), encodeLeaseAttrs(l.attrs));
      assertEquals(l.node, node.metadata.name);
      assertEquals(l.expiration, null);
      assert(l.created === undefined || Number.isFinite(l.created), "created is a time or nothing");
    }),
    1000,
  );
});

Deno.test("kube Node → lease (property): the annotations our node publishes read back as its lease", () => {
  const families = fc.constantFrom([true, false], [true, true], [false, true]);
  check(
    fc.property(prefixes, families, ipv4Net, ipv6Net, attrsArb, (p, [v4, v6], s4, s6, attrs) => {
      const a: LeaseAttrsWire = { ...attrs, PublicIP: v4 ? attrs.PublicIP : "0.0.0.0" };
      if (!v6) a.PublicIPv6 = null;
      // An IPv6-only vxlan node publishes no backend-data (as flanneld): none to read back.
      if (a.BackendData === null || (!v4 && a.BackendType === "vxlan")) delete a.BackendData;
      if (a.BackendV6Data === null || !v6) delete a.BackendV6Data;
      const podCIDRs = [...(v4 ? [String(s4)] : []), ...(v6 ? [String(s6)] : [])];
      const raw = {
        metadata: { name: "node-1", resourceVersion: "42", annotations: published(p, a, v4, v6) },
        spec: { podCIDR: podCIDRs[0], podCIDRs },
      };
      const l = leaseFromNode(projectNode(raw, p), p);
      assert(l !== null, "a published lease is read");
      assertEquals([String(l.subnet), String(l.ipv6Subnet)], [
        v4 ? String(s4) : "null",
        v6 ? String(s6) : "null",
      ]);
      assertEquals(encodeLeaseAttrs(l.attrs), encodeLeaseAttrs(a));
      assertEquals([l.node, l.revision], ["node-1", "42"]);
    }),
    500,
  );
});
