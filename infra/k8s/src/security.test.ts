import { identityFromSubjectAltName } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { findKubectl, type K8sObject, overlays, render, validate } from "./render.js";

/**
 * The production overlay's defences, as rendered: every gRPC pod's own certificate (cert-manager's CSI
 * driver) naming its role and pod, mutual TLS with peer roles and TCP probes; the broker's client tokens; in
 * every overlay, egress limited per role to exactly what the role calls (and each such hop admitted by the
 * callee's ingress policies); and no service-account token anywhere but the allocator.
 */
const kubectl = findKubectl();

type Labels = Record<string, string>;
interface Selector {
  matchLabels?: Labels;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}
interface Container {
  name: string;
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  readinessProbe?: { tcpSocket?: { port: string | number } };
  livenessProbe?: { tcpSocket?: { port: string | number } };
  startupProbe?: { tcpSocket?: { port: string | number } };
}
interface Volume {
  name: string;
  csi?: { driver: string; readOnly?: boolean; volumeAttributes?: Record<string, string> };
  secret?: { secretName: string; items?: { key: string; path: string }[] };
}
interface Workload extends K8sObject {
  spec: {
    template: {
      metadata: { labels: Labels };
      spec: { containers: Container[]; volumes?: Volume[]; serviceAccountName?: string; automountServiceAccountToken?: boolean };
    };
  };
}
interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string };
}
interface PolicyRule {
  to?: Peer[];
  from?: Peer[];
  ports?: { port: number; protocol?: string }[];
}
interface Policy extends K8sObject {
  spec: { podSelector: Selector; policyTypes?: string[]; ingress?: PolicyRule[]; egress?: PolicyRule[] };
}

const NAME = "app.kubernetes.io/name";
const byKind = <T extends K8sObject>(objects: readonly K8sObject[], kind: string) => objects.filter((o) => o.kind === kind) as T[];
const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name)?.value;

/** A label selector's verdict on a set of labels (the operators NetworkPolicies and bindings use). */
function selects(selector: Selector, labels: Labels): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    const value = labels[e.key];
    const ok =
      e.operator === "In"
        ? value !== undefined && (e.values ?? []).includes(value)
        : e.operator === "NotIn"
          ? value === undefined || !(e.values ?? []).includes(value)
          : e.operator === "Exists"
            ? has
            : e.operator === "DoesNotExist"
              ? !has
              : false;
    if (!ok) return false;
  }
  return true;
}

describe("label selectors as the tests read them", () => {
  it("match the way Kubernetes matches them", () => {
    expect(selects({}, { a: "1" })).toBe(true);
    expect(selects({ matchLabels: { a: "1" } }, { a: "2" })).toBe(false);
    expect(selects({ matchExpressions: [{ key: "a", operator: "In", values: ["1", "2"] }] }, { a: "2" })).toBe(true);
    expect(selects({ matchExpressions: [{ key: "a", operator: "In", values: ["1"] }] }, {})).toBe(false);
    expect(selects({ matchExpressions: [{ key: "a", operator: "NotIn", values: ["1"] }] }, {})).toBe(true);
    expect(selects({ matchExpressions: [{ key: "a", operator: "Exists" }] }, { b: "1" })).toBe(false);
  });
});

/** The role each gRPC Deployment's pods speak as, and the Service names its certificate must carry. */
const GRPC_ROLES: Record<string, { role: string; names: string[] }> = {
  broker: { role: "broker", names: ["broker"] },
  frontend: { role: "frontend", names: ["frontend", "frontend-direct"] },
  backend: { role: "backend", names: ["backend"] },
  predictor: { role: "predictor", names: ["predictor"] },
  "global-allocator": { role: "allocator", names: ["global-allocator"] },
};
/** Whom each role dials over gRPC (its callee's name is what it checks in the server's certificate). */
const CALLEE: Record<string, string | undefined> = { broker: "frontend", frontend: "backend", "global-allocator": "backend" };

/** What cert-manager's csi-driver accepts (pkg/apis/v1alpha1 and validation): a typo there fails at mount time, in the pod. */
const CSI_ATTRIBUTES = new Set(
  [
    "issuer-name",
    "issuer-kind",
    "issuer-group",
    "common-name",
    "dns-names",
    "ip-sans",
    "uri-sans",
    "duration",
    "is-ca",
    "key-usages",
    "key-algorithm",
    "key-encoding",
    "key-size",
    "ca-file",
    "certificate-file",
    "privatekey-file",
    "fs-group",
    "renew-before",
    "reuse-private-key",
  ].map((k) => `csi.cert-manager.io/${k}`),
);
const CSI_VARIABLES = new Set(["POD_NAME", "POD_NAMESPACE", "POD_UID", "SERVICE_ACCOUNT_NAME"]);
/** The csi-driver's own placeholders (os.Expand syntax), written out as such in the manifests. */
const POD_NAME = "$" + "{POD_NAME}";
const POD_NAMESPACE = "$" + "{POD_NAMESPACE}";
const KEY_USAGES = new Set(["digital signature", "key encipherment", "server auth", "client auth"]);

