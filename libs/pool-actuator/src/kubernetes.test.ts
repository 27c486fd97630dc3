import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { ApiException, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type BackendResizer, ResizeError } from "./actuator.js";
import { KubernetesActuator, type KubernetesActuatorOptions, POD_DELETION_COST, parseWorkload } from "./kubernetes.js";
import { TypedPools } from "./typed-pools.js";

/**
 * There is no Kubernetes API server on the project's machines, so these tests run the actuator
 * (the real @kubernetes/client-node calls) against a LOCAL HTTP STAND-IN FOR A REAL API SERVER (and the
 * kubelet behind it) that serves the few endpoints the actuator uses, with the semantics that matter
 * here: the scale subresource with resourceVersion conflicts (409), pods listed by label and field
 * selector, merge-patching a pod's annotations, a ReplicaSet controller that removes the pods with the
 * lowest pod-deletion-cost first, and in-place pod resize as Kubernetes 1.33+ does it: the pod's
 * `resize` subresource (strategic-merge or JSON merge patch; only containers' resources are taken from
 * it; only cpu and memory may change, none removed, requests within limits, the QoS class kept; the
 * pod's generation bumped), then a kubelet that admits the resize against its node's allocatable CPU
 * (PodResizePending: Infeasible above the allocatable, Deferred while the other pods' requests leave too
 * little, retried when they shrink), actuates it (PodResizeInProgress, then the applied resources in
 * status.containerStatuses[].resources) and honours the container's resizePolicy (RestartContainer
 * restarts it). Every request is recorded so the tests can assert what was called. The last describe puts
 * a real backend-worker process (and NATS) behind a pod's IP to check that the backend is told.
 */

type ResourceList = Record<string, string>;
interface Resources {
  requests?: ResourceList;
  limits?: ResourceList;
}
interface FakeContainer {
  name: string;
  image: string;
  resources: Resources;
  resizePolicy?: { resourceName: string; restartPolicy: string }[];
}
interface Condition {
  type: string;
  status: "True" | "False";
  reason?: string;
  message?: string;
}

interface FakePod {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  ready: boolean;
  nodeName: string;
  podIP: string;
  containers: FakeContainer[];
  generation: number;
  observedGeneration: number;
  /** The kubelet's: admitted (allocated) and applied (actual) resources, by container. */
  allocated: Record<string, Resources>;
  actual: Record<string, Resources>;
  resizeConditions: Condition[];
  restartCount: number;
}

interface Recorded {
  method: string;
  path: string;
  contentType: string | undefined;
  authorization: string | undefined;
  body: unknown;
}

/** Every request the stand-in answered, whichever workload it was about. */
const requests: Recorded[] = [];

const clone = <T>(x: T): T => structuredClone(x);

/** Nodes by name: their allocatable CPU. */
const nodes = new Map<string, { allocatableCpu: string }>();
/** Pods of other namespaces (system daemons, other teams) that take CPU on the nodes. */
const foreignPods: FakePod[] = [];
/** The kubelet's delays: before it looks at a resize, and for actuating one it admitted. */
const kubelet = { syncDelayMs: 5, actuateMs: 10 };

function backendContainer(): FakeContainer {
  return {
    name: "backend",
    image: "infergrid-backend-worker",
    resources: { requests: { cpu: "1", memory: "512Mi" }, limits: { cpu: "1", memory: "1Gi" } },
    resizePolicy: [{ resourceName: "cpu", restartPolicy: "NotRequired" }],
  };
}

function newPod(name: string, namespace: string, labels: Record<string, string>, nodeName: string, containers: FakeContainer[]): FakePod {
  return {
    name,
    namespace,
    labels,
    annotations: {},
    ready: true,
    nodeName,
    podIP: "127.0.0.1",
    containers,
    generation: 1,
    observedGeneration: 1,
    allocated: Object.fromEntries(containers.map((c) => [c.name, clone(c.resources)])),
    actual: Object.fromEntries(containers.map((c) => [c.name, clone(c.resources)])),
    resizeConditions: [],
    restartCount: 0,
  };
}

/** One Deployment (or StatefulSet) of the stand-in: its scale and its pods. */
class StandIn {
  replicas = 0;
  resourceVersion = 1;
  pods: FakePod[] = [];
  /** Makes the next PUT of the scale fail with 409, as when another writer got there first. */
  conflictsToInject = 0;
  /** The pod template's containers and the node new pods land on. */
  template: () => FakeContainer[] = () => [backendContainer()];
  nodeName = "node-a";
  private seq = 0;

  constructor(readonly name: string) {}

  get requests(): Recorded[] {
    return requests;
  }

  reset(replicas: number): void {
    this.replicas = 0;
    this.pods = [];
    requests.length = 0;
    this.conflictsToInject = 0;
    this.resourceVersion = 1;
    this.template = () => [backendContainer()];
    this.setReplicas(replicas);
  }

  setReplicas(n: number): void {
    this.replicas = n;
    this.resourceVersion++;
    while (this.pods.length < n) {
      const name = `${this.name}-7d9f-${(this.seq++).toString(36)}`;
      this.pods.push(newPod(name, "infergrid", { "app.kubernetes.io/name": this.name }, this.nodeName, this.template()));
    }
    // The ReplicaSet controller's choice: lowest pod-deletion-cost first, then newest.
    const cost = (p: FakePod) => Number(p.annotations[POD_DELETION_COST] ?? "0");
    while (this.pods.length > n) {
      const victim = [...this.pods].sort((a, b) => cost(a) - cost(b) || this.pods.indexOf(b) - this.pods.indexOf(a))[0]!;
      this.pods.splice(this.pods.indexOf(victim), 1);
    }
  }

