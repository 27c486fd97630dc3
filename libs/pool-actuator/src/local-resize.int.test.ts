/**
 * The local pool's in-place resize on real backend-worker processes over real gRPC and NATS: the pool
 * makes a control token, hands it to the backends it starts (environment only), and resizes a backend
 * through its authenticated Resize RPC; the backend's heartbeat then reports the new size. A call
 * with another token is refused by the backend.
 */
import { readFileSync } from "node:fs";
import { subjects } from "@infergrid/control-plane";
import { type backend, control, decodeMessage } from "@infergrid/proto";
import { connectNats, createClient, createLogger, grpc, type NatsConnection, resizeBackend } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, serviceEntry, startNatsServer } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResizeError } from "./actuator.js";
import { LocalProcessActuator } from "./local.js";

describe("LocalProcessActuator.resize on real backend-worker processes", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let pool: LocalProcessActuator;
  const lines: string[] = [];
  const heartbeats = new Map<string, backend.BackendReport[]>();
  const addresses = new Map<string, string>();

  beforeAll(async () => {
    nats = await startNatsServer();
    pool = new LocalProcessActuator({
      entry: serviceEntry("backend-worker"),
      env: {
        INFERGRID_NATS_URL: nats.url,
        INFERGRID_HEARTBEAT_MS: "200",
        INFERGRID_GRPC_PORT: "0",
        INFERGRID_METRICS_PORT: "0",
        INFERGRID_LOG_LEVEL: "info",
      },
      idPrefix: "rz",
      nodeCores: 8,
      onLine: (id, line) => {
        lines.push(line);
        const ready = /"event":"ready"/.test(line) ? (JSON.parse(line) as { grpcAddress?: string }) : undefined;
        if (ready?.grpcAddress) addresses.set(id, ready.grpcAddress);
      },
    });
    nc = await connectNats({ servers: nats.url, name: "pool-resize-int" }, createLogger("test", "pool-resize-int", "warn"));
    const sub = nc.subscribe(subjects.heartbeatsOf("backend"));
    void (async () => {
      for await (const m of sub) {
        const hb = decodeMessage(control.Heartbeat, m.data);
        const id = m.subject.split(".").at(-1) ?? "";
        if (hb.ok && hb.value.backend) heartbeats.set(id, [...(heartbeats.get(id) ?? []), hb.value.backend as backend.BackendReport]);
      }
    })();
    await pool.scaleTo(2);
    await pool.waitReady(30_000);
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
    await nc?.close();
    await nats?.stop();
  }, 30_000);

  const lastBeat = (id: string) => heartbeats.get(id)?.at(-1);

  it("resizes a backend from 1 to 4 cores in place: the reply, the members and the heartbeat say 4, the other keeps 1", async () => {
    const [a, b] = (await pool.members()).map((m) => m.id) as [string, string];
    expect((await pool.members()).map((m) => m.cores)).toEqual([1, 1]);
    await eventually("a heartbeat at 1 core", async () => (lastBeat(a)?.cores === 1 ? true : undefined));
    const pid = pool.pidOf(a);

    const result = await pool.resize(a, 4, 2);
    expect(result).toMatchObject({ memberId: a, cores: 4, maxBatch: 2 });
    expect(result.elapsedMs).toBeGreaterThan(0);
    expect(result.elapsedMs).toBeLessThan(2_000);
    process.stdout.write(`local resize 1 -> 4 cores: ${result.elapsedMs.toFixed(1)} ms round trip\n`);
    expect((await pool.members()).map((m) => [m.id, m.cores])).toEqual([
      [a, 4],
      [b, 1],
    ]);
    await eventually("a heartbeat at 4 cores", async () => (lastBeat(a)?.cores === 4 && lastBeat(a)?.maxBatch === 2 ? true : undefined));
    expect(lastBeat(b)?.cores).toBe(1);
    // In place: the same process.
    expect(pool.pidOf(a)).toBe(pid);

    expect((await pool.resize(a, 1)).cores).toBe(1);
    await eventually("a heartbeat back at 1 core", async () => (lastBeat(a)?.cores === 1 ? true : undefined));
  });

  it("hands the backends a random control token in their environment only; another token is refused", async () => {
    const [a] = (await pool.members()).map((m) => m.id) as [string];
    const environ = readFileSync(`/proc/${pool.pidOf(a)}/environ`, "utf8").split("\0");
    const token = environ.find((e) => e.startsWith("INFERGRID_CONTROL_TOKEN="))?.slice("INFERGRID_CONTROL_TOKEN=".length) ?? "";
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.includes(token))).toBe(false);

    const client = createClient(addresses.get(a) ?? "");
    try {
      const wrong = await resizeBackend(client, "not-the-token", { cores: 2 }).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(wrong?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(lastBeat(a)?.cores).toBe(1);
      // The pool's own token is the one the backend takes.
      expect((await resizeBackend(client, token, { cores: 2 })).cores).toBe(2);
    } finally {
      client.close();
    }
    expect((await pool.resize(a, 1)).cores).toBe(1);
  });

  it("refuses beyond the node limit and for a backend it does not hold, without calling anything", async () => {
    const [a] = (await pool.members()).map((m) => m.id) as [string];
    const beyond = await pool.resize(a, 9).catch((e: unknown) => e);
    expect(beyond).toBeInstanceOf(ResizeError);
    expect(beyond).toMatchObject({ reason: "capacity", message: `resizing backend ${a} to 9 cores: beyond the node limit of 8 cores` });
    await expect(pool.resize("rz-99", 2)).rejects.toMatchObject({ reason: "gone" });
    expect((await pool.members()).find((m) => m.id === a)?.cores).toBe(1);
  });
});