/** The problems the csi-driver would find in a volume's attributes (empty when it would issue). */
function csiProblems(attrs: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(attrs)) if (!CSI_ATTRIBUTES.has(key)) problems.push(`unknown attribute ${key}`);
  if (!attrs["csi.cert-manager.io/issuer-name"]) problems.push("issuer-name is required");
  for (const [key, value] of Object.entries(attrs)) {
    for (const m of value.matchAll(/\$\{?([A-Za-z_]+)\}?/g))
      if (!CSI_VARIABLES.has(m[1]!)) problems.push(`${key}: undefined variable ${m[1]}`);
  }
  for (const u of (attrs["csi.cert-manager.io/key-usages"] ?? "").split(",").filter(Boolean)) {
    if (!KEY_USAGES.has(u.trim())) problems.push(`not a key usage: ${u}`);
  }
  const duration = attrs["csi.cert-manager.io/duration"];
  if (duration !== undefined && !/^(\d+h)?(\d+m)?(\d+s)?$/.test(duration)) problems.push(`not a duration: ${duration}`);
  const files = ["ca-file", "certificate-file", "privatekey-file"].map((k) => attrs[`csi.cert-manager.io/${k}`]);
  for (const f of files) if (f === undefined || f.includes("/") || f.startsWith("..")) problems.push(`bad file name ${f}`);
  if (new Set(files).size !== files.length) problems.push("file names must differ");
  return problems;
}

describe("the csi-driver attribute check", () => {
  it("finds what the driver would refuse", () => {
    const good = {
      "csi.cert-manager.io/issuer-name": "ca",
      "csi.cert-manager.io/uri-sans": `spiffe://infergrid/x/${POD_NAME}`,
      "csi.cert-manager.io/ca-file": "ca.crt",
      "csi.cert-manager.io/certificate-file": "tls.crt",
      "csi.cert-manager.io/privatekey-file": "tls.key",
    };
    expect(csiProblems(good)).toEqual([]);
    expect(csiProblems({ ...good, "csi.cert-manager.io/uri-sans": `spiffe://infergrid/x/${"$"}{POD_IP}` })).toEqual([
      "csi.cert-manager.io/uri-sans: undefined variable POD_IP",
    ]);
    expect(csiProblems({ ...good, "csi.cert-manager.io/uri-san": "x" })).toContain("unknown attribute csi.cert-manager.io/uri-san");
    expect(csiProblems({ ...good, "csi.cert-manager.io/ca-file": "tls.crt" })).toEqual(["file names must differ"]);
    expect(csiProblems({ ...good, "csi.cert-manager.io/key-usages": "server auth,client-auth" })).toEqual(["not a key usage: client-auth"]);
  });
});

