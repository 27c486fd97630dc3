import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceRegistry, subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, publishMessage } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The console as a real process on a real nats-server: control-plane messages published here show up in
 * GET /api/state and on the server-sent events; with a token every route but /healthz needs it.
 */

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(address: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, headers }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => {
        body += d.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Reads server-sent events until `count` data events arrived; returns their payloads. */
function events(address: string, count: number, headers: Record<string, string> = {}): Promise<unknown[]> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const got: unknown[] = [];
    const req = request({ host, port, path: "/api/events", headers }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
      let buffer = "";
      res.on("data", (d: Buffer) => {
        buffer += d.toString();
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of block.split("\n")) if (line.startsWith("data: ")) got.push(JSON.parse(line.slice(6)));
          if (got.length >= count) {
            req.destroy();
            resolve(got);
            return;
          }
          end = buffer.indexOf("\n\n");
        }
      });
    });
    req.on("error", (err) => {
      if (got.length < count) reject(err);
    });
    req.end();
  });
}

interface StateJson {
  seq?: number;
  full?: boolean;
  services?: { name: string; requests?: number; backends?: { id: string; state: string }[]; series?: unknown[] }[];
  cluster?: { backends?: number; members?: { role: string; id: string }[]; plan?: { objective?: string; solveMs?: number } };
}

describe("console (real nats-server, real process)", () => {
  let nats: NatsServerHandle;
  let consoleProcess: ServiceProcess;
  let secured: ServiceProcess;
  let nc: NatsConnection;
  let address: string;
  let securedAddress: string;
  const dir = mkdtempSync(join(tmpdir(), "ig-console-"));
  let timer: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
    const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HTTP_PORT: "0", INFERGRID_UPDATE_MS: "250" };
    writeFileSync(join(dir, "token"), "s3cret-token\n");
    [consoleProcess, secured] = await Promise.all([
      startService("console", { env }),
      startService("console", { env: { ...env, INFERGRID_AUTH_TOKEN_FILE: join(dir, "token") } }),
    ]);
    address = consoleProcess.ready.httpAddress ?? "";
    securedAddress = secured.ready.httpAddress ?? "";
    const logger = createLogger("test", "console-test", "warn");
    nc = await connectNats({ servers: nats.url, name: "console-test" }, logger);
    const registry = await ServiceRegistry.open(nc, logger);
    await registry.putService(
      control.ServiceEntry.create({
        spec: { name: "svc", sla: { latencyThresholdMs: 100, percentile: 99 } },
        backends: [{ backendId: "b1" }, { backendId: "b2" }],
        version: 1,
      }),
    );
    const beat = () => {
      for (const [id, state] of [
        ["b1", backend.BackendState.BACKEND_STATE_BUSY],
        ["b2", backend.BackendState.BACKEND_STATE_WARM_IDLE],
      ] as const)
        publishMessage(nc, subjects.heartbeat("backend", id), control.Heartbeat, {
          role: control.Role.ROLE_BACKEND,
          id,
          backend: { backendId: id, state, service: "svc" },
        });
      publishMessage(nc, subjects.heartbeat("frontend", "f1"), control.Heartbeat, {
        role: control.Role.ROLE_FRONTEND,
        id: "f1",
        address: "x:1",
      });
      const now = Date.now();
      publishMessage(nc, subjects.load("svc"), control.LoadReport, {
        frontendId: "f1",
        service: "svc",
        windowStartUnixMs: now - 250,
        windowEndUnixMs: now,
        arrivals: 5,
        completed: 5,
        withinSlo: 5,
        latencyP50Ms: 10,
        latencyP99Ms: 20,
        backendsInUse: 2,
      });
    };
    beat();
    timer = setInterval(beat, 250);
    publishMessage(nc, subjects.plan, control.AllocationPlan, {
      seq: 1,
      objective: "attainment",
      solveMs: 3.5,
      solvedAtUnixMs: Date.now(),
    });
  });

  afterAll(async () => {
    clearInterval(timer);
    await Promise.all([consoleProcess?.stop(), secured?.stop()]);
    await nc?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves the page, its script and uPlot", async () => {
    const page = await get(address, "/");
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toContain("text/html");
    expect(page.body).toContain("/console.js");
    const script = await get(address, "/console.js");
    expect(script.status).toBe(200);
    expect(script.body).toContain("EventSource");
    const uplot = await get(address, "/vendor/uPlot.iife.min.js");
    expect(uplot.status).toBe(200);
    expect(uplot.body.length).toBeGreaterThan(10_000);
  });

  it("shows what the control plane published", async () => {
    await eventually(
      "the published cluster in /api/state",
      async () => {
        const state = JSON.parse((await get(address, "/api/state")).body) as StateJson;
        const svc = state.services?.find((s) => s.name === "svc");
        expect(svc?.backends?.map((b) => `${b.id}:${b.state}`)).toEqual(["b1:busy", "b2:warm"]);
        expect(svc?.requests).toBeGreaterThanOrEqual(10);
        expect(state.cluster?.backends).toBe(2);
        expect(state.cluster?.members?.map((m) => `${m.role}/${m.id}`)).toContain("frontend/f1");
        expect(state.cluster?.plan?.objective).toBe("attainment");
        expect(state.cluster?.plan?.solveMs).toBe(3.5);
        return true;
      },
      10_000,
    );
  });

  it("streams a full update first, then only the newest points, each update newer than the last", async () => {
    const got = (await events(address, 3)) as StateJson[];
    expect(got[0]?.full).toBe(true);
    expect(got[1]?.full ?? false).toBe(false);
    expect(got[1]?.services?.[0]?.series).toHaveLength(1);
    expect(got[2]?.seq ?? 0).toBeGreaterThan(got[1]?.seq ?? 0);
  });

  it("answers an unknown path with 404 and the error envelope", async () => {
    const r = await get(address, "/nope");
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toEqual({ error: { code: "NOT_FOUND", message: "no such page: GET /nope" } });
  });

  it("with a token, refuses every route without it (401, Basic challenge) and serves it with it", async () => {
    for (const path of ["/", "/api/state", "/api/events", "/console.js"]) {
      const r = await get(securedAddress, path);
      expect(r.status, path).toBe(401);
      expect(r.headers["www-authenticate"]).toContain("Basic");
    }
    const wrong = await get(securedAddress, "/api/state", { authorization: `Basic ${Buffer.from("admin:wrong").toString("base64")}` });
    expect(wrong.status).toBe(401);
    const auth = { authorization: `Basic ${Buffer.from("anyone:s3cret-token").toString("base64")}` };
    expect((await get(securedAddress, "/api/state", auth)).status).toBe(200);
    expect((await events(securedAddress, 1, auth))[0]).toMatchObject({ full: true });
    expect((await get(securedAddress, "/healthz")).status).toBe(200);
  });
});
