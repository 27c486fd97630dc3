import { evaluate } from "@marcbachmann/cel-js";
import { describe, expect, it } from "vitest";
import { findKubectl, type K8sObject, overlays, render } from "./render.js";

/**
 * base/allocator-admission.yaml, evaluated: its CEL expressions run in-process (@marcbachmann/cel-js) against
 * admission requests built from each overlay's own pod templates, as the API server would run them: the
 * allocator's service account may change a backend pod's annotations and resize it, and nothing of any other
 * pod; other users are not matched. An expression that errors counts as a refusal (failurePolicy: Fail).
 * What this cannot show is the API server's own type-check of the expressions against the Pod schema.
 */
const kubectl = findKubectl();

interface Policy extends K8sObject {
  spec: {
    failurePolicy?: string;
    matchConstraints: { resourceRules: { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] }[] };
    matchConditions?: { name: string; expression: string }[];
    validations: { expression: string; message?: string }[];
  };
}
interface Binding extends K8sObject {
  spec: {
    policyName: string;
    validationActions: string[];
    matchResources?: { namespaceSelector?: { matchLabels?: Record<string, string> } };
  };
}
interface Pod {
  metadata: { name: string; namespace: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    containers: { name: string; image: string; resources?: { requests?: Record<string, string>; limits?: Record<string, string> } }[];
  };
}
type Workload = K8sObject & { spec: { template: { metadata: { labels: Record<string, string> }; spec: Pod["spec"] } } };

interface Request {
  username: string;
  namespace: string;
  subResource: "" | "resize";
  oldObject: Pod;
  object: Pod;
}

/** The verdict: "not matched" (the policy does not apply), or the messages of the failed validations (empty: admitted). */
function review(policy: Policy, r: Request): "not matched" | string[] {
  const context = {
    request: { userInfo: { username: r.username }, namespace: r.namespace, subResource: r.subResource, operation: "UPDATE" },
    object: r.object,
    oldObject: r.oldObject,
  };
  for (const c of policy.spec.matchConditions ?? []) if (evaluate(c.expression, context) !== true) return "not matched";
  const failed: string[] = [];
  for (const v of policy.spec.validations) {
    let ok: unknown;
    try {
      ok = evaluate(v.expression, context);
    } catch {
      ok = false;
    }
    if (ok !== true) failed.push(v.message ?? v.expression);
  }
  return failed;
}

const clone = <T>(x: T): T => structuredClone(x);

