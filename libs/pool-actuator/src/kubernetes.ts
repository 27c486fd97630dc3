import { setTimeout as sleep } from "node:timers/promises";
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Container,
  type V1Pod,
  type V1Scale,
} from "@kubernetes/client-node";
import {
  type BackendResizer,
  checkBatch,
  checkCores,
  checkSize,
  type PoolActuator,
  type PoolMember,
  ResizeError,
  type ResizeResult,
  type ScaleOptions,
} from "./actuator.js";
import { type GrpcBackendResizer, grpcBackendResizer } from "./backend-resizer.js";
import {
  appliedCpuLimitMillis,
  cores,
  cpuMillis,
  cpuQuantity,
  cpuResizeRestarts,
  podCpuRequestMillis,
  type ResizeState,
  resizeState,
} from "./pod-resources.js";

export interface KubernetesActuatorOptions {
  /** Namespace of the pool's workload (in a pod: the downward API's metadata.namespace). */
  namespace: string;
  /** The workload holding the backends, e.g. `deployment/backend` or `statefulset/backend`. */
  workload: string;
  /** How to reach the API server (default: the pod's service account, `loadFromCluster`). */
  kubeConfig?: KubeConfig;
  /** Conflicting writes (another writer changed the scale meanwhile) are retried this often. */
  conflictRetries?: number;
  /** The backend's container in each pod (default: the one named `backend`, else the pod's only one). */
  container?: string;
  /**
   * The most cores one backend may have. Given, it bounds every resize and the node is not read (no
   * cluster-wide RBAC needed); not given, the bound is the node's allocatable CPU less the requests of the
   * other pods on it (reads the node and lists the pods on it, in every namespace).
   */
  nodeCores?: number;
  /** A resize the kubelet has not applied after this long (deferred, in progress) is undone (default 10 s). */
  resizeTimeoutMs?: number;
  /** How soon the pod is read again while the kubelet applies a resize (default 50 ms, doubling up to 500 ms). */
  resizePollMs?: number;
  /**
   * The control token the backends check on Resize: once a pod has its new size, the backend in it is told
   * (its Resize RPC) so its model's threads follow the new CPU limit. Without it (and without
   * tellBackend) only the pod is resized.
   */
  controlToken?: string;
  /** How a backend is told its new size, instead of the Resize RPC with controlToken. */
  tellBackend?: BackendResizer;
  /** The backends' gRPC port, where tellBackend reaches them (default 50051). */
  backendPort?: number;
}

type WorkloadKind = "deployment" | "statefulset";

/** The annotation the ReplicaSet controller reads to pick which pods a scale-down removes first. */
export const POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost";

export function parseWorkload(workload: string): { kind: WorkloadKind; name: string } {
  const [kind, name, ...rest] = workload.split("/");
  const k = kind?.toLowerCase();
  if ((k !== "deployment" && k !== "statefulset") || !name || rest.length > 0) {
    throw new Error(`pool workload must be deployment/<name> or statefulset/<name>, got "${workload}"`);
  }
  return { kind: k, name };
}

/**
 * The pool as a Kubernetes Deployment or StatefulSet, sized through its scale subresource (the
 * same call `kubectl scale` makes) so that no other field of the workload is ever written. The
 * RBAC it needs is in infra/k8s/base/global-allocator.yaml.
 */
export class KubernetesActuator implements PoolActuator {
  readonly kind = "kubernetes" as const;
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly workload: { kind: WorkloadKind; name: string };
  private readonly grpc: GrpcBackendResizer | undefined;
  private readonly tellBackend: BackendResizer | undefined;

