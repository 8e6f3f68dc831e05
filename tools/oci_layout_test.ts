/**
 * tools/oci_layout.ts: the image's OCI layout names kube-flanctl.yml's image and deno.json's version, and the
 * same input gives the same bytes (the image build itself, as root: tests/image_build_test.ts).
 */
import { assert, assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { ROOT } from "../tests/netns.ts";
import { buildLayout, splitRef } from "./oci_layout.ts";

const VERSION = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).version as string;
const IMAGE = [
  ...new Set(
    [...Deno.readTextFileSync(`${ROOT}deploy/kube-flanctl.yml`).matchAll(/^\s*image:\s*(\S+)/gm)].map((m) =>
      m[1]
    ),
  ),
];

Deno.test("oci_layout: the manifest names the image and the version; same input, same bytes", () => {
  assertEquals(IMAGE.length, 1, "kube-flanctl.yml names one image");
  assertEquals(splitRef("localhost:5000/a/b:1.2"), { name: "localhost:5000/a/b", tag: "1.2" });
  let err = "";
  try {
    splitRef("localhost:5000/a/b");
  } catch (e) {
    err = String(e);
  }
  assertStringIncludes(err, "give NAME:TAG");
  const input = {
    ref: IMAGE[0],
    version: VERSION,
    created: 1767225600,
    revision: "abc",
    arch: "amd64",
    layerSha: "0".repeat(64),
    layerSize: 10,
  };
  const a = buildLayout(input), b = buildLayout(input);
  assertEquals(a.manifestDigest, b.manifestDigest);
  assertEquals([...a.files.values()], [...b.files.values()]);
  const index = JSON.parse(new TextDecoder().decode(a.files.get("index.json")));
  assertEquals(index.manifests[0].annotations["io.containerd.image.name"], IMAGE[0]);
  assertEquals(index.manifests[0].annotations["org.opencontainers.image.ref.name"], splitRef(IMAGE[0]).tag);
  const docker = JSON.parse(new TextDecoder().decode(a.files.get("manifest.json")));
  assertEquals(docker[0].RepoTags, [IMAGE[0]]);
  const config = JSON.parse(new TextDecoder().decode([...a.blobs.values()][0]));
  assertEquals(config.config.Labels["org.opencontainers.image.version"], VERSION);
  assertEquals(config.created, "2026-01-01T00:00:00Z");
  // Another revision: another config, another digest.
  assert(buildLayout({ ...input, revision: "abd" }).manifestDigest !== a.manifestDigest);
});

Deno.test("oci_layout: a peer image's entrypoint, arguments and labels; flanctl's bytes unchanged", () => {
  const input = {
    ref: "ghcr.io/flanctl/flanctl:0.1.0",
    version: "0.1.0",
    created: 1767225600,
    revision: "abc",
    arch: "amd64",
    layerSha: "0".repeat(64),
    layerSize: 10,
  };
  // The digest the layout had before peer images existed: flanctl's image keeps its bytes.
  assertEquals(
    buildLayout(input).manifestDigest,
    "sha256:1dec27868ff5639bef042be58a6b331201092c48ee2a69f1470a186765fc03a9",
  );
  const peer = buildLayout({
    ...input,
    ref: "flanctl.local/e2e/agnhost:2.66.1",
    entrypoint: ["/agnhost"],
    cmd: ["pause"],
    title: "agnhost",
    description: "Kubernetes' e2e test image",
    createdBy: "deploy/build-image.sh --peer agnhost",
  });
  const config = JSON.parse(new TextDecoder().decode([...peer.blobs.values()][0]));
  assertEquals(config.config.Entrypoint, ["/agnhost"]);
  assertEquals(config.config.Cmd, ["pause"]);
  assertEquals(config.config.Labels["org.opencontainers.image.title"], "agnhost");
  assertEquals(config.history[0].created_by, "deploy/build-image.sh --peer agnhost");
  const flanctl = JSON.parse(new TextDecoder().decode([...buildLayout(input).blobs.values()][0]));
  assertEquals("Cmd" in flanctl.config, false);
});
