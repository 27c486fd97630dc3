import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
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

const runCli = (args: string[], opts: { interruptAfterLoadMs?: number } = {}): Promise<Run> => runCliIn<SummaryJson>(dir, args, opts);

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
  it("runs the synthetic workload for --duration and accounts for every request", async () => {
    const run = await runCli(["--duration", "15", "--backends", "4", "--frontends", "2", "--peak-rps", "20"]);
    expect(run.code, run.stderr).toBe(0);
    expectAccounted(run, ["resnet34", "mobilenet-v2", "ocr-cls"]);
    expect(run.summary.interrupted).toBe(false);
    expect(run.summary.loadSeconds).toBeCloseTo(15, 0);
    expect(run.summary.totals.sent).toBeGreaterThan(50);
    // Warm backends were billed for about the load's length at least once per service.
    for (const s of run.summary.services) expect(s.backendSeconds).toBeGreaterThanOrEqual(10);
    expect(run.stdout).toMatch(/Summary: .* 4 backends, 2 frontends, policy swayam/);
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

  it("replays jobs of a real per-minute trace", async () => {
    const run = await runCli([
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
  }, 90_000);

  it("Ctrl-C stops the load, then every process, and still writes the summary", async () => {
    const run = await runCli(["--backends", "3", "--frontends", "1", "--no-onnx", "--peak-rps", "10"], { interruptAfterLoadMs: 4_000 });
    expect(run.code).toBe(130);
    expect(run.summary.interrupted).toBe(true);
    expect(run.summary.loadSeconds).toBeLessThan(10);
    expectAccounted(run, ["resnet34", "mobilenet-v2"]);
  }, 90_000);
});
