import { spawn } from "node:child_process";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";
import { MAX_INPUTS } from "@infergrid/dataplane";
import type { FloodCounts } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoadDriver, type Outcome } from "./load-driver.js";
import { emulatedSpec, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * The hostile-client drill (issue #18) on real processes (NATS, allocator, two backends, a frontend, the broker):
 * one client floods the broker with requests it must refuse (thousands of tiny tensors under the size cap,
 * gRPC messages and HTTP bodies over it) while others send normal load. The flood is refused at the broker
 * with the documented codes, none of it reaches a frontend, and the normal clients' p99 stays within 2x of
 * the same load without the flood, with none of their requests failing.
 */
let cluster: TestCluster;

const NORMAL_RATE = 50;
const PHASE_MS = 5_000;
const MANY_TENSORS_PER_SEC = 100;
const OVERSIZED_PER_SEC = 5;

beforeAll(async () => {
  cluster = await startCluster({ backends: 2, frontends: 1 });
  await registerService(cluster, emulatedSpec("svc", { initialBackends: 2, maxBackends: 2, rtMaxMs: 500 }));
  await waitUntilServing(cluster, "svc");
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function p99(outcomes: readonly Outcome[]): number {
  const sorted = outcomes.map((o) => o.doneAt - o.sentAt).sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? Number.NaN;
}

async function frontendRequests(): Promise<number> {
  let total = 0;
  for (const f of cluster.frontends) {
    const text = await (await fetch(`http://${f.ready.metricsAddress}/metrics`)).text();
    for (const line of text.split("\n")) if (line.startsWith("infergrid_frontend_requests_total{")) total += Number(line.split(" ").pop());
  }
  return total;
}

const HOSTILE_CLIENT = fileURLToPath(new URL("../../libs/testkit/dist/hostile-client.js", import.meta.url));

/** Runs the hostile client (its own process) for `ms`; resolves to its counts of answers by code. */
function hostileClient(ms: number): Promise<FloodCounts> {
  return new Promise((resolve, reject) => {
    const args = [
      HOSTILE_CLIENT,
      ...["--grpc", cluster.broker.ready.grpcAddress ?? "", "--http", cluster.httpUrl, "--service", "svc"],
      ...[
        "--duration-ms",
        String(ms),
        "--many-tensors-per-sec",
        String(MANY_TENSORS_PER_SEC),
        "--oversized-per-sec",
        String(OVERSIZED_PER_SEC),
      ],
    ];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    // The flooding client stands for a machine elsewhere: on these two shared cores its own sending (20 MB a
    // second of 200 KB requests) would otherwise be counted against the system it floods. Lowest priority, so
    // what the others' p99 measures is the broker's refusing, not the client's writing.
    if (child.pid !== undefined) setPriority(child.pid, 19);
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out) as FloodCounts) : reject(new Error(`hostile client exited ${code}: ${err}`)),
    );
  });
}

async function normalPhase(withFlood: boolean) {
  const driver = new LoadDriver(
    cluster.brokerClient,
    () => ({ service: "svc", inputs: { x: { dims: [1, 4], data: [1, 2, 3, 4] } } }),
    NORMAL_RATE,
  );
  const before = await frontendRequests();
  const flood = withFlood ? hostileClient(PHASE_MS) : undefined;
  driver.start();
  await pause(PHASE_MS);
  await driver.stop();
  const counts = await flood;
  const reachedFrontends = (await frontendRequests()) - before;
  return { driver, counts, reachedFrontends };
}

describe("a hostile client beside normal load", () => {
  it("is refused at the broker with the documented codes while the others keep their p99 within 2x", async () => {
    await pause(1_000); // the start-up requests out of the way
    // A flood first, not measured: the broker's refusals of each kind compiled before the first pair (in a CI run the
    // first pair alone gave 3.25x, the three after it 0.89-1.89x).
    await hostileClient(2_000);
    // Alternated, so that whatever else the machine does weighs on both sides alike; four pairs, each a quiet
    // phase and the flooded one after it, so that one slow moment of the machine (a CI run once saw 2.2x pooled
    // where the same code gives 1.1-1.4x) weighs on one pair's ratio and not on the median of the four.
    const phases = [];
    for (let i = 0; i < 8; i++) {
      const withFlood = i % 2 === 1;
      phases.push({ withFlood, ...(await normalPhase(withFlood)) });
    }
    const quiet = phases.filter((p) => !p.withFlood);
    const flooded = phases.filter((p) => p.withFlood);

    for (const phase of phases) {
      expect(phase.driver.outcomes.length).toBe(phase.driver.sentCount);
      expect(phase.driver.outcomes.filter((o) => !o.ok).map((o) => o.code)).toEqual([]);
      // Only the normal requests reached a frontend: the flood was refused before any work was done.
      expect(phase.reachedFrontends).toBe(phase.driver.sentCount);
    }
    const total = (kind: keyof FloodCounts) => {
      const all: Record<string, number> = {};
      for (const p of flooded) for (const [code, n] of Object.entries(p.counts?.[kind] ?? {})) all[code] = (all[code] ?? 0) + n;
      return all;
    };
    const [manyTensors, oversized, oversizedHttp] = [total("manyTensors"), total("oversizedGrpc"), total("oversizedHttp")];
    const sum = (c: Record<string, number>) => Object.values(c).reduce((x, y) => x + y, 0);
    const floodSeconds = (flooded.length * PHASE_MS) / 1000;
    const quietP99 = p99(quiet.flatMap((p) => p.driver.outcomes));
    const floodedP99 = p99(flooded.flatMap((p) => p.driver.outcomes));
    const pairRatios = quiet.map((q, i) => p99(flooded[i]?.driver.outcomes ?? []) / p99(q.driver.outcomes));
    const sortedRatios = [...pairRatios].sort((a, b) => a - b);
    const medianRatio = ((sortedRatios[1] ?? Number.NaN) + (sortedRatios[2] ?? Number.NaN)) / 2;
    console.info(
      `hostile-client drill: normal load ${NORMAL_RATE}/s, p99 ${quietP99} ms alone and ${floodedP99} ms beside a flood of ` +
        `${sum(manyTensors)} requests of 10,000 tensors (more than ${MAX_INPUTS} inputs), ${sum(oversized)} gRPC and ` +
        `${sum(oversizedHttp)} HTTP requests of 5 MiB (${JSON.stringify(oversizedHttp)}); p99 beside the flood over ` +
        `p99 alone, pair by pair: ${pairRatios.map((r) => r.toFixed(2)).join(", ")} (median ${medianRatio.toFixed(2)})`,
    );
    expect(Object.keys(manyTensors)).toEqual(["INVALID_ARGUMENT"]);
    expect(sum(manyTensors)).toBe(MANY_TENSORS_PER_SEC * floodSeconds); // every one answered, once
    expect(Object.keys(oversized)).toEqual(["RESOURCE_EXHAUSTED"]);
    expect(sum(oversized)).toBe(OVERSIZED_PER_SEC * floodSeconds);
    // The broker answers 413 from the Content-Length and closes without reading the body: a client still
    // writing may see its write refused instead of the answer.
    const refusedHttp = oversizedHttp["413"] ?? 0;
    const cutOff = Object.entries(oversizedHttp)
      .filter(([code]) => /^cut off: .*(EPIPE|ECONNRESET)/.test(code))
      .reduce((n, [, k]) => n + k, 0);
    expect(refusedHttp, JSON.stringify(oversizedHttp)).toBeGreaterThan(0);
    expect(refusedHttp + cutOff, JSON.stringify(oversizedHttp)).toBe(sum(oversizedHttp));

    expect(pairRatios).toHaveLength(4);
    expect(medianRatio).toBeLessThanOrEqual(2);
  }, 120_000);
});
