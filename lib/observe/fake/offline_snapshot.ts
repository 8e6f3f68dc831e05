/**
 * A NodeSnapshot for unit tests that reads nothing: no namespace, no daemon URL, no store, no probe, the
 * default paths with a subnet.env that does not exist. A test fills in what its check reads (kernel, store
 * config, links) and overrides what it needs through `over`.
 * @module
 */
import { DEFAULT_PATHS, NodeSnapshot, type SnapshotOptions } from "../snapshot.ts";

/** A snapshot of nothing; `over` replaces any of its options. */
export function offlineSnapshot(over: Partial<SnapshotOptions> = {}): NodeSnapshot {
  return new NodeSnapshot({
    netns: null,
    ...DEFAULT_PATHS,
    subnetFile: "/nonexistent/subnet.env",
    readyzUrl: null,
    probe: false,
    openStore: null,
    storeExplicit: false,
    skip: new Set(),
    ...over,
  });
}
