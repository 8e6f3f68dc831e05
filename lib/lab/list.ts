/**
 * `flanctl lab list`: every lab on this machine (each directory under the lab root with a state file, or
 * with the record of a `--kube` lab: store "kube", its pods the sandboxes on its nodes, its "daemons" the
 * nodes' kubelets), as explicit view rows. Read-only.
 * @module
 */
import { labRoot } from "./paths.ts";
import { readState } from "./state.ts";
import { daemonStatus } from "./status.ts";
import { familyOf, type LabIpFamily } from "./family.ts";
import { errText } from "../base/errors.ts";
import { kubeletRunning, kubePodSandboxes, readKubeRecord } from "./kube_status.ts";

/** One row of `flanctl lab list -o json` (the contract; camelCase). */
export interface LabListJson {
  name: string;
  backend: string;
  store: string;
  network: string;
  /** The lab's address families (lab up --ip-family, or the --net-conf's). */
  ipFamily: LabIpFamily;
  nodes: number;
  pods: number;
  /** Nodes whose daemon is running. */
  daemonsRunning: number;
  createdAt: string;
}

/** Every lab with a readable state file, sorted by name; corrupt state files are reported in `errors`. */
export function listLabs(): { labs: LabListJson[]; errors: string[] } {
  const labs: LabListJson[] = [];
  const errors: string[] = [];
  let names: string[];
  try {
    names = [...Deno.readDirSync(labRoot())].filter((e) => e.isDirectory).map((e) => e.name).sort();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { labs, errors };
    throw e;
  }
  for (const name of names) {
    let s;
    try {
      s = readState(name);
    } catch (e) {
      errors.push(errText(e));
      continue;
    }
    if (!s) {
      try {
        const k = readKubeRecord(name);
        if (k) {
          labs.push({
            name,
            backend: k.backend,
            store: "kube",
            network: k.network,
            ipFamily: k.ipFamily,
            nodes: k.nodes,
            pods: kubePodSandboxes(k),
            daemonsRunning: Array.from({ length: k.nodes }, (_, i) =>
              kubeletRunning(k, i + 1)).filter(Boolean)
              .length,
            createdAt: k.createdAt,
          });
        }
      } catch (e) {
        errors.push(errText(e));
      }
      continue;
    }
    labs.push({
      name: s.name,
      backend: s.backend,
      store: s.store,
      network: s.network,
      ipFamily: familyOf(s),
      nodes: s.nodes.length,
      pods: s.pods.length,
      daemonsRunning: s.nodes.filter((n) => daemonStatus(s, n).state === "running").length,
      createdAt: s.createdAt,
    });
  }
  return { labs, errors };
}
