/**
 * Real backend-worker processes over real gRPC and NATS: batching of concurrent Executes and the
 * authenticated in-place Resize, seen in the replies and in the heartbeat.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { subjects } from "@infergrid/control-plane";
import { BackendServiceDefinition, backend, control, decodeMessage } from "@infergrid/proto";
import {
  connectNats,
  controlMetadata,
  createClient,
  createLogger,
  grpc,
  type NatsConnection,
  resizeBackend,
  unaryCall,
} from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const TOKEN = "int-test-control-token";
const SERVICE = "themis-int";
// l(b, c) = (gamma*b + eps)/c + delta*b + eta
const THEMIS = { gamma: 40, eps: 0, delta: 0, eta: 10 };
const l = (b: number, c: number) => (40 * b) / c + 10;
const S = backend.ExecuteStatus;

describe("backend-worker: batches and an authenticated in-place Resize", () => {
  let nats: NatsServerHandle;
  let writer: RegistryWriter;
  let nc: NatsConnection;
  let guarded: ServiceProcess;
  let open: ServiceProcess;
  let client: grpc.Client;
  let openClient: grpc.Client;
  const dir = mkdtempSync(join(tmpdir(), "backend-resize-"));
  const heartbeats: backend.BackendReport[] = [];

  const deadline = () => Date.now() + 5_000;
  const codeOf = async (p: Promise<unknown>) => {
    try {
      await p;
      return "OK";
    } catch (err) {
      const e = err as grpc.ServiceError;
      return `${grpc.status[e.code]}: ${e.details}`;
    }
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    const tokenFile = join(dir, "control-token");
    writeFileSync(tokenFile, `${TOKEN}\n`);
    const env = {
      INFERGRID_NATS_URL: nats.url,
      INFERGRID_HEARTBEAT_MS: "200",
      INFERGRID_MAX_BATCH: "4",
      INFERGRID_BATCH_TIMEOUT_MS: "Infinity",
    };
    [guarded, open] = (await startAll([
      startService("backend-worker", {
        name: "guarded",
        env: { ...env, INFERGRID_CONTROL_TOKEN_FILE: tokenFile, INFERGRID_MAX_CORES: "8" },
      }),
      startService("backend-worker", { name: "open", env }),
    ])) as [ServiceProcess, ServiceProcess];
    client = createClient(guarded.ready.grpcAddress ?? "");
    openClient = createClient(open.ready.grpcAddress ?? "");
    nc = await connectNats({ servers: nats.url, name: "resize-int-test" }, createLogger("test", "resize-int", "warn"));
    const sub = nc.subscribe(subjects.heartbeat("backend", guarded.ready.id ?? ""));
    void (async () => {
      for await (const m of sub) {
        const hb = decodeMessage(control.Heartbeat, m.data);
        if (hb.ok && hb.value.backend) heartbeats.push(hb.value.backend as backend.BackendReport);
      }
    })();
    writer = await RegistryWriter.open(nats.url);
    await writer.assign(
      {
        name: SERVICE,
        model: {
          kind: control.ModelKind.MODEL_KIND_EMULATED,
          profile: { shape: 0, locMs: l(1, 1), scaleMs: 0 },
          coldStartMs: 0,
          themis: THEMIS,
        },
        sla: { latencyThresholdMs: 1000, percentile: 99, burstFactor: 2 },
      },
      [guarded, open],
    );
    for (const c of [client, openClient]) {
      await eventually("the backend warm", async () => {
        const r = await unaryCall(c, BackendServiceDefinition.WarmUp, { service: SERVICE, frontendId: "fe" }, { deadline: deadline() });
        return r.accepted && r.report?.state === backend.BackendState.BACKEND_STATE_WARM_IDLE ? r : undefined;
      });
    }
  }, 90_000);

  afterAll(async () => {
    client?.close();
    openClient?.close();
    await nc?.close();
    await writer?.close();
    await Promise.all([guarded?.stop(), open?.stop()]);
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("refuses Resize without the token, with a wrong one, and where no token is configured", async () => {
    const resize = (c: grpc.Client, metadata: grpc.Metadata) =>
      unaryCall(c, BackendServiceDefinition.Resize, { cores: 2 }, { deadline: deadline(), metadata });
    expect(await codeOf(resize(client, new grpc.Metadata()))).toMatch(/^UNAUTHENTICATED: Resize needs the control token/);
    expect(await codeOf(resize(client, controlMetadata("not-the-token")))).toMatch(/^UNAUTHENTICATED/);
    expect(await codeOf(resize(openClient, controlMetadata(TOKEN)))).toMatch(/^UNAUTHENTICATED: Resize is disabled/);
    expect(await codeOf(resizeBackend(client, TOKEN, { cores: 9 }, { deadline: deadline() }))).toMatch(
      /^INVALID_ARGUMENT: cores: 9 is outside 1\.\.8/,
    );
  });

  it("resizes with the right token; concurrent Executes run as one batch of l(4, 2), each answered once; the heartbeat shows the size", async () => {
    const reply = await resizeBackend(client, TOKEN, { cores: 2 }, { deadline: deadline() });
    expect(reply).toMatchObject({ cores: 2, maxBatch: 4 });
    expect(reply.resizeMs).toBeLessThan(50);
    const sent = Array.from({ length: 9 }, (_, i) =>
      unaryCall(
        client,
        BackendServiceDefinition.Execute,
        { service: SERVICE, requestId: `r${i}`, frontendId: "fe", inputs: {}, attempt: 1 },
        { deadline: deadline() },
      ),
    );
    const replies = await Promise.all(sent);
    const ok = replies.filter((r) => r.status === S.EXECUTE_STATUS_OK);
    // The backend holds 2b = 8 requests at once (a batch running, the next forming): the ninth is refused busy
    // (the frontend would retry elsewhere); the eight run as two batches of 4.
    expect(ok).toHaveLength(8);
    expect(replies.filter((r) => r.status === S.EXECUTE_STATUS_REFUSED_BUSY)).toHaveLength(1);
    for (const r of ok) expect(r.computeMs).toBe(l(4, 2));
    const seen = await eventually("a heartbeat with the new size", () =>
      heartbeats.find((h) => h.cores === 2 && h.maxBatch === 4 && h.batchTimeoutMs === Number.POSITIVE_INFINITY),
    );
    expect(seen.backendId).toBe(guarded.ready.id);
  });
});
