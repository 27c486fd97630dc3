import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Certificate, Issuer } from "@kubernetes-models/cert-manager/cert-manager.io/v1";
import { PodMonitor, PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding } from "kubernetes-models/admissionregistration.k8s.io/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { Namespace, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { parseAllDocuments } from "yaml";

/** infra/k8s, from this file (src/ or dist/). */
export const k8sRoot = join(dirname(fileURLToPath(import.meta.url)), "..");

export const overlays = ["local", "production", "heterogeneous"] as const;
export type Overlay = (typeof overlays)[number];

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** The kubectl binary (env KUBECTL, else the PATH), or undefined when there is none. */
export function findKubectl(): string | undefined {
  if (process.env.KUBECTL) return process.env.KUBECTL;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "kubectl");
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** `kubectl kustomize` of a folder under infra/k8s, or under `root` (kustomize is built into kubectl). */
export function render(path: string, kubectl = findKubectl(), root = k8sRoot): K8sObject[] {
  if (!kubectl) throw new Error("kubectl not found (PATH or env KUBECTL): it renders the kustomize overlays");
  const out = execFileSync(kubectl, ["kustomize", join(root, path)], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return parseAllDocuments(out)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/**
 * One validating model class per kind the manifests use; the models check an object against the
 * Kubernetes OpenAPI schemas (types, required fields, enums, formats such as quantities).
 */
const models: Record<string, new (data: never) => { validate(): void }> = {
  "v1/Namespace": Namespace,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "rbac.authorization.k8s.io/v1/Role": Role,
  "rbac.authorization.k8s.io/v1/RoleBinding": RoleBinding,
  "rbac.authorization.k8s.io/v1/ClusterRole": ClusterRole,
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": ClusterRoleBinding,
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": ValidatingAdmissionPolicy,
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": ValidatingAdmissionPolicyBinding,
  // production's gRPC CA (cert-manager's CRDs).
  "cert-manager.io/v1/Issuer": Issuer,
  "cert-manager.io/v1/Certificate": Certificate,
  // monitoring/ (in production): the Prometheus Operator's CRDs.
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
};

/** Schema errors of every object, as `Kind/name: message` (empty when all are valid). */
export function validate(objects: readonly K8sObject[]): string[] {
  const errors: string[] = [];
  for (const o of objects) {
    const id = `${o.kind}/${o.metadata?.name}`;
    const Model = models[`${o.apiVersion}/${o.kind}`];
    if (!Model) {
      errors.push(`${id}: no schema known for ${o.apiVersion} ${o.kind}`);
      continue;
    }
    try {
      new Model(o as never).validate();
    } catch (err) {
      errors.push(`${id}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return errors;
}