describe.skipIf(!kubectl).each(overlays)("infra/k8s/overlays/%s: the allocator's admission policy", (overlay) => {
  const objects = kubectl ? render(`overlays/${overlay}`, kubectl) : [];
  const ns = overlay === "local" ? "infergrid-local" : "infergrid";
  const allocator = `system:serviceaccount:${ns}:global-allocator`;
  const policy = objects.find((o) => o.kind === "ValidatingAdmissionPolicy") as Policy;
  const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet") as Workload[];
  const podOf = (w: Workload): Pod => ({
    metadata: {
      name: `${w.metadata.name}-7c9d5-abcde`,
      namespace: ns,
      labels: clone(w.spec.template.metadata.labels),
      annotations: {},
    },
    spec: clone(w.spec.template.spec),
  });
  const backends = workloads.filter((w) => w.spec.template.metadata.labels["app.kubernetes.io/name"] === "backend");
  const others = workloads.filter((w) => !backends.includes(w));
  const deletionCost = (pod: Pod): Pod => {
    const p = clone(pod);
    p.metadata.annotations = { ...p.metadata.annotations, "controller.kubernetes.io/pod-deletion-cost": "-1000" };
    return p;
  };
  const resized = (pod: Pod): Pod => {
    const p = clone(pod);
    p.spec.containers[0]!.resources = { requests: { cpu: "3" }, limits: { cpu: "3" } };
    return p;
  };

  it("applies to updates and patches of pods and their resize subresource, denying, where the allocator runs", () => {
    expect(policy.spec.failurePolicy).toBe("Fail");
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods", "pods/resize"] },
    ]);
    const binding = objects.find((o) => o.kind === "ValidatingAdmissionPolicyBinding") as Binding;
    expect(binding.spec.policyName).toBe(policy.metadata.name);
    expect(binding.spec.validationActions).toEqual(["Deny"]);
    const namespace = objects.find((o) => o.kind === "Namespace" && o.metadata.name === ns);
    for (const [k, v] of Object.entries(binding.spec.matchResources?.namespaceSelector?.matchLabels ?? {}))
      expect(namespace?.metadata.labels?.[k], `namespace ${ns} label ${k}`).toBe(v);
    // Every way the allocator's Role lets it write a pod is one the policy sees (patch and update are UPDATEs).
    type Role = K8sObject & { rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] };
    const role = objects.find((o) => o.kind === "Role") as Role;
    const writable = role.rules
      .filter((r) => r.apiGroups.includes("") && r.resources.some((x) => x === "pods" || x.startsWith("pods/")))
      .filter((r) => r.verbs.some((v) => v !== "get" && v !== "list" && v !== "watch"));
    for (const r of writable) {
      expect(
        r.verbs.filter((v) => !["get", "list", "watch", "patch", "update"].includes(v)),
        r.resources.join(),
      ).toEqual([]);
      for (const resource of r.resources) expect(policy.spec.matchConstraints.resourceRules[0]!.resources).toContain(resource);
    }
  });

  it("lets the allocator set a backend's deletion cost and resize it, for every backend Deployment's pods", () => {
    expect(backends.length).toBeGreaterThan(0);
    for (const w of backends) {
      const pod = podOf(w);
      const request = { username: allocator, namespace: ns, oldObject: pod };
      expect(review(policy, { ...request, subResource: "", object: deletionCost(pod) }), w.metadata.name).toEqual([]);
      expect(review(policy, { ...request, subResource: "resize", object: resized(pod) }), w.metadata.name).toEqual([]);
    }
  });

  it("refuses the allocator any change to a pod that is not a backend, whatever the change", () => {
    expect(others.map((w) => w.metadata.name)).toEqual(expect.arrayContaining(["broker", "frontend", "global-allocator", "nats"]));
    for (const w of others) {
      const pod = podOf(w);
      const request = { username: allocator, namespace: ns, oldObject: pod };
      expect(review(policy, { ...request, subResource: "", object: deletionCost(pod) }), w.metadata.name).toContain(
        "the global-allocator may change backend pods only",
      );
      expect(review(policy, { ...request, subResource: "resize", object: resized(pod) }), w.metadata.name).not.toEqual([]);
      // Nor by making it look like a backend in the same patch.
      const relabelled = clone(pod);
      relabelled.metadata.labels = { ...relabelled.metadata.labels, "app.kubernetes.io/name": "backend" };
      expect(review(policy, { ...request, subResource: "", object: relabelled }), w.metadata.name).not.toEqual([]);
    }
    // A pod with no labels at all is refused, not an error that slips through.
    const bare: Pod = { metadata: { name: "bare", namespace: ns }, spec: { containers: [{ name: "x", image: "x" }] } };
    expect(
      review(policy, { username: allocator, namespace: ns, subResource: "", oldObject: bare, object: deletionCost(bare) }),
    ).not.toEqual([]);
  });

  it("refuses the allocator relabelling a backend or changing its spec outside the resize subresource", () => {
    const pod = podOf(backends[0]!);
    const request = { username: allocator, namespace: ns, oldObject: pod, subResource: "" as const };
    const relabelled = clone(pod);
    relabelled.metadata.labels = { ...relabelled.metadata.labels, "app.kubernetes.io/name": "frontend" };
    expect(review(policy, { ...request, object: relabelled })).toEqual(["the global-allocator may not change a pod's labels"]);
    const extraLabel = clone(pod);
    extraLabel.metadata.labels = { ...extraLabel.metadata.labels, "infergrid.io/direct-client": "true" };
    expect(review(policy, { ...request, object: extraLabel })).toEqual(["the global-allocator may not change a pod's labels"]);
    const swapped = clone(pod);
    swapped.spec.containers[0]!.image = "attacker.example/backend:evil";
    expect(review(policy, { ...request, object: swapped })).toEqual([
      "the global-allocator may change a backend's spec only through its resize subresource",
    ]);
    expect(review(policy, { ...request, object: resized(pod) })).toEqual([
      "the global-allocator may change a backend's spec only through its resize subresource",
    ]);
  });

  it("leaves every other user alone, the same account name in another namespace included", () => {
    const pod = podOf(others[0]!);
    for (const username of [`system:serviceaccount:${ns}:default`, "kubernetes-admin", `system:serviceaccount:elsewhere:global-allocator`])
      expect(review(policy, { username, namespace: ns, subResource: "", oldObject: pod, object: deletionCost(pod) }), username).toBe(
        "not matched",
      );
  });
});
