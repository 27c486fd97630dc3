import { control } from "@infergrid/proto";
import { sizeBackends } from "@infergrid/swayam";
import { jobCounts } from "@infergrid/workload";
import { OptionsError } from "./options.js";
import type { WorkloadPlan } from "./workload-plan.js";

/** d1 + d2 + delta on loopback, as the frontends' defaults assume (1 ms round trip, 5 ms gap). */
const PROBE_COST_MS = 6;

/**
 * The baseline users would otherwise pick: a fixed allocation sized for the peak. Each service
 * gets, for the whole run, the backends that Swayam's own response-time model says its busiest
 * minute needs (without a burst margin: the peak is known in advance). The frontends then use
 * exactly that prefix (static scaling) and backends never decommission.
 */
export function peakSizes(plan: WorkloadPlan): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const svc of plan.services) {
    const counts = jobCounts(plan.trace, svc.name);
    let peakPerMinute = 0;
    for (const c of counts) peakPerMinute = Math.max(peakPerMinute, c);
    const peakRps = (peakPerMinute * plan.rateScale * plan.compression) / 60;
    const profile = svc.spec.model?.kind === control.ModelKind.MODEL_KIND_EMULATED ? svc.spec.model.profile : undefined;
    const sizing = sizeBackends({
      ratePerSec: peakRps,
      serviceTime: profile
        ? { kind: "lognormal", dist: { shape: profile.shape ?? 0, loc: profile.locMs ?? 0, scale: profile.scaleMs ?? 0 } }
        : { kind: "empirical", samplesMs: [svc.meanServiceMs] },
      rtMaxMs: svc.rtMaxMs,
      slMin: svc.slMin,
      probeCostMs: PROBE_COST_MS,
      maxN: 10_000,
      minN: 1,
    });
    sizes.set(svc.name, sizing.n);
  }
  return sizes;
}

/** Fixes every service's list and prefix at its peak size; fails if the pool cannot hold them all. */
export function applyFixedPeak(plan: WorkloadPlan, backends: number): Map<string, number> {
  const sizes = peakSizes(plan);
  const needed = [...sizes.values()].reduce((a, b) => a + b, 0);
  if (needed > backends) {
    const each = [...sizes].map(([name, n]) => `${name} ${n}`).join(", ");
    throw new OptionsError(
      `--policy fixed-peak needs ${needed} backends to size every service for its peak (${each}): give --backends ${needed} or more`,
    );
  }
  for (const svc of plan.services) {
    const n = sizes.get(svc.name) ?? 1;
    svc.spec = { ...svc.spec, minBackends: n, maxBackends: n, initialBackends: n };
  }
  return sizes;
}
