/**
 * One hop for a backend's own overlay device (udp's flannel0, wireguard's flannel-wg and flannel-wg-v6): the
 * doctor's finding for the device, plus the pod MTU fitting it.
 * @module
 */
import { doctorText, type Path } from "./path.ts";
import type { TraceNode } from "./types.ts";
import type { CheckId, Finding } from "../doctor/mod.ts";

/**
 * Adds the hop of device `name` on `n` to `p`, judged by `f` (the doctor's `check` finding for it, or
 * undefined when none was given) and by `podMtu` fitting the device's MTU. Returns whether it is ok.
 */
export async function overlayDeviceHop(
  n: TraceNode,
  step: string,
  podMtu: number | null,
  p: Path,
  name: string,
  check: CheckId,
  f: Finding | undefined,
): Promise<boolean> {
  const dev = n.ctx.link(name);
  const mtuBad = !!dev && podMtu !== null && podMtu > dev.mtu;
  const ok = !!f && f.severity === "ok" && !mtuBad;
  p.add(
    {
      node: n.name,
      step,
      ok,
      entry: dev
        ? `${dev.name} ${dev.kind ?? "?"} ${dev.up ? "up" : "DOWN"} mtu ${dev.mtu}` +
          (podMtu !== null ? `; pod mtu ${podMtu}` : "")
        : `${name} does not exist`,
      detail: !f
        ? `${check} not checked`
        : f.severity !== "ok"
        ? f.detail
        : mtuBad
        ? `pod MTU ${podMtu} > ${name} MTU ${dev!.mtu}: larger packets are dropped`
        : f.detail,
    },
    ok ? null : mtuBad && f?.severity === "ok" ? await doctorText(n.ctx, "mtu") : {
      why: f?.why ?? f?.detail ?? `${name} is not usable`,
      fix: f?.fix ?? [],
      check,
    },
  );
  return ok;
}