  /** A pod deleted (evicted, its node gone): it leaves at once. */
  remove(name: string): void {
    this.pods = this.pods.filter((p) => p.name !== name);
  }

  selector(kind: string): string {
    return `app.kubernetes.io/name=${kind === "deployments" ? this.name : `${this.name}-sts`}`;
  }

  scaleObject(kind: string): Record<string, unknown> {
    return {
      apiVersion: "autoscaling/v1",
      kind: "Scale",
      metadata: { name: this.name, namespace: "infergrid", resourceVersion: String(this.resourceVersion) },
      spec: { replicas: this.replicas },
      status: { replicas: this.pods.length, selector: this.selector(kind) },
    };
  }
}

/** The workloads the stand-in serves, by name ("backend" always; the typed-pool tests add theirs). */
const workloads = new Map<string, StandIn>();

function allPods(): FakePod[] {
  return [...[...workloads.values()].flatMap((w) => w.pods), ...foreignPods];
}

/** A CPU quantity in millicores (the stand-in's own parser: "500m", "2", "1.5"). */
function milli(q: string | undefined): number {
  if (q === undefined) return 0;
  return q.endsWith("m") ? Number(q.slice(0, -1)) : Math.round(Number(q) * 1000);
}

/** Kubernetes's QoS class of a pod's containers (requests default to limits when absent). */
function qosClass(containers: FakeContainer[]): "Guaranteed" | "Burstable" | "BestEffort" {
  const any = containers.some((c) => Object.keys(c.resources.requests ?? {}).length + Object.keys(c.resources.limits ?? {}).length > 0);
  if (!any) return "BestEffort";
  const guaranteed = containers.every((c) =>
    ["cpu", "memory"].every((r) => {
      const limit = c.resources.limits?.[r];
      const request = c.resources.requests?.[r] ?? limit;
      return limit !== undefined && request === limit;
    }),
  );
  return guaranteed ? "Guaranteed" : "Burstable";
}

/** What a pod holds of its node's CPU for the kubelet: per container the larger of desired and allocated requests. */
function podCpu(p: FakePod): number {
  return p.containers.reduce((sum, c) => sum + Math.max(milli(c.resources.requests?.cpu), milli(p.allocated[c.name]?.requests?.cpu)), 0);
}

function podObject(p: FakePod): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: p.name, namespace: p.namespace, labels: p.labels, annotations: p.annotations, generation: p.generation },
    spec: { nodeName: p.nodeName, containers: clone(p.containers) },
    status: {
      phase: "Running",
      podIP: p.podIP,
      qosClass: qosClass(p.containers),
      observedGeneration: p.observedGeneration,
      conditions: [{ type: "Ready", status: p.ready ? "True" : "False" }, ...p.resizeConditions],
      containerStatuses: p.containers.map((c) => ({
        name: c.name,
        image: c.image,
        imageID: "",
        ready: p.ready,
        started: true,
        restartCount: p.restartCount,
        allocatedResources: clone(p.allocated[c.name]?.requests ?? {}),
        resources: clone(p.actual[c.name] ?? {}),
      })),
    },
  };
}

/**
 * The kubelet's pod sync after a resize (Kubernetes 1.33+): a resize it cannot fit is left pending
 * (Infeasible above the node's allocatable, not retried; Deferred while the other pods' requests leave
 * too little, retried on later syncs); one it can is allocated, reported in progress, then applied.
 */
function kubeletSync(p: FakePod): void {
  p.observedGeneration = p.generation;
  const same = (a: Resources | undefined, b: Resources | undefined) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});
  if (p.containers.every((c) => same(c.resources, p.allocated[c.name]))) {
    // Nothing (left) to resize: a pending one was withdrawn.
    p.resizeConditions = p.resizeConditions.filter((c) => c.type !== "PodResizePending");
    return;
  }
  const capacity = milli(nodes.get(p.nodeName)?.allocatableCpu);
  const requested = p.containers.reduce((sum, c) => sum + milli(c.resources.requests?.cpu), 0);
  if (requested > capacity) {
    p.resizeConditions = [
      {
        type: "PodResizePending",
        status: "True",
        reason: "Infeasible",
        message: `Node didn't have enough capacity: cpu, requested: ${requested}, capacity: ${capacity}`,
      },
    ];
    return;
  }
  const used = allPods()
    .filter((o) => o !== p && o.nodeName === p.nodeName)
    .reduce((sum, o) => sum + podCpu(o), 0);
  if (requested + used > capacity) {
    p.resizeConditions = [
      {
        type: "PodResizePending",
        status: "True",
        reason: "Deferred",
        message: `Node didn't have enough resource: cpu, requested: ${requested}, used: ${used}, capacity: ${capacity}`,
      },
    ];
    return;
  }
  const before = clone(p.actual);
  for (const c of p.containers) p.allocated[c.name] = clone(c.resources);
  p.resizeConditions = [{ type: "PodResizeInProgress", status: "True" }];
  const generation = p.generation;
  setTimeout(() => {
    if (p.generation !== generation) return; // a newer resize took over
    for (const c of p.containers) {
      const changed = ["cpu", "memory"].filter(
        (r) => before[c.name]?.limits?.[r] !== c.resources.limits?.[r] || before[c.name]?.requests?.[r] !== c.resources.requests?.[r],
      );
      if (changed.some((r) => c.resizePolicy?.some((x) => x.resourceName === r && x.restartPolicy === "RestartContainer")))
        p.restartCount++;
      p.actual[c.name] = clone(c.resources);
    }
    p.resizeConditions = [];
    // Room freed on the node: deferred resizes there are tried again.
    for (const o of allPods()) if (o !== p && o.nodeName === p.nodeName && o.resizeConditions[0]?.reason === "Deferred") kubeletSync(o);
  }, kubelet.actuateMs);
}

