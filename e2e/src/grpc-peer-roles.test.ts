import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AllocatorAdminDefinition, BackendServiceDefinition, InferenceServiceDefinition } from "@infergrid/proto";
import { grpc, unaryCall } from "@infergrid/runtime";
import { makeCa, makeCert } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callWith, emulatedSpec, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * gRPC peer roles on real processes: mutual TLS everywhere, each process with a certificate naming its
 * identity (`spiffe://infergrid/<role>/<id>`) and --grpc-peer-roles on. Requests flow broker -> frontend ->
 * backend as before; a caller of the wrong role is refused (PERMISSION_DENIED, the handler never runs), a
 * frontend cannot call in another's name (what n_F counts), and only admin identities reach the admin API.
 */
const SERVER_NAME = "infergrid.internal";
const dir = mkdtempSync(join(tmpdir(), "ig-peer-roles-"));
const IDS: [string, string][] = [
  ["allocator", "allocator"],
  ["broker", "broker"],
  ["frontend-0", "frontend"],
  ["backend-0", "backend"],
  ["backend-1", "backend"],
  ["admin", "admin"],
  ["evil", "client"],
];
let cluster: TestCluster;

function creds(name: string): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(
    readFileSync(join(dir, "ca.pem")),
    readFileSync(join(dir, `${name}.key`)),
    readFileSync(join(dir, `${name}.pem`)),
  );
}

function callAs<Req, Res>(name: string, address: string, method: grpc.MethodDefinition<Req, Res>, request: Req) {
  return callWith(address, creds(name), method, request, { "grpc.ssl_target_name_override": SERVER_NAME });
}

beforeAll(async () => {
  makeCa(dir, "ca");
  for (const [id, role] of IDS) makeCert(dir, id, "ca", `IP:127.0.0.1,DNS:${SERVER_NAME},URI:spiffe://infergrid/${role}/${id}`);
  cluster = await startCluster({
    backends: 2,
    frontends: 1,
    env: {
      INFERGRID_GRPC_TLS_CA_FILE: join(dir, "ca.pem"),
      INFERGRID_GRPC_TLS_SERVER_NAME: SERVER_NAME,
      INFERGRID_GRPC_PEER_ROLES: "true",
    },
    instanceEnv: (id) => ({ INFERGRID_GRPC_TLS_CERT_FILE: join(dir, `${id}.pem`), INFERGRID_GRPC_TLS_KEY_FILE: join(dir, `${id}.key`) }),
    frontendEnv: { INFERGRID_SCALING: "static" },
    grpcClient: { credentials: creds("admin"), options: { "grpc.ssl_target_name_override": SERVER_NAME } },
  });
  await registerService(cluster, emulatedSpec("echo", { initialBackends: 2, maxBackends: 2 }));
  await waitUntilServing(cluster, "echo", { x: { dims: [1], data: [1] } });
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("gRPC peer roles (mutual TLS, identities in certificates, real processes)", () => {
  it("serves through broker -> frontend -> backend, each hop admitted by role", async () => {
    for (let i = 0; i < 10; i++) {
      const r = await unaryCall(
        cluster.brokerClient,
        InferenceServiceDefinition.Infer,
        { service: "echo", inputs: { x: { dims: [1], data: [1] } } },
        { deadline: Date.now() + 5000 },
      );
      expect(r.backendId).toMatch(/^backend-/);
    }
  });

  it("a backend's Execute refuses callers that are not frontends, and a frontend calling in another's name", async () => {
    const backend = cluster.backends[0]?.ready.grpcAddress ?? "";
    const execute = { service: "echo", requestId: "r1", frontendId: "frontend-0", inputs: { x: { dims: [1], data: [1] } }, attempt: 1 };
    for (const who of ["broker", "evil", "admin", "backend-1"]) {
      const r = await callAs(who, backend, BackendServiceDefinition.Execute, execute);
      expect(r, who).toMatchObject({ ok: false, code: grpc.status.PERMISSION_DENIED });
      if (!r.ok) expect(r.details).toMatch(/Execute is not for \w+ [\w-]+ \(only frontend\)/);
    }
    // A frontend inventing ids would raise every backend's n_F: refused.
    const forged = await callAs("frontend-0", backend, BackendServiceDefinition.Execute, { ...execute, frontendId: "frontend-evil" });
    expect(forged).toMatchObject({ ok: false, code: grpc.status.PERMISSION_DENIED });
    if (!forged.ok) expect(forged.details).toBe('frontend_id "frontend-evil" is not the caller\'s identity "frontend-0"');
    for (const method of [BackendServiceDefinition.Park, BackendServiceDefinition.WarmUp, BackendServiceDefinition.Release]) {
      expect(await callAs("evil", backend, method as grpc.MethodDefinition<object, unknown>, {}), method.path).toMatchObject({
        ok: false,
        code: grpc.status.PERMISSION_DENIED,
      });
    }
    // The frontend itself is admitted.
    expect(await callAs("frontend-0", backend, BackendServiceDefinition.Execute, execute)).toMatchObject({ ok: true });
  });

  it("the admin API is for admin identities only", async () => {
    const allocator = cluster.allocator.ready.grpcAddress ?? "";
    for (const who of ["frontend-0", "broker", "evil"]) {
      const r = await callAs(who, allocator, AllocatorAdminDefinition.RegisterService, { spec: emulatedSpec("intruder") });
      expect(r, who).toMatchObject({ ok: false, code: grpc.status.PERMISSION_DENIED });
      expect(await callAs(who, allocator, AllocatorAdminDefinition.DeregisterService, { name: "echo" }), who).toMatchObject({
        ok: false,
        code: grpc.status.PERMISSION_DENIED,
      });
    }
    const list = await callAs("admin", allocator, AllocatorAdminDefinition.ListServices, {});
    expect(list.ok && list.value.services?.map((s) => s.spec?.name)).toEqual(["echo"]);
  });

  it("frontends take requests from the broker (or a direct client), not from any certificate", async () => {
    const frontend = cluster.frontends[0]?.ready.grpcAddress ?? "";
    const r = await callAs("evil", frontend, InferenceServiceDefinition.Infer, {
      service: "echo",
      inputs: { x: { dims: [1], data: [1] } },
    });
    expect(r).toMatchObject({ ok: false, code: grpc.status.PERMISSION_DENIED });
    expect(
      await callAs("broker", frontend, InferenceServiceDefinition.Infer, { service: "echo", inputs: { x: { dims: [1], data: [1] } } }),
    ).toMatchObject({
      ok: true,
    });
  });

  it("a process refuses to start with --grpc-peer-roles but no TLS", async () => {
    const { startService } = await import("@infergrid/testkit");
    await expect(
      startService("predictor", { env: { INFERGRID_NATS_URL: cluster.nats.url, INFERGRID_GRPC_PEER_ROLES: "true" } }),
    ).rejects.toThrow(/--grpc-peer-roles \/ INFERGRID_GRPC_PEER_ROLES needs gRPC TLS/);
  });
});