  constructor(private readonly options: KubernetesActuatorOptions) {
    const kc = options.kubeConfig ?? inCluster();
    this.apps = kc.makeApiClient(AppsV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.workload = parseWorkload(options.workload);
    if (options.nodeCores !== undefined) checkCores(options.nodeCores);
    this.grpc =
      options.tellBackend === undefined && options.controlToken !== undefined ? grpcBackendResizer(options.controlToken) : undefined;
    this.tellBackend = options.tellBackend ?? this.grpc?.resize;
  }

  async currentSize(): Promise<number> {
    return (await this.readScale()).spec?.replicas ?? 0;
  }

  async scaleTo(n: number, options: ScaleOptions = {}): Promise<void> {
    checkSize(n);
    const retries = this.options.conflictRetries ?? 3;
    for (let attempt = 0; ; attempt++) {
      const scale = await this.readScale();
      const current = scale.spec?.replicas ?? 0;
      if (current === n) return;
      if (n < current && this.workload.kind === "deployment" && options.removeFirst?.length) {
        // Deployments remove the pods with the lowest deletion cost first; StatefulSets always
        // remove the highest ordinal, so there the hint cannot apply.
        await this.markForRemoval(options.removeFirst);
      }
      try {
        // replace carries the resourceVersion just read: a concurrent change makes it fail with
        // 409 instead of being silently overwritten.
        await this.replaceScale({ ...scale, spec: { ...scale.spec, replicas: n } });
        return;
      } catch (err) {
        if (err instanceof ApiException && err.code === 409 && attempt < retries) continue;
        throw describe(err, `scaling ${this.options.workload} to ${n}`);
      }
    }
  }

  async members(): Promise<PoolMember[]> {
    const selector = (await this.readScale()).status?.selector;
    if (!selector) throw new Error(`${this.options.workload} reports no pod selector in its scale subresource`);
    try {
      const list = await this.core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: selector });
      return list.items.map((p) => member(p, this.options.container)).sort((a, b) => a.id.localeCompare(b.id));
    } catch (err) {
      throw describe(err, `listing the pods of ${this.options.workload}`);
    }
  }

  /**
   * Resizes one backend pod in place through its `resize` subresource (Kubernetes 1.33+): the backend
   * container's CPU request and limit both become `cores`, after checking it fits its node. Resolves once
   * the kubelet reports the new limit applied and, with the control token (or `tellBackend`), the backend
   * has taken the new size (the pod first, so the backend never runs more threads than its limit allows
   * for long; a resize the kubelet refuses never reaches the backend). A batch size needs the backend told. A resize the kubelet finds infeasible, or does not apply
   * within `resizeTimeoutMs`, is undone (the previous request and limit patched back) and rejected.
   */
  async resize(memberId: string, wanted: number, maxBatch?: number): Promise<ResizeResult> {
    checkCores(wanted);
    checkBatch(maxBatch);
    const started = performance.now();
    const what = `resizing pod ${memberId} to ${wanted} cores`;
    if (maxBatch !== undefined && !this.tellBackend) {
      throw new ResizeError(
        `${what}: a batch size is the backend's to apply, and this pool has no control token to tell it with`,
        "backend",
      );
    }
    const pod = await this.poolPod(memberId, what);
    const container = this.backendContainer(pod, what);
    if (cpuResizeRestarts(container)) {
      throw new ResizeError(
        `${what}: its container ${container.name} restarts on a CPU resize (resizePolicy cpu: RestartContainer), which is not in place; declare restartPolicy NotRequired`,
        "restarts",
      );
    }
    const millis = wanted * 1000;
    const before = { requests: container.resources?.requests?.cpu, limits: container.resources?.limits?.cpu };
    let generation = pod.metadata?.generation;
    const changes = cpuMillis(before.requests) !== millis || cpuMillis(before.limits) !== millis;
    if (changes) {
      await this.checkNodeCapacity(pod, container.name, millis, what);
      const q = cpuQuantity(millis);
      generation = (await this.patchCpu(memberId, container.name, { requests: q, limits: q }, what)).metadata?.generation;
    }
    // Also when the spec already asks for it: an earlier resize may still be in flight.
    const { state, pod: now } = await this.awaitKubelet(memberId, container.name, millis, generation, what);
    if (state.kind !== "done") {
      const undo = changes ? await this.undo(memberId, container.name, before) : "";
      if (state.kind === "infeasible")
        throw new ResizeError(`${what}: the kubelet found it infeasible (${state.message})${undo}`, "infeasible");
      const detail = state.kind === "unobserved" ? "not reported applied" : `${state.kind}${state.message ? ` (${state.message})` : ""}`;
      throw new ResizeError(`${what}: ${detail} after ${this.options.resizeTimeoutMs ?? 10_000} ms${undo}`, "timeout");
    }
    const applied = cores(appliedCpuLimitMillis(now, container.name) ?? millis);
    const result: ResizeResult = { memberId, cores: applied, elapsedMs: 0 };
    if (this.tellBackend) {
      const ip = now.status?.podIP;
      if (!ip) throw new ResizeError(`${what}: the pod has ${applied} cores but no IP to reach its backend at`, "backend");
      const address = `${ip.includes(":") ? `[${ip}]` : ip}:${this.options.backendPort ?? 50051}`;
      try {
        const told = await this.tellBackend({ memberId, address, cores: wanted, ...(maxBatch !== undefined ? { maxBatch } : {}) });
        result.cores = told.cores;
        result.maxBatch = told.maxBatch;
        result.modelResizeMs = told.resizeMs;
      } catch (err) {
        throw new ResizeError(
          `${what}: the pod has ${applied} cores, but its backend at ${address} did not take them: ${message(err)}`,
          "backend",
          {
            cause: err,
          },
        );
      }
    }
    result.elapsedMs = performance.now() - started;
    return result;
  }

  async close(): Promise<void> {
    // The pool outlives the allocator: only the channels to the backends are closed.
    this.grpc?.close();
  }

  /** The pod, if it is one of this workload's (its selector, applied by the API server) and not terminating. */
  private async poolPod(name: string, what: string): Promise<V1Pod> {
    const selector = (await this.readScale()).status?.selector;
    if (!selector) throw new Error(`${this.options.workload} reports no pod selector in its scale subresource`);
    let pods: V1Pod[];
    try {
      pods = (
        await this.core.listNamespacedPod({
          namespace: this.options.namespace,
          labelSelector: selector,
          fieldSelector: `metadata.name=${name}`,
        })
      ).items;
    } catch (err) {
      throw describe(err, what);
    }
    const pod = pods[0];
    if (!pod) throw new ResizeError(`${what}: no such pod in ${this.options.workload} (gone?)`, "gone");
    if (pod.metadata?.deletionTimestamp) throw new ResizeError(`${what}: the pod is terminating`, "gone");
    return pod;
  }

  private backendContainer(pod: V1Pod, what: string): V1Container {
    const containers = pod.spec?.containers ?? [];
    const name = this.options.container;
    const found =
      name !== undefined
        ? containers.find((c) => c.name === name)
        : (containers.find((c) => c.name === "backend") ?? (containers.length === 1 ? containers[0] : undefined));
    if (!found) {
      throw new Error(`${what}: no container ${name ?? "backend"} in the pod (it has: ${containers.map((c) => c.name).join(", ")})`);
    }
    return found;
  }

  /**
   * Refuses a resize its node cannot hold, before anything is written: the configured node limit, else
   * what the kubelet checks (the pod's new requests against the node's allocatable CPU less the requests
   * of the other pods on it), so that a resize is refused here with a reason rather than left pending.
   */
  private async checkNodeCapacity(pod: V1Pod, container: string, millis: number, what: string): Promise<void> {
    const limit = this.options.nodeCores;
    if (limit !== undefined) {
      if (millis > limit * 1000) throw new ResizeError(`${what}: beyond the node limit of ${limit} cores`, "capacity");
      return;
    }
    const nodeName = pod.spec?.nodeName;
    if (!nodeName) throw new ResizeError(`${what}: the pod is not on a node yet`, "capacity");
    let allocatable: number | undefined;
    let others: V1Pod[];
    try {
      const [node, list] = await Promise.all([
        this.core.readNode({ name: nodeName }),
        this.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` }),
      ]);
      allocatable = cpuMillis(node.status?.allocatable?.cpu);
      others = list.items;
    } catch (err) {
      throw describe(err, `${what}: reading node ${nodeName}`);
    }
    if (allocatable === undefined) throw new Error(`${what}: node ${nodeName} reports no allocatable CPU`);
    const self = (p: V1Pod) => p.metadata?.name === pod.metadata?.name && p.metadata?.namespace === pod.metadata?.namespace;
    const used = others
      .filter((p) => !self(p) && p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed")
      .reduce((sum, p) => sum + podCpuRequestMillis(p), 0);
    // The pod's other containers and overhead keep their requests.
    const rest = podCpuRequestMillis({
      ...pod,
      spec: { ...pod.spec, containers: (pod.spec?.containers ?? []).filter((c) => c.name !== container) },
    });
    const need = millis + rest;
    if (need > allocatable) {
      throw new ResizeError(`${what}: beyond node ${nodeName}'s ${cores(allocatable)} allocatable cores`, "capacity");
    }
    if (need + used > allocatable) {
      throw new ResizeError(
        `${what}: node ${nodeName} has ${cores(allocatable - used - rest)} cores free for it (${cores(allocatable)} allocatable, its other pods request ${cores(used)})`,
        "capacity",
      );
    }
  }

  /** A strategic-merge patch of the container's CPU through the resize subresource; returns the pod. */
  private async patchCpu(
    name: string,
    container: string,
    cpu: { requests?: string | undefined; limits?: string | undefined },
    what: string,
  ): Promise<V1Pod> {
    const resources: Record<string, { cpu: string }> = {};
    if (cpu.requests !== undefined) resources.requests = { cpu: cpu.requests };
    if (cpu.limits !== undefined) resources.limits = { cpu: cpu.limits };
    const body = { spec: { containers: [{ name: container, resources }] } };
    try {
      return await this.core.patchNamespacedPodResize(
        { name, namespace: this.options.namespace, body },
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      );
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) throw new ResizeError(`${what}: the pod is gone`, "gone", { cause: err });
      throw describe(err, what);
    }
  }

  /** Patches the CPU back to what it was; says so (or that it could not) for the caller's message. */
  private async undo(
    name: string,
    container: string,
    before: { requests?: string | undefined; limits?: string | undefined },
  ): Promise<string> {
    try {
      await this.patchCpu(name, container, before, "undoing the resize");
      return `; undone (CPU back at ${before.limits ?? before.requests})`;
    } catch (err) {
      return `; undoing it failed too: ${message(err)}`;
    }
  }

  /** Reads the pod until the kubelet reports the resize applied, infeasible, or the time allowed is over. */
  private async awaitKubelet(
    name: string,
    container: string,
    millis: number,
    generation: number | undefined,
    what: string,
  ): Promise<{ state: ResizeState; pod: V1Pod }> {
    const deadline = Date.now() + (this.options.resizeTimeoutMs ?? 10_000);
    // Quick at first (a CPU resize is usually applied within a second or two), then sparing the API
    // server while many backends are resized at once.
    let pollMs = this.options.resizePollMs ?? 50;
    for (;;) {
      let pod: V1Pod;
      try {
        pod = await this.core.readNamespacedPod({ name, namespace: this.options.namespace });
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) throw new ResizeError(`${what}: the pod is gone`, "gone", { cause: err });
        throw describe(err, what);
      }
      const state = resizeState(pod, container, millis, generation);
      if (state.kind === "done" || state.kind === "infeasible" || Date.now() >= deadline) return { state, pod };
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
      pollMs = Math.min(pollMs * 2, 500);
    }
  }

  private async readScale(): Promise<V1Scale> {
    const req = { name: this.workload.name, namespace: this.options.namespace };
    try {
      return this.workload.kind === "deployment"
        ? await this.apps.readNamespacedDeploymentScale(req)
        : await this.apps.readNamespacedStatefulSetScale(req);
    } catch (err) {
      throw describe(err, `reading the scale of ${this.options.workload}`);
    }
  }

  private replaceScale(body: V1Scale): Promise<V1Scale> {
    const req = { name: this.workload.name, namespace: this.options.namespace, body };
    return this.workload.kind === "deployment"
      ? this.apps.replaceNamespacedDeploymentScale(req)
      : this.apps.replaceNamespacedStatefulSetScale(req);
  }

  private async markForRemoval(ids: readonly string[]): Promise<void> {
    const body = { metadata: { annotations: { [POD_DELETION_COST]: "-1000" } } };
    await Promise.all(
      ids.map(async (name) => {
        try {
          await this.core.patchNamespacedPod(
            { name, namespace: this.options.namespace, body },
            setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
          );
        } catch (err) {
          // A pod that is already gone needs no mark; anything else is a real failure.
          if (!(err instanceof ApiException && err.code === 404)) throw describe(err, `marking pod ${name} for removal`);
        }
      }),
    );
  }
}

function inCluster(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromCluster();
  return kc;
}

function member(pod: V1Pod, container: string | undefined): PoolMember {
  const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
  const m: PoolMember = { id: pod.metadata?.name ?? "", ready, terminating: pod.metadata?.deletionTimestamp !== undefined };
  const containers = pod.spec?.containers ?? [];
  const name =
    container ?? (containers.some((c) => c.name === "backend") ? "backend" : containers.length === 1 ? containers[0]?.name : undefined);
  const millis = name === undefined ? undefined : appliedCpuLimitMillis(pod, name);
  if (millis !== undefined) m.cores = cores(millis);
  return m;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** An error that says what was attempted and what the API server answered (status and message). */
function describe(err: unknown, what: string): Error {
  if (err instanceof ApiException) {
    const body = typeof err.body === "string" ? err.body : JSON.stringify(err.body);
    let message = body;
    try {
      message = (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      // Not JSON: keep the raw body.
    }
    return new Error(`${what}: the Kubernetes API answered ${err.code}: ${message}`, { cause: err });
  }
  return err instanceof Error ? new Error(`${what}: ${err.message}`, { cause: err }) : new Error(`${what}: ${String(err)}`);
}