/** A strategic-merge patch of a list of containers: items merged by name, maps merged, null deletes a key. */
function strategicMerge(target: unknown, patch: unknown): unknown {
  if (Array.isArray(patch)) {
    const out = clone(Array.isArray(target) ? (target as { name?: string }[]) : []);
    for (const item of patch as { name?: string }[]) {
      const at = out.findIndex((x) => x.name === item.name);
      if (at >= 0) out[at] = strategicMerge(out[at], item) as { name?: string };
      else out.push(item);
    }
    return out;
  }
  if (patch === null || typeof patch !== "object") return patch;
  const out: Record<string, unknown> = target !== null && typeof target === "object" ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = strategicMerge(out[k], v);
  }
  return out;
}

/** A JSON merge patch (RFC 7386): maps merged, null deletes, arrays replaced whole. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target !== null && typeof target === "object" && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * The API server's handling of PATCH pods/<name>/resize: of the patched pod only the containers'
 * resources and resizePolicy are kept (other changes are dropped, as its resize strategy does), then
 * the resize validation; the field errors read as Kubernetes writes them.
 */
function resizePod(p: FakePod, contentType: string | undefined, patch: unknown): { code: number; errors?: string[] } {
  const merge =
    contentType === "application/strategic-merge-patch+json"
      ? strategicMerge
      : contentType === "application/merge-patch+json"
        ? mergePatch
        : undefined;
  if (!merge) return { code: 415 };
  const patched = merge({ spec: { containers: clone(p.containers) } }, patch) as { spec?: { containers?: Partial<FakeContainer>[] } };
  const next = patched.spec?.containers ?? [];
  const errors: string[] = [];
  if (next.length !== p.containers.length || next.some((c, i) => c.name !== p.containers[i]?.name)) {
    return { code: 422, errors: ["spec.containers: Forbidden: containers may not be renamed or reordered on resize"] };
  }
  const updated: FakeContainer[] = p.containers.map((old, i) => ({
    ...clone(old),
    resources: clone(next[i]?.resources ?? {}),
    ...(next[i]?.resizePolicy !== undefined ? { resizePolicy: clone(next[i]?.resizePolicy) } : {}),
  }));
  updated.forEach((c, i) => {
    const old = p.containers[i] as FakeContainer;
    const path = `spec.containers[${i}].resources`;
    for (const kind of ["requests", "limits"] as const) {
      for (const r of Object.keys(old.resources[kind] ?? {})) {
        if (c.resources[kind]?.[r] === undefined) errors.push(`${path}.${kind}: Forbidden: resource ${kind} cannot be removed`);
      }
    }
    // Only cpu and memory may differ: everything else of the container must be as it was.
    const strip = (x: FakeContainer) => {
      const y = clone(x);
      for (const kind of ["requests", "limits"] as const) {
        for (const r of ["cpu", "memory"]) delete y.resources[kind]?.[r];
      }
      return JSON.stringify(y);
    };
    if (strip(c) !== strip(old)) errors.push("spec: Forbidden: only cpu and memory resources are mutable");
    const request = c.resources.requests?.cpu;
    const limit = c.resources.limits?.cpu;
    if (request !== undefined && limit !== undefined && milli(request) > milli(limit)) {
      errors.push(`${path}.requests: Invalid value: "${request}": must be less than or equal to cpu limit of ${limit}`);
    }
  });
  const qos = qosClass(updated);
  if (qos !== qosClass(p.containers)) errors.push(`spec: Invalid value: "${qos}": Pod QOS Class may not change as a result of resizing`);
  if (errors.length > 0) return { code: 422, errors: [...new Set(errors)] };
  if (JSON.stringify(updated) !== JSON.stringify(p.containers)) {
    p.containers = updated;
    p.generation++;
    setTimeout(() => kubeletSync(p), kubelet.syncDelayMs);
  }
  return { code: 200 };
}

