import { field } from "@infergrid/runtime";
import { PARK_DEFAULTS, PRUNE_BUDGET_DEFAULTS } from "@infergrid/swayam";
import { z } from "zod";

export const frontendConfig = z.object({
  maxRequestBytes: field.int(4 * 1024 * 1024, 1024).describe("largest accepted request, bytes"),
  requestTimeoutMs: field.ms(30_000).describe("deadline given to a request that brings none"),
  retryGapMs: field.ms(5).describe("delta: wait before retrying a refused request on another backend"),
  parkWindowMs: field
    .ms(PARK_DEFAULTS.windowMs)
    .describe("late binding: how long a refused request waits at its prefix for a free slot per round (0: Swayam's probing)"),
  attemptTimeoutMs: field
    .ms(10_000)
    .describe(
      "longest one backend call may take before it counts as failed (also at most 2 x the service's latency threshold, at least 1 s)",
    ),
  answerReserveMs: field.ms(15).describe("time kept before a request's deadline so that a give-up answer arrives in time"),
  backendFailCooldownMs: field.ms(5_000).describe("how long a backend that failed a call is skipped"),
  loadReportMs: field.ms(1_000).describe("period of per-service load reports on NATS"),
  autoscaleMs: field.ms(1_000).describe("period of the autoscaling decision"),
  tSetupMs: field.ms(10_000).describe("t_setup: provisioning upper bound, prediction horizon and n_F freshness"),
  rateWindowMs: field.ms(100_000).describe("Swayam rate window for the regression"),
  rateHistoryMs: field.ms(500_000).describe("Swayam rate history for the regression"),
  scaleInCooldownMs: field.ms(600_000).describe("minimum time between two scale-ins of a service"),
  networkRttMs: field.ms(1).describe("d1 + d2: round trip to a backend, used by the sizing model"),
  scaling: z.enum(["swayam", "static"]).default("swayam").describe("swayam: model-based n; static: n = the allocator's min_warm"),
  pruneBudget: z
    .enum(["always", "tail", "tail-or-lost"])
    .default(PRUNE_BUDGET_DEFAULTS.mode)
    .describe(
      "for a service that prunes late requests: always (Swayam's), tail (only within each minute's SLO tail), tail-or-lost (also once the minute's tail is lost to drops)",
    ),
  learnedHeadroom: field
    .bool(true)
    .describe(
      "size each service for the last seconds' rate too and keep the warm headroom its bursts needed (false: Swayam's windows and U alone)",
    ),
});

export type FrontendConfig = z.infer<typeof frontendConfig>;
