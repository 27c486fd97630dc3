import { SLOW_LOOP_DEFAULTS } from "@infergrid/allocation";
import { KUBERNETES_NATS_USERS, natsAuthorization } from "@infergrid/control-plane";
import { envName } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { findKubectl, type K8sObject, overlays, render, validate } from "./render.js";

/**
 * Renders every overlay with `kubectl kustomize` (offline, as `kubectl apply -k` would) and checks
 * each object against the Kubernetes schemas (kubernetes-models), then the properties the system
 * relies on: probes on the gRPC health service, resources, non-root, PDBs, NetworkPolicies that
 * expose only the broker, RBAC for the allocator's scale and resize calls, backends resizable in place
 * (CPU resizePolicy NotRequired, the control token mounted), NATS with JetStream on a volume; and in
 * overlays/heterogeneous, one backend Deployment per instance type wired to the allocator's per-type pools.
 */
const kubectl = findKubectl();
if (!kubectl) {
  // Only when the machine truly has no kubectl: say so loudly rather than pass silently.
  process.stderr.write("infra/k8s: SKIPPED: kubectl not found (PATH or env KUBECTL); the manifests were not rendered\n");
}

interface Probe {
  grpc?: { port: number };
  tcpSocket?: { port: number | string };
  httpGet?: unknown;
}
interface Container {
  name: string;
  image: string;
  imagePullPolicy?: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name?: string; containerPort: number }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  resizePolicy?: { resourceName: string; restartPolicy: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
}
interface PodSpec {
  containers: Container[];
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  nodeSelector?: Record<string, string>;
  volumes?: { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] } }[];
}
interface Workload extends K8sObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
    volumeClaimTemplates?: unknown[];
  };
}
interface Rule {
  from?: { podSelector?: { matchLabels?: Record<string, string> }; namespaceSelector?: unknown }[];
  ports?: { port: number }[];
}
interface Policy extends K8sObject {
  spec: { podSelector: { matchLabels?: Record<string, string>; matchExpressions?: { values: string[] }[] }; ingress?: Rule[] };
}

type RoleObject = K8sObject & { rules: { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }[] };

/** The backend pool's Deployments: the single-type `backend`, or one per instance type. */
const backendDeployments = (overlay: string) => (overlay === "heterogeneous" ? ["backend-g4dn-xlarge", "backend-r5n-large"] : ["backend"]);

const byKind = <T extends K8sObject>(objects: K8sObject[], kind: string) => objects.filter((o) => o.kind === kind) as T[];
const named = <T extends K8sObject>(objects: K8sObject[], kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`${kind}/${name} not rendered`);
  return found as T;
};

