import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execPath, kill, stdout } from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { seededRandom } from "@infergrid/core";
import { afterAll, describe, expect, it } from "vitest";
import { EXPERIMENTS } from "./experiments.js";
import { configFor, defaultTracesDir, prepareExperiment, repoRoot } from "./run-experiment.js";
import { simulate, traceArrivals } from "./simulate.js";

/**
 * Fidelity: the simulator and the real local cluster (infra/local's CLI: nats-server and every service as
 * processes) replay the same slice of the same trace with the same arrival times (the CLI's --seed drives
 * the same arrivalSchedule stream) on the same configuration (the local-mirror experiment), and must agree on
 * SLA compliance and backend-seconds within TOLERANCE. Needs `pnpm -s build` (the CLI and services run from dist/).
 *
 * Tolerance: 10 % relative (|sim - real| / max(sim, real)) per service, the bar. The real run is one
 * sample on a shared machine; a CPU stall of the machine shows up as late requests in the real run only.
 * The slice is short (150 s of load) to keep the test near 3 minutes; docs/results.md says how to run it longer.
 */
const TOLERANCE = 0.1;
const SLICE = { jobs: ["serve-cluster0", "serve-cluster8"], fromMinute: 0, minutes: 25, rateScale: 0.05, seed: 1 };
const cli = join(repoRoot(), "infra", "local", "dist", "main.js");

