/**
 * `flanctl lab`: a multi-node flannel cluster in network namespaces on one machine.
 * @module
 */
export * from "./types.ts";
export * from "./paths.ts";
export { flanctlCommand, LabCommandError } from "./proc.ts";
export { LabNotFoundError, loadState, readState } from "./state.ts";
export { labExec, LabTargetError, resolveTarget, withNodeFiles } from "./exec.ts";
export { labAddNode, LabExistsError, labUp, MAX_NODES, validateUpOptions } from "./build.ts";
export { hostFits, labFamilies, LabTooBigError, refusal } from "./host_size.ts";
export type { Progress } from "./build.ts";
export { labDown, listNetns } from "./down.ts";
export { labAddPod, labDelPod, parsePublish } from "./add_pod.ts";
export type { DownReport } from "./down.ts";
export { formatStatus, labStatus, nodeSubnet } from "./status.ts";
export { connectivityCheck, formatCheck, waitConverged } from "./check.ts";
export {
  findProgram,
  kubeAddPod,
  kubectlCmd,
  kubeExecArgv,
  KubeLabError,
  kubePaths,
  kubeUp,
  runKubectl,
} from "./kube.ts";
export type { KubeUpOptions } from "./kube.ts";
export { kubeFamily } from "./kube_family.ts";
export type { KubeIpFamily } from "./kube_family.ts";
export { formatKubeStatus, kubeLabStatus, readKubeRecord } from "./kube_status.ts";
export type { KubeLabRecord, KubeStatusJson } from "./kube_status.ts";
export { formatKubeCheck, kubeServiceCheck } from "./kube_check.ts";
export type { KubeProbe } from "./kube_check.ts";
export { listLabs } from "./list.ts";
export type { LabListJson } from "./list.ts";
export { copyLog, daemonLogPath, LabNodeNotFoundError } from "./logs.ts";
export type { CheckReport, Convergence, PingResult } from "./check.ts";
export {
  etcdEndpoint,
  probeHealth,
  startDaemon,
  startEtcd,
  stopDaemon,
  stopEtcd,
  waitDaemonReady,
} from "./services.ts";
