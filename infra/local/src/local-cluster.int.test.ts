import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { connect } from "node:net";
import { dirname, join } from "node:path";
import { BackendServiceDefinition, InferenceServiceDefinition } from "@infergrid/proto";
import { grpc } from "@infergrid/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alive, type CliRun, freshRunDir, processesMentioning, removeRunDir, runCli as runCliIn } from "./test-support.js";

/**
 * The real CLI as a newcomer runs it (compiled dist/, real nats-server and service processes),
 * checked through its --summary-json: every request sent ends answered or failed, and nothing
 * is left running afterwards. Needs `npx tsc -b` (the services' and this package's dist/).
 */
const trace = "/work/shared/traces/faro-10jobs-6h-per-minute.csv";

interface ServiceRow {
  service: string;
  sent: number;
  answered: number;
  failed: number;
  lost: number;
  notSent: number;
  p50Ms: number | null;
  p99Ms: number | null;
  sloAttainment: number | null;
  backendSeconds: number;
  failedByCode: Record<string, number>;
}

interface SummaryJson {
  interrupted: boolean;
  loadSeconds: number;
  services: ServiceRow[];
  totals: { sent: number; answered: number; failed: number; lost: number };
  replay: { services: string[]; minutes: number; compression: number; peakRps: number };
  processes: Array<{ name: string; pid: number; log: string }>;
}

let dir: string;

beforeAll(() => {
  dir = freshRunDir("ig-local-");
});

afterAll(() => removeRunDir(dir));

const runCli = (args: string[], opts: { interruptAfterLoadMs?: number; onLine?: (line: string) => void } = {}): Promise<Run> =>
  runCliIn<SummaryJson>(dir, args, opts);

/** One unary call; the status name it ends with ("OK" when answered). */
function statusOf<Req, Res>(address: string, credentials: grpc.ChannelCredentials, method: grpc.MethodDefinition<Req, Res>, request: Req) {
  return new Promise<string>((resolve) => {
    // The certificates name localhost; the processes are dialled by address (as they dial each other).
    const client = new grpc.Client(address, credentials, { "grpc.ssl_target_name_override": "localhost" });
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + 5_000 },
      (err) => {
        client.close();
        resolve(err ? (grpc.status[err.code] ?? String(err.code)) : "OK");
      },
    );
  });
}

/** What nats-server answers a client that speaks plaintext: its INFO line and whatever follows a CONNECT and PING. */
function plaintextNats(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    let received = "";
    const socket = connect({ host: hostname, port: Number(port) });
    const done = () => {
      socket.destroy();
      resolve(received);
    };
    socket.setTimeout(5_000, done);
    socket.on("data", (d: Buffer) => {
      const first = received === "";
      received += d.toString("latin1");
      if (first) socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
    });
    socket.once("close", done);
    socket.once("error", done);
  });
}

/** While the CLI's load runs: how its processes answer callers that are not who they should be. */
async function probeIntruders(runDir: string, natsUrl: string) {
  const ready = (name: string) => {
    const line = readFileSync(join(runDir, `${name}.log`), "utf8")
      .split("\n")
      .find((l) => l.includes('"event":"ready"'));
    return (JSON.parse(line ?? "{}") as { grpcAddress?: string }).grpcAddress ?? "";
  };
  const tls = (name: string) =>
    grpc.credentials.createSsl(
      readFileSync(join(runDir, "tls", "ca.pem")),
      readFileSync(join(runDir, "tls", `${name}.key`)),
      readFileSync(join(runDir, "tls", `${name}.pem`)),
    );
  const backend = ready("backend-00");
  const frontend = ready("frontend-0");
  const plaintext = grpc.credentials.createInsecure();
  const execute = {
    service: "resnet34",
    requestId: "intruder",
    frontendId: "frontend-0",
    inputs: { x: { dims: [1], data: [1] } },
    attempt: 1,
  };
  const infer = { service: "resnet34", inputs: { x: { dims: [1], data: [1] } } };
  return {
    plaintextExecute: await statusOf(backend, plaintext, BackendServiceDefinition.Execute, execute),
    plaintextInfer: await statusOf(frontend, plaintext, InferenceServiceDefinition.Infer, infer),
    // The CLI's own certificate: same CA, role client.
    clientExecute: await statusOf(backend, tls("local-cli"), BackendServiceDefinition.Execute, execute),
    clientInfer: await statusOf(frontend, tls("local-cli"), InferenceServiceDefinition.Infer, infer),
    // The right role, to show the refusals above are the role's.
    frontendExecute: await statusOf(backend, tls("frontend-0"), BackendServiceDefinition.Execute, execute),
    plaintextNats: await plaintextNats(natsUrl),
  };
}

type Run = CliRun<SummaryJson>;

function expectAccounted(run: Run, services: string[]): void {
  const { summary } = run;
  expect(summary.services.map((s) => s.service)).toEqual(services);
  for (const s of summary.services) {
    expect(s.answered, `${s.service} answered`).toBeGreaterThan(0);
    expect(s.lost, `${s.service} lost`).toBe(0);
    expect(s.answered + s.failed, `${s.service} answered + failed`).toBe(s.sent);
    expect(s.notSent).toBe(0);
    expect(s.p50Ms).toBeGreaterThan(0);
    expect(s.p99Ms).toBeGreaterThanOrEqual(s.p50Ms ?? 0);
    expect(s.backendSeconds, `${s.service} backend-seconds`).toBeGreaterThan(0);
  }
  expect(summary.totals.lost).toBe(0);
  expect(summary.totals.answered + summary.totals.failed).toBe(summary.totals.sent);
  // Nothing left behind: every process it started is gone.
  expect(summary.processes.length).toBeGreaterThan(0);
  expect(summary.processes.filter((p) => alive(p.pid))).toEqual([]);
  expect(processesMentioning(dir)).toEqual([]);
  expect(run.stdout).toContain("all processes stopped (0 left)");
  // Services log to files, not to the console.
  for (const p of summary.processes) expect(existsSync(p.log), p.log).toBe(true);
  expect(run.stdout).not.toContain('"level"');
}