interface ServiceRow {
  service: string;
  sent: number;
  answered: number;
  slaCompliance: number | null;
  sloAttainment: number | null;
  backendSeconds: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

let dir: string | undefined;
let child: ChildProcess | undefined;

/** Processes holding a file under `root` open: the services log there (their stdout), so these are the CLI's children. */
function holdersOf(root: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      for (const fd of readdirSync(`/proc/${entry}/fd`)) {
        if (readlinkSync(`/proc/${entry}/fd/${fd}`).startsWith(root)) {
          pids.push(Number(entry));
          break;
        }
      }
    } catch {
      // Gone, or not ours to read.
    }
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops the CLI (which stops its cluster), and kills whatever it left if it could not (a timeout, a crash). */
async function cleanUp(): Promise<void> {
  const c = child;
  if (c?.pid !== undefined && c.exitCode === null && c.signalCode === null) {
    c.kill("SIGTERM");
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    const timeout = sleep(20_000, undefined, { ref: false });
    await Promise.race([exited, timeout]);
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  }
  if (dir === undefined) return;
  // Every service runs in its own process group (infra/local processes.ts).
  for (const pid of holdersOf(dir)) {
    try {
      kill(-pid, "SIGKILL");
    } catch {
      if (alive(pid)) kill(pid, "SIGKILL");
    }
  }
}

afterAll(async () => {
  await cleanUp();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 40_000);

function runLocalCluster(out: string): Promise<{ code: number | null; stdout: string; services: ServiceRow[] }> {
  const summaryPath = join(out, "summary.json");
  const args = [
    cli,
    "--trace",
    join(defaultTracesDir(), EXPERIMENTS["local-mirror"].trace.file),
    "--jobs",
    SLICE.jobs.join(","),
    "--from-minute",
    String(SLICE.fromMinute),
    "--minutes",
    String(SLICE.minutes),
    "--compression",
    String(EXPERIMENTS["local-mirror"].trace.compression),
    "--rate-scale",
    String(SLICE.rateScale),
    "--backends",
    String(EXPERIMENTS["local-mirror"].capacity),
    "--frontends",
    String(EXPERIMENTS["local-mirror"].cluster.frontends),
    "--idle-timeout-ms",
    String(EXPERIMENTS["local-mirror"].cluster.idleTimeoutMs),
    "--seed",
    String(SLICE.seed),
    // The simulator's swayam-park: Swayam's frontends with this system's data path in the allocator's static split.
    "--policy",
    "swayam",
    "--summary-json",
    summaryPath,
    "--runtime-dir",
    join(out, "runs"),
  ];
  child = spawn(execPath, args, { cwd: repoRoot(), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  child.stdout?.on("data", (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    stdout += d.toString();
  });
  return new Promise((resolve, reject) => {
    child?.once("error", reject);
    child?.once("exit", (code) => {
      if (!existsSync(summaryPath)) {
        reject(new Error(`no summary (exit ${code}):\n${stdout}`));
        return;
      }
      const summary = JSON.parse(readFileSync(summaryPath, "utf8")) as { services: ServiceRow[] };
      resolve({ code, stdout, services: summary.services });
    });
  });
}

async function simulateSlice() {
  const base = EXPERIMENTS["local-mirror"];
  const experiment = {
    ...base,
    trace: { ...base.trace, jobs: SLICE.jobs, fromMinute: SLICE.fromMinute, minutes: SLICE.minutes, rateScale: SLICE.rateScale },
  };
  const p = await prepareExperiment(experiment);
  // infra/local draws its arrivals with seededRandom(--seed): the same stream gives the same requests.
  const arrivals = traceArrivals(p.trace, p.trace.jobs, {
    random: seededRandom(SLICE.seed),
    compression: experiment.trace.compression,
    rateScale: SLICE.rateScale,
  });
  // The local cluster's services park refused requests (late binding) by default: so does swayam-park.
  return simulate(configFor(p, "swayam-park", SLICE.seed), arrivals);
}

const relativeGap = (a: number, b: number) => (a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b)));

describe("simulator vs the real local cluster (local-mirror)", () => {
  it("agree on SLA compliance and backend-seconds within 10 % on a 150 s slice", async () => {
    if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (pnpm -s build)`);
    dir = mkdtempSync(join(tmpdir(), "ig-fidelity-"));
    const sim = await simulateSlice();
    const real = await runLocalCluster(dir);
    expect(real.code, real.stdout).toBe(0);
    const rows = SLICE.jobs.map((name) => {
      const s = sim.jobs.find((j) => j.name === name);
      const r = real.services.find((x) => x.service === name);
      if (!s || !r) throw new Error(`${name} missing: sim ${s !== undefined}, real ${r !== undefined}`);
      return { name, s, r };
    });
    const table = rows.map(
      ({ name, s, r }) =>
        `${name}: requests sim ${s.requests} real ${r.sent}; SLA compliance sim ${s.slaCompliance.toFixed(3)} real ${r.slaCompliance}; ` +
        `within SLO sim ${(1 - s.violationRate).toFixed(4)} real ${r.sloAttainment}; p50 sim ${s.p50Ms.toFixed(0)} real ${r.p50Ms}; ` +
        `p99 sim ${s.p99Ms.toFixed(0)} real ${r.p99Ms}; backend-s sim ${s.backendSeconds.toFixed(1)} real ${r.backendSeconds}`,
    );
    stdout.write(`fidelity (tolerance ${TOLERANCE * 100} %):\n${table.join("\n")}\n`);
    for (const { name, s, r } of rows) {
      // The same arrival stream: anything else would make the comparison meaningless.
      expect(r.sent, `${name} requests`).toBe(s.requests);
      expect(r.answered, `${name} answered`).toBe(r.sent);
      expect(r.slaCompliance, `${name} real SLA compliance (needs >= 1000 requests)`).not.toBeNull();
      expect(
        relativeGap(s.slaCompliance, r.slaCompliance ?? Number.NaN),
        `${name} SLA compliance\n${table.join("\n")}`,
      ).toBeLessThanOrEqual(TOLERANCE);
      expect(relativeGap(s.backendSeconds, r.backendSeconds), `${name} backend-seconds\n${table.join("\n")}`).toBeLessThanOrEqual(
        TOLERANCE,
      );
    }
    // Nothing left running.
    expect(holdersOf(dir).filter(alive)).toEqual([]);
  }, 330_000);
});