/** Answers one request; returns true once it has (every path answers exactly once). */
function handle(req: IncomingMessage, body: string, res: ServerResponse): true {
  const url = new URL(req.url ?? "/", "http://stand-in");
  const parsed: unknown = body ? JSON.parse(body) : undefined;
  requests.push({
    method: req.method ?? "",
    path: url.pathname + url.search,
    contentType: req.headers["content-type"],
    authorization: req.headers.authorization,
    body: parsed,
  });
  const send = (status: number, obj: unknown): true => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(obj));
    return true;
  };
  const status = (code: number, reason: string, message: string) =>
    send(code, { kind: "Status", apiVersion: "v1", status: "Failure", reason, message, code });
  const podList = (items: FakePod[]) => send(200, { kind: "PodList", apiVersion: "v1", items: items.map(podObject) });
  const fieldSelector = (key: string) => {
    const f = url.searchParams.get("fieldSelector");
    return f?.startsWith(`${key}=`) ? f.slice(key.length + 1) : undefined;
  };

  let m = url.pathname.match(/^\/apis\/apps\/v1\/namespaces\/infergrid\/(deployments|statefulsets)\/([^/]+)\/scale$/);
  if (m) {
    const [, kind, name] = m as unknown as [string, string, string];
    const w = workloads.get(name);
    if (!w) return status(404, "NotFound", `${kind}.apps "${name}" not found`);
    if (req.method === "GET") return send(200, w.scaleObject(kind));
    if (req.method === "PUT") {
      const scale = parsed as { metadata?: { resourceVersion?: string }; spec?: { replicas?: number } };
      if (w.conflictsToInject > 0) {
        w.conflictsToInject--;
        w.resourceVersion++;
      }
      if (scale.metadata?.resourceVersion !== String(w.resourceVersion)) {
        return status(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again");
      }
      const n = scale.spec?.replicas;
      if (typeof n !== "number" || n < 0) return status(422, "Invalid", "spec.replicas: Invalid value");
      w.setReplicas(n);
      return send(200, w.scaleObject(kind));
    }
  }
  if (req.method === "GET" && url.pathname === "/api/v1/namespaces/infergrid/pods") {
    const w = [...workloads.values()].find((x) => x.selector("deployments") === url.searchParams.get("labelSelector"));
    const name = fieldSelector("metadata.name");
    return podList((w?.pods ?? []).filter((p) => name === undefined || p.name === name));
  }
  if (req.method === "GET" && url.pathname === "/api/v1/pods") {
    const node = fieldSelector("spec.nodeName");
    return podList(allPods().filter((p) => node === undefined || p.nodeName === node));
  }
  m = url.pathname.match(/^\/api\/v1\/nodes\/([^/]+)$/);
  if (m && req.method === "GET") {
    const node = nodes.get(m[1] as string);
    if (!node) return status(404, "NotFound", `nodes "${m[1]}" not found`);
    return send(200, {
      kind: "Node",
      apiVersion: "v1",
      metadata: { name: m[1] },
      status: { capacity: { cpu: node.allocatableCpu }, allocatable: { cpu: node.allocatableCpu } },
    });
  }
  m = url.pathname.match(/^\/api\/v1\/namespaces\/infergrid\/pods\/([^/]+)(\/resize)?$/);
  if (m) {
    const pod = allPods().find((p) => p.namespace === "infergrid" && p.name === m?.[1]);
    if (!pod) return status(404, "NotFound", `pods "${m[1]}" not found`);
    if (req.method === "GET") return send(200, podObject(pod));
    if (req.method === "PATCH" && m[2] === "/resize") {
      const out = resizePod(pod, req.headers["content-type"], parsed);
      if (out.code === 415) return status(415, "UnsupportedMediaType", `the body of the request was in an unknown format`);
      if (out.errors) {
        const list = out.errors.length === 1 ? out.errors[0] : `[${out.errors.join(", ")}]`;
        return status(422, "Invalid", `Pod "${pod.name}" is invalid: ${list}`);
      }
      return send(200, podObject(pod));
    }
    if (req.method === "PATCH") {
      if (req.headers["content-type"] !== "application/merge-patch+json") return status(415, "UnsupportedMediaType", "wrong patch type");
      const patch = parsed as { metadata?: { annotations?: Record<string, string> } };
      Object.assign(pod.annotations, patch.metadata?.annotations ?? {});
      return send(200, { metadata: { name: pod.name, annotations: pod.annotations } });
    }
  }
  return status(404, "NotFound", `no route for ${req.method} ${url.pathname}`);
}

const standIn = new StandIn("backend");
workloads.set(standIn.name, standIn);
let server: Server;
let kubeConfig: KubeConfig;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => handle(req, body, res));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "stand-in", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "allocator", token: "sa-token-123" }],
    contexts: [{ name: "stand-in", cluster: "stand-in", user: "allocator" }],
    currentContext: "stand-in",
  });
});

afterAll(() => {
  server.close();
});

beforeEach(() => {
  // Each describe sets up the workloads it uses.
  for (const name of workloads.keys()) if (name !== standIn.name) workloads.delete(name);
  standIn.reset(3);
  nodes.clear();
  nodes.set("node-a", { allocatableCpu: "8" });
  foreignPods.length = 0;
  kubelet.syncDelayMs = 5;
  kubelet.actuateMs = 10;
});

function actuator(workload = "deployment/backend", options: Partial<KubernetesActuatorOptions> = {}): KubernetesActuator {
  return new KubernetesActuator({ namespace: "infergrid", workload, kubeConfig, ...options });
}