describe.skipIf(!kubectl).each(overlays)("infra/k8s/overlays/%s", (overlay) => {
  const objects = kubectl ? render(`overlays/${overlay}`, kubectl) : [];
  const workloads = [...byKind<Workload>(objects, "Deployment"), ...byKind<Workload>(objects, "StatefulSet")];
  const services = ["broker", "frontend", ...backendDeployments(overlay), "predictor", "global-allocator", "console"];

  it("renders every object, each valid against the Kubernetes schemas", () => {
    expect(objects.length).toBeGreaterThanOrEqual(25);
    expect(validate(objects)).toEqual([]);
    const ns = overlay === "local" ? "infergrid-local" : "infergrid";
    // kustomize 5.5 does not know the admission policy kinds are cluster-scoped and gives them the overlay's
    // namespace, which kubectl drops for cluster-scoped kinds.
    const clusterScoped = [
      "Namespace",
      "ClusterRole",
      "ClusterRoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ];
    for (const o of objects.filter((x) => !clusterScoped.includes(x.kind)))
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(ns);
  });

  it("has a Deployment per service and NATS as a StatefulSet with JetStream on a persistent volume", () => {
    expect(
      byKind<Workload>(objects, "Deployment")
        .map((d) => d.metadata.name)
        .sort(),
    ).toEqual([...services].sort());
    const nats = named<Workload>(objects, "StatefulSet", "nats");
    expect(nats.spec.volumeClaimTemplates).toHaveLength(1);
    const conf = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config")) as K8sObject & {
      data: Record<string, string>;
    };
    expect(conf.data["nats.conf"]).toMatch(/jetstream\s*\{[^}]*store_dir: \/data/);
  });

  it("selects each workload's own pods", () => {
    for (const w of workloads) {
      for (const [k, v] of Object.entries(w.spec.selector.matchLabels)) expect(w.spec.template.metadata.labels[k]).toBe(v);
    }
  });

  it(
    overlay === "local"
      ? "probes every service on the gRPC health service, with requests and limits, as a non-root user with nothing to escalate"
      : "probes every gRPC service with a TCP connect (kubelet has no client certificate for mutual TLS), with requests and limits, as a non-root user with nothing to escalate",
    () => {
      for (const w of workloads) {
        const pod = w.spec.template.spec;
        expect(pod.securityContext?.runAsNonRoot, w.metadata.name).toBe(true);
        expect(pod.securityContext?.runAsUser).toBeGreaterThan(0);
        for (const c of pod.containers) {
          for (const r of ["cpu", "memory"]) {
            expect(c.resources?.requests?.[r], `${w.metadata.name} requests.${r}`).toBeDefined();
            expect(c.resources?.limits?.[r], `${w.metadata.name} limits.${r}`).toBeDefined();
          }
          expect(c.securityContext).toMatchObject({
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ["ALL"] },
          });
          if (w.kind === "Deployment" && w.metadata.name === "console") {
            // The console serves no gRPC: /healthz on its metrics port, which needs no token.
            for (const probe of [c.readinessProbe, c.livenessProbe])
              expect(probe?.httpGet, "console").toEqual({ path: "/healthz", port: "metrics" });
          } else if (w.kind === "Deployment" && overlay === "local") {
            for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) expect(probe?.grpc?.port, w.metadata.name).toBe(50051);
          } else if (w.kind === "Deployment") {
            for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
              expect(probe?.tcpSocket, w.metadata.name).toEqual({ port: "grpc" });
              expect(probe?.grpc, w.metadata.name).toBeUndefined();
            }
            expect(c.ports?.find((p) => p.name === "grpc")?.containerPort, w.metadata.name).toBe(50051);
          } else {
            expect(c.readinessProbe?.httpGet).toBeDefined();
          }
        }
      }
    },
  );

  it("gives every service its role's NATS user, the password from the Secret (never a literal), and NATS those users' permissions", () => {
    const secretNames = byKind(objects, "Secret").map((s) => s.metadata.name);
    const roleOf = (name: string) => (name === "global-allocator" ? "allocator" : name.startsWith("backend") ? "backend" : name);
    for (const w of byKind<Workload>(objects, "Deployment")) {
      const env = w.spec.template.spec.containers[0]!.env ?? [];
      const role = roleOf(w.metadata.name);
      expect(env.find((e) => e.name === "INFERGRID_NATS_USER")?.value, w.metadata.name).toBe(role);
      const pass = env.find((e) => e.name === "INFERGRID_NATS_PASS")?.valueFrom?.secretKeyRef;
      expect(pass, w.metadata.name).toEqual({ name: expect.stringMatching(/^infergrid-nats-auth/), key: `${role}-password` });
      // local ships a generated development Secret; production expects one made outside git.
      if (overlay === "local") expect(secretNames).toContain(pass?.name);
      else expect(secretNames).toEqual([]);
    }
    // The server's users are the roles, each with libs/control-plane's permissions, passwords from the same Secret.
    const conf = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config")) as K8sObject & {
      data: Record<string, string>;
    };
    expect(conf.data["nats.conf"]).toContain(natsAuthorization(KUBERNETES_NATS_USERS));
    const nats = named<Workload>(objects, "StatefulSet", "nats").spec.template.spec.containers[0]!;
    for (const u of KUBERNETES_NATS_USERS)
      expect(nats.env?.find((e) => e.name === u.passwordEnv)?.valueFrom?.secretKeyRef, u.user).toEqual({
        name: expect.stringMatching(/^infergrid-nats-auth/),
        key: `${u.user}-password`,
      });
  });

  it("runs what the simulator evaluates as the default (`infergrid`): the slow loop and the frontends' sizing at their defaults", () => {
    const envOf = (name: string) => named<Workload>(objects, "Deployment", name).spec.template.spec.containers[0]!.env ?? [];
    const setIn = (name: string, keys: string[]) =>
      envOf(name)
        .map((e) => e.name)
        .filter((e) => keys.some((k) => envName("INFERGRID", k) === e));
    expect(envOf("global-allocator").find((e) => e.name === "INFERGRID_POLICY")?.value).toBe("faro");
    // A slow-loop setting in a manifest would deploy a combination no simulator run has measured.
    expect(setIn("global-allocator", Object.keys(SLOW_LOOP_DEFAULTS))).toEqual([]);
    expect(setIn("frontend", ["scaling", "pruneBudget", "learnedHeadroom"])).toEqual([]);
  });

  it("declares the backends resizable in place: CPU resizes never restart them, and they and the allocator share the control token", () => {
    for (const name of backendDeployments(overlay)) {
      const c = named<Workload>(objects, "Deployment", name).spec.template.spec.containers[0]!;
      expect(c.resizePolicy, name).toEqual([{ resourceName: "cpu", restartPolicy: "NotRequired" }]);
    }
    if (overlay !== "heterogeneous") {
      // Themis's horizontal unit: one core, requested as much as allowed, so the node accounts for it.
      const c = named<Workload>(objects, "Deployment", "backend").spec.template.spec.containers[0]!;
      expect(c.resources?.limits?.cpu).toBe("1");
      if (overlay === "production") expect(c.resources?.requests?.cpu).toBe("1");
    }
    const secretNames = byKind(objects, "Secret").map((s) => s.metadata.name);
    for (const name of [...backendDeployments(overlay), "global-allocator"]) {
      const pod = named<Workload>(objects, "Deployment", name).spec.template.spec;
      const c = pod.containers[0]!;
      const file = c.env?.find((e) => e.name === "INFERGRID_CONTROL_TOKEN_FILE")?.value;
      expect(file, name).toBe("/etc/infergrid/control/token");
      const mount = c.volumeMounts?.find((m) => m.mountPath === "/etc/infergrid/control");
      expect(mount?.readOnly, name).toBe(true);
      const secret = pod.volumes?.find((v) => v.name === mount?.name)?.secret;
      expect(secret?.items, name).toEqual([{ key: "token", path: "token" }]);
      expect(secret?.secretName, name).toMatch(/^infergrid-control-token/);
      // Never a literal in the environment.
      expect(
        c.env?.some((e) => e.name === "INFERGRID_CONTROL_TOKEN"),
        name,
      ).toBe(false);
      if (overlay === "local") expect(secretNames).toContain(secret?.secretName);
    }
  });

  it("budgets disruptions for broker, frontends, backends and NATS", () => {
    const pdbs = byKind<K8sObject & { spec: { selector: { matchLabels: Record<string, string> } } }>(objects, "PodDisruptionBudget");
    expect(pdbs.map((p) => p.spec.selector.matchLabels["app.kubernetes.io/name"]).sort()).toEqual([
      "backend",
      "broker",
      "frontend",
      "nats",
    ]);
  });

  it("lets only the broker be reached from outside, backends only from frontends and the allocator", () => {
    const policies = byKind<Policy>(objects, "NetworkPolicy");
    const denyAll = policies.find((p) => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress);
    expect(denyAll, "a default-deny ingress policy").toBeDefined();
    // A rule without `from` admits any source: only the broker's policy may have one.
    const open = policies.filter((p) => p.spec.ingress?.some((r) => !r.from));
    expect(open.map((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"])).toEqual(["broker"]);
    const toBackend = policies.filter((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "backend");
    const sources = toBackend.flatMap((p) => p.spec.ingress ?? []).flatMap((r) => r.from ?? []);
    expect(sources.map((s) => s.podSelector?.matchLabels).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual([
      { "app.kubernetes.io/name": "frontend" },
      { "app.kubernetes.io/name": "global-allocator" },
    ]);
    // Frontends: the broker, and the pods an operator labels as direct clients.
    const toFrontend = policies.filter((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "frontend");
    const frontendSources = toFrontend.flatMap((p) => p.spec.ingress ?? []).flatMap((r) => r.from ?? []);
    expect(frontendSources.filter((s) => !s.namespaceSelector).map((s) => s.podSelector?.matchLabels)).toEqual([
      { "app.kubernetes.io/name": "broker" },
      { "infergrid.io/direct-client": "true" },
    ]);
    // Every other policy admits sources inside the namespace, or the monitoring namespace on metrics ports,
    // or (the console's page only) pods and namespaces an operator labels as console clients.
    for (const p of policies) {
      const console = p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "console";
      for (const r of p.spec.ingress ?? []) {
        for (const f of r.from ?? []) {
          if (f.namespaceSelector) expect(r.ports?.map((x) => x.port).sort()).toEqual(console ? [8090] : [8222, 9464]);
        }
      }
    }
    const toConsole = policies.filter((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "console");
    expect(toConsole.flatMap((p) => p.spec.ingress ?? []).flatMap((r) => r.ports?.map((x) => x.port) ?? [])).toEqual([8090]);
  });

  // production and heterogeneous (built on it) put the console behind its token.
  it(overlay !== "local" ? "serves the console only with its token, from a Secret" : "serves the console", () => {
    const c = named<Workload>(objects, "Deployment", "console").spec.template.spec.containers[0]!;
    expect(c.ports?.find((p) => p.name === "http")?.containerPort).toBe(8090);
    const tokenFile = c.env?.find((e) => e.name === "INFERGRID_AUTH_TOKEN_FILE")?.value;
    if (overlay === "local") {
      expect(tokenFile).toBeUndefined();
      return;
    }
    expect(tokenFile).toBe("/etc/infergrid/console/token");
    const mount = c.volumeMounts?.find((m) => m.mountPath === "/etc/infergrid/console");
    expect(mount?.readOnly).toBe(true);
    const pod = named<Workload>(objects, "Deployment", "console").spec.template.spec;
    expect(pod.volumes?.find((v) => v.name === mount?.name)?.secret).toEqual({
      secretName: "infergrid-console-token",
      items: [{ key: "token", path: "token" }],
    });
    // Inside the cluster only: the console has no LoadBalancer.
    const svc = named<K8sObject & { spec: { type?: string } }>(objects, "Service", "console");
    expect(svc.spec.type ?? "ClusterIP").toBe("ClusterIP");
  });

  it("lets the allocator (and only it) scale the backend pool and list its pods", () => {
    const allocator = named<Workload>(objects, "Deployment", "global-allocator");
    expect(allocator.spec.template.spec.serviceAccountName).toBe("global-allocator");
    for (const w of byKind<Workload>(objects, "Deployment").filter((d) => d.metadata.name !== "global-allocator")) {
      expect(w.spec.template.spec.automountServiceAccountToken, w.metadata.name).toBe(false);
    }
    const role = byKind<RoleObject>(objects, "Role")[0]!;
    const scale = role.rules.find((r) => r.resources.includes("deployments/scale"));
    expect(scale?.apiGroups).toEqual(["apps"]);
    expect([...(scale?.resourceNames ?? [])].sort()).toEqual(backendDeployments(overlay));
    expect(scale?.verbs).toEqual(expect.arrayContaining(["get", "update"]));
    expect(role.rules.find((r) => r.resources.includes("pods"))?.verbs).toEqual(expect.arrayContaining(["list", "patch"]));
    expect(role.rules.find((r) => r.resources.includes("pods/resize"))?.verbs).toEqual(["get", "patch"]);
    expect(role.rules.flatMap((r) => r.verbs)).not.toContain("delete");
    type Binding = K8sObject & { subjects: { kind: string; name: string; namespace?: string }[]; roleRef: { kind: string; name: string } };
    const binding = byKind<Binding>(objects, "RoleBinding")[0]!;
    expect(binding.subjects.map((s) => s.name)).toEqual(["global-allocator"]);
    expect(binding.roleRef.name).toBe(role.metadata.name);
    // Beyond the namespace only reads: the node's allocatable CPU and the pods on it bound a resize.
    const clusterRoles = byKind<RoleObject>(objects, "ClusterRole");
    expect(clusterRoles).toHaveLength(1);
    expect(clusterRoles[0]!.rules.map((r) => [r.resources, r.verbs])).toEqual([
      [["nodes"], ["get"]],
      [["pods"], ["list"]],
    ]);
    const clusterBinding = byKind<Binding>(objects, "ClusterRoleBinding")[0]!;
    expect(clusterBinding.roleRef).toMatchObject({ kind: "ClusterRole", name: clusterRoles[0]!.metadata.name });
    expect(clusterBinding.subjects).toEqual([
      { kind: "ServiceAccount", name: "global-allocator", namespace: overlay === "local" ? "infergrid-local" : "infergrid" },
    ]);
  });

  it(overlay === "local" ? "uses the locally built images, never pulled" : "uses released images from the registry", () => {
    for (const w of workloads) {
      const c = w.spec.template.spec.containers[0]!;
      if (overlay === "local") {
        expect(c.image).toMatch(/^localhost\/(infergrid-[a-z-]+|nats):local$/);
        expect(c.imagePullPolicy).toBe("Never");
      } else {
        expect(c.image).toMatch(/:[0-9][\w.-]*$/);
        expect(c.image).not.toMatch(/:latest$/);
      }
    }
  });
});

describe.skipIf(!kubectl)("infra/k8s/overlays/heterogeneous: one backend Deployment per instance type", () => {
  const objects = kubectl ? render("overlays/heterogeneous", kubectl) : [];
  const expected = {
    "backend-g4dn-xlarge": { type: "g4dn.xlarge", requests: { cpu: "3500m", memory: "12Gi" }, limits: { cpu: "4", memory: "14Gi" } },
    "backend-r5n-large": { type: "r5n.large", requests: { cpu: "1500m", memory: "12Gi" }, limits: { cpu: "2", memory: "14Gi" } },
  } as const;
  const backends = byKind<Workload>(objects, "Deployment").filter(
    (d) => d.spec.template.metadata.labels["app.kubernetes.io/name"] === "backend",
  );
  const allocatorEnv = (name: string) =>
    named<Workload>(objects, "Deployment", "global-allocator").spec.template.spec.containers[0]!.env?.find((e) => e.name === name)?.value;

  it("has exactly the per-type Deployments, each pinned to its instance type, with its own resources and INFERGRID_INSTANCE_TYPE", () => {
    expect(backends.map((d) => d.metadata.name).sort()).toEqual(Object.keys(expected));
    for (const d of backends) {
      const want = expected[d.metadata.name as keyof typeof expected];
      const pod = d.spec.template.spec;
      const c = pod.containers[0]!;
      expect(d.spec.selector.matchLabels, d.metadata.name).toEqual({
        "app.kubernetes.io/name": "backend",
        "infergrid.io/instance-type": want.type,
      });
      expect(pod.nodeSelector).toEqual({ "node.kubernetes.io/instance-type": want.type });
      expect(c.env?.find((e) => e.name === "INFERGRID_INSTANCE_TYPE")?.value).toBe(want.type);
      expect(c.resources).toEqual({ requests: want.requests, limits: want.limits });
      expect(c.image).toMatch(/^ghcr\.io\/infergrid\/backend-worker:0\.1\.0$/);
      // Production's NATS CA reaches the added Deployments too.
      expect(pod.volumes?.map((v) => v.name)).toContain("nats-tls");
    }
  });

  it("no two pools' selectors claim the same pods", () => {
    for (const a of backends) {
      for (const b of backends.filter((x) => x !== a)) {
        const claims = Object.entries(a.spec.selector.matchLabels).every(([k, v]) => b.spec.template.metadata.labels[k] === v);
        expect(claims, `${a.metadata.name} selects ${b.metadata.name}'s pods`).toBe(false);
      }
    }
  });

  it("configures the allocator with one pool per Deployment and a price list naming each pool's type", () => {
    expect(allocatorEnv("INFERGRID_POOL_ACTUATOR")).toBe("kubernetes");
    expect(allocatorEnv("INFERGRID_POOL_WORKLOAD")).toBeUndefined();
    const pools = (allocatorEnv("INFERGRID_POOL_TYPES") ?? "").split(",").map((e) => e.split("="));
    expect(Object.fromEntries(pools)).toEqual(
      Object.fromEntries(Object.entries(expected).map(([name, e]) => [e.type, `deployment/${name}`])),
    );
    const prices = JSON.parse(allocatorEnv("INFERGRID_INSTANCE_TYPES") ?? "[]") as {
      name: string;
      pricePerHour: number;
      maxCount: number;
    }[];
    expect(prices.map((p) => p.name).sort()).toEqual(pools.map(([type]) => type).sort());
    for (const p of prices) {
      expect(p.pricePerHour).toBeGreaterThan(0);
      expect(Number.isInteger(p.maxCount)).toBe(true);
    }
    // The cluster's capacity is what the types may hold together.
    expect(Number(allocatorEnv("INFERGRID_POOL_MAX_SIZE"))).toBe(prices.reduce((n, p) => n + p.maxCount, 0));
  });

  it("lets the allocator read and scale every per-type Deployment, and nothing else", () => {
    const role = byKind<RoleObject>(objects, "Role")[0]!;
    const workloads = (allocatorEnv("INFERGRID_POOL_TYPES") ?? "").split(",").map((e) => e.split("=")[1]!);
    for (const w of workloads) {
      const [kind, name] = w.split("/") as [string, string];
      expect(kind).toBe("deployment");
      expect(
        byKind<Workload>(objects, "Deployment").some((d) => d.metadata.name === name),
        `${w} is rendered`,
      ).toBe(true);
      const rule = (resource: string) => role.rules.find((r) => r.resources.includes(resource) && r.resourceNames?.includes(name));
      expect(rule("deployments/scale")?.verbs, `${name} scale`).toEqual(expect.arrayContaining(["get", "update"]));
      expect(rule("deployments")?.verbs, name).toContain("get");
    }
    expect(role.rules.flatMap((r) => r.resourceNames ?? []).sort()).toEqual(
      [...workloads, ...workloads].map((w) => w.split("/")[1]).sort(),
    );
  });
});