describe("npm start (infra/local)", () => {
  it("runs the synthetic workload for --duration and accounts for every request, secure by default", async () => {
    let runDir = "";
    let natsUrl = "";
    let probes: ReturnType<typeof probeIntruders> | undefined;
    const run = await runCli(["--duration", "15", "--backends", "4", "--frontends", "2", "--peak-rps", "20"], {
      onLine: (line) => {
        runDir = /logs in (\S+)$/.exec(line)?.[1] ?? runDir;
        natsUrl = /started nats-server at (\S+)$/.exec(line)?.[1] ?? natsUrl;
        if (line === "load running") probes = probeIntruders(runDir, natsUrl);
      },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(probes, "probed while the load ran").toBeDefined();
    const seen = await probes;
    // No plaintext gRPC port: the TLS handshake fails before any call is made.
    expect(seen?.plaintextExecute).toBe("UNAVAILABLE");
    expect(seen?.plaintextInfer).toBe("UNAVAILABLE");
    // A certificate from the run's CA of another role is refused before the handler runs.
    expect(seen?.clientExecute).toBe("PERMISSION_DENIED");
    expect(seen?.clientInfer).toBe("PERMISSION_DENIED");
    // (It may be told the backend serves another service; what matters is that it got past the check.)
    expect(["UNAVAILABLE", "UNAUTHENTICATED", "PERMISSION_DENIED"]).not.toContain(seen?.frontendExecute);
    // nats-server requires TLS and closes a plaintext connection without a PONG.
    expect(seen?.plaintextNats).toMatch(/^INFO .*"tls_required":true/);
    expect(seen?.plaintextNats).not.toContain("PONG");
    expect(existsSync(join(runDir, "tls", "ca.key")), "the CA's key outlived the start").toBe(false);
    // Loopback addresses are not given to TLS as server names (Node would warn in every process).
    expect(run.stderr).not.toContain("Warning");
    for (const p of run.summary.processes) expect(readFileSync(p.log, "utf8"), p.log).not.toContain("DeprecationWarning");
    expectAccounted(run, ["resnet34", "mobilenet-v2", "ocr-cls"]);
    expect(run.summary.interrupted).toBe(false);
    expect(run.summary.loadSeconds).toBeCloseTo(15, 0);
    expect(run.summary.totals.sent).toBeGreaterThan(50);
    // Warm backends were billed for about the load's length at least once per service.
    for (const s of run.summary.services) expect(s.backendSeconds).toBeGreaterThanOrEqual(10);
    expect(run.stdout).toMatch(/Summary: .* 4 backends, 2 frontends, policy infergrid/);
    const runs = readdirSync(join(dir, "runs"));
    expect(runs.length).toBeGreaterThan(0);
    // Secure by default: every process on NATS as its own user; their work needed nothing their roles forbid.
    const natsLog = run.summary.processes.find((p) => p.name === "nats-server")?.log ?? "";
    const conf = join(dirname(natsLog), "nats-identities", "nats-auth.conf");
    expect(readFileSync(conf, "utf8")).toContain('{ user: "frontend-0", password: ');
    expect(statSync(conf).mode & 0o077, "nats-auth.conf readable by others").toBe(0);
    expect(
      readFileSync(natsLog, "utf8")
        .split("\n")
        .filter((l) => /Violation|authentication error/.test(l)),
    ).toEqual([]);
  }, 90_000);

  it("replays jobs of a real per-minute trace (--insecure: open NATS, plaintext gRPC)", async () => {
    const run = await runCli([
      "--insecure",
      "--trace",
      trace,
      "--jobs",
      "serve-cluster0,serve-cluster1",
      "--minutes",
      "1",
      // One trace minute over 10 s of wall time.
      "--compression",
      "6",
      "--backends",
      "4",
      "--frontends",
      "2",
      "--policy",
      "static",
    ]);
    expect(run.code, run.stderr).toBe(0);
    expectAccounted(run, ["serve-cluster0", "serve-cluster1"]);
    expect(run.summary.replay).toMatchObject({ services: ["serve-cluster0", "serve-cluster1"], minutes: 1, compression: 6 });
    expect(run.summary.loadSeconds).toBeGreaterThan(8);
    expect(run.summary.loadSeconds).toBeLessThanOrEqual(10.1);
    const runDir = dirname(run.summary.processes[0]?.log ?? "");
    expect(existsSync(join(runDir, "tls")) || existsSync(join(runDir, "nats-identities"))).toBe(false);
  }, 90_000);

  it("Ctrl-C stops the load, then every process, and still writes the summary", async () => {
    const run = await runCli(["--backends", "3", "--frontends", "1", "--no-onnx", "--peak-rps", "10"], { interruptAfterLoadMs: 4_000 });
    expect(run.code).toBe(130);
    expect(run.summary.interrupted).toBe(true);
    expect(run.summary.loadSeconds).toBeLessThan(10);
    expectAccounted(run, ["resnet34", "mobilenet-v2"]);
  }, 90_000);
});
