import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { KubernetesActuator, POD_DELETION_COST, parseWorkload } from "./kubernetes.js";
import { TypedPools } from "./typed-pools.js";

/**
 * There is no Kubernetes API server on the project's machines, so these tests run the actuator
 * (the real @kubernetes/client-node calls) against a LOCAL HTTP STAND-IN that serves the few
 * endpoints it uses, with the API server's semantics that matter here: the scale subresource
 * with resourceVersion conflicts (409), pods listed by label selector, merge-patching a pod's
 * annotations, and a ReplicaSet controller that removes the pods with the lowest
 * pod-deletion-cost first. Every request is recorded so the tests can assert what was called.
 */

interface FakePod {
  name: string;
  annotations: Record<string, string>;
  ready: boolean;
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

/** One Deployment (or StatefulSet) of the stand-in: its scale and its pods. */
class StandIn {
  replicas = 0;
  resourceVersion = 1;
  pods: FakePod[] = [];
  /** Makes the next PUT of the scale fail with 409, as when another writer got there first. */
  conflictsToInject = 0;
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
    this.setReplicas(replicas);
  }

  setReplicas(n: number): void {
    this.replicas = n;
    this.resourceVersion++;
    while (this.pods.length < n) this.pods.push({ name: `${this.name}-7d9f-${(this.seq++).toString(36)}`, annotations: {}, ready: true });
    // The ReplicaSet controller's choice: lowest pod-deletion-cost first, then newest.
    const cost = (p: FakePod) => Number(p.annotations[POD_DELETION_COST] ?? "0");
    while (this.pods.length > n) {
      const victim = [...this.pods].sort((a, b) => cost(a) - cost(b) || this.pods.indexOf(b) - this.pods.indexOf(a))[0]!;
      this.pods.splice(this.pods.indexOf(victim), 1);
    }
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
    return send(200, {
      kind: "PodList",
      apiVersion: "v1",
      items: (w?.pods ?? []).map((p) => ({
        metadata: { name: p.name, namespace: "infergrid", annotations: p.annotations },
        status: { phase: "Running", conditions: [{ type: "Ready", status: p.ready ? "True" : "False" }] },
      })),
    });
  }
  m = url.pathname.match(/^\/api\/v1\/namespaces\/infergrid\/pods\/([^/]+)$/);
  if (m && req.method === "PATCH") {
    const pod = [...workloads.values()].flatMap((w) => w.pods).find((p) => p.name === m?.[1]);
    if (!pod) return status(404, "NotFound", `pods "${m[1]}" not found`);
    if (req.headers["content-type"] !== "application/merge-patch+json") return status(415, "UnsupportedMediaType", "wrong patch type");
    const patch = parsed as { metadata?: { annotations?: Record<string, string> } };
    Object.assign(pod.annotations, patch.metadata?.annotations ?? {});
    return send(200, { metadata: { name: pod.name, annotations: pod.annotations } });
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
  standIn.reset(3);
});

function actuator(workload = "deployment/backend"): KubernetesActuator {
  return new KubernetesActuator({ namespace: "infergrid", workload, kubeConfig });
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
