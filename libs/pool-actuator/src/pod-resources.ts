import type { V1Container, V1Pod } from "@kubernetes/client-node";

/**
 * A CPU quantity (`"500m"`, `"2"`, `"1.5"`, `"250000u"`) in millicores, or undefined when absent.
 * Throws on a value that is not a quantity, naming it.
 */
export function cpuMillis(quantity: string | number | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  if (typeof quantity === "number") return Math.round(quantity * 1000);
  const m = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(n|u|m|k|M|G)?$/.exec(quantity.trim());
  if (!m) throw new Error(`not a CPU quantity: "${quantity}"`);
  const scale: Record<string, number> = { n: 1e-6, u: 1e-3, m: 1, "": 1000, k: 1e6, M: 1e9, G: 1e12 };
  return Math.round(Number(m[1]) * (scale[m[2] ?? ""] as number));
}

/** Millicores as the API writes them: whole cores plain (`"4"`), otherwise in `m` (`"1500m"`). */
export function cpuQuantity(millis: number): string {
  return millis % 1000 === 0 ? String(millis / 1000) : `${millis}m`;
}

/** Cores from millicores, for messages (`1.5`). */
export function cores(millis: number): number {
  return Math.round(millis) / 1000;
}

/**
 * What a pod holds of its node's CPU, as the kubelet counts it for a resize: the sum of its containers'
 * requests, each the larger of the spec's (desired) and the status's allocated one (a resize in flight
 * holds both), plus the pod overhead. Init containers run before and are not counted.
 */
export function podCpuRequestMillis(pod: V1Pod): number {
  const allocated = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, cpuMillis(s.allocatedResources?.cpu) ?? 0]));
  let sum = cpuMillis(pod.spec?.overhead?.cpu) ?? 0;
  for (const c of pod.spec?.containers ?? []) {
    sum += Math.max(cpuMillis(c.resources?.requests?.cpu) ?? 0, allocated.get(c.name) ?? 0);
  }
  return sum;
}

/** The container's CPU limit in effect (the kubelet's report), else the spec's; undefined when it has none. */
export function appliedCpuLimitMillis(pod: V1Pod, container: string): number | undefined {
  const status = pod.status?.containerStatuses?.find((s) => s.name === container);
  const spec = pod.spec?.containers.find((c) => c.name === container);
  return cpuMillis(status?.resources?.limits?.cpu) ?? cpuMillis(spec?.resources?.limits?.cpu);
}

/** Whether a CPU resize of this container restarts it (its resizePolicy for cpu says RestartContainer). */
export function cpuResizeRestarts(container: V1Container): boolean {
  return container.resizePolicy?.some((p) => p.resourceName === "cpu" && p.restartPolicy === "RestartContainer") ?? false;
}

/** Where a pod's last resize stands, from the kubelet's conditions and the container's reported resources. */
export type ResizeState =
  | { kind: "done" }
  | { kind: "infeasible"; message: string }
  | { kind: "deferred"; message: string }
  | { kind: "in-progress"; message: string }
  /** The kubelet has not yet looked at this resize (its observedGeneration is behind) or not reported it. */
  | { kind: "unobserved" };

/**
 * The state of a resize of `container` to `millis` requested and limit, as written by the kubelet (Kubernetes
 * 1.33+: conditions PodResizePending with reason Infeasible or Deferred, PodResizeInProgress, and the applied
 * resources in status.containerStatuses[].resources). `generation` is the pod's metadata.generation the
 * resize patch returned: while the status's observedGeneration (when the cluster reports one) is older,
 * its conditions speak of an earlier spec.
 */
export function resizeState(pod: V1Pod, container: string, millis: number, generation: number | undefined): ResizeState {
  const observed = pod.status?.observedGeneration;
  if (generation !== undefined && observed !== undefined && observed < generation) return { kind: "unobserved" };
  const condition = (type: string) => pod.status?.conditions?.find((c) => c.type === type && c.status === "True");
  const pending = condition("PodResizePending");
  if (pending) {
    const message = pending.message ?? "";
    // Any other reason is to be read as Deferred (the KEP's rule for values it does not know).
    return pending.reason === "Infeasible" ? { kind: "infeasible", message } : { kind: "deferred", message };
  }
  const progress = condition("PodResizeInProgress");
  if (progress) return { kind: "in-progress", message: progress.message ?? progress.reason ?? "" };
  const status = pod.status?.containerStatuses?.find((s) => s.name === container);
  const limit = cpuMillis(status?.resources?.limits?.cpu);
  const request = cpuMillis(status?.resources?.requests?.cpu);
  return limit === millis && request === millis ? { kind: "done" } : { kind: "unobserved" };
}