describe("KubernetesActuator (against a local HTTP stand-in for the API server)", () => {
  it("reads the pool size from the Deployment's scale subresource, with the service account's token", async () => {
    expect(await actuator().currentSize()).toBe(3);
    expect(standIn.requests).toHaveLength(1);
    expect(standIn.requests[0]).toMatchObject({
      method: "GET",
      path: "/apis/apps/v1/namespaces/infergrid/deployments/backend/scale",
      authorization: "Bearer sa-token-123",
    });
  });

  it("grows and shrinks the pool by replacing the scale with the resourceVersion it read", async () => {
    const a = actuator();
    await a.scaleTo(7);
    expect(standIn.replicas).toBe(7);
    expect(standIn.pods).toHaveLength(7);
    const put = standIn.requests.find((r) => r.method === "PUT");
    expect(put?.body).toMatchObject({ kind: "Scale", spec: { replicas: 7 }, metadata: { resourceVersion: "2" } });
    await a.scaleTo(2);
    expect(await a.currentSize()).toBe(2);
    expect((await a.members()).map((m) => m.id)).toHaveLength(2);
  });

  it("changes nothing when asked for the size it already has", async () => {
    await actuator().scaleTo(3);
    expect(standIn.requests.map((r) => r.method)).toEqual(["GET"]);
  });

  it("retries a 409 conflict with a fresh read, and gives up with the API's message after the retries", async () => {
    standIn.conflictsToInject = 2;
    await actuator().scaleTo(5);
    expect(standIn.replicas).toBe(5);
    expect(standIn.requests.filter((r) => r.method === "PUT")).toHaveLength(3);

    standIn.conflictsToInject = 10;
    await expect(actuator().scaleTo(6)).rejects.toThrow(
      /scaling deployment\/backend to 6: the Kubernetes API answered 409: the object has been modified/,
    );
    expect(standIn.replicas).toBe(5);
  });

  it("lists the pool's pods by the selector the scale subresource reports, with readiness", async () => {
    standIn.pods[1]!.ready = false;
    const members = await actuator().members();
    expect(members).toHaveLength(3);
    expect(members.filter((m) => m.ready)).toHaveLength(2);
    expect(standIn.requests.at(-1)?.path).toBe("/api/v1/namespaces/infergrid/pods?labelSelector=app.kubernetes.io%2Fname%3Dbackend");
  });

  it("on a shrink, marks the idle backends with a low pod-deletion-cost so they are the ones removed", async () => {
    await actuator().scaleTo(6);
    const names = standIn.pods.map((p) => p.name);
    const idle = [names[0]!, names[2]!];
    await actuator().scaleTo(4, { removeFirst: idle });
    const patches = standIn.requests.filter((r) => r.method === "PATCH");
    expect(patches).toHaveLength(2);
    expect(patches[0]?.contentType).toBe("application/merge-patch+json");
    expect(patches[0]?.body).toEqual({ metadata: { annotations: { [POD_DELETION_COST]: "-1000" } } });
    const left = standIn.pods.map((p) => p.name);
    expect(left).toHaveLength(4);
    expect(left).not.toContain(idle[0]);
    expect(left).not.toContain(idle[1]);
  });

  it("a removeFirst pod that is already gone is not an error", async () => {
    await actuator().scaleTo(1, { removeFirst: ["backend-gone"] });
    expect(standIn.replicas).toBe(1);
  });

  it("scales a StatefulSet through its own scale subresource", async () => {
    await actuator("statefulset/backend").scaleTo(4);
    expect(standIn.requests.filter((r) => r.method === "PUT").map((r) => r.path)).toEqual([
      "/apis/apps/v1/namespaces/infergrid/statefulsets/backend/scale",
    ]);
  });

  it("reports a missing workload with the API server's answer", async () => {
    await expect(actuator("deployment/nope").currentSize()).rejects.toThrow(
      /reading the scale of deployment\/nope: the Kubernetes API answered 404: deployments.apps "nope" not found/,
    );
  });

  it("refuses bad sizes and workload names before calling anything", async () => {
    await expect(actuator().scaleTo(-1)).rejects.toThrow(RangeError);
    await expect(actuator().scaleTo(1.5)).rejects.toThrow(RangeError);
    expect(() => parseWorkload("pod/backend")).toThrow(/deployment\/<name> or statefulset\/<name>/);
    expect(parseWorkload("StatefulSet/pool")).toEqual({ kind: "statefulset", name: "pool" });
    expect(standIn.requests).toHaveLength(0);
  });
});

describe("TypedPools over one Deployment per instance type (same stand-in)", () => {
  const g4dn = new StandIn("backend-g4dn");
  const r5n = new StandIn("backend-r5n");
  beforeEach(() => {
    workloads.set(g4dn.name, g4dn);
    workloads.set(r5n.name, r5n);
    g4dn.reset(1);
    r5n.reset(2);
  });
  const pools = () =>
    new TypedPools([
      { instanceType: "g4dn.xlarge", actuator: actuator("deployment/backend-g4dn"), maxCount: 3 },
      { instanceType: "r5n.large", actuator: actuator("deployment/backend-r5n") },
    ]);

  it("reads each type's size from its own Deployment and lists its pods by that Deployment's selector", async () => {
    const p = pools();
    expect(await p.currentSizes()).toEqual(
      new Map([
        ["g4dn.xlarge", 1],
        ["r5n.large", 2],
      ]),
    );
    expect(await p.currentSize()).toBe(3);
    const byType = await p.membersByType();
    expect(byType.get("g4dn.xlarge")?.map((m) => m.id)).toEqual(g4dn.pods.map((x) => x.name));
    expect(
      byType
        .get("r5n.large")
        ?.map((m) => m.id)
        .sort(),
    ).toEqual(r5n.pods.map((x) => x.name).sort());
  });

  it("scaleTypesTo writes only the named Deployments' scale", async () => {
    await pools().scaleTypesTo({ "r5n.large": 4 });
    expect([g4dn.replicas, r5n.replicas, standIn.replicas]).toEqual([1, 4, 3]);
    expect(requests.filter((r) => r.method === "PUT").map((r) => r.path)).toEqual([
      "/apis/apps/v1/namespaces/infergrid/deployments/backend-r5n/scale",
    ]);
    await expect(pools().scaleTypesTo({ "g4dn.xlarge": 4 })).rejects.toThrow(/g4dn.xlarge may hold at most 3, asked for 4/);
    await expect(pools().scaleTypesTo({ "m5.large": 1 })).rejects.toThrow(/no pool for instance type m5.large/);
    expect(g4dn.replicas).toBe(1);
  });

  it("scaleTo grows the preferred type up to its max, then the next; a shrink marks only the pods of their own Deployment", async () => {
    const p = pools();
    await p.scaleTo(7);
    expect([g4dn.replicas, r5n.replicas]).toEqual([3, 4]);
    const idle = [g4dn.pods[0]!.name, r5n.pods[1]!.name];
    requests.length = 0;
    await p.scaleTo(5, { removeFirst: idle });
    expect([g4dn.replicas, r5n.replicas]).toEqual([2, 3]);
    const patched = requests.filter((r) => r.method === "PATCH").map((r) => r.path.split("/").at(-1));
    expect(patched.sort()).toEqual([...idle].sort());
    expect(g4dn.pods.map((x) => x.name)).not.toContain(idle[0]);
    expect(r5n.pods.map((x) => x.name)).not.toContain(idle[1]);
  });
});

