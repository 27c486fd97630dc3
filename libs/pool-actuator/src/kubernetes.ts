import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  type V1Scale,
} from "@kubernetes/client-node";
import { checkSize, type PoolActuator, type PoolMember, type ScaleOptions } from "./actuator.js";

export interface KubernetesActuatorOptions {
  /** Namespace of the pool's workload (in a pod: the downward API's metadata.namespace). */
  namespace: string;
  /** The workload holding the backends, e.g. `deployment/backend` or `statefulset/backend`. */
  workload: string;
  /** How to reach the API server (default: the pod's service account, `loadFromCluster`). */
  kubeConfig?: KubeConfig;
  /** Conflicting writes (another writer changed the scale meanwhile) are retried this often. */
  conflictRetries?: number;
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

  constructor(private readonly options: KubernetesActuatorOptions) {
    const kc = options.kubeConfig ?? inCluster();
    this.apps = kc.makeApiClient(AppsV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.workload = parseWorkload(options.workload);
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
      return list.items.map(member).sort((a, b) => a.id.localeCompare(b.id));
    } catch (err) {
      throw describe(err, `listing the pods of ${this.options.workload}`);
    }
  }

  async close(): Promise<void> {
    // Nothing is held: the pool outlives the allocator.
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

function member(pod: V1Pod): PoolMember {
  const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
  return { id: pod.metadata?.name ?? "", ready, terminating: pod.metadata?.deletionTimestamp !== undefined };
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