describe.skipIf(!kubectl).each(overlays)("infra/k8s/overlays/%s: security", (overlay) => {
  const objects = kubectl ? render(`overlays/${overlay}`, kubectl) : [];
  const deployments = byKind<Workload>(objects, "Deployment");
  const workloads = [...deployments, ...byKind<Workload>(objects, "StatefulSet")];
  const policies = byKind<Policy>(objects, "NetworkPolicy");
  const roleOf = (w: Workload) => w.spec.template.metadata.labels[NAME]!;
  const mtls = overlay !== "local";

  it(
    mtls
      ? "gives every gRPC pod its own certificate naming its role and pod, from the namespace's CA"
      : "runs gRPC without TLS (no cert-manager assumed)",
    () => {
      const grpcDeployments = deployments.filter((d) => roleOf(d) in GRPC_ROLES);
      expect(grpcDeployments.map(roleOf).sort()).toEqual(
        overlay === "heterogeneous"
          ? ["backend", "backend", "broker", "frontend", "global-allocator", "predictor"]
          : Object.keys(GRPC_ROLES).sort(),
      );
      for (const d of grpcDeployments) {
        const name = d.metadata.name;
        const pod = d.spec.template.spec;
        const c = pod.containers[0]!;
        const volume = pod.volumes?.find((v) => v.csi);
        if (!mtls) {
          expect(volume, name).toBeUndefined();
          expect(envOf(c, "INFERGRID_GRPC_TLS_CERT_FILE"), name).toBeUndefined();
          continue;
        }
        const want = GRPC_ROLES[roleOf(d)]!;
        expect(volume?.csi?.driver, name).toBe("csi.cert-manager.io");
        expect(volume?.csi?.readOnly, name).toBe(true);
        const attrs = volume?.csi?.volumeAttributes ?? {};
        expect(csiProblems(attrs), name).toEqual([]);
        // The identity --grpc-peer-roles admits by: the role, and the pod's name, which is the instance id.
        expect(attrs["csi.cert-manager.io/uri-sans"], name).toBe(`spiffe://infergrid/${want.role}/${POD_NAME}`);
        expect(c.env?.find((e) => e.name === "INFERGRID_ID")?.valueFrom?.fieldRef?.fieldPath, name).toBe("metadata.name");
        const podName = `${name}-5d8f7c9b4-x2x7k`;
        const san = `URI:${attrs["csi.cert-manager.io/uri-sans"]!.replace(POD_NAME, podName)}`;
        expect(identityFromSubjectAltName(san), name).toEqual({ role: want.role, id: podName });
        const dns = (attrs["csi.cert-manager.io/dns-names"] ?? "").split(",");
        for (const n of want.names) expect(dns, name).toEqual(expect.arrayContaining([n, `${n}.${POD_NAMESPACE}.svc`]));
        // No other role's name: a pod must not be able to pose as another role's server.
        for (const [otherRole, other] of Object.entries(GRPC_ROLES)) {
          if (otherRole !== roleOf(d)) for (const n of other.names) expect(dns, `${name} names ${n}`).not.toContain(n);
        }
        expect(attrs["csi.cert-manager.io/key-usages"]?.split(","), name).toEqual(expect.arrayContaining(["server auth", "client auth"]));
        expect(attrs["csi.cert-manager.io/fs-group"], name).toBe("1000");

        // The services read the very files the driver writes, and turn peer roles on.
        const mount = c.volumeMounts?.find((m) => m.name === volume?.name);
        expect(mount?.readOnly, name).toBe(true);
        const file = (key: string) => `${mount?.mountPath}/${attrs[`csi.cert-manager.io/${key}`]}`;
        expect(envOf(c, "INFERGRID_GRPC_TLS_CERT_FILE"), name).toBe(file("certificate-file"));
        expect(envOf(c, "INFERGRID_GRPC_TLS_KEY_FILE"), name).toBe(file("privatekey-file"));
        expect(envOf(c, "INFERGRID_GRPC_TLS_CA_FILE"), name).toBe(file("ca-file"));
        expect(envOf(c, "INFERGRID_GRPC_PEER_ROLES"), name).toBe("true");
        // NATS users are per role: heartbeats are believed only on their own pod's signature.
        expect(envOf(c, "INFERGRID_SIGNED_HEARTBEATS"), name).toBe("true");
        for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) expect(probe?.tcpSocket, name).toEqual({ port: "grpc" });

        // Each caller checks for its callee's name, which only the callee's certificates carry.
        const callee = CALLEE[roleOf(d)];
        expect(envOf(c, "INFERGRID_GRPC_TLS_SERVER_NAME"), name).toBe(callee);
        if (callee !== undefined) {
          const calleeDns = deployments
            .filter((x) => roleOf(x) === callee)
            .map((x) => x.spec.template.spec.volumes?.find((v) => v.csi)?.csi?.volumeAttributes?.["csi.cert-manager.io/dns-names"]);
          expect(calleeDns.length, name).toBeGreaterThan(0);
          for (const names of calleeDns) expect(names?.split(","), `${name} -> ${callee}`).toContain(callee);
        }
      }
      // The console serves no gRPC and gets no certificate.
      const console = deployments.find((d) => d.metadata.name === "console")!;
      expect(console.spec.template.spec.volumes?.some((v) => v.csi)).toBe(false);
    },
  );

  it.skipIf(!mtls)("issues from a CA Issuer whose CA a self-signed Issuer bootstraps", () => {
    type Issuer = K8sObject & { spec: { selfSigned?: object; ca?: { secretName: string } } };
    type Certificate = K8sObject & { spec: { isCA?: boolean; secretName: string; issuerRef: { name: string; kind?: string } } };
    const issuers = byKind<Issuer>(objects, "Issuer");
    const certificates = byKind<Certificate>(objects, "Certificate");
    const used = new Set(
      deployments.flatMap((d) =>
        (d.spec.template.spec.volumes ?? []).flatMap((v) => (v.csi ? [v.csi.volumeAttributes?.["csi.cert-manager.io/issuer-name"]] : [])),
      ),
    );
    expect([...used]).toEqual(["infergrid-grpc-ca"]);
    const ca = issuers.find((i) => i.metadata.name === "infergrid-grpc-ca");
    expect(ca?.spec.ca?.secretName).toBe("infergrid-grpc-ca");
    const caCert = certificates.find((c) => c.spec.secretName === ca?.spec.ca?.secretName);
    expect(caCert?.spec.isCA).toBe(true);
    expect(caCert?.spec.issuerRef.kind).toBe("Issuer");
    expect(issuers.find((i) => i.metadata.name === caCert?.spec.issuerRef.name)?.spec.selfSigned).toEqual({});
    // The schema check catches a broken Certificate (cert-manager's CRD schema, not only Kubernetes').
    expect(validate([{ ...caCert!, spec: { ...caCert!.spec, isCA: "yes" } } as K8sObject])).not.toEqual([]);
  });

  it.skipIf(!mtls)("makes the broker's clients authenticate with tokens from the Secret infergrid-client-tokens", () => {
    const broker = deployments.find((d) => d.metadata.name === "broker")!;
    const c = broker.spec.template.spec.containers[0]!;
    const file = envOf(c, "INFERGRID_CLIENT_TOKENS_FILE");
    const mount = c.volumeMounts?.find((m) => file?.startsWith(`${m.mountPath}/`));
    expect(mount?.readOnly).toBe(true);
    const volume = broker.spec.template.spec.volumes?.find((v) => v.name === mount?.name);
    expect(volume?.secret?.secretName).toBe("infergrid-client-tokens");
    expect(volume?.secret?.items).toEqual([{ key: "tokens", path: file?.slice(`${mount?.mountPath}/`.length) }]);
    // Its clients from outside hold a token, not a certificate of the cluster's CA.
    expect(envOf(c, "INFERGRID_CLIENT_CERTIFICATES")).toBe("optional");
    // Tokens over HTTPS only.
    expect(envOf(c, "INFERGRID_HTTP_TLS")).toBe("true");
    // Both need the gRPC certificate, or the broker refuses to start.
    expect(envOf(c, "INFERGRID_GRPC_TLS_CERT_FILE")).toBeTruthy();
  });

  it.skipIf(overlay !== "heterogeneous")("wires the per-type backends exactly as production's backend", () => {
    const production = kubectl ? render("overlays/production", kubectl) : [];
    const reference = byKind<Workload>(production, "Deployment").find((d) => d.metadata.name === "backend")!;
    const tlsOf = (w: Workload) => {
      const pod = w.spec.template.spec;
      const c = pod.containers[0]!;
      return {
        volume: pod.volumes?.find((v) => v.name === "grpc-tls"),
        mount: c.volumeMounts?.find((m) => m.name === "grpc-tls"),
        env: c.env?.filter((e) => e.name.startsWith("INFERGRID_GRPC_")),
        probes: [c.startupProbe, c.readinessProbe, c.livenessProbe],
      };
    };
    for (const d of deployments.filter((x) => roleOf(x) === "backend")) expect(tlsOf(d), d.metadata.name).toEqual(tlsOf(reference));
  });

  /** `<peer>:<port>/<protocol>` for every destination an egress rule set allows a pod with these labels. */
  const egressOf = (labels: Labels): string[] => {
    const allowed = new Set<string>();
    for (const p of policies) {
      if (!(p.spec.policyTypes ?? []).includes("Egress") || !selects(p.spec.podSelector, labels)) continue;
      for (const rule of p.spec.egress ?? []) {
        const peers = rule.to?.map((peer) => {
          if (peer.ipBlock) return `ip:${peer.ipBlock.cidr}`;
          const pods = peer.podSelector?.matchLabels ?? {};
          if (peer.namespaceSelector) return `ns(${JSON.stringify(peer.namespaceSelector.matchLabels)})/${JSON.stringify(pods)}`;
          return pods[NAME] ?? JSON.stringify(pods);
        }) ?? ["*"];
        for (const peer of peers)
          for (const port of rule.ports ?? [{ port: 0 }]) allowed.add(`${peer}:${port.port}/${port.protocol ?? "TCP"}`);
      }
    }
    return [...allowed].sort();
  };
  const DNS = [
    'ns({"kubernetes.io/metadata.name":"kube-system"})/{"k8s-app":"kube-dns"}:53/TCP',
    'ns({"kubernetes.io/metadata.name":"kube-system"})/{"k8s-app":"kube-dns"}:53/UDP',
  ];
  const NATS = "nats:4222/TCP";
  const expectedEgress: Record<string, string[]> = {
    broker: [...DNS, NATS, "frontend:50051/TCP"],
    frontend: [...DNS, NATS, "backend:50051/TCP"],
    backend: [...DNS, NATS],
    predictor: [...DNS, NATS],
    "global-allocator": [...DNS, NATS, "backend:50051/TCP", "*:443/TCP", "*:6443/TCP"],
    console: [...DNS, NATS],
    nats: [...DNS, "nats:6222/TCP"],
  };

  it("denies egress by default and lets each pod reach exactly DNS, NATS and the gRPC servers its role calls", () => {
    const denyAll = policies.find(
      (p) => Object.keys(p.spec.podSelector).length === 0 && p.spec.policyTypes?.includes("Egress") && !p.spec.egress,
    );
    expect(denyAll, "a default-deny egress policy").toBeDefined();
    for (const w of workloads) {
      const role = roleOf(w);
      expect(expectedEgress[role], `${w.metadata.name}: a role the test knows`).toBeDefined();
      expect(egressOf(w.spec.template.metadata.labels), w.metadata.name).toEqual([...(expectedEgress[role] ?? [])].sort());
    }
    // The in-namespace clients that the ingress policies admit may reach what they are admitted to.
    expect(egressOf({ "infergrid.io/direct-client": "true" })).toEqual([...DNS, "frontend:50051/TCP"].sort());
    expect(egressOf({ "infergrid.io/console-client": "true" })).toEqual([...DNS, "console:8090/TCP"].sort());
    // Any other pod in the namespace: DNS only.
    expect(egressOf({ [NAME]: "debug" })).toEqual(DNS);
  });

  it("admits each allowed in-namespace hop at the callee: egress and ingress agree, on a port the callee serves", () => {
    const ingressAdmits = (from: Labels, to: Labels, port: number) =>
      policies.some(
        (p) =>
          (p.spec.policyTypes ?? []).includes("Ingress") &&
          selects(p.spec.podSelector, to) &&
          (p.spec.ingress ?? []).some(
            (r) =>
              (r.ports ?? []).some((x) => x.port === port) &&
              (r.from === undefined || r.from.some((peer) => !peer.namespaceSelector && selects(peer.podSelector ?? {}, from))),
          ),
      );
    const pods = workloads.map((w) => ({ name: w.metadata.name, labels: w.spec.template.metadata.labels, spec: w.spec.template.spec }));
    // broker -> frontends, frontends and the allocator -> each backend Deployment, each service -> NATS, NATS -> NATS.
    let hops = 0;
    for (const src of pods) {
      for (const p of policies.filter((x) => (x.spec.policyTypes ?? []).includes("Egress") && selects(x.spec.podSelector, src.labels))) {
        for (const rule of p.spec.egress ?? []) {
          for (const peer of rule.to ?? []) {
            if (peer.namespaceSelector || peer.ipBlock) continue;
            const targets = pods.filter((dst) => selects(peer.podSelector ?? {}, dst.labels));
            expect(targets.length, `${p.metadata.name} selects a pod`).toBeGreaterThan(0);
            for (const dst of targets) {
              for (const { port } of rule.ports ?? []) {
                hops++;
                const served = dst.spec.containers.some((c) => c.ports?.some((x) => x.containerPort === port));
                expect(served, `${dst.name} serves ${port}`).toBe(true);
                expect(ingressAdmits(src.labels, dst.labels, port), `${src.name} -> ${dst.name}:${port}`).toBe(true);
              }
            }
          }
        }
      }
    }
    expect(hops).toBeGreaterThanOrEqual(10);
  });

  it("mounts a service-account token into no pod but the allocator's, and never by default", () => {
    for (const w of workloads) {
      const pod = w.spec.template.spec;
      if (w.metadata.name === "global-allocator") {
        expect(pod.serviceAccountName).toBe("global-allocator");
        continue;
      }
      expect(pod.automountServiceAccountToken, w.metadata.name).toBe(false);
      expect(pod.serviceAccountName ?? "default", w.metadata.name).toBe("default");
    }
    const accounts = byKind<K8sObject & { automountServiceAccountToken?: boolean }>(objects, "ServiceAccount");
    expect(accounts.find((a) => a.metadata.name === "default")?.automountServiceAccountToken).toBe(false);
  });
});