/** The rejection of a promise that must reject. */
async function failure(p: Promise<unknown>): Promise<ResizeError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ResizeError)) throw new Error(`expected a ResizeError, got ${String(err)}`);
  return err;
}

describe("KubernetesActuator.resize: in-place pod resize through the resize subresource (same stand-in)", () => {
  const pod = (i: number) => standIn.pods[i] as FakePod;
  const backendOf = (p: FakePod) => p.containers.find((c) => c.name === "backend") as FakeContainer;
  const resizes = () => requests.filter((r) => r.method === "PATCH" && r.path.endsWith("/resize"));
  /** What the backends were told, and the stand-in pod's applied CPU limit at that moment. */
  const told: { memberId: string; address: string; cores: number; maxBatch?: number; appliedThen: string | undefined }[] = [];
  const tellBackend: BackendResizer = async (t) => {
    const p = standIn.pods.find((x) => x.name === t.memberId);
    told.push({ ...t, appliedThen: p?.actual.backend?.limits?.cpu });
    return { cores: t.cores, maxBatch: t.maxBatch ?? 1, resizeMs: 7 };
  };
  beforeEach(() => {
    told.length = 0;
  });

  it("patches the container's CPU request and limit, waits for the kubelet to apply them, then tells the backend", async () => {
    const name = pod(1).name;
    const result = await actuator("deployment/backend", { tellBackend }).resize(name, 4, 8);
    expect(result).toMatchObject({ memberId: name, cores: 4, maxBatch: 8, modelResizeMs: 7 });
    expect(result.elapsedMs).toBeGreaterThan(0);
    expect(resizes()).toHaveLength(1);
    expect(resizes()[0]).toMatchObject({
      path: `/api/v1/namespaces/infergrid/pods/${name}/resize`,
      contentType: "application/strategic-merge-patch+json",
      authorization: "Bearer sa-token-123",
      body: { spec: { containers: [{ name: "backend", resources: { requests: { cpu: "4" }, limits: { cpu: "4" } } }] } },
    });
    // Applied by the kubelet, memory untouched, no restart (resizePolicy cpu: NotRequired).
    expect(pod(1).actual.backend).toEqual({ requests: { cpu: "4", memory: "512Mi" }, limits: { cpu: "4", memory: "1Gi" } });
    expect(pod(1).restartCount).toBe(0);
    // The backend heard of it only once the pod had its new limit.
    expect(told).toEqual([{ memberId: name, address: "127.0.0.1:50051", cores: 4, maxBatch: 8, appliedThen: "4" }]);
    const members = await actuator().members();
    expect(members.find((m) => m.id === name)?.cores).toBe(4);
    expect(members.filter((m) => m.id !== name).map((m) => m.cores)).toEqual([1, 1]);

    // And back to one core; asking again for the size it has writes nothing.
    expect((await actuator().resize(name, 1)).cores).toBe(1);
    expect(pod(1).actual.backend?.limits?.cpu).toBe("1");
    requests.length = 0;
    expect((await actuator().resize(name, 1)).cores).toBe(1);
    expect(resizes()).toHaveLength(0);
  });

  it("refuses a resize beyond the node's allocatable CPU less the other pods' requests, writing nothing", async () => {
    // node-a: 8 allocatable; a system pod requests 2, the two other backends 1 each: 4 left for this one.
    foreignPods.push(
      newPod("logging-agent", "kube-system", {}, "node-a", [{ name: "agent", image: "x", resources: { requests: { cpu: "2" } } }]),
    );
    const name = pod(0).name;
    const err = await failure(actuator().resize(name, 5));
    expect(err.reason).toBe("capacity");
    expect(err.message).toBe(
      `resizing pod ${name} to 5 cores: node node-a has 4 cores free for it (8 allocatable, its other pods request 4)`,
    );
    const beyond = await failure(actuator().resize(name, 9));
    expect(beyond.message).toMatch(/beyond node node-a's 8 allocatable cores/);
    expect(resizes()).toHaveLength(0);
    expect(requests.some((r) => r.path === "/api/v1/nodes/node-a")).toBe(true);
    expect(requests.some((r) => r.path === "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")).toBe(true);
    expect((await actuator().resize(name, 4)).cores).toBe(4);
  });

  it("with a configured node limit, bounds by it without reading the node", async () => {
    const err = await failure(actuator("deployment/backend", { nodeCores: 2 }).resize(pod(0).name, 3));
    expect(err).toMatchObject({ reason: "capacity", message: expect.stringMatching(/beyond the node limit of 2 cores$/) });
    expect(requests.some((r) => r.path.startsWith("/api/v1/nodes") || r.path.startsWith("/api/v1/pods"))).toBe(false);
    expect(resizes()).toHaveLength(0);
  });

  it("a resize the kubelet finds Infeasible is undone and never reaches the backend", async () => {
    // A configured limit above what the node really has: the kubelet is the one to refuse.
    const name = pod(0).name;
    const err = await failure(actuator("deployment/backend", { nodeCores: 16, tellBackend }).resize(name, 12));
    expect(err.reason).toBe("infeasible");
    expect(err.message).toBe(
      `resizing pod ${name} to 12 cores: the kubelet found it infeasible (Node didn't have enough capacity: cpu, requested: 12000, capacity: 8000); undone (CPU back at 1)`,
    );
    expect(told).toEqual([]);
    expect(resizes().map((r) => r.body)).toEqual([
      { spec: { containers: [{ name: "backend", resources: { requests: { cpu: "12" }, limits: { cpu: "12" } } }] } },
      { spec: { containers: [{ name: "backend", resources: { requests: { cpu: "1" }, limits: { cpu: "1" } } }] } },
    ]);
    expect(backendOf(pod(0)).resources.limits?.cpu).toBe("1");
    await sleep(50);
    expect(pod(0).resizeConditions).toEqual([]);
    expect(pod(0).actual.backend?.limits?.cpu).toBe("1");
  });

  it("a resize the kubelet keeps Deferred past the time allowed is undone", async () => {
    // The configured limit allows 4, but other pods hold 6 of the node's 8 cores.
    foreignPods.push(newPod("batch-job", "jobs", {}, "node-a", [{ name: "job", image: "x", resources: { requests: { cpu: "4" } } }]));
    const name = pod(0).name;
    const err = await failure(actuator("deployment/backend", { nodeCores: 4, resizeTimeoutMs: 200, tellBackend }).resize(name, 4));
    expect(err.reason).toBe("timeout");
    expect(err.message).toBe(
      `resizing pod ${name} to 4 cores: deferred (Node didn't have enough resource: cpu, requested: 4000, used: 6000, capacity: 8000) after 200 ms; undone (CPU back at 1)`,
    );
    expect(told).toEqual([]);
    expect(backendOf(pod(0)).resources.requests?.cpu).toBe("1");
  });

  it("a pod's own refused change surfaces the API server's reason (the QoS class may not change)", async () => {
    // Burstable only through its CPU (memory request = limit): CPU request = limit would make it Guaranteed.
    standIn.template = () => [
      {
        ...backendContainer(),
        resources: { requests: { cpu: "500m", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } },
      },
    ];
    standIn.setReplicas(4);
    const name = pod(3).name;
    await expect(actuator().resize(name, 2)).rejects.toThrow(
      `resizing pod ${name} to 2 cores: the Kubernetes API answered 422: Pod "${name}" is invalid: spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing`,
    );
    expect(backendOf(pod(3)).resources.limits?.cpu).toBe("1");
  });

  it("the stand-in's resize subresource takes only cpu and memory changes, as the API server does", async () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const name = pod(0).name;
    const patch = (body: unknown, strategy: PatchStrategy = PatchStrategy.StrategicMergePatch) =>
      core.patchNamespacedPodResize({ name, namespace: "infergrid", body }, setHeaderOptions("Content-Type", strategy)).then(
        () => "ok",
        (e: unknown) => (e instanceof ApiException ? `${e.code} ${JSON.parse(e.body as string).message}` : String(e)),
      );
    const container = (resources: unknown) => ({ spec: { containers: [{ name: "backend", resources }] } });
    expect(await patch(container({ limits: { "ephemeral-storage": "1Gi" } }))).toBe(
      `422 Pod "${name}" is invalid: spec: Forbidden: only cpu and memory resources are mutable`,
    );
    expect(await patch(container({ requests: { memory: null } }))).toMatch(
      `422 Pod "${name}" is invalid: [spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed`,
    );
    expect(await patch(container({ requests: { cpu: "3" } }))).toBe(
      `422 Pod "${name}" is invalid: spec.containers[0].resources.requests: Invalid value: "3": must be less than or equal to cpu limit of 1`,
    );
    // A JSON merge patch replaces the whole list: the container's resizePolicy goes with it.
    expect(await patch(container({ requests: { cpu: "1" }, limits: { cpu: "1" } }), PatchStrategy.MergePatch)).toMatch(
      /^422 .*(only cpu and memory resources are mutable|cannot be removed)/,
    );
    expect(await patch({ spec: { containers: [{ name: "sidecar" }] } })).toBe(
      `422 Pod "${name}" is invalid: spec.containers: Forbidden: containers may not be renamed or reordered on resize`,
    );
    // Changes outside the resources are dropped, not applied.
    expect(await patch({ spec: { containers: [{ name: "backend", image: "evil" }] } })).toBe("ok");
    expect(backendOf(pod(0)).image).toBe("infergrid-backend-worker");
    expect(pod(0).generation).toBe(1);
  });

  it("honours the resize policy: the stand-in's kubelet restarts a RestartContainer container; the actuator refuses to resize one", async () => {
    standIn.template = () => [{ ...backendContainer(), resizePolicy: [{ resourceName: "cpu", restartPolicy: "RestartContainer" }] }];
    standIn.setReplicas(4);
    const name = pod(3).name;
    const err = await failure(actuator().resize(name, 2));
    expect(err.reason).toBe("restarts");
    expect(err.message).toMatch(/resizePolicy cpu: RestartContainer/);
    expect(resizes()).toHaveLength(0);

    const core = kubeConfig.makeApiClient(CoreV1Api);
    await core.patchNamespacedPodResize(
      {
        name,
        namespace: "infergrid",
        body: { spec: { containers: [{ name: "backend", resources: { requests: { cpu: "2" }, limits: { cpu: "2" } } }] } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    await sleep(60);
    expect(pod(3).actual.backend?.limits?.cpu).toBe("2");
    expect(pod(3).restartCount).toBe(1);
  });

  it("a pod that is gone, or goes while the kubelet applies the resize, is a clear error", async () => {
    const gone = await failure(actuator().resize("backend-7d9f-zz", 2));
    expect(gone).toMatchObject({
      reason: "gone",
      message: "resizing pod backend-7d9f-zz to 2 cores: no such pod in deployment/backend (gone?)",
    });

    kubelet.syncDelayMs = 300;
    const name = pod(2).name;
    const resizing = failure(actuator("deployment/backend", { tellBackend }).resize(name, 2));
    for (let i = 0; i < 200 && resizes().length === 0; i++) await sleep(5);
    standIn.remove(name);
    const err = await resizing;
    expect(err).toMatchObject({ reason: "gone", message: `resizing pod ${name} to 2 cores: the pod is gone` });
    expect(told).toEqual([]);
  });

  it("a backend that does not take its new size is reported, the pod keeping it", async () => {
    const name = pod(0).name;
    const err = await failure(
      actuator("deployment/backend", {
        backendPort: 7001,
        tellBackend: async () => {
          throw new Error("16 UNAUTHENTICATED: wrong control token");
        },
      }).resize(name, 2),
    );
    expect(err).toMatchObject({
      reason: "backend",
      message: `resizing pod ${name} to 2 cores: the pod has 2 cores, but its backend at 127.0.0.1:7001 did not take them: 16 UNAUTHENTICATED: wrong control token`,
    });
    expect(pod(0).actual.backend?.limits?.cpu).toBe("2");
  });

  it("refuses bad sizes before calling anything", async () => {
    const name = pod(0).name;
    await expect(actuator().resize(name, 0)).rejects.toThrow(/cores must be a positive integer, got 0/);
    await expect(actuator().resize(name, 1.5)).rejects.toThrow(RangeError);
    await expect(actuator().resize(name, 2, 0)).rejects.toThrow(/maxBatch must be a positive integer, got 0/);
    // Only the backend applies a batch size: without a way to tell it, nothing is resized.
    await expect(actuator().resize(name, 2, 4)).rejects.toThrow(
      /a batch size is the backend's to apply, and this pool has no control token/,
    );
    expect(requests).toHaveLength(0);
  });
});

describe("TypedPools.resize over one Deployment per instance type (same stand-in)", () => {
  const g4dn = new StandIn("backend-g4dn");
  const r5n = new StandIn("backend-r5n");
  beforeEach(() => {
    workloads.set(g4dn.name, g4dn);
    workloads.set(r5n.name, r5n);
    g4dn.reset(1);
    r5n.reset(1);
    r5n.nodeName = "node-b";
    nodes.set("node-b", { allocatableCpu: "2" });
    r5n.reset(1);
  });

  it("resizes through the pool that holds the pod, bounded by that pod's node", async () => {
    const pools = new TypedPools([
      { instanceType: "g4dn.xlarge", actuator: actuator("deployment/backend-g4dn") },
      { instanceType: "r5n.large", actuator: actuator("deployment/backend-r5n") },
    ]);
    const small = r5n.pods[0]!.name;
    expect((await pools.resize(small, 2)).cores).toBe(2);
    expect(r5n.pods[0]!.actual.backend?.limits?.cpu).toBe("2");
    await expect(pools.resize(small, 3)).rejects.toThrow(/beyond node node-b's 2 allocatable cores/);
    const big = g4dn.pods[0]!.name;
    expect((await pools.resize(big, 3)).cores).toBe(3);
    await expect(pools.resize("backend-elsewhere-0", 2)).rejects.toThrow(/no pool of g4dn.xlarge, r5n.large holds it/);
  });
});

describe("KubernetesActuator.resize telling a real backend-worker behind the stand-in's pod (its Resize RPC)", () => {
  const TOKEN = "k8s-stand-in-control-token";
  let nats: NatsServerHandle;
  let worker: ServiceProcess;
  let port: number;

  beforeAll(async () => {
    nats = await startNatsServer();
    worker = await startService("backend-worker", {
      name: "pod-backend",
      env: { INFERGRID_NATS_URL: nats.url, INFERGRID_CONTROL_TOKEN: TOKEN, INFERGRID_MAX_CORES: "8" },
    });
    port = Number((worker.ready.grpcAddress ?? "").split(":").at(-1));
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await nats?.stop();
  }, 30_000);

  it("patches the pod, then resizes the backend in it with the control token; a wrong token leaves the backend as it was", async () => {
    const name = (standIn.pods[0] as FakePod).name;
    const k8s = actuator("deployment/backend", { controlToken: TOKEN, backendPort: port });
    try {
      const result = await k8s.resize(name, 4, 2);
      expect(result).toMatchObject({ memberId: name, cores: 4, maxBatch: 2, modelResizeMs: 0 });
      expect((standIn.pods[0] as FakePod).actual.backend?.limits?.cpu).toBe("4");
    } finally {
      await k8s.close();
    }
    const wrong = actuator("deployment/backend", { controlToken: "not-the-token", backendPort: port });
    try {
      const err = await failure(wrong.resize(name, 2));
      expect(err.reason).toBe("backend");
      expect(err.message).toMatch(
        /the pod has 2 cores, but its backend at 127\.0\.0\.1:\d+ did not take them: UNAUTHENTICATED: Resize needs the control token/,
      );
    } finally {
      await wrong.close();
    }
  });
});
