/**
 * Pins the simulator to queueing theory: a fixed number of replicas behind one FIFO queue (the
 * first-available router) is an M/G/c queue, so its mean wait must match the closed forms.
 */

import { erase, fixedPolicy, mmcMeanWait } from "@infergrid/baselines";
import { describe, expect, it } from "vitest";
import type { ServiceTimeSpec, SimConfig } from "./config.js";
import { poissonArrivals, simulate } from "./simulate.js";
import { paperSwayam } from "./test-support.js";

function queueConfig(c: number, serviceTime: ServiceTimeSpec, durationMs: number, seed: number): SimConfig {
  return {
    jobs: [{ name: "q", serviceTime, sloMs: 1e12, slMin: 0.99, burstFactor: 1 }],
    capacity: c,
    durationMs,
    hopMs: 0,
    coldStartMs: 0,
    idleTimeoutMs: 300_000,
    dropAfterMs: Number.POSITIVE_INFINITY,
    binMs: 600_000,
    seed,
    policy: {
      kind: "autoscaler",
      name: "fixed",
      policies: [erase(fixedPolicy(c))],
      routing: { kind: "first-available" },
      initialReplicas: [c],
    },
    swayam: paperSwayam(1, { listLengths: [c] }),
  };
}

/**
 * Exact mean wait of M/D/c by Crommelin's relation: with deterministic service D and FCFS, the number in the
 * system D later is max(N - c, 0) plus the Poisson(lambda D) arrivals in between, at any instant; the chain's
 * stationary law is the time-stationary law of N (PASTA for arrivals), so Wq = E[(N - c)+] / lambda (Little).
 */
export function mdcMeanWait(c: number, lambdaPerMs: number, serviceMs: number): number {
  const m = lambdaPerMs * serviceMs;
  const pmf: number[] = [];
  let term = Math.exp(-m);
  for (let k = 0; k < 10_000; k++) {
    pmf.push(term);
    term *= m / (k + 1);
    if (k > m && term < 1e-16) break;
  }
  const N = 4000;
  let p = new Float64Array(N);
  p[0] = 1;
  for (let iter = 0; iter < 100_000; iter++) {
    const q = new Float64Array(N);
    for (let i = 0; i < N; i++) {
      const pi = p[i] as number;
      if (pi < 1e-300) continue;
      const base = Math.max(i - c, 0);
      for (let k = 0; k < pmf.length && base + k < N; k++) q[base + k] = (q[base + k] as number) + pi * (pmf[k] as number);
    }
    let diff = 0;
    for (let i = 0; i < N; i++) diff += Math.abs((q[i] as number) - (p[i] as number));
    p = q;
    if (diff < 1e-13) break;
  }
  let lq = 0;
  for (let n = c + 1; n < N; n++) lq += (n - c) * (p[n] as number);
  return lq / lambdaPerMs;
}

function simulatedWait(c: number, ratePerSec: number, serviceTime: ServiceTimeSpec, hours: number, seeds: number[]): number {
  let total = 0;
  let count = 0;
  for (const seed of seeds) {
    const durationMs = hours * 3_600_000;
    const r = simulate(queueConfig(c, serviceTime, durationMs, seed), poissonArrivals([ratePerSec], durationMs, seed));
    const job = r.jobs[0];
    if (!job) throw new Error("no job");
    total += job.meanWaitMs * job.completed;
    count += job.completed;
  }
  return total / count;
}

describe("the simulator against queueing theory", () => {
  it("the M/D/c solver gives Pollaczek-Khinchine's M/D/1 wait", () => {
    // M/D/1: Wq = rho D / (2 (1 - rho)); rho = 0.7, D = 100 ms: 116.67 ms.
    expect(mdcMeanWait(1, 0.007, 100)).toBeCloseTo((0.7 * 100) / (2 * 0.3), 3);
  });

  it("M/M/c: 4 replicas at rho = 0.8, mean wait within 4 % of Erlang C", () => {
    const theory = mmcMeanWait(4, 0.032, 100);
    const sim = simulatedWait(4, 32, { kind: "exponential", meanMs: 100 }, 4, [1, 2]);
    const error = Math.abs(sim - theory) / theory;
    console.log(`M/M/4 rho 0.8: Erlang C ${theory.toFixed(2)} ms, simulated ${sim.toFixed(2)} ms, error ${(error * 100).toFixed(2)} %`);
    expect(error).toBeLessThan(0.04);
  });

  it("M/D/c: 4 replicas at rho = 0.8, mean wait within 4 % of the exact solution", () => {
    const theory = mdcMeanWait(4, 0.032, 100);
    // Deterministic service waits about half as long as exponential (the M/D/c rule of thumb Faro uses).
    expect(theory / mmcMeanWait(4, 0.032, 100)).toBeGreaterThan(0.45);
    expect(theory / mmcMeanWait(4, 0.032, 100)).toBeLessThan(0.56);
    const sim = simulatedWait(4, 32, { kind: "deterministic", ms: 100 }, 4, [1, 2]);
    const error = Math.abs(sim - theory) / theory;
    console.log(`M/D/4 rho 0.8: exact ${theory.toFixed(2)} ms, simulated ${sim.toFixed(2)} ms, error ${(error * 100).toFixed(2)} %`);
    expect(error).toBeLessThan(0.04);
  });
});
