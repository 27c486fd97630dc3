/**
 * Building blocks of the simulator's own tests: ResNet-34 jobs with Faro's SLO and Swayam's paper settings,
 * so each test states only what it varies.
 */
import { planStaticAllocation } from "@infergrid/allocation";
import type { JobSpec, SimConfig, SwayamSettings } from "./config.js";
import { PAPER_SWAYAM_TIMING, RESNET34 } from "./experiments.js";

/** Jobs with the ResNet-34 profile, SLO 720 ms at p99 and U = 2 (Faro's evaluation). */
export function resnetJobs(names: readonly string[]): JobSpec[] {
  return names.map((name) => ({ name, serviceTime: { kind: "lognormal", dist: RESNET34 }, sloMs: 720, slMin: 0.99, burstFactor: 2 }));
}

/** Swayam's paper settings for `jobs` jobs (one frontend, every list an equal share, one warm entry each). */
export function paperSwayam(jobs: number, over: Partial<SwayamSettings> = {}): SwayamSettings {
  return {
    frontends: 1,
    autoscaleMs: 10_000,
    retryGapMs: 5,
    ...PAPER_SWAYAM_TIMING,
    listLengths: new Array<number>(jobs).fill(0),
    minWarm: new Array<number>(jobs).fill(1),
    bootstrap: new Array<number>(jobs).fill(1),
    allocate: planStaticAllocation,
    ...over,
  };
}

/** The cluster timings the small simulator tests share: 0.5 ms hops, 5 s cold starts, T 60 s, one-minute bins. */
export const TEST_TIMINGS = {
  hopMs: 0.5,
  coldStartMs: 5000,
  idleTimeoutMs: 60_000,
  dropAfterMs: 10_000,
  binMs: 60_000,
} satisfies Partial<SimConfig>;
