/**
 * The JSON half of deploy/build-image.sh: turns one uncompressed layer tar into an image layout
 * (lib/image/oci_layout.ts) that build-image.sh then tars deterministically.
 *
 *   deno run -A tools/oci_layout.ts --layer FILE --dir DIR --ref NAME:TAG --version V --created EPOCH
 *     [--revision R] [--arch amd64] [--entrypoint JSON-ARRAY] [--cmd JSON-ARRAY] [--title T]
 *     [--description D] [--created-by TEXT]
 *
 * Moves FILE into DIR/blobs/sha256/ and prints the manifest digest (the image's digest in containerd and
 * registries) on stdout.
 * @module
 */
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";
import { buildLayout } from "../lib/image/oci_layout.ts";
export { buildLayout, splitRef } from "../lib/image/oci_layout.ts";

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
      entrypoint: { type: "string" },
      cmd: { type: "string" },
      title: { type: "string" },
      description: { type: "string" },
      "created-by": { type: "string" },
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
  const argv = (flag: "entrypoint" | "cmd"): string[] | undefined => {
    const text = v[flag];
    if (text === undefined) return undefined;
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === "string")) {
      throw new Error(`--${flag} ${text}: give a JSON array of strings`);
    }
    return parsed;
  };
  let entrypoint: string[] | undefined, cmd: string[] | undefined;
  try {
    entrypoint = argv("entrypoint");
    cmd = argv("cmd");
  } catch (e) {
    console.error(`oci_layout: ${e instanceof Error ? e.message : e}`);
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
    entrypoint,
    cmd,
    title: v.title,
    description: v.description,
    createdBy: v["created-by"],
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
