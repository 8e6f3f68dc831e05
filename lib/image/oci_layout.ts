/**
 * An OCI image layout for one uncompressed layer, as bytes: the config (labelled with the version), the
 * manifest, the index (named for containerd and skopeo/docker) and Docker's manifest.json, as `docker save`
 * writes them since Docker 25, so `ctr images import`, `podman load` and `docker load` all read the archive.
 * Every byte is a function of the inputs (no clock, no random, keys in a fixed order): two builds of the same
 * layer give the same digests. The layer stays uncompressed (application/vnd.oci.image.layer.v1.tar, as
 * `docker save` stores it): every loader accepts it, and its bytes do not depend on a gzip version.
 * Used by deploy/build-image.sh (through tools/oci_layout.ts), for flanctl's image and the lab's peer images
 * (kube-proxy, CoreDNS, agnhost: their own entrypoint, arguments and labels).
 * @module
 */
import { createHash } from "node:crypto";

/** What goes into the image's config and index. */
export interface LayoutInput {
  /** Full reference, e.g. ghcr.io/flanctl/flanctl:0.1.0 (kube-flanctl.yml's image line). */
  ref: string;
  /** deno.json's version (the org.opencontainers.image.version label). */
  version: string;
  /** SOURCE_DATE_EPOCH, seconds: the config's and history's `created`. */
  created: number;
  /** The source revision (git commit, "-dirty" when the tree had changes), or "". */
  revision: string;
  /** OCI architecture name (amd64, arm64). */
  arch: string;
  /** sha256 hex of the uncompressed layer (diff_id and digest: it is stored uncompressed). */
  layerSha: string;
  layerSize: number;
  /** The config's Entrypoint (default: flanctl's launcher). */
  entrypoint?: string[];
  /** The config's Cmd (the entrypoint's default arguments; none by default). */
  cmd?: string[];
  /** The title and description labels and the history line (default: flanctl's own image). */
  title?: string;
  description?: string;
  createdBy?: string;
}

/** The blobs and top-level files of the layout, each as its exact bytes. */
export interface Layout {
  /** blobs/sha256/<hex> -> bytes (config and manifest; the layer is moved in by the caller). */
  blobs: Map<string, Uint8Array>;
  /** Top-level files: oci-layout, index.json, manifest.json. */
  files: Map<string, Uint8Array>;
  manifestDigest: string;
}

const enc = new TextEncoder();
const json = (v: unknown) => enc.encode(JSON.stringify(v));
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Splits `registry/path:tag` into name and tag (a port in the registry part is not a tag). */
export function splitRef(ref: string): { name: string; tag: string } {
  const at = ref.lastIndexOf(":");
  if (at <= ref.lastIndexOf("/") || at === ref.length - 1) {
    throw new Error(`--ref ${ref}: give NAME:TAG (kube-flanctl.yml's image line)`);
  }
  return { name: ref.slice(0, at), tag: ref.slice(at + 1) };
}

/** Builds the config, manifest, index and Docker manifest for `i`. Pure. */
export function buildLayout(i: LayoutInput): Layout {
  const { tag } = splitRef(i.ref);
  const created = new Date(i.created * 1000).toISOString().replace(".000Z", "Z");
  const labels: Record<string, string> = {
    "org.opencontainers.image.title": i.title ?? "flanctl",
    "org.opencontainers.image.description": i.description ??
      "flannel-compatible container network (daemon and CNI plugins)",
    "org.opencontainers.image.version": i.version,
    "org.opencontainers.image.created": created,
  };
  if (i.revision) labels["org.opencontainers.image.revision"] = i.revision;
  const config = json({
    created,
    architecture: i.arch,
    os: "linux",
    config: {
      Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
      Entrypoint: i.entrypoint ?? ["/usr/local/bin/flanctl"],
      ...(i.cmd ? { Cmd: i.cmd } : {}),
      WorkingDir: "/",
      Labels: labels,
    },
    rootfs: { type: "layers", diff_ids: [`sha256:${i.layerSha}`] },
    history: [{ created, created_by: i.createdBy ?? "deploy/build-image.sh (Debian packages + install.sh)" }],
  });
  const configSha = sha256(config);
  const manifest = json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: `sha256:${configSha}`,
      size: config.length,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar",
      digest: `sha256:${i.layerSha}`,
      size: i.layerSize,
    }],
    annotations: { "org.opencontainers.image.created": created },
  });
  const manifestSha = sha256(manifest);
  const index = json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest: `sha256:${manifestSha}`,
      size: manifest.length,
      annotations: {
        // containerd's importer names the image from this one; docker load and skopeo read the next.
        "io.containerd.image.name": i.ref,
        "org.opencontainers.image.ref.name": tag,
      },
    }],
  });
  const dockerManifest = json([{
    Config: `blobs/sha256/${configSha}`,
    RepoTags: [i.ref],
    Layers: [`blobs/sha256/${i.layerSha}`],
  }]);
  return {
    blobs: new Map([[configSha, config], [manifestSha, manifest]]),
    files: new Map([
      ["oci-layout", json({ imageLayoutVersion: "1.0.0" })],
      ["index.json", index],
      ["manifest.json", dockerManifest],
    ]),
    manifestDigest: `sha256:${manifestSha}`,
  };
}
