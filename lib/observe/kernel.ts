/**
 * Opens the kernel reader for the doctor: the netlink layer (lib/netlink/mod.ts) on the checked
 * namespace. Callers fall back to {@link IpCliReader} when this throws (libnl missing or broken).
 * @module
 */
import { openNetlink } from "../netlink/mod.ts";
import type { KernelReader } from "./kernel_ip.ts";

/** Opens a read handle on `netns` (null: the current namespace). Throws when libnl is unavailable. */
export function openKernel(netns: string | null): KernelReader {
  return openNetlink(netns === null ? null : { name: netns });
}
