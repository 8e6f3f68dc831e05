/**
 * The JSON half of deploy/build-image.sh: turns one uncompressed layer tar into an image layout that
 * `ctr images import`, `podman load` / skopeo (`oci-archive:` and `docker-archive:`) and `docker load` read:
 * an OCI image layout (oci-layout, index.json, blobs/sha256/...) that also carries Docker's manifest.json,
 * as `docker save` writes since Docker 25. build-image.sh then tars the directory deterministically.
 *
 * Every byte is a function of the inputs (no clock, no random, keys in a fixed order), so two builds of
 * the same layer give the same digests. The layer stays uncompressed (application/vnd.oci.image.layer.v1.tar,
 * as `docker save` stores it): every loader accepts it, and its bytes do not depend on a gzip version.
 *
 *   deno run -A tools/oci_layout.ts --layer FILE --dir DIR --ref NAME:TAG --version V --created EPOCH
 *     [--revision R] [--arch amd64]
 *
 * Moves FILE into DIR/blobs/sha256/ and prints the manifest digest (the image's digest in containerd and
 * registries) on stdout.
 * @module
 */
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

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
    "org.opencontainers.image.title": "flanctl",
    "org.opencontainers.image.description": "flannel-compatible container network (daemon and CNI plugins)",
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
      Entrypoint: ["/usr/local/bin/flanctl"],
      WorkingDir: "/",
      Labels: labels,
    },
    rootfs: { type: "layers", diff_ids: [`sha256:${i.layerSha}`] },
    history: [{ created, created_by: "deploy/build-image.sh (Debian packages + install.sh)" }],
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

async function fileSha256(path: string): Promise<{ hex: string; size: number }> {
  const h = createHash("sha256");
  let size = 0;
  using f = await Deno.open(path);
  for await (const chunk of f.readable) {
    h.update(chunk);
    size += chunk.length;
  }
  return { hex: h.digest("hex"), size };
}

async function main(): Promise<number> {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      layer: { type: "string" },
      dir: { type: "string" },
      ref: { type: "string" },
      version: { type: "string" },
      created: { type: "string" },
      revision: { type: "string", default: "" },
      arch: { type: "string", default: "amd64" },
    },
  });
  for (const k of ["layer", "dir", "ref", "version", "created"] as const) {
    if (!v[k]) {
      console.error(`oci_layout: --${k}: required`);
      return 2;
    }
  }
  const created = Number(v.created);
  if (!Number.isSafeInteger(created) || created < 0) {
    console.error(`oci_layout: --created ${v.created}: give SOURCE_DATE_EPOCH in seconds`);
    return 2;
  }
  const { hex, size } = await fileSha256(v.layer!);
  const layout = buildLayout({
    ref: v.ref!,
    version: v.version!,
    created,
    revision: v.revision!,
    arch: v.arch!,
    layerSha: hex,
    layerSize: size,
  });
  const blobs = `${v.dir}/blobs/sha256`;
  await Deno.mkdir(blobs, { recursive: true });
  await Deno.rename(v.layer!, `${blobs}/${hex}`);
  for (const [sha, bytes] of layout.blobs) await Deno.writeFile(`${blobs}/${sha}`, bytes);
  for (const [name, bytes] of layout.files) await Deno.writeFile(`${v.dir}/${name}`, bytes);
  console.log(layout.manifestDigest);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
